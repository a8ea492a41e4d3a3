"""Balance metrics: OST and OSS utilization, and OSTCost (docs/references.md#s000-eq7).

OST utilization = storage used on an OST / its capacity. OSTCost = max OST utilization /
mean OST utilization over all OSTs (1.0 is perfect balance). Each is reported twice:
over the bytes the job placed (the paper's figures) and over total usage (job + what was
already there), because iez must balance both: a job spread evenly can still leave the file
system's usage uneven, and levelling total usage alone can crowd a job onto a few OSTs
(docs/allocation.md, `balanced`).
"""

from __future__ import annotations

from dataclasses import dataclass

from iez.cluster import Cluster


def ost_utilization(cluster: Cluster, bytes_on: dict[int, int]) -> dict[int, float]:
    """Fraction of each OST's capacity taken by `bytes_on` (OSTs absent from it count 0)."""
    return {o.index: bytes_on.get(o.index, 0) / o.capacity for o in cluster.osts}


def oss_utilization(cluster: Cluster, bytes_on: dict[int, int]) -> dict[str, float]:
    """Per OSS: bytes on its OSTs / the capacity of its OSTs (docs/references.md#s000-fig11)."""
    out = {}
    for s in cluster.osses:
        cap = sum(cluster.ost(i).capacity for i in s.osts)
        out[s.name] = sum(bytes_on.get(i, 0) for i in s.osts) / cap
    return out


def ost_cost(util: dict[int, float] | dict[str, float]) -> float:
    """max / mean (eq. 7); 1.0 when nothing is used at all."""
    vals = list(util.values())
    if not vals:
        return 1.0
    mean = sum(vals) / len(vals)
    return max(vals) / mean if mean > 0 else 1.0


def integer_bound(stripes: int, n_osts: int) -> float:
    """Best OSTCost that k equal stripes can reach on n OSTs: ceil(k/n) / (k/n)."""
    if stripes <= 0 or n_osts <= 0:
        return 1.0
    return -(-stripes // n_osts) / (stripes / n_osts)


@dataclass(frozen=True)
class Balance:
    ost_util: dict[int, float]
    oss_util: dict[str, float]
    ost_cost: float
    oss_cost: float


@dataclass(frozen=True)
class BalanceReport:
    job: Balance  # over the bytes this job placed
    total: Balance  # over job bytes + bytes already used on each OST


def balance(cluster: Cluster, bytes_on: dict[int, int]) -> Balance:
    ou = ost_utilization(cluster, bytes_on)
    su = oss_utilization(cluster, bytes_on)
    return Balance(ou, su, ost_cost(ou), ost_cost(su))


def balance_report(cluster: Cluster, job_bytes: dict[int, int]) -> BalanceReport:
    total = {o.index: o.used + job_bytes.get(o.index, 0) for o in cluster.osts}
    return BalanceReport(job=balance(cluster, job_bytes), total=balance(cluster, total))
