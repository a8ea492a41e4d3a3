"""I/O event logs: what each process read and wrote, the input of the emulated RPC logs.

Format (docs/liopprof.md, "I/O event logs"), UTF-8 text, one file per process or shared with
O_APPEND, one event per line written with a single write(2):

    # iez-ioev 1
    <time> <op> <offset> <length> <nid> <pid> <jobid> <path>

time: seconds since the epoch with a fraction; op: `r` (read) or `w` (write); offset and length
in bytes; nid: the client's LNet NID (`192.168.1.10@tcp`); pid: the process; jobid: the job id
a Lustre client would send (`-` for none); path: the rest of the line, absolute. A line that
does not parse is reported, never fatal. libiez writes these lines from its read and write
wrappers (`IEZ_IOLOG`, docs/libiez.md), one mapped file per thread: a file whose process was
killed ends in zero bytes, which are not lines. The test workload (`iez.profile.workload`)
writes them too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from iez.lustre.parse import Skipped
from iez.profile import ProfileError

HEADER = "# iez-ioev 1"
SUFFIX = ".ioev"
OPS = {"r": "read", "w": "write"}


@dataclass(frozen=True)
class IoEvent:
    time: float
    op: str  # "read" | "write"
    path: str
    offset: int
    length: int
    nid: str
    pid: int
    jobid: str = ""


def format_event(e: IoEvent) -> str:
    if "\n" in e.path or not e.path.startswith("/"):
        raise ProfileError(f"I/O event path must be absolute and on one line: {e.path!r}")
    op = "r" if e.op == "read" else "w"
    return f"{e.time:.9f} {op} {e.offset} {e.length} {e.nid} {e.pid} {e.jobid or '-'} {e.path}\n"


def parse_events(text: str, source: str = "") -> tuple[list[IoEvent], list[Skipped]]:
    events: list[IoEvent] = []
    skipped: list[Skipped] = []
    for i, line in enumerate(text.rstrip("\0").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split(" ", 7)
        try:
            if len(f) != 8 or f[1] not in OPS or not f[7].startswith("/"):
                raise ValueError
            t, off, n, pid = float(f[0]), int(f[2]), int(f[3]), int(f[5])
            if off < 0 or n < 0 or "@" not in f[4] or t != t:
                raise ValueError
        except ValueError:
            skipped.append(Skipped(i, line, f"not an I/O event{' in ' + source if source else ''}"))
            continue
        events.append(IoEvent(t, OPS[f[1]], f[7], off, n, f[4], pid, "" if f[6] == "-" else f[6]))
    return events, skipped


def read_event_dir(directory: str | Path) -> tuple[list[IoEvent], list[Skipped]]:
    """Every event of every `*.ioev` file in a directory, in time order."""
    d = Path(directory)
    events: list[IoEvent] = []
    skipped: list[Skipped] = []
    for p in sorted(d.glob(f"*{SUFFIX}")):
        try:
            text = p.read_text(errors="replace")
        except OSError as e:
            raise ProfileError(f"cannot read I/O event log {p}: {e.strerror}") from None
        ev, sk = parse_events(text, p.name)
        events.extend(ev)
        skipped.extend(sk)
    events.sort(key=lambda e: e.time)
    return events, skipped


class EventLog:
    """An append-only event log of one process: one write(2) per event."""

    def __init__(self, path: str | Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if os.fstat(self.fd).st_size == 0:
            os.write(self.fd, (HEADER + "\n").encode())

    def add(self, events: Iterable[IoEvent]) -> None:
        for e in events:
            os.write(self.fd, format_event(e).encode())

    def close(self) -> None:
        os.close(self.fd)
