"""lprocfs `*.stats` files: obdfilter, osc, OSS/MDS services, llite, md_stats, export stats.

Format (lprocfs_stats_seq_show, docs/references.md#l-fmt-stats): a header of one line (snapshot_time,
2.5 in secs.usecs, 2.10+ in secs.nsecs) or three (snapshot/start/elapsed, 2.15+ and EXAScaler
2.14 backports), then one line per counter with count > 0:
    "%-25s %lld samples [%s]"  name count units  [+ " %lld %lld %lld" min max sum [+ " %llu" sumsq]]

Duplicate names are kept, in file order. 2.5-2.13 obdfilter stats print `statfs` twice: first the
OFD's own counter (the one per-export stats also show), then the generic obd-op counter. They
count different things, so they are never summed; `counter(name)` returns the first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from iez.lustre.parse import LustreFormatError, Skipped, Times, format_time, parse_time_line

_COUNTER = re.compile(r"^(\S+)\s+(\d+)\s+samples\s+\[([^\]]*)\]((?:\s+-?\d+)*)\s*$")


@dataclass(frozen=True)
class Counter:
    """One lprocfs counter. min/max/sum (and sumsq) are None when the counter has no such
    columns; `hist` holds job_stats histogram buckets (label, count)."""

    name: str
    count: int
    unit: str
    min: int | None = None
    max: int | None = None
    sum: int | None = None
    sumsq: int | None = None
    hist: tuple[tuple[str, int], ...] = ()

    @property
    def mean(self) -> float | None:
        if self.sum is None or self.count == 0:
            return None
        return self.sum / self.count

    @property
    def sumsq_wrapped(self) -> bool:
        """The u64 sum of squares overflowed: it is below sum^2/count (Cauchy-Schwarz).
        Seen on busy clients, e.g. osc write_bytes in the 2.10.1 fixture."""
        if self.sumsq is None or self.sum is None or self.count == 0:
            return False
        return self.sumsq * self.count < self.sum * self.sum

    @property
    def stddev(self) -> float | None:
        """Population standard deviation, or None without a usable sum of squares."""
        if self.sumsq is None or self.sum is None or self.count == 0 or self.sumsq_wrapped:
            return None
        mean = self.sum / self.count
        return math.sqrt(max(0.0, self.sumsq / self.count - mean * mean))


@dataclass(frozen=True)
class Stats:
    times: Times
    counters: tuple[Counter, ...]
    skipped: tuple[Skipped, ...] = ()

    def counter(self, name: str) -> Counter | None:
        """The first counter called `name` (see the module docstring on duplicates)."""
        return next((c for c in self.counters if c.name == name), None)

    def all(self, name: str) -> list[Counter]:
        return [c for c in self.counters if c.name == name]

    def names(self) -> list[str]:
        return list(dict.fromkeys(c.name for c in self.counters))


def parse_counter_line(line: str) -> Counter | None:
    m = _COUNTER.match(line)
    if not m:
        return None
    name, count, unit, rest = m.groups()
    nums = [int(x) for x in rest.split()]
    if len(nums) not in (0, 3, 4):
        return None
    lo, hi, total, sumsq = [*nums, None, None, None, None][:4]
    return Counter(name, int(count), unit, lo, hi, total, sumsq)


def parse_stats(text: str) -> Stats:
    fields: dict[str, int] = {}
    counters: list[Counter] = []
    skipped: list[Skipped] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        t = parse_time_line(line)
        if t is not None:
            fields[t[0]] = t[1]
            continue
        c = parse_counter_line(line)
        if c is None:
            skipped.append(Skipped(i, line, "not a stats header or counter line"))
        else:
            counters.append(c)
    return Stats(Times.of(fields), tuple(counters), tuple(skipped))


def format_stats(stats: Stats) -> str:
    """The text lprocfs prints for these stats (2.10+ header; 3 lines when start is known)."""
    t = stats.times
    out = []
    for name, ns in (("snapshot_time", t.snapshot_ns), ("start_time", t.start_ns), ("elapsed_time", t.elapsed_ns)):
        if ns is not None:
            out.append(format_time(name, ns))
    for c in stats.counters:
        line = f"{c.name:<25} {c.count} samples [{c.unit}]"
        extra = [c.min, c.max, c.sum] if c.sum is not None else []
        if extra and c.sumsq is not None:
            extra.append(c.sumsq)
        out.append(line + "".join(f" {v}" for v in extra))
    return "".join(line + "\n" for line in out)


# -- rates between two snapshots ----------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """How much one counter moved between two snapshots."""

    name: str
    unit: str
    interval: float  # seconds
    count: int  # samples added in the interval
    amount: int | None  # sum added (bytes for [bytes], usecs for latency counters)
    reset: bool = False  # the counter went backwards (stats cleared); counted from zero

    @property
    def ops_per_s(self) -> float:
        return self.count / self.interval

    @property
    def per_s(self) -> float | None:
        return None if self.amount is None else self.amount / self.interval

    @property
    def mean(self) -> float | None:
        """Mean sample in the interval: bytes per RPC, or latency for [usecs] counters."""
        return None if self.amount is None or self.count == 0 else self.amount / self.count


@dataclass(frozen=True)
class StatsRates:
    interval: float
    rates: dict[str, Rate] = field(default_factory=dict)

    def _per_s(self, name: str) -> float:
        r = self.rates.get(name)
        return (r.per_s or 0.0) if r else 0.0

    def _ops(self, name: str) -> float:
        r = self.rates.get(name)
        return r.ops_per_s if r else 0.0

    @property
    def read_bps(self) -> float:
        return self._per_s("read_bytes")

    @property
    def write_bps(self) -> float:
        return self._per_s("write_bytes")

    @property
    def read_ops(self) -> float:
        return self._ops("read_bytes")

    @property
    def write_ops(self) -> float:
        return self._ops("write_bytes")


def stats_rates(before: Stats, after: Stats) -> StatsRates:
    """Per-second rates of every counter between two snapshots of the same stats file.

    Counters are printed only once non-zero, so a missing counter counts as 0. A counter that
    went backwards was cleared in between; its rate counts from zero (a lower bound)."""
    t0, t1 = before.times.snapshot_ns, after.times.snapshot_ns
    if t0 is None or t1 is None:
        raise LustreFormatError("stats rates need a snapshot_time in both snapshots")
    if t1 <= t0:
        raise LustreFormatError(f"stats snapshots are not in time order ({t0 / 1e9:.9f} then {t1 / 1e9:.9f})")
    dt = (t1 - t0) / 1e9
    rates = {}
    for name in dict.fromkeys([*after.names(), *before.names()]):
        a, b = after.counter(name), before.counter(name)
        count_a, count_b = (a.count if a else 0), (b.count if b else 0)
        sum_a, sum_b = ((a.sum or 0) if a else 0), ((b.sum or 0) if b else 0)
        reset = count_a < count_b or sum_a < sum_b
        if reset:
            count_b = sum_b = 0
        c = a or b
        assert c is not None  # the name is one of theirs
        amount = sum_a - sum_b if c.sum is not None else None
        rates[name] = Rate(name, c.unit, dt, count_a - count_b, amount, reset)
    return StatsRates(dt, rates)
