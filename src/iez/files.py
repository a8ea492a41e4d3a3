"""Files iez reads and writes by name in directories it does not control (docs/security.md).

A temporary name chosen by us (`.plan.tmp`) in a directory others can write is a trap: someone
plants a symbolic link there and our write truncates their target. So a replaced file is written
through a descriptor made with O_EXCL|O_NOFOLLOW under a random name, then renamed over the name;
and a file read by name is read only after fstat says it is a regular file of bounded size, so a
FIFO cannot hang the reader and a device cannot feed it forever.
"""

from __future__ import annotations

import os
import resource
import secrets
import stat
from pathlib import Path

from iez.errors import ConfigError


def replace_atomically(path: str | Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half of one,
    and no existing file but `path`'s own entry is touched."""
    p = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    while True:  # O_EXCL|O_NOFOLLOW under a random name, as mkstemp, but with `mode` less the umask
        tmp = p.with_name(f".{p.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, p)
    except BaseException:
        os.unlink(tmp)
        raise


def read_regular(path: str | Path, max_bytes: int, what: str) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; a one-line ConfigError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(f"cannot read {what} {path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"cannot read {what} {path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfigError(f"cannot read {what} {path}: larger than {max_bytes >> 20} MiB")
    return data


def raise_descriptor_limit() -> int:
    """Services hold a descriptor per client: lift the soft limit to the hard one; the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard
