"""The controller's Prometheus exposition, by prometheus_client.

Families (built afresh at each scrape, so they always show the current view): per-OST and
per-OSS utilization and OSTCost (docs/references.md#s000-eq7) over fresh statistics, capacity,
statistics ages and staleness, bytes read and written, OSS load, allocation latency (a
histogram), work done and waiting, collector messages accepted and rejected, plan hits and
misses. docs/controller.md lists them all beside the Lustre exporters' names.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from iez.cluster import Cluster
from iez.controller.view import ViewSnapshot
from iez.metrics import ost_cost

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


# Prometheus names, after the Lustre exporters sites already run (docs/references.md#lustre-exporter):
# per-target families carry `component` (ost, oss, mds) and `target` (FSNAME-OSTxxxx, or the host's
# name for an OSS or the MDS), so a query can join iez's series with lustre_exporter's on `target`;
# counters end in _total for rate(); units (bytes, seconds, ratio) are in the names.
TARGET_LABELS = ["component", "target"]


@dataclass(frozen=True)
class Counts:
    """What the controller counted since it started, copied under its lock for one scrape."""

    latency: dict[str, Histogram]  # allocation seconds, by policy
    done: dict[str, int]  # predict / allocate ok
    errors: dict[str, int]  # predict / allocate failed
    messages: dict[str, int]  # collector messages accepted / rejected
    held: int  # pieces of work held back
    ost_bytes: dict[str, tuple[float, float]]  # target -> (read, write) bytes the collectors reported
    plan_files: dict[str, tuple[int, int]]  # app -> (hits, misses) of the traces uploaded


def families(cluster: Cluster, view: ViewSnapshot, desc: dict[str, Any], counts: Counts) -> list[Metric]:
    """Every family of /metrics from the global view (`view` and its `describe` form) and `counts`."""
    fs = cluster.fsname
    osts = view.snapshot.osts

    def gauge(name: str, doc: str, labels: list[str] = TARGET_LABELS) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=labels)

    used = gauge("iez_used_ratio", "Used fraction of an OST (fresh statistics only) or of an OSS's fresh OSTs.",
                 [*TARGET_LABELS, "oss"])
    cap = gauge("iez_capacity_bytes", "Capacity of the OST (kbytestotal x 1024), fresh statistics only.")
    avail = gauge("iez_available_bytes", "Space available to users on the OST (kbytesavail x 1024).")
    free = gauge("iez_free_bytes", "Free space on the OST, the root reserve included (kbytesfree x 1024).")
    age = gauge("iez_stats_age_seconds", "Seconds since the target's statistics arrived at the controller.")
    stale = gauge("iez_stale", "1 while the target has no fresh statistics (allocation avoids its OSTs).")
    rbytes = CounterMetricFamily("iez_read_bytes", "Bytes read on the OST: its obdfilter stats read_bytes sum as "
                                 "its collector reported it (version 1 collectors: rate x interval, summed since the "
                                 "controller started).", labels=TARGET_LABELS)
    wbytes = CounterMetricFamily("iez_write_bytes", "Bytes written on the OST: its obdfilter stats write_bytes sum "
                                 "as its collector reported it (version 1 collectors: rate x interval, summed since "
                                 "the controller started).", labels=TARGET_LABELS)
    for row in desc["osts"]:
        lab = ["ost", row["name"]]
        stale.add_metric(lab, float(row["stale"]))
        add_known(age, lab, row["age"])
        if row["index"] in osts:
            st = osts[row["index"]]
            used.add_metric([*lab, row["oss"]], st.used_fraction)
            cap.add_metric(lab, st.kbytestotal * 1024.0)
            avail.add_metric(lab, st.kbytesavail * 1024.0)
            if st.kbytesfree is not None:  # older collectors do not send it
                free.add_metric(lab, st.kbytesfree * 1024.0)
        if row["name"] in counts.ost_bytes:
            r, w = counts.ost_bytes[row["name"]]
            rbytes.add_metric(lab, r)
            wbytes.add_metric(lab, w)
    cpu = gauge("iez_cpu_load_ratio", "The host's 1-minute load average per core (fresh statistics only).")
    mem = gauge("iez_memory_used_ratio", "The host's used memory fraction (fresh statistics only).")
    per_oss = {}
    for s in cluster.osses:
        fresh = [osts[i] for i in s.osts if i in osts]
        if fresh:
            total = sum(o.kbytestotal for o in fresh)
            per_oss[s.name] = sum(o.used_fraction * o.kbytestotal for o in fresh) / total
            used.add_metric(["oss", s.name, s.name], per_oss[s.name])
        load = view.snapshot.osses.get(s.name)
        if load is not None:
            cpu.add_metric(["oss", s.name], load.cpu)
            mem.add_metric(["oss", s.name], load.mem)
    for component, hosts in (("oss", desc["osses"]), ("mds", [desc["mds"]])):
        for host in hosts:
            stale.add_metric([component, host["name"]], float(host["stale"]))
            add_known(age, [component, host["name"]], host["age"])
    cost = gauge("iez_ost_cost_ratio", "OSTCost (docs/references.md#s000-eq7): max / mean OST utilization over "
                 "fresh OSTs; 1 is perfect balance.", ["fsname"])
    oss_cost = gauge("iez_oss_cost_ratio", "max / mean OSS utilization over fresh OSTs.", ["fsname"])
    if osts:
        cost.add_metric([fs], ost_cost({i: o.used_fraction for i, o in osts.items()}))
        oss_cost.add_metric([fs], ost_cost(per_oss))
    lat = HistogramMetricFamily("iez_allocation_seconds", "Time to place one run and store its plan.",
                                labels=["policy"])
    for name, h in counts.latency.items():
        lat.add_metric([name], h.cumulative(), h.sum)
    work = CounterMetricFamily("iez_work", "Predictions and allocations done, by result.", labels=["kind", "result"])
    for kind in ("predict", "allocate"):
        work.add_metric([kind, "ok"], counts.done[kind])
        work.add_metric([kind, "failed"], counts.errors[kind])
    msgs = CounterMetricFamily("iez_collector_messages", "Collector messages, by what became of them.",
                               labels=["result"])
    for k, v in counts.messages.items():
        msgs.add_metric([k], v)
    plan = CounterMetricFamily("iez_plan_files", "Files the uploaded traces created: placed from the plan "
                               "(hit) or not named by it (miss).", labels=["app", "result"])
    for app, (hits, misses) in sorted(counts.plan_files.items()):
        plan.add_metric([app, "hit"], hits)
        plan.add_metric([app, "miss"], misses)
    held = GaugeMetricFamily("iez_work_held_back", "Pieces of work waiting for the gate or for fresh statistics.",
                             value=counts.held)
    return [used, cap, avail, free, age, stale, rbytes, wbytes, cpu, mem, cost, oss_cost, lat, work, msgs, plan, held]
