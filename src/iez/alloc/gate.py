"""The controller-host gate: allocate only while the host is not busy ("only if the CPU
utilization is lower than 70% and memory utilization is lower than 50%", so the allocator never
disturbs the MDS it runs beside: docs/references.md#s000-gate).

Pure: `decide` is the rule over a `HostLoad`; reading the load from /proc and waiting for the gate
to open are `iez.collect.host`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iez.errors import ConfigError, IezError

DEFAULT_MAX_CPU = 0.70
DEFAULT_MAX_MEM = 0.50


class GateClosed(IezError):
    """The host is too busy to allocate now."""

    exit_code = 1


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
