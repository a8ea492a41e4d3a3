"""One exception family, so the CLI can print bad input as one clear line."""


class IezError(Exception):
    """Base for every error iez reports to a user (bad input, missing backend, ...).

    `exit_code` is the command's exit status: 2 (the default, as for argparse's own errors)
    when what the user typed or gave must change; 1 when doing the work failed (the file
    system, an allocation, the host gate)."""

    exit_code = 2


class ConfigError(IezError):
    """A cluster or plan file (or an option's value) that cannot be used."""


class LayoutError(IezError):
    """A layout that Lustre would reject, or a malformed lov_user_md buffer."""


class AllocationError(IezError):
    """No placement satisfies the request (full OSTs, unknown OST index, ...).

    `errno` names the errno Lustre's MDS would return: ENOSPC (no OST can take an object),
    EINVAL (bad layout, unknown OST, offset not in the list) or EREMOTEIO (a listed OST is
    inactive). Raise as `AllocationError("why", errno="ENOSPC")`.
    """

    exit_code = 1

    def __init__(self, message: str, errno: str = "ENOSPC"):
        super().__init__(message)
        self.errno = errno


class BackendError(IezError):
    """A file-system operation failed or is unavailable on this backend."""

    exit_code = 1


def shown(value: object, limit: int = 60) -> str:
    """`value` as a one-line error quotes it: its repr (newlines escaped), cut to `limit`."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def one_line(e: BaseException) -> str:
    """An exception as one line of a message: an IezError's own (already one line), anything
    else, a bug, as its type and the first line of what it says."""
    if isinstance(e, IezError):
        return " ".join(str(e).split())
    text = (str(e).strip().splitlines() or [""])[0][:300]
    return f"internal error: {type(e).__name__}{': ' + text if text else ''}"
