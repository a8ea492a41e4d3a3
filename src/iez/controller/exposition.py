"""The controller's Prometheus exposition, by prometheus_client.

Families (built afresh at each scrape, so they always show the current view): per-OST and
per-OSS utilization and OSTCost (docs/references.md#s000-eq7) over fresh statistics, statistics ages and
staleness, OSS load, allocation latency (a histogram), work done and waiting, collector messages
accepted and rejected. docs/controller.md lists them all.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# Seconds: allocation of a small job takes milliseconds, thousands of files seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class Histogram:
    """Observed values counted into buckets; the collector turns them into a histogram family."""

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

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, observations ≤ le) pairs, as HistogramMetricFamily.add_metric takes them."""
        out: list[tuple[str, float]] = []
        running = 0
        for le, n in zip([*self.buckets, float("inf")], self.counts):
            running += n
            out.append((floatToGoString(le), running))
        return out


def add_known(family: GaugeMetricFamily, labels: list[str], value: float | None) -> None:
    """One sample, or none for a figure not known (yet): an OST never heard of has no age, a
    collector's rates are null until its second sample. A made-up zero would read as a fact."""
    if value is not None:
        family.add_metric(labels, value)


class Exposition(Collector):
    """The families `build` yields, in a registry of their own: the process-wide default
    registry would add the Python process's own metrics and outlive a controller."""

    def __init__(self, build: Callable[[], Iterable[Metric]]):
        self._build = build
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Iterable[Metric]:
        return self._build()

    def render(self) -> bytes:
        return generate_latest(self.registry)
