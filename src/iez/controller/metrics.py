"""Prometheus text exposition (format 0.0.4) of the controller's figures: pure rendering.

Families: per-OST and per-OSS utilization and OSTCost (seed 000 eq. 7) over fresh statistics,
statistics ages and staleness, OSS load, allocation latency (a histogram), work done and
waiting, collector messages accepted and rejected. docs/controller.md lists them all.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

# Seconds: allocation of a small job takes milliseconds, thousands of files seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(init=False)  # per bucket, not cumulative; last is +Inf
    sum: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def copy(self) -> "Histogram":
        h = Histogram(self.buckets)
        h.counts, h.sum, h.count = list(self.counts), self.sum, self.count
        return h

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1


Labels = Mapping[str, str]


@dataclass
class Family:
    name: str
    kind: str  # gauge | counter | histogram
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)
    histograms: list[tuple[Labels, Histogram]] = field(default_factory=list)

    def add(self, value: float | None, **labels: str) -> "Family":
        if value is not None:
            self.samples.append((labels, value))
        return self


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    esc = (str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for v in labels.values())
    return "{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, esc)) + "}"


def render(families: Iterable[Family]) -> str:
    out: list[str] = []
    for f in families:
        out.append(f"# HELP {f.name} {f.help}")
        out.append(f"# TYPE {f.name} {f.kind}")
        for labels, v in f.samples:
            out.append(f"{f.name}{_labels(labels)} {_value(v)}")
        for labels, h in f.histograms:
            running = 0
            for le, n in zip([*map(_value, h.buckets), "+Inf"], h.counts):
                running += n
                out.append(f"{f.name}_bucket{_labels({**labels, 'le': le})} {running}")
            out.append(f"{f.name}_sum{_labels(labels)} {_value(h.sum)}")
            out.append(f"{f.name}_count{_labels(labels)} {h.count}")
    return "\n".join(out) + "\n"
