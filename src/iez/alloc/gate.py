"""The controller-host gate: allocate only while the host is not busy (seed 000 §III-B2: "only if
the CPU utilization is lower than 70% and memory utilization is lower than 50%", so the
allocator never disturbs the MDS it runs beside).

`decide` is the pure rule; `read_host_load` is the adapter that reads /proc as the paper's
collectors do (CPU = 1-minute load average / cores from /proc/loadavg, memory = 1 -
MemAvailable / MemTotal from /proc/meminfo); `check` puts them together.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from iez.errors import ConfigError, IezError

DEFAULT_MAX_CPU = 0.70
DEFAULT_MAX_MEM = 0.50
POLL = 2.0  # seconds between looks at the host's load while waiting


class GateClosed(IezError):
    """The host is too busy to allocate now."""


@dataclass(frozen=True)
class GateLimits:
    max_cpu: float = DEFAULT_MAX_CPU  # fraction of the cores' capacity, 0..1+
    max_mem: float = DEFAULT_MAX_MEM  # fraction of memory in use, 0..1

    def __post_init__(self) -> None:
        for name in ("max_cpu", "max_mem"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"gate {name.replace('_', ' ')} {v} must be a positive fraction (e.g. 0.7)")


@dataclass(frozen=True)
class HostLoad:
    cpu: float  # 1-minute load average / cores
    mem: float  # used memory fraction


@dataclass(frozen=True)
class Decision:
    open: bool
    reason: str  # one line, for logs and errors


def decide(load: HostLoad, limits: GateLimits = GateLimits()) -> Decision:
    """Open iff CPU < max_cpu and memory < max_mem (both strict, as in the paper)."""
    why = []
    if not load.cpu < limits.max_cpu:
        why.append(f"CPU {load.cpu:.0%} >= {limits.max_cpu:.0%}")
    if not load.mem < limits.max_mem:
        why.append(f"memory {load.mem:.0%} >= {limits.max_mem:.0%}")
    if why:
        return Decision(False, "host busy: " + ", ".join(why))
    return Decision(True, f"host idle enough: CPU {load.cpu:.0%}, memory {load.mem:.0%}")


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
        fields = rest.split()
        if fields and fields[0].isdigit():
            meminfo[key.strip()] = int(fields[0])
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
        raise GateClosed(f"not allocating now, {d.reason} (limits are configurable)")
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
    try:
        return path.read_text()
    except OSError as e:
        raise IezError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise IezError(f"{path}: not text") from None
