"""One collector per source, in the style of Prometheus node_exporter: each is a small unit
behind one interface, `collect(tree) -> Reading`, and a failing one is reported and skipped
while the others go on (seed 000 §III-B1).

    OstSpace    kbytestotal / kbytesavail / kbytesfree of every OST   (obdfilter.*, else osd-*)
    OstRates    read and write bytes/s between two rounds              (obdfilter.*.stats)
    HostLoad    CPU (1-min load average / cores) and used memory       (/proc/loadavg, /proc/meminfo)
    OstStates   active / inactive / nocreate as the MDS's OSPs see it  (osp.*.active, max_create_count)

An OSS runs the first three, an MDS the last two. The parameters come from a `ParamTree` (a
real node's /proc and /sys, an emulated host's `params/<host>`, an `lctl get_param` dump, or
lctl itself), read with the parsers of `iez.lustre`; the computations are theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol

from iez.alloc.gate import HostLoad as Load
from iez.collect.host import read_host_load
from iez.cluster import ost_name
from iez.collect.message import OstReading
from iez.errors import IezError
from iez.lustre.parse import LustreFormatError, Skipped
from iez.lustre.getparam import split_param_name
from iez.lustre.params import ParamTree
from iez.lustre.stats import Stats, parse_stats, stats_rates
from iez.lustre.targets import osp_states, parse_target_name, target_space

SPACE_PATTERNS = ("obdfilter.*.kbytes*", "osd-*.*.kbytes*")
STATS_PATTERN = "obdfilter.*.stats"
OSP_PATTERNS = ("osp.*.active", "osp.*.max_create_count")


@dataclass
class Reading:
    """What one collector read in one round. Fields left empty were not its to read."""

    osts: dict[str, dict[str, float | int | None]] = field(default_factory=dict)  # target -> fields
    ost_states: dict[str, str] = field(default_factory=dict)
    load: Load | None = None
    errors: list[str] = field(default_factory=list)


class Collector(Protocol):
    name: str

    def collect(self, tree: ParamTree) -> Reading: ...


def by_fsname(values: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Parameters grouped by the file system of the target they belong to (`*.<fs>-OSTxxxx*.*`),
    so that indices of two file systems served by one host never mix."""
    out: dict[str, dict[str, str]] = {}
    for name, text in values.items():
        parts = split_param_name(name)
        target = parse_target_name(parts[1]) if len(parts) > 1 else None
        if target is not None:
            out.setdefault(target[0], {})[name] = text
    return out


def _gather(tree: ParamTree, patterns: tuple[str, ...], absent: str) -> tuple[dict[str, str], Reading]:
    """Values of every pattern, and a Reading holding what could not be read (or `absent`)."""
    before = len(tree.errors)
    values: dict[str, str] = {}
    for pattern in patterns:
        values.update(tree.get(pattern))
    out = Reading(errors=[str(e) for e in tree.errors[before:]])
    if not values:
        out.errors.append(absent)
    return values, out


def _skipped(what: str, skipped: list[Skipped] | tuple[Skipped, ...]) -> list[str]:
    return [f"{what}: {s}" for s in skipped]


class OstSpace:
    name = "ost_space"

    def collect(self, tree: ParamTree) -> Reading:
        values, out = _gather(tree, SPACE_PATTERNS, "no OST space parameters (obdfilter.*.kbytes*, "
                              "osd-*.*.kbytes*) on this node")
        for fs, group in by_fsname(values).items():
            report = target_space(group)
            out.errors += [f"{s.text}: {s.reason}" for s in report.skipped]
            for index, t in report.by_index("OST").items():
                target = ost_name(fs, index)
                if t.kbytestotal is None or t.kbytesavail is None or t.kbytestotal <= 0:
                    out.errors.append(f"{t.device}: no usable kbytestotal and kbytesavail: OST skipped")
                    continue
                if not 0 <= t.kbytesavail <= t.kbytestotal:
                    out.errors.append(f"{t.device}: kbytesavail {t.kbytesavail} outside 0..{t.kbytestotal}: OST skipped")
                    continue
                free = t.kbytesfree if t.kbytesfree is not None and 0 <= t.kbytesfree <= t.kbytestotal else None
                out.osts[target] = {"kbytestotal": t.kbytestotal, "kbytesavail": t.kbytesavail, "kbytesfree": free}
        return out


class OstRates:
    """Bytes/s from the growth of obdfilter `read_bytes` / `write_bytes` sums between rounds.

    The first round of an OST gives no rate (None). A stats file whose snapshot_time did not
    advance (read twice between two kernel updates) repeats the last rate; one that went back
    (a restarted OST, 2.15.0's monotonic clock after a reboot) starts over."""

    name = "ost_rates"

    def __init__(self) -> None:
        self.prev: dict[str, Stats] = {}
        self.last: dict[str, tuple[float, float]] = {}

    def collect(self, tree: ParamTree) -> Reading:
        values, out = _gather(tree, (STATS_PATTERN,), f"no {STATS_PATTERN} on this node")
        for fs, group in by_fsname(values).items():
            for name, text in group.items():
                target = ost_name(fs, parse_target_name(split_param_name(name)[1])[2])
                stats = parse_stats(text)
                out.errors += _skipped(name, stats.skipped)
                if stats.times.snapshot_ns is None:
                    out.errors.append(f"{name}: no snapshot_time: no rate")
                    continue
                rates = self._rates(target, stats)
                out.osts[target] = {"read_bps": None, "write_bps": None} if rates is None else \
                    {"read_bps": rates[0], "write_bps": rates[1]}
        return out

    def _rates(self, target: str, stats: Stats) -> tuple[float, float] | None:
        prev = self.prev.get(target)
        if prev is not None and stats.times.snapshot_ns == prev.times.snapshot_ns:
            return self.last.get(target)
        self.prev[target] = stats
        if prev is None:
            return None
        try:
            r = stats_rates(prev, stats)
        except LustreFormatError:  # went back in time: count from this sample on
            self.last.pop(target, None)
            return None
        self.last[target] = (r.read_bps, r.write_bps)
        return self.last[target]


class HostLoad:
    """The host's CPU and memory use, read from `proc` (a directory shaped like /proc) as the
    controller's own gate reads it (iez.alloc.gate: load average / cores, 1 - MemAvailable / MemTotal)."""

    name = "host_load"

    def __init__(self, proc: str | Path = "/proc") -> None:
        self.proc = Path(proc)

    def collect(self, tree: ParamTree) -> Reading:
        try:
            return Reading(load=read_host_load(self.proc))
        except IezError as e:
            return Reading(errors=[str(e)])


class OstStates:
    name = "ost_states"

    def collect(self, tree: ParamTree) -> Reading:
        values, out = _gather(tree, OSP_PATTERNS, "no OSP parameters (osp.*.active, osp.*.max_create_count): "
                              "is this the MDS?")
        for fs, group in by_fsname(values).items():
            for index, state in osp_states(group).items():
                out.ost_states[ost_name(fs, index)] = state
        return out


def collectors_for(role: str, proc: str | Path = "/proc") -> list[Collector]:
    if role == "oss":
        return [OstSpace(), OstRates(), HostLoad(proc)]
    if role == "mds":
        return [OstStates(), HostLoad(proc)]
    raise IezError(f"unknown collector role {role!r} (oss or mds)")


def run_round(collectors: list[Collector], tree: ParamTree) -> tuple[dict[str, OstReading], dict[str, str],
                                                                     Load | None, list[str]]:
    """Every collector once; a collector that fails is reported and skipped. Returns the OSTs
    that have both space and (possibly unknown) rates, their states, the host load, the errors."""
    fields: dict[str, dict[str, float | int | None]] = {}
    states: dict[str, str] = {}
    load: Load | None = None
    errors: list[str] = []
    for c in collectors:
        try:
            r = c.collect(tree)
        except (IezError, OSError) as e:
            errors.append(f"{c.name}: {e}")
            continue
        for target, f in r.osts.items():
            fields.setdefault(target, {}).update(f)
        states.update(r.ost_states)
        load = r.load or load
        errors += [f"{c.name}: {e}" for e in r.errors]
    osts = {}
    for t, f in sorted(fields.items()):
        if "kbytestotal" in f:
            osts[t] = OstReading(f["kbytestotal"], f["kbytesavail"], f.get("kbytesfree"),  # type: ignore[arg-type]
                                 f.get("read_bps"), f.get("write_bps"))
        else:
            errors.append(f"{t}: I/O statistics but no space figures: OST not reported")
    return osts, states, load, errors
