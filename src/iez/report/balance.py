"""The policy comparison `iez report` and `iez allocate` show: per policy, how balanced the
OSTs and OSSs are after its placements (docs/references.md#s000-eq7), and the layouts it changed
from the asked ones with why (docs/layouts.md), as plain data and as (metric, value per policy)
rows for a table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from iez.cluster import Cluster, Snapshot, states_ok
from iez.errors import IezError
from iez.layout.layout import FileLayout
from iez.metrics import BalanceReport, balance_report, integer_bound
from iez.request import Placement
from iez.units import format_size

# Printed under the table: user-facing text, so it names the paper rather than a link.
COST_NOTE = "OSTCost = max / mean OST utilization (seed 000 eq. 7); 1.000 is perfect balance."


@dataclass(frozen=True)
class ChangedLayout:
    """A file whose layout iez changed from the asked one (a placement with a note)."""

    path: str
    asked: str  # the request's stripe count, "-" when the request is not at hand
    chosen: str  # the placed layout: "C x SIZE", or "PFL" and each component's count
    why: str  # the placement's note


@dataclass(frozen=True)
class PolicyBalance:
    policy: str
    cluster: Cluster  # OSTs carry the bytes used before this run
    job_bytes: dict[int, int]
    balance: BalanceReport
    bound: float  # best job OSTCost k equal stripes can reach on the usable OSTs
    files: int
    stripes: int
    changed: tuple[ChangedLayout, ...] = ()  # in placement order


def cluster_used(cluster: Cluster, snap: Snapshot) -> Cluster:
    """The cluster with each OST's used bytes as the snapshot saw them."""
    used = {i: min(cluster.ost(i).capacity, max(0, s.kbytestotal - s.kbytes_free) * 1024)
            for i, s in snap.osts.items()}
    return cluster.with_used(used)


def layout_summary(fl: FileLayout) -> str:
    """A layout in a few characters: "4 x 1 MiB", or "PFL 1 / 4 / 15" (each component's count)."""
    if fl.is_composite:
        return "PFL " + " / ".join(str(c.layout.stripe_count) for c in fl.parts())
    lay = fl.parts()[0].layout
    return f"{lay.stripe_count} x {format_size(lay.stripe_size)}"


def asked_summary(stripe_count: int) -> str:
    """A request's stripe count as lfs setstripe -c reads it (-1: every OST, 0: the default)."""
    return {-1: "all OSTs", 0: "the default", 1: "1 stripe"}.get(stripe_count, f"{stripe_count} stripes")


def changed_layouts(placed: Sequence[Placement], asked: Mapping[str, int]) -> tuple[ChangedLayout, ...]:
    """The placements whose layout iez changed, with the stripe count their request asked for
    (`asked`: path -> count; a path it lacks shows "-")."""
    return tuple(ChangedLayout(p.path, asked_summary(asked[p.path]) if p.path in asked else "-",
                               layout_summary(p.layout), p.note) for p in placed if p.note)


def policy_balance(policy: str, cluster: Cluster, snap: Snapshot, placed: Sequence[Placement],
                   asked: Mapping[str, int] | None = None) -> PolicyBalance:
    """One policy's row; `asked` (path -> the request's stripe count) fills the changed layouts'
    asked column."""
    from iez.alloc.policy import job_bytes

    base = cluster_used(cluster, snap)
    job = job_bytes(placed)
    stripes = sum(len(p.layout.parts()[0].layout.osts) for p in placed)
    usable = len(states_ok(cluster.ost_indices(), snap))
    return PolicyBalance(policy, base, job, balance_report(base, job), integer_bound(stripes, usable),
                         len(placed), stripes, changed_layouts(placed, asked or {}))


def check_one_cluster(app: str, run: int, rows: Sequence[PolicyBalance]) -> None:
    """Policies are compared only on the same cluster."""
    if len({tuple(r.cluster.ost_indices()) for r in rows}) > 1 or len({r.cluster.fsname for r in rows}) > 1:
        raise IezError(f"run {run} of {app} was placed on different clusters: re-run iez allocate "
                       "with one --cluster for every policy")


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def report_rows(rows: Sequence[PolicyBalance]) -> list[tuple[str, list[str]]]:
    """The comparison as (metric, value per policy), shared by the terminal table and the page."""
    return [
        ("files / stripes", [f"{r.files} / {r.stripes}" for r in rows]),
        ("bytes placed", [format_size(sum(r.job_bytes.values())) for r in rows]),
        ("OSTs used", [f"{sum(1 for v in r.job_bytes.values() if v)} of {len(r.cluster.osts)}" for r in rows]),
        ("OSTCost, job", [f"{r.balance.job.ost_cost:.3f}" for r in rows]),
        ("  bound for equal stripes", [f"{r.bound:.3f}" for r in rows]),
        ("OSS cost, job", [f"{r.balance.job.oss_cost:.3f}" for r in rows]),
        ("max OST utilization, job", [_pct(max(r.balance.job.ost_util.values())) for r in rows]),
        ("OSTCost, total usage", [f"{r.balance.total.ost_cost:.3f}" for r in rows]),
        ("OSS cost, total usage", [f"{r.balance.total.oss_cost:.3f}" for r in rows]),
        ("max OST utilization, total", [_pct(max(r.balance.total.ost_util.values())) for r in rows]),
        ("layouts iez changed", [f"{len(r.changed)} of {r.files}" for r in rows]),
    ]


CHANGED_COLUMNS = ("policy", "path", "asked", "chosen", "why")


def changed_rows(rows: Sequence[PolicyBalance], limit: int | None = None) -> list[list[str]]:
    """The layouts each policy changed, as CHANGED_COLUMNS rows: the first `limit` per policy
    (None: all), then a row saying how many more there are."""
    out = []
    for r in rows:
        shown = r.changed if limit is None else r.changed[:limit]
        out += [[r.policy, c.path, c.asked, c.chosen, c.why] for c in shown]
        if len(shown) < len(r.changed):
            out.append([r.policy, f"... and {len(r.changed) - len(shown)} more", "", "", ""])
    return out


def report_json(app: str, run: int, rows: Sequence[PolicyBalance]) -> dict[str, Any]:
    """The comparison as report.json holds it."""
    return {"app": app, "run": run, "policies": {
        r.policy: {"files": r.files, "stripes": r.stripes, "bound": r.bound,
                   "job": {"ost_cost": r.balance.job.ost_cost, "oss_cost": r.balance.job.oss_cost,
                           "ost_util": r.balance.job.ost_util, "oss_util": r.balance.job.oss_util},
                   "total": {"ost_cost": r.balance.total.ost_cost, "oss_cost": r.balance.total.oss_cost,
                             "ost_util": r.balance.total.ost_util, "oss_util": r.balance.total.oss_util},
                   "job_bytes": r.job_bytes,
                   "changed": [{"path": c.path, "asked": c.asked, "chosen": c.chosen, "why": c.why} for c in r.changed]}
        for r in rows}}
