"""LIOPProf (docs/references.md#s003-logging): a Lustre I/O profiler tying application I/O to server-side behaviour.

Logging services on the OSSs (`services`, through the one lustre-side `remote` runner), parsers of what
they record (`rpctrace`, `iostat`, the profile directory `profiledir`), pure analysis
(`analysis`), pictures and the report (`report`), and emulated RPC logs (`emulate`) fed by I/O
event logs (`ioevents`). See docs/liopprof.md.
"""

from iez.errors import IezError


class ProfileError(IezError):
    """A profile that cannot be made or read (missing parser, unreadable directory, ...)."""
