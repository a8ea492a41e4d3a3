"""One collector per source, in the style of Prometheus node_exporter: each is a small class
behind one interface, `collect(tree) -> Reading`, listed once in `COLLECTORS`, and a failing one
is reported and skipped while the others go on (docs/references.md#s000-collect).

    ost_space   kbytestotal / kbytesavail / kbytesfree of every OST   (obdfilter.*, else osd-*)
    ost_rates   read and write bytes/s between two rounds              (obdfilter.*.stats)
    ost_states  active / inactive / nocreate as the MDS's OSPs see it  (osp.*.active, max_create_count)
    host_load   CPU (1-min load average / cores) and used memory       (/proc/loadavg, /proc/meminfo)

`COLLECTORS` says which roles run each by default (an OSS the space, rates and load, the MDS the
states and load); `iez collect` reads it for its defaults and for `--collector` /
`--no-collector`. To add a collector: a class with `name` and `collect`, and one row in
`COLLECTORS`.

The parameters come from a `ParamTree` (a real node's /proc and /sys, an emulated host's
`params/<host>`, an `lctl get_param` dump, or lctl itself), read with the parsers of
`iez.lustre`; the computations are theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, NamedTuple, Protocol

from iez.alloc.gate import HostLoad as Load
from iez.collect.host import read_host_load
from iez.cluster import ost_name
from iez.collect.message import ROLES, OstReading
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
    """One source: `collect` reads it from the tree (or elsewhere, e.g. /proc) once per round."""

    name: str

    def collect(self, tree: ParamTree) -> Reading: ...


def by_fsname(values: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Parameters grouped by the file system of the target they belong to (`*.<fs>-OSTxxxx*.*`),
    so that indices of two file systems served by one host never mix."""
    out: dict[str, dict[str, str]] = {}
    for name, text in values.items():
        target = target_of(name)
        if target is not None:
            out.setdefault(target[0], {})[name] = text
    return out


def target_of(name: str) -> tuple[str, str, int] | None:
    """`(fsname, "OST"|"MDT", index)` of the target a parameter (`*.<fs>-OSTxxxx*.*`) belongs to."""
    parts = split_param_name(name)
    return parse_target_name(parts[1]) if len(parts) > 1 else None


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
        for name, text in values.items():
            parsed = target_of(name)
            if parsed is None:  # not a target's statistics
                continue
            target = ost_name(parsed[0], parsed[2])
            stats = parse_stats(text)
            out.errors += _skipped(name, stats.skipped)
            if stats.times.snapshot_ns is None:
                out.errors.append(f"{name}: no snapshot_time: no rate")
                continue
            rates = self._rates(target, stats)
            out.osts[target] = {"read_bps": None, "write_bps": None} if rates is None else \
                {"read_bps": rates[0], "write_bps": rates[1]}
            # Lustre's own cumulative sums, for /metrics' counters (a counter printed only once
            # non-zero: absent is 0)
            for field_name in ("read_bytes", "write_bytes"):
                c = stats.counter(field_name)
                out.osts[target][field_name] = (c.sum or 0) if c is not None else 0
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


@dataclass(frozen=True)
class Registration:
    """A collector in `COLLECTORS`: how to make one (given the /proc to read the host from), the
    roles that run it unless told otherwise, and what it reads, for `iez collect --help`."""

    factory: Callable[[Path], Collector]
    roles: tuple[str, ...]
    about: str


# The one list of collectors, in the order they run (and report errors).
COLLECTORS: dict[str, Registration] = {
    "ost_space": Registration(lambda proc: OstSpace(), ("oss",), "OST space (kbytes*)"),
    "ost_rates": Registration(lambda proc: OstRates(), ("oss",), "OST read and write bytes/s (obdfilter stats)"),
    "ost_states": Registration(lambda proc: OstStates(), ("mds",), "OST states as the MDS's OSPs see them"),
    "host_load": Registration(HostLoad, ("oss", "mds"), "the host's CPU and memory use (/proc)"),
}


def collectors_for(role: str, proc: str | Path = "/proc", enable: Iterable[str] = (),
                   disable: Iterable[str] = ()) -> list[Collector]:
    """The collectors `role` runs by default, plus `enable`, minus `disable`, in table order."""
    if role not in ROLES:
        raise IezError(f"unknown collector role {role!r} (oss or mds)")
    on, off = set(enable), set(disable)
    for name in sorted(on | off):
        if name not in COLLECTORS:
            raise IezError(f"unknown collector {name!r}; known: {', '.join(COLLECTORS)}")
    return [reg.factory(Path(proc)) for name, reg in COLLECTORS.items()
            if (role in reg.roles or name in on) and name not in off]


class Round(NamedTuple):
    """What one round of every collector gives the message."""

    osts: dict[str, OstReading]  # OSTs with space figures (and rates, possibly unknown)
    ost_states: dict[str, str]
    load: Load | None
    errors: list[str]


def run_round(collectors: list[Collector], tree: ParamTree) -> Round:
    """Every collector once; a collector that fails is reported and skipped."""
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
            # OstSpace writes both as checked ints; the rest of the fields are its or OstRates'.
            osts[t] = OstReading(f["kbytestotal"], f["kbytesavail"], f.get("kbytesfree"),  # type: ignore[arg-type]
                                 f.get("read_bps"), f.get("write_bps"),
                                 f.get("read_bytes"), f.get("write_bytes"))  # type: ignore[arg-type]
        else:
            errors.append(f"{t}: I/O statistics but no space figures: OST not reported")
    return Round(osts, states, load, errors)
