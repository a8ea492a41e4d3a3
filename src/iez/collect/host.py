"""The host's own load, read from /proc as the paper's collectors read it, and the gate on it.

CPU = 1-minute load average / cores (/proc/loadavg), memory = 1 - MemAvailable / MemTotal
(/proc/meminfo). The host collector publishes it; the controller and `iez allocate` hold allocation
back with `iez.alloc.gate`'s pure rule while it is too high (docs/references.md#s000-gate).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from iez.alloc.gate import Decision, GateClosed, GateLimits, HostLoad, decide
from iez.errors import IezError

POLL = 2.0  # seconds between looks at the host's load while waiting
MEMINFO_KEYS = frozenset(("MemTotal", "MemAvailable", "MemFree"))
READ_CHUNK, MAX_READ = 1 << 14, 1 << 20  # bytes: /proc/meminfo is about 1.5 KiB


def read_host_load(proc: str | Path = "/proc", cores: int | None = None) -> HostLoad:
    """CPU and memory use from `proc`/loadavg and `proc`/meminfo (a directory shaped like /proc)."""
    root = Path(proc)
    loadavg = _read(root / "loadavg")
    try:
        one_minute = float(loadavg.split()[0])
    except (IndexError, ValueError):
        raise IezError(f"{root / 'loadavg'}: cannot read the load average from {loadavg[:40]!r}") from None
    cores = cores or len(os.sched_getaffinity(0)) or 1
    meminfo = {}
    for line in _read(root / "meminfo").splitlines():
        key, _, rest = line.partition(":")
        if key in MEMINFO_KEYS:  # the three of some fifty lines (a collector reads it every round)
            fields = rest.split()
            if fields and fields[0].isdigit():
                meminfo[key] = int(fields[0])
    total = meminfo.get("MemTotal", 0)
    if total <= 0 or "MemAvailable" not in meminfo and "MemFree" not in meminfo:
        raise IezError(f"{root / 'meminfo'}: no MemTotal and MemAvailable (or MemFree) lines")
    # MemAvailable (Linux 3.14+) counts reclaimable cache as free; MemFree is the older fallback.
    avail = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
    return HostLoad(cpu=one_minute / cores, mem=max(0.0, 1.0 - avail / total))


def check(limits: GateLimits = GateLimits(), proc: str | Path = "/proc", cores: int | None = None) -> Decision:
    return decide(read_host_load(proc, cores), limits)


def require_open(limits: GateLimits = GateLimits(), proc: str | Path = "/proc", cores: int | None = None) -> Decision:
    """`check`, raising GateClosed (one line) when the gate is shut."""
    d = check(limits, proc, cores)
    if not d.open:
        raise GateClosed(f"not allocating now, {d.reason} (wait for it with --gate-wait SECONDS, "
                         "raise --max-cpu/--max-mem, or skip the gate with --no-gate)")
    return d


def wait_open(limits: GateLimits = GateLimits(), timeout: float = 0.0,
              on_wait: Callable[[Decision], None] | None = None, proc: str | Path = "/proc") -> Decision:
    """`require_open` once the gate opens or `timeout` seconds have passed; `on_wait` hears each
    look that found it shut."""
    deadline = time.monotonic() + max(0.0, timeout)
    while time.monotonic() < deadline:
        d = check(limits, proc)
        if d.open:
            return d
        if on_wait:
            on_wait(d)
        time.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
    return require_open(limits, proc)


def _read(path: Path) -> str:
    """The file's text, through os.open/os.read: a collector reads two of them every round, and a
    buffered text file object cost most of reading the host's load (as in iez.lustre.params)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks: list[bytes] = []  # /proc files say size 0: read to the end, at most MAX_READ
            size = 0
            while size < MAX_READ and (chunk := os.read(fd, READ_CHUNK)):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode()
    except OSError as e:
        raise IezError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise IezError(f"{path}: not text") from None
