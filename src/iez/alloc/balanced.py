"""`balanced`, iez's default OST allocation: convex min-cost flow, solved by an exact greedy.

The model (docs/allocation.md, `balanced`). Each stripe is one unit of flow: source -> file (capacity = its stripe
count) -> OST (capacity 1: a file's stripes go to distinct OSTs) -> its OSS -> sink. The arcs
into the sink side are split into unit arcs whose costs rise with projected utilization:

    k-th unit on OST j:  (u_j + k w) / (C_j ū)  +  ε (x_j + k w) / (b_j T0)
    k-th unit on OSS s:                           ε (X_s + k w) / (b_s T0)

w is the bytes a stripe carries; u_j the OST's used bytes (plus other plans' reservations, plus
this job's stripes placed so far) and C_j its capacity; ū the mean utilization once the job is
written. x_j / X_s are the job's bytes on OST j / OSS s and b_j / b_s the write bandwidth that
other jobs' live load and the OSS's CPU and memory load leave this job (`policy.ost_table`);
T0 is the time of a perfectly even spread. The first term is long-term capacity balance (total
usage); the second, with ε = 1e-3, only breaks its ties toward the faster placement. Unit costs
rise with k, so each chain of unit arcs is a convex cost and the problem a convex min-cost flow;
its optimum levels utilization as far as the arc capacities allow (water-filling).

The job's own I/O time enters as arc capacities. Its analytic time, max over OSTs and OSSs of
bytes / bandwidth and over its clients (`client_bw`, when known), may not exceed T_allow = T* + λ (T_RR - T*): T* is the fastest time any
placement reaches (found by bisection on the bound, exact for a group of equal stripes) and T_RR
that of Lustre's round-robin on the same files at its luckiest start (`rr_reference`, which walks
the RR array exactly as LOD does). λ is `AllocOptions.capacity_weight`, the one trade-off weight:
0 places the job as fast as possible (and balances capacity as well as that allows), 1 spends all
of the time the job could gain over RR on capacity balance. For every λ the job is never slower
than RR: the bound is kept on the stripe model below, then checked on the real bytes, tightened
if need be, and if that fails RR's own placement is returned. Only when RR's placement would
overfill an OST is there no RR time to keep to (the bound then rises just enough to fit).
`max_slowdown` > 1 lets T_RR be exceeded; math.inf with λ > 0 drops the bound, which is capacity
balance alone: the failure the issue warns about, a small job crowded onto the emptiest OSTs.

The algorithm. Files are grouped by (pool, stripe count, stripe size within ~9%); a group's
stripes are units of equal weight w (its mean bytes per stripe). Groups are placed one after the other,
heaviest stripes first, each on the loads the earlier ones left. Within a group the placement is
exact, by three steps:

1. Counts. n_j, the stripes OST j gets, minimise F(n) = Σ_j Σ_{k≤n_j} m_j(k) + Σ_s Σ_{k≤N_s} m_s(k)
   (m the unit costs above, N_s = Σ_{j in s} n_j) subject to Σ n_j = M c, 0 ≤ n_j ≤ box_j (M files
   per OST at most, room for whole stripes, the time bound) and N_s ≤ box_s.
   Claim: taking units one at a time, each time the OSS s whose next unit is cheapest (its
   cheapest next OST unit plus its own next unit cost) and in it that cheapest OST, is optimal.
   Proof. For a fixed N_s, the best split inside OSS s takes the N_s smallest of its OSTs'
   unit costs: each OST's costs rise, so any choice takes a prefix of each OST's list, and
   exchanging a taken unit for a cheaper untaken one never increases the sum. Call that sum
   Φ_s(N_s); its increments are the merged sorted OST costs, so Φ_s is convex, and so is
   G_s(N) = Φ_s(N) + Σ_{k≤N} m_s(k). F is then Σ_s G_s(N_s) with Σ N_s = M c: a separable convex
   resource allocation, whose optimum takes the M c smallest increments over all the G_s (the
   same exchange: if a taken increment of s exceeded an untaken one of t, moving the unit from s
   to t would lower F). The greedy takes exactly those. ∎
   The greedy is computed in bulk: bisection on the price θ finds, per OSS, how many of its
   units cost at most θ (an inner bisection on the count, since its own cost grows with it);
   the last few units, those near the final θ and ties, are merged per OSS in cost order. Every
   step keeps each OSS and OST on a prefix of its cost list, so the result is the greedy's.
2. Realisation. The wrap-around rule (McNaughton): lay OSTs out with OST j repeated n_j times
   and deal the sequence to the M files column by column (file i gets positions i, i+M, ...).
   Since n_j ≤ M, no run of one OST holds two positions M apart: every file gets c distinct
   OSTs, and every OST exactly n_j stripes. So any count vector within the boxes is realisable,
   and step 1's optimum is the optimum of the flow. Reordering a file's list (which stripe goes
   where) changes neither, so Method II's shorter last stripes go to the OSTs (or OSSs) with
   the most time so far (`order_stripes`), evenly among equals (`deal`).
3. Bytes. The group's real per-stripe bytes (Method II's last stripe may be partial) are added
   to the OSTs' loads before the next group.

Exactness is per group. Across groups (stripes of different sizes, counts or pools) the problem
is NP-hard (it contains makespan scheduling); placing big stripes first is the LPT rule. The time
bound covers the whole job; a later group that cannot fit under it raises it (and T* is then the
bound the groups needed, an upper bound on the true fastest time). tests/test_alloc_exact.py
checks steps 1-2 against an exact networkx min-cost flow on the unit-arc graph, and the RR walk
against lustre_rr, on random instances.

Cost: two passes (T*, then T_allow; a few more when the real bytes need a tighter bound; the
second keeps a group's counts from the first while they are still optimal, `_optimal`), each
O(G · (B1 · B2 · N + R log N)) for G groups on N OSTs, with B1, B2 ≤ 64 bisection steps and
R ≤ a few N units merged at the end; plus the RR reference, O(starts · files). No per-file Python
work: the answer is arrays (`Placements`).

Reads. A job that reads its files back (`Request.read_bytes`) has a read time as well, the same
maximum over the read bandwidths; its I/O time is the sum. Each phase is kept within RR's time of
it (`phased`), so the sum is within RR's, and the read time joins the tie-breaking cost term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Sequence

import numpy as np

from iez.alloc.lustre_rr import calc_rr, server_order
from iez.alloc.policy import (
    AllocOptions,
    OstTable,
    RequestTable,
    Placements,
    keep_recent,
    request_table,
    room_bytes,
    snapshot_table,
    stripe_bytes,
    stripe_size,
)
from iez.alloc.registry import Registration
from iez.cluster import Cluster, Snapshot
from iez.errors import AllocationError
from iez.layout.hierarchical import Cut, composite, cut, interleave, premise, validate
from iez.layout.raid0 import bytes_per_ost
from iez.layout.stripe import AP
from iez.request import Placement, Request, distinct

# A stripe weighs at least one alignment unit in the costs: empty files still take an object on
# each OST, and spreading those is what makes inode use even too.
MIN_UNIT = float(AP)
# Relative slack when turning a time bound into whole stripes, so a bound met exactly (as RR's
# own loads meet it) is not lost to rounding.
EPS = 1e-9
SIZE_CLASSES = 8  # stripe-size groups per doubling
BISECT_STEPS = 64
TIE = 1e-3  # weight of the job's time in the unit costs: it only breaks ties of utilization
RR_WORK = 250_000  # (start, file) pairs the RR reference may try
RR_MIN_STARTS = 16
STRIPE_ORDERS = ("ost", "oss")
PHASE_FLOOR = 1e-6  # least share of the time bound a phase gets (a job that barely writes still writes)
SEARCH_WAYS = 32  # bounds tried at once when searching the least one
# `threshold`: how far above the lower bound a bound that fits is first looked for (then 8 times
# further each time), how many caps' steps below it are bisected, and how many floats away the
# computed step may be from the exact one.
THRESHOLD_GAP = 2.0 ** -10
THRESHOLD_STEPS = 1 << 14
THRESHOLD_ULPS = 8
TAIL = 4  # units per OST the bisection may leave to the final merge
GUARD_TRIES = 4  # times the bound is tightened to the real bytes before falling back on RR


class Balanced:
    name = "balanced"

    def place(self, requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
              options: AllocOptions = AllocOptions()) -> Placements:
        osts = snapshot_table(cluster, snapshot, options)
        table = request_table(requests, cluster, osts, options)
        if options.routers and cluster.topology:
            cap = cluster.topology.oss_router_bw([s.name for s in cluster.osses])
            osts = replace(osts, oss_bw=np.minimum(osts.oss_bw, cap))
        cuts = hierarchical_cuts(requests, table, cluster, options)
        cut_any = options.layout == "hierarchical" and any(cuts)
        if cut_any:
            table = with_cuts(table, cuts)
        if not len(requests):
            return Placements(requests, table, np.zeros(0, np.int64), np.zeros(1, np.int64), self.name)
        sol = solve(table, osts, rr_orders(cluster, table, osts), options)
        placements = Placements(requests, table, osts.index[sol.stripes], sol.offsets, self.name)
        if cut_any:
            placements = hierarchical(placements, cuts, requests, cluster, osts, sol, options)
        return placements


POLICIES = {Balanced.name: Registration(Balanced, "iez")}


# -- hierarchical striping (docs/references.md#s001-hierarchical; iez.layout.hierarchical) ----------
#
# A file cut into G components of k OSTs is placed as a plain file of G·k stripes: its stripes
# go to distinct OSTs, so the G subsets of k are disjoint, and the cost model (bytes per OST and
# per OSS, the time bound) sees the same bytes, since component g's extent, whole rounds of its k
# stripes, lands on its OSTs as stripes g·k .. g·k+k-1 of the plain file would. The plain list
# is then cut into subsets, reordered so each spans as many OSSs as it can; the job's real bytes
# under the composite layouts are checked against the bound, as the plain ones were.


def hierarchical_cuts(requests: Sequence[Request], table: RequestTable, cluster: Cluster,
                      options: AllocOptions) -> list[Cut | None]:
    """Per request, its hierarchical geometry, or None: only with layout "hierarchical", for a
    shared file (two writers or more) big and wide enough for two subsets (`table.count`: the
    user's count or the automatic one)."""
    if options.layout != "hierarchical":
        return [None] * len(requests)
    fixed = options.stripe_size or cluster.default_stripe_size
    out: list[Cut | None] = []
    for r, w, c, comps in zip(requests, table.write_bytes.tolist(), table.count.tolist(), table.components):
        writers = r.writer_count
        # A PFL file (size unknown, or growing) is not cut.
        cuttable = writers >= 2 and not comps and premise(r.writer_segments, r.api, r.grows)[0]
        out.append(cut(w, writers, c, partial(stripe_size, w, method=options.stripe_method, fixed=fixed))
                   if cuttable else None)
    return out


def with_cuts(table: RequestTable, cuts: Sequence[Cut | None]) -> RequestTable:
    """`table` with each cut file's stripe count G·k and stripe size."""
    count, size = table.count.copy(), table.size.copy()
    for i, c in enumerate(cuts):
        if c is not None:
            count[i], size[i] = c.grouping.stripes, c.stripe_size
    return replace(table, count=count, size=size)


def hierarchical(placements: Placements, cuts: Sequence[Cut | None], requests: Sequence[Request],
                 cluster: Cluster, osts: OstTable, sol: Solution, options: AllocOptions) -> Placements:
    """The cut files' composite layouts, their subsets spread over OSSs, if the job's real time
    keeps the bound (else with the plain order's subsets, else the plain layouts)."""
    oss_of = {o.index: o.oss for o in cluster.osts}
    indices = [o.index for o in cluster.osts]
    top = sol.reference * options.max_slowdown
    osts, table = sol.phased or osts, placements.table
    plain_time = _real_time(placements, osts, table)
    for spread in (True, False):
        out: dict[int, Placement] = {}
        for i, c in enumerate(cuts):
            if c is None:
                continue
            p, k = placements[i], c.grouping.subset
            order = list(p.layout.osts())
            if spread:
                order = interleave(order, oss_of)
            fl = composite(c.spans, c.stripe_size, [order[g * k:(g + 1) * k] for g in range(c.grouping.groups)],
                           requests[i].pool)
            validate(fl, indices)
            ranks = requests[i].writer_count // c.grouping.groups
            why = (f"hierarchical: {c.grouping.groups} components of {k} OSTs, one per "
                   f"{'writer' if ranks == 1 else f'group of {ranks} writers'}")
            assumed = premise(requests[i].writer_segments, requests[i].api, requests[i].grows)[1]
            why = f"{why} ({assumed})" if assumed else why
            out[i] = replace(p, layout=fl, note=f"{p.note}; {why}" if p.note else why)
        cut_up = placements.with_replaced(out)
        if _real_time(cut_up, osts, table) <= max(top, plain_time) * (1 + EPS):
            return cut_up
    return placements


def _real_time(placements: Sequence[Placement], osts: OstTable, table: RequestTable) -> float:
    """The job's time (`job_time`) with `placements`' real bytes, each file read back as `read_bytes` says."""
    job, reads = np.zeros(osts.n), np.zeros(osts.n)
    for i, p in enumerate(placements):
        on = bytes_per_ost(p.layout, p.write_bytes)
        at = np.array([osts.position[o] for o in on], dtype=np.int64)
        real = np.array(list(on.values()), dtype=float)
        np.add.at(job, at, real)
        r = float(table.read_bytes[i])
        if r:
            np.add.at(reads, at, real * (r / p.write_bytes) if p.write_bytes else np.full(len(at), r / len(at)))
    return job_time(job, osts, reads)


@dataclass(frozen=True)
class Solution:
    stripes: np.ndarray  # OST positions, stripe by stripe, files in request order
    offsets: np.ndarray  # file i's stripes are stripes[offsets[i]:offsets[i+1]]
    job: np.ndarray  # bytes the job puts on each OST position
    reference: float  # analytic time of Lustre's round-robin on the same files, at its best start (s)
    bound: float  # the time bound enforced (s): the allowed time, raised only if nothing fit under it
    reads: np.ndarray  # bytes the job reads back from each OST position
    phased: OstTable | None = None  # the table whose job_time the bound is on (`phased`)
    fills: tuple[_Fill, ...] = ()  # per group, in placing order: its counts and matrix


@dataclass(frozen=True)
class _Fill:
    """A group's counts (per eligible OST) and stripe matrix before `order_stripes`, and the
    job's loads (written, read) once it was placed."""
    n: np.ndarray
    mat: np.ndarray
    after: tuple[np.ndarray, np.ndarray]


def rr_orders(cluster: Cluster, table: RequestTable, osts: OstTable) -> list[np.ndarray]:
    """Per pool of `table`: the positions of its usable OSTs in LOD's RR array order."""
    return [order[allowed[order]] for order, allowed in zip(rr_arrays(cluster, table.pools), table.allowed)]


# The RR arrays of the clusters placed on lately: they depend on the cluster alone, and a cluster
# is frozen, so a controller placing job after job on one builds them once.
_RR_CACHE: dict[int, tuple[Cluster, dict[str, np.ndarray]]] = {}


def rr_arrays(cluster: Cluster, pools: Sequence[str]) -> list[np.ndarray]:
    """Per pool name: OST positions (cluster order) in LOD's RR array order (`calc_rr`)."""
    held = _RR_CACHE.get(id(cluster))
    if held is None or held[0] is not cluster:  # an id is only reused once its object is gone
        held = keep_recent(_RR_CACHE, id(cluster), (cluster, {}))
    arrays = held[1]
    missing = [name for name in pools if name not in arrays]
    if missing:
        server_of = {o.index: o.oss for o in cluster.osts}
        servers = server_order([(o.index, o.oss) for o in cluster.osts])
        position = {o.index: p for p, o in enumerate(cluster.osts)}
        for name in missing:
            rr = calc_rr(list(cluster.pool(name)), server_of, servers)
            arrays[name] = np.array([position[i] for i in rr if i is not None], dtype=np.int64)
    return [arrays[name] for name in pools]


def solve(table: RequestTable, osts: OstTable, orders: Sequence[np.ndarray], options: AllocOptions) -> Solution:
    """Place every stripe of `table` on `osts` (see the module docstring)."""
    any_reads = table.read_bytes.any()
    groups = []
    for idx in group_members(table):
        g = _Group(int(table.pool[idx[0]]), int(table.count[idx[0]]), idx, 0.0)
        g.written = table.write_bytes[idx]
        g.unit = max(float(g.written.sum()) / (len(idx) * g.count), MIN_UNIT)
        g.read_unit = float(table.read_bytes[idx].sum()) / (len(idx) * g.count) if any_reads else 0.0
        groups.append(g)
    groups.sort(key=lambda g: (-g.unit, -g.count))  # heaviest stripes first (LPT)

    total, read = float(table.write_bytes.sum()), float(table.read_bytes.sum())
    offsets = np.concatenate([[0], np.cumsum(table.count)])
    rr = rr_reference(table, osts, orders, offsets)
    osts, shares = phased(osts, rr)
    # No placement writes (or reads) faster than the job's clients.
    clients = max(total / shares[0], read / shares[1] if read else 0.0) / options.client_bw
    reference = max(rr.time, clients)
    any_ok = np.logical_or.reduce(table.allowed)
    oss_rate = np.minimum(osts.oss_bw, np.bincount(osts.oss, weights=osts.bw * any_ok, minlength=len(osts.oss_bw)))
    scale = _Scale(t0=max(total, MIN_UNIT) / oss_rate.sum(),  # an even spread's time
                   level=max((osts.used[any_ok].sum() + total) / osts.capacity[any_ok].sum(), 1e-12))
    top = reference * options.max_slowdown
    sol = fastest = _place_all(table, offsets, osts, orders, groups, clients, scale, 0.0)
    weight = options.capacity_weight
    # The same share of the slack, in the stripe model (the bound) and in real bytes (the limit).
    fast = max(job_time(fastest.job, osts), clients)
    allowed = fastest.bound + weight * max(0.0, top - fastest.bound) if math.isfinite(top) else math.inf
    limit = fast + weight * max(0.0, top - fast) if math.isfinite(top) else math.inf
    if allowed > fastest.bound or limit > fast:  # else RR is as fast as it gets: nothing to trade
        sol = _place_all(table, offsets, osts, orders, groups, max(allowed, fastest.bound), scale, limit, fastest)
    # The bound holds for stripes of their group's mean size; the real bytes (Method II's short
    # last stripes) can differ a little. Check them, tighten, and at worst take RR's placement.
    for _ in range(GUARD_TRIES):
        real = max(job_time(sol.job, osts, sol.reads), clients)
        if real <= top * (1 + EPS):
            return replace(sol, reference=reference, phased=osts)
        sol = _place_all(table, offsets, osts, orders, groups, sol.bound * top / real, scale, top)
    if (rr.job <= osts.room).all():
        return Solution(rr.stripes, sol.offsets, rr.job, reference, reference, rr.reads, osts)
    return replace(sol, reference=reference, phased=osts)  # RR would overfill an OST: no time to keep to


def group_members(table: RequestTable) -> list[np.ndarray]:
    """The files of each group, in create order; groups ordered by (pool, stripe count, size
    bucket). Stripe sizes within ~9% of each other share a group: few groups even for a trace of
    many distinct sizes, while equal stripes always share one. (A function of its own, so its
    keys are let go before the job is placed.)"""
    bucket = np.round(np.log2(table.size) * SIZE_CLASSES).astype(np.int64)  # < 2**10
    in_order = _group_keys(table.pool, table.count, bucket)[table.order]
    # one stable sort: by group (pool, count, bucket), in create order within one
    by = np.argsort(in_order, kind="stable") if len(in_order) and in_order.max() else np.arange(len(in_order))
    starts = np.concatenate([[0], np.flatnonzero(np.diff(in_order[by])) + 1])
    return np.split(table.order[by], starts[1:])


def phased(osts: OstTable, rr: RRPlacement) -> tuple[OstTable, tuple[float, float]]:
    """`osts` with each phase's bandwidths scaled by its share of RR's time, and the shares.

    A job writes its files and reads them back (`Request.read_bytes`): its I/O time is its write
    time plus its read time, each the slowest OST or OSS of that phase. Keeping each phase within
    RR's time of that phase keeps the sum within RR's. With bandwidths scaled by the phase's share
    s of RR's write-plus-read time T, one bound t does both: a phase's time over s is at most t,
    and t = T gives each phase RR's time of it. Without reads the table is unchanged (s = 1)."""
    if not rr.reads.any():
        return osts, (1.0, 1.0)
    span = rr.write_time + rr.read_time
    w, r = (max(x / span, PHASE_FLOOR) for x in (rr.write_time, rr.read_time))
    return replace(osts, bw=osts.bw * w, oss_bw=osts.oss_bw * w, read_bw=osts.read_bw * r,
                   oss_read_bw=osts.oss_read_bw * r), (w, r)


def job_time(job: np.ndarray, osts: OstTable, reads: np.ndarray | None = None) -> float:
    """Analytic time of per-OST bytes: the slowest OST or OSS writing `job`, or reading `reads` (s).
    On a `phased` table, the one bound both phases keep."""
    t = phase_time(job, osts.bw, osts.oss_bw, osts.oss)
    return t if reads is None or not reads.any() else max(t, phase_time(reads, osts.read_bw, osts.oss_read_bw, osts.oss))


def phase_time(load: np.ndarray, bw: np.ndarray, oss_bw: np.ndarray, oss: np.ndarray) -> float:
    per_oss = np.bincount(oss, weights=load, minlength=len(oss_bw))
    return float(max((load / bw).max(), (per_oss / oss_bw).max()))


@dataclass
class _Group:
    pool: int
    count: int
    members: np.ndarray  # request positions, in create order
    unit: float  # bytes per stripe, on average
    read_unit: float = 0.0  # bytes read back per stripe, on average
    # The same in every pass, so worked out once (`facts`): room a stripe needs, the real bytes
    # of each file's stripes (files x count) and the bytes read back from them (None: no reads).
    written: np.ndarray | None = None  # each file's write bytes
    room: int = 0
    real: np.ndarray | None = None
    back: np.ndarray | None = None

    def facts(self, table: RequestTable) -> tuple[int, np.ndarray, np.ndarray | None]:
        if self.real is None:
            idx = self.members
            w = (table.write_bytes[idx] if self.written is None else self.written)[:, None]
            if self.count == 1:  # the one stripe holds the file
                self.room, self.real = max(int(w.max()), int(table.size[idx].max())), w
            else:
                self.room = int(room_bytes(w[:, 0], table.size[idx], self.count).max())
                self.real = stripe_bytes(w, table.size[idx, None], self.count, np.arange(self.count)[None, :])
            self.back = read_bytes(table, idx, self.real) if self.read_unit else None
        return self.room, self.real, self.back


@dataclass(frozen=True)
class _Scale:
    t0: float  # time of a perfectly even spread of the job (s)
    level: float  # mean utilization of total usage once the job is written


def _place_all(table: RequestTable, offsets: np.ndarray, osts: OstTable, orders: Sequence[np.ndarray],
               groups: Sequence[_Group], bound: float, scale: _Scale, limit: float,
               prior: Solution | None = None) -> Solution:
    """Place the groups in turn under the time bound, raising it when a group cannot fit.
    Stripe orders within files are chosen by (real time over `limit`, fullest OST, real time).
    `prior`: an earlier pass, whose counts a group keeps while the loads it meets are that pass's
    and the counts are still optimal (`_optimal`); such a group whose stripes have one order
    keeps that pass's stripes and loads too (the same operations on the same numbers)."""
    fills_before = prior.fills if prior is not None else ()
    stripes = prior.stripes.copy() if prior is not None else np.empty(offsets[-1], dtype=np.int64)
    single = offsets[-1] == len(offsets) - 1  # every file one stripe: file i's is stripe i
    job, reads = np.zeros(osts.n), np.zeros(osts.n)
    fills = []
    for i, g in enumerate(groups):
        idx = g.members
        size, real, back = g.facts(table)
        same = i < len(fills_before) and (not i or all(map(np.array_equal, fills_before[i - 1].after, (job, reads))))
        kept = fills_before[i] if same else None
        fill, bound = _place_group(len(idx), g.count, size, (g.unit, g.read_unit), table.allowed[g.pool],
                                   orders[g.pool], osts, (job, reads), bound, scale, table.pools[g.pool],
                                   bool(real.any()), kept)
        uneven = g.count > 1 and bool((real != real[:, :1]).any())  # equal stripes: any order
        if fill is kept and not uneven:
            job, reads = fill.after
            fills.append(fill)
            continue
        mat = fill.mat
        best = None
        for by in STRIPE_ORDERS if uneven else ():
            cand = order_stripes(mat, real, g.unit, job, osts, by)
            after = job + np.bincount(cand.ravel(), real.ravel(), osts.n)
            after_reads = reads if back is None else reads + np.bincount(cand.ravel(), back.ravel(), osts.n)
            t = job_time(after, osts, after_reads)
            score = (max(t, limit), ((osts.used + after) / osts.capacity).max(), t)
            if best is None or score < best[0]:
                best = (score, cand, after, after_reads)
        if best is None:
            job = job + np.bincount(mat.ravel(), real.ravel(), osts.n)
            reads = reads if back is None else reads + np.bincount(mat.ravel(), back.ravel(), osts.n)
        else:
            _, mat, job, reads = best
        at = idx if single else offsets[idx]
        if g.count == 1:
            stripes[at] = mat[:, 0]
        else:
            stripes[at[:, None] + np.arange(g.count)] = mat
        fills.append(replace(fill, after=(job, reads)))
    return Solution(stripes, offsets, job, math.nan, bound, reads, fills=tuple(fills))


def read_bytes(table: RequestTable, idx: np.ndarray, real: np.ndarray) -> np.ndarray:
    """Bytes read back from each stripe of files `idx` whose stripes hold `real` (written) bytes:
    a file is read as it was written; one written empty is read evenly over its stripes."""
    w, r = table.write_bytes[idx].astype(float), table.read_bytes[idx].astype(float)
    if real.ndim == 2:
        w, r = w[:, None], r[:, None]
    count = table.count[idx][:, None] if real.ndim == 2 else table.count[idx]
    return np.where(w > 0, real * (r / np.maximum(w, 1)), r / count)


def order_stripes(mat: np.ndarray, real: np.ndarray, unit: float, job: np.ndarray, osts: OstTable,
                  by: str) -> np.ndarray:
    """Which of its OSTs takes which stripe of a file: the heaviest stripe (RAID-0 stripes only
    get lighter along a file) to the least loaded OST, by its own time ("ost") or by its time
    plus its OSS's ("oss"). Files go one at a time, or for a big group in at most 64 batches;
    loads not yet known count `unit` a stripe. Ties keep the order `deal` gave, so equal OSTs
    share the short stripes evenly."""
    m = len(mat)
    load = job + np.bincount(mat.ravel(), minlength=osts.n) * unit
    out = mat.copy()
    step = max(1, -(-m // 64))
    for lo in range(0, m, step):
        rows, b = out[lo:lo + step], real[lo:lo + step]
        load -= np.bincount(rows.ravel(), minlength=osts.n) * unit
        key = load / osts.bw
        if by == "oss":
            key = key + (np.bincount(osts.oss, weights=load, minlength=len(osts.oss_bw)) / osts.oss_bw)[osts.oss]
        rows = np.take_along_axis(rows, np.argsort(key[rows], axis=1, kind="stable"), axis=1)
        load += np.bincount(rows.ravel(), b.ravel(), osts.n)
        out[lo:lo + step] = rows
    return out


@dataclass(frozen=True)
class RRPlacement:
    write_time: float  # analytic write time (s)
    read_time: float  # analytic time to read the files back (s)
    job: np.ndarray  # bytes per OST position
    reads: np.ndarray  # bytes read back per OST position
    offsets: np.ndarray  # file i's stripes are stripes[offsets[i]:offsets[i+1]]
    walks: tuple[tuple[np.ndarray, int, np.ndarray], ...]  # per pool: (files, RR start, RR array)

    @property
    def time(self) -> float:
        return self.write_time + self.read_time

    @property
    def stripes(self) -> np.ndarray:
        """OST positions, stripe by stripe, files in request order: built only when RR's own
        placement is wanted (the loads above come from the runs)."""
        out = np.empty(self.offsets[-1], dtype=np.int64)
        for idx, start, order in self.walks:
            count = self.offsets[idx + 1] - self.offsets[idx]
            first = rr_first_slots(count, len(order), np.array([start]))[0]
            for k in range(int(count.max())):
                has = count > k
                out[self.offsets[idx[has]] + k] = order[(first[has] + k) % len(order)]
        return out


def rr_reference(table: RequestTable, osts: OstTable, orders: Sequence[np.ndarray],
                 offsets: np.ndarray | None = None) -> RRPlacement:
    """What Lustre's round-robin does with the same files, at its luckiest start.

    Each pool's files take, in create order, the slots of the pool's RR array as
    `lod_ost_alloc_rr` walks them (docs/references.md#l-alloc-rr): pre-increment from a random start,
    and one slot of precession each time the walk wraps (unless the file has one stripe or
    N % count == 1). Stripes carry their real bytes. We take the start that gives RR its shortest
    time, writing and reading back (all starts, or an even sample of them for very large jobs), so "never slower than RR"
    holds for RR's luckiest draw. Not modelled: the reseed every (2000/N+30)*N creates, and slots
    spent on OSTs that refuse objects (they are left out of the array instead).
    """
    job, reads = np.zeros(osts.n), np.zeros(osts.n)
    walks = []
    for p, order in enumerate(orders):
        idx = table.order if len(orders) == 1 else table.order[table.pool[table.order] == p]
        if not len(idx):
            continue
        count = table.count[idx]
        healthy = order[~osts.degraded[order]]  # RR passes over degraded OSTs while it can
        if len(healthy) >= count.max():
            order = healthy
        runs = _runs(table, idx)
        start, (written, read) = _rr_best_start(count, (runs, _read_runs(table, idx, runs)), order, osts)
        job[order] += written
        reads[order] += read
        walks.append((idx, start, order))
    if offsets is None:
        offsets = np.concatenate([[0], np.cumsum(table.count)])
    return RRPlacement(job_time(job, osts), phase_time(reads, osts.read_bw, osts.oss_read_bw, osts.oss), job, reads,
                       offsets, tuple(walks))


def _runs(table: RequestTable, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A file's real bytes along its stripes as at most three runs (file, first stripe, length,
    bytes per stripe): its whole rounds on every stripe, the full stripes of its last round, and
    the one short stripe (the RAID-0 map of `policy.stripe_bytes`)."""
    w, count = table.write_bytes[idx], table.count[idx]
    if (count == 1).all():  # one stripe carries each file whole: one run a file
        f = np.flatnonzero(w)
        return (f, np.broadcast_to(np.int64(0), f.shape), np.broadcast_to(np.int64(1), f.shape),
                (w if len(f) == len(w) else w[f]).astype(float))
    size = table.size[idx]
    rounds = w // (size * count)
    rest = w - rounds * size * count
    full = rest // size
    short = rest - full * size
    f = np.arange(len(idx))
    file_of = np.concatenate([f, f, f])
    start = np.concatenate([np.zeros_like(f), np.zeros_like(f), full])
    length = np.concatenate([count, full, np.ones_like(f)])
    weight = np.concatenate([rounds * size, size, short]).astype(float)
    keep = (length > 0) & (weight > 0)
    return file_of[keep], start[keep], length[keep], weight[keep]


def _read_runs(table: RequestTable, idx: np.ndarray, runs):
    """The bytes read back along the same stripes, as runs (`read_bytes`)."""
    file_of, start, length, weight = runs
    if not table.read_bytes[idx].any():
        return file_of[:0], start[:0], length[:0], weight[:0]
    w, r = table.write_bytes[idx].astype(float), table.read_bytes[idx].astype(float)
    empty = np.flatnonzero((w == 0) & (r > 0))  # read evenly over its stripes
    weight = weight * (r / np.maximum(w, 1))[file_of]
    keep = weight > 0
    return (np.concatenate([file_of[keep], empty]), np.concatenate([start[keep], np.zeros_like(empty)]),
            np.concatenate([length[keep], table.count[idx][empty]]),
            np.concatenate([weight[keep], (r / table.count[idx])[empty]]))


def _rr_best_start(count: np.ndarray, both, order: np.ndarray, osts: OstTable
                   ) -> tuple[int, tuple[np.ndarray, np.ndarray]]:
    """The RR start (`rr_first_slots`) with the shortest time, of the write runs both[0] plus the
    read runs both[1], and at that start each slot's bytes written and read."""
    n = len(order)
    phases = list(zip(both, (osts.bw, osts.read_bw), (osts.oss_bw, osts.oss_read_bw)))
    if not _precesses(count, n).any():  # every start is a rotation of start 0
        slots = [_start_loads(count, runs, n) for runs, _, _ in phases]
        time = sum((_rotation_times(slot, order, osts, bw, oss_bw) for slot, (runs, bw, oss_bw) in zip(slots, phases)
                    if len(runs[0])), np.zeros(n))
        r = int(np.argmin(np.round(time, 9)))
        w, rd = (np.roll(slot, r) for slot in slots)  # rotation r: slot q holds slot[(q - r) % n]
        return r, (w, rd)
    if n * len(count) <= RR_WORK:
        starts = np.arange(n)
    else:  # a long job: every start spreads it almost alike, an even sample of them will do
        starts = np.unique(np.linspace(0, n - 1, max(RR_MIN_STARTS, RR_WORK // len(count))).astype(np.int64))
    first = rr_first_slots(count, n, starts)
    servers, local = np.unique(osts.oss[order], return_inverse=True)
    member = np.zeros((n, len(servers)))
    member[np.arange(n), local] = 1.0
    time = np.zeros(len(starts))
    loads = [_run_loads(first, runs, n) for runs, _, _ in phases]
    for load, (runs, bw, oss_bw) in zip(loads, phases):
        if len(runs[0]):
            time += np.maximum((load / bw[order]).max(axis=1), (load @ member / oss_bw[servers]).max(axis=1))
    best = int(np.argmin(np.round(time, 9)))
    return int(starts[best]), (loads[0][best], loads[1][best])


def _start_loads(count: np.ndarray, runs, n: int) -> np.ndarray:
    """`_run_loads` at start 0. Single-stripe files whose runs come in file order (file j on slot
    (j + 1) % n) are summed as columns of n files instead: the same additions in the same order."""
    file_of, _, _, weight = runs
    if (count == 1).all() and (file_of[1:] > file_of[:-1]).all():
        col = np.zeros(-(-len(count) // n) * n)
        col[file_of] = weight
        return np.roll(col.reshape(-1, n).sum(axis=0), 1)
    return _run_loads(rr_first_slots(count, n, np.zeros(1, np.int64)), runs, n)[0]


def rr_first_slots(count: np.ndarray, n: int, starts: np.ndarray) -> np.ndarray:
    """RR array slot of each file's first stripe, for each start index, as `lod_ost_alloc_rr`
    (2.15+) walks an array of n usable OSTs; file f then takes the count[f] slots from there,
    wrapping. Shape (len(starts), len(count))."""
    before = np.concatenate([[0], np.cumsum(count)[:-1]])  # stripes allocated before each file
    at = starts[:, None] + before[None, :]
    precesses = _precesses(count, n)
    if precesses.any():
        # The walk passes the array's end before a file at most once (count <= n); each time it
        # does, offset_idx grows by one if this file precesses.
        events = np.diff(at // n, axis=1, prepend=0) > 0
        at = at + np.cumsum(events & precesses[None, :], axis=1)
    return (at + 1) % n  # pre-increment: start + 1


def _precesses(count: np.ndarray, n: int) -> np.ndarray:
    several = count > 1
    return several & (n % count != 1) if several.any() else several


def _run_loads(first: np.ndarray, runs, n: int) -> np.ndarray:
    """Per start (row of `first`), the bytes on each of n slots when file f's stripes take the
    slots first[f], first[f] + 1, ... (mod n) and `runs` (file, first stripe, length, bytes per
    stripe) say what they carry: difference arrays, O(files) a start."""
    file_of, off, length, weight = runs
    rows = np.arange(first.shape[0])[:, None] * (n + 1)
    begin = (first[:, file_of] + off[None, :]) % n
    if (length == 1).all():  # one slot a run: its bytes straight onto the slot
        cells = (rows + begin).ravel()
        return np.bincount(cells, np.broadcast_to(weight, begin.shape).ravel(),
                           first.shape[0] * (n + 1)).reshape(first.shape[0], n + 1)[:, :n]
    end = begin + length[None, :]
    w = np.broadcast_to(weight, begin.shape)
    wrapped = end > n
    cells = np.concatenate([(rows + begin).ravel(), (rows + np.minimum(end, n)).ravel(),
                            np.broadcast_to(rows, begin.shape)[wrapped], (rows + end - n)[wrapped]])
    signs = np.concatenate([w.ravel(), -w.ravel(), w[wrapped], -w[wrapped]])
    diff = np.bincount(cells, signs, first.shape[0] * (n + 1)).reshape(first.shape[0], n + 1)
    return np.cumsum(diff, axis=1)[:, :n]


def _rotation_times(slot: np.ndarray, order: np.ndarray, osts: OstTable, bw_all: np.ndarray,
                    oss_bw: np.ndarray) -> np.ndarray:
    """Per rotation r (slot q of `order` gets slot[(q - r) % n]), the time of the loads `slot`."""
    n = len(slot)
    bw = bw_all[order]
    if np.ptp(bw) == 0 or n * n > RR_WORK:
        per_ost = np.full(n, slot.max() / bw.max())  # the same for every rotation (or a bound on it)
    else:
        shifted = slot[(np.arange(n)[None, :] - np.arange(n)[:, None]) % n]  # [r, q]
        per_ost = (shifted / bw[None, :]).max(axis=1)
    servers, spectrum = _membership_spectrum(order, osts.oss)
    # load_s(r) = Σ_q member[s, q] slot[(q - r) % n]: a circular cross-correlation.
    per_oss = np.fft.irfft(spectrum * np.conj(np.fft.rfft(slot))[None, :], n=n, axis=1)
    return np.maximum(per_ost, (per_oss / oss_bw[servers][:, None]).max(axis=0))


_SPECTRA: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}


def _membership_spectrum(order: np.ndarray, oss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The OSSs of the RR array `order` and the FFT along it of each one's membership (1 where
    slot q is one of its OSTs): the same for every job on a cluster, so kept for the last few."""
    key = order.tobytes() + b"/" + oss.tobytes()
    got = _SPECTRA.get(key)
    if got is None:
        servers, local = np.unique(oss[order], return_inverse=True)
        member = np.zeros((len(servers), len(order)))
        member[local, np.arange(len(order))] = 1.0
        got = keep_recent(_SPECTRA, key, (servers, np.fft.rfft(member, axis=1)))
    return got


def _place_group(m: int, count: int, size: int, units: tuple[float, float], allowed: np.ndarray, order: np.ndarray,
                 osts: OstTable, loads: tuple[np.ndarray, np.ndarray], bound: float, scale: _Scale,
                 pool: str, written: bool = True, prior: _Fill | None = None) -> tuple[_Fill, float]:
    """The m x count matrix of OST positions for one group (a stripe writes units[0] bytes and
    reads units[1] back; the job so far writes loads[0] and reads loads[1] per OST), in a `_Fill`,
    and the time bound used. `prior`: the group's fill from an earlier pass on the same loads,
    kept if its counts are optimal under this bound too."""
    k = m * count
    (w, r), (job, reads) = units, loads
    # A group written empty but read back is bound by its reads alone: its stripes weigh
    # MIN_UNIT in the costs, not in the write time.
    units = (0.0 if r > 0 and not written else w, r)
    room = np.floor(np.maximum(osts.room - job, 0) / size).astype(np.int64)
    per_oss_job = np.bincount(osts.oss, weights=job, minlength=len(osts.oss_bw))
    for elig in (allowed & ~osts.degraded, allowed):  # degraded OSTs only if nothing else will do
        pos = order[elig[order]]
        if not len(pos):
            continue
        base = np.minimum(room[pos], m)
        grp_of = osts.oss[pos]
        servers, grp = np.unique(grp_of, return_inverse=True)
        if base.sum() < k or len(pos) < count:
            continue
        caps = _Caps(pos, base, grp, servers, units, osts, loads)
        t = bound
        if not caps.fits(k, t):
            t = caps.least_bound(k, t)
        box, box_s = caps.boxes(t)
        # Unit costs: projected utilization of total usage, and, to break its ties, time (the
        # write's, plus the read's when the job reads its files back).
        # An OST of ~0 bandwidth costs inf or nan here: water_fill leaves it out.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            cap = osts.capacity[pos] * scale.level
            bw, oss_bw = osts.bw[pos] * scale.t0, osts.oss_bw[servers] * scale.t0
            a = (osts.used[pos] + job[pos]) / cap + TIE * job[pos] / bw
            beta = w * (1 / cap + TIE / bw)
            a_s = TIE * per_oss_job[servers] / oss_bw
            gamma = TIE * w / oss_bw
            if r > 0:
                rbw, oss_rbw = osts.read_bw[pos] * scale.t0, osts.oss_read_bw[servers] * scale.t0
                a = a + TIE * reads[pos] / rbw
                beta = beta + TIE * r / rbw
                a_s = a_s + TIE * np.bincount(osts.oss, weights=reads, minlength=len(osts.oss_bw))[servers] / oss_rbw
                gamma = gamma + TIE * r / oss_rbw
        if prior is not None and _optimal(prior.n, a, beta, box, grp, a_s, gamma, box_s):
            return prior, max(t, bound)
        n = water_fill(k, a, beta, box, grp, a_s, gamma, box_s)
        # Wrap-around: OSTs in OSS-major order, so a file's stripes, spaced ~N/count apart, span OSSs.
        seq_order = np.lexsort((osts.index[pos], grp_of))
        mat = deal(np.repeat(pos[seq_order], n[seq_order]), m, count)
        return _Fill(n, mat, loads), max(t, bound)
    where = f"pool {pool!r}" if pool else "the file system"
    raise AllocationError(f"ENOSPC: {m} files x {count} stripes of {size} bytes do not fit in {where}: "
                          f"{int(allowed.sum())} usable OSTs, room for {int(np.minimum(room[allowed], m).sum())} "
                          f"such stripes")


def deal(seq: np.ndarray, m: int, count: int) -> np.ndarray:
    """The m x count stripe matrix from `seq` (each OST repeated at most m times), by the
    wrap-around rule: file rows are seq[r], seq[r+m], ... - distinct OSTs, counts kept."""
    if count == 1:
        return seq[np.arange(m) * _stride(m) % m][:, None]
    rows = seq.reshape(count, m).T
    # Rotate row r by r (any reordering of a row keeps counts and distinctness): a file's last
    # stripe, Method II's short one, then falls on each OST's run in turn, so an OST with n
    # stripes holds about n/count of them (within two).
    r = np.arange(m)[:, None]
    rows = rows[r, (np.arange(count)[None, :] + r) % count]
    # Deal the rows with a stride coprime to m, so files created one after another get different
    # OST sets (permuting rows, like rotating them, keeps counts and distinctness).
    return rows[np.arange(m) * _stride(m) % m]


def _group_keys(pool: np.ndarray, count: np.ndarray, bucket: np.ndarray) -> np.ndarray:
    """A file's group as one number, ordered as (pool, stripe count, size bucket): dense ranks of
    the values present (`distinct`), small enough for numpy's radix sort."""
    key = np.zeros(len(pool), np.int64)
    for column in (pool, count, bucket):
        values, rank = distinct(column)
        if len(values) > 1:
            key *= len(values)
            key += rank
    return key.astype(np.uint16) if len(key) and key.max() < 1 << 16 else key


def _stride(m: int) -> int:
    p = max(1, round(m * 0.618))  # near the golden ratio: neighbours land far apart
    while math.gcd(p, m) != 1:
        p += 1
    return p


class _Caps:
    """A group's per-OST and per-OSS stripe caps as the time bound t varies: room and
    distinctness (`base`) and the stripes each OST and OSS takes within t, for the write
    (units[0] bytes a stripe onto loads[0]) and for the read back (units[1], loads[1]). What does
    not depend on t is taken once, for the many bounds `least_bound` tries."""

    def __init__(self, pos: np.ndarray, base: np.ndarray, grp: np.ndarray, servers: np.ndarray,
                 units: tuple[float, float], osts: OstTable, loads: tuple[np.ndarray, np.ndarray]):
        self.base, self.grp, self.n_srv = base, grp, len(servers)
        # Per phase: bytes a stripe, and the bandwidth and the load so far per OST then per OSS,
        # in one array (the OSTs first): one numpy call a step for both levels.
        self.phases = [(unit, np.concatenate([bw[pos], oss_bw[servers]]), np.concatenate(
                        [load[pos], np.bincount(osts.oss, weights=load, minlength=len(oss_bw))[servers]]))
                       for unit, load, bw, oss_bw in zip(units, loads, (osts.bw, osts.read_bw),
                                                         (osts.oss_bw, osts.oss_read_bw)) if unit > 0]
        self.top = np.concatenate([base.astype(float), np.full(self.n_srv, np.inf)])  # the caps without a bound
        self.step = np.empty(len(self.top))
        # The phases stacked (phase x element), for `threshold`'s steps of every cap at once.
        self.unit, self.bw, self.load = (np.array([ph[i] for ph in self.phases]) for i in range(3))

    def boxes(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Per OST and per OSS, the stripes it may take under bound t."""
        box, box_s = self._caps(t)
        return box.astype(np.int64), box_s.astype(np.int64)

    def _caps(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """`boxes`, whole numbers held as floats (what `fits` sums, many times a group)."""
        if math.isinf(t):
            return self.base, np.bincount(self.grp, weights=self.base, minlength=self.n_srv)
        cap = self.top.copy()
        for unit, bw, load in self.phases:
            np.minimum(cap, _steps(bw, t, load, unit, out=self.step), out=cap)
        return self._within(cap)

    def _within(self, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`_caps` from each element's least step over the phases (and its room), in place."""
        n = len(self.base)
        np.maximum(cap, 0, out=cap)  # as np.clip
        box = np.minimum(cap[:n], self.base, out=cap[:n])
        inner = np.bincount(self.grp, weights=box, minlength=self.n_srv)
        return box, np.minimum(cap[n:], inner, out=cap[n:])

    def fits(self, k: int, t: float) -> bool:
        return bool(self._caps(t)[1].sum() >= k)

    def least_bound(self, k: int, t: float) -> float:
        """The smallest time bound ≥ t under which k stripes fit, within EPS (`search_bound` from
        `lower_bound`). Fitting is monotone in the bound (every step of the caps is), so the
        search's answer follows from the least bound that fits (`threshold`) once that is known;
        else each bound the search tries is tried."""
        lo = max(t, self.lower_bound(k))
        least = self.threshold(k, lo)
        return search_bound(lo, partial(self.fits, k) if least is None else lambda x: x >= least)

    def threshold(self, k: int, lo: float) -> float | None:
        """The least float bound under which k stripes fit, if above `lo`: the caps change only
        where one of them steps, so it is one of the steps above `lo`, found by bisection among
        the few below a bound that fits (each step about where its floor reaches its next
        value), then made the exact float of that step and checked on itself and the float
        below it. None if not so found."""
        if not len(self.phases) or not 0 < lo < math.inf:
            return None
        gap, hi = THRESHOLD_GAP, lo
        low = self._floors(lo)
        if self._fit(k, low):
            return None
        while not self._fit(k, high := self._floors(hi := lo * (1 + gap))):  # a bound that fits, just above
            if hi == math.inf:
                return None
            lo, low, gap = hi, high, gap * 8
        while True:  # the caps' steps between, as values reached by (phase, element)
            # An OST's steps above its room change nothing, nor steps below 0.
            count = np.maximum(np.minimum(high, self.top) - np.maximum(low, 0), 0)
            if not np.isfinite(count).all():
                return None
            if count.sum() <= THRESHOLD_STEPS:
                break
            mid = (lo + hi) / 2
            if not lo < mid < hi:  # as many steps at one float (equal OSTs, or huge ones)
                return None
            fl = self._floors(mid)
            if self._fit(k, fl):
                hi, high = mid, fl
            else:
                lo, low = mid, fl
        # Each step's (phase, element) and the value it reaches.
        count = count.astype(np.int64).ravel()
        which = np.repeat(np.arange(len(count)), count)
        value = np.maximum(low, 0).ravel()[which] + 1 + np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)
        unit = self.unit[which // len(self.top)]
        t = ((value - EPS) * unit + self.load.ravel()[which]) / (self.bw.ravel()[which] * (1 + EPS))
        # A step's computed bound may be a few floats under its exact one: each is tried that
        # much above it, so the first that fits is the one the caps reach the stripes at. Equal
        # OSTs step together: their bounds are tried once.
        above, by = np.unique(t * (1 + THRESHOLD_ULPS * 2.0 ** -52), return_index=True)
        if not len(by):
            return None
        i, j = 0, len(by) - 1  # no cap changes between the last step and hi: they fit there
        while i < j:
            mid = (i + j) // 2
            i, j = (i, mid) if self.fits(k, float(above[mid])) else (mid + 1, j)
        step = which[by[i]]
        least = _step_time(float(self.bw.flat[step]), float(t[by[i]]), float(self.load.flat[step]),
                           float(unit[by[i]]), float(value[by[i]]))
        ok = least is not None and self.fits(k, least) and not self.fits(k, math.nextafter(least, 0.0))
        return least if ok else None

    def _floors(self, t: float) -> np.ndarray:
        """Per phase and element, its step (`_steps`) at bound t."""
        return _steps(self.bw, t, self.load, self.unit[:, None])

    def _fit(self, k: int, floors: np.ndarray) -> bool:
        """`fits` at the bound `floors` were taken at."""
        return bool(self._within(np.minimum(floors.min(axis=0), self.top))[1].sum() >= k)

    def lower_bound(self, k: int) -> float:
        """A time bound below which k stripes do not fit: per phase, the OSTs' caps are at most
        Σ max(0, (t·b(1+EPS) − L)/u + EPS) and so are the OSSs', a piecewise-linear sum that must
        reach k."""
        out = 0.0
        n = len(self.base)
        for unit, bw, load in self.phases:
            for level_load, level_bw in ((load[:n], bw[:n]), (load[n:], bw[n:])):
                b = level_bw * (1 + EPS)
                free = level_load - EPS * unit
                with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    tau = np.where(b > 0, free / b, np.inf)  # where a cap starts to rise
                by = np.argsort(tau)
                cb, cl = np.cumsum(b[by]), np.cumsum(free[by])
                # The sum over the first i+1 risers, (t cb_i - cl_i) / u, just before the next one rises.
                with np.errstate(invalid="ignore", over="ignore"):
                    reach = (np.append(tau[by][1:], np.inf) * cb - cl) / unit >= k
                i = int(np.argmax(reach))
                if reach[i] and cb[i] > 0:
                    out = max(out, (k * unit + cl[i]) / cb[i])
        return out


def _steps(bw: float | np.ndarray, t: float | np.ndarray, load: float | np.ndarray, unit: float | np.ndarray,
           out: np.ndarray | None = None) -> np.ndarray:
    """floor((t bw (1 + EPS) - load) / unit + EPS): the stripes of `unit` bytes a resource of
    bandwidth `bw` holding `load` takes within bound t (its cap, before room and distinctness)."""
    out = np.multiply(bw, t, out=out)
    out *= 1 + EPS
    out -= load
    out /= unit
    out += EPS
    return np.floor(out, out=out)


def _step_time(bw: float, t: float, load: float, unit: float, value: float) -> float | None:
    """The least float bound at which `_steps` reaches `value`, from t about there (None if more
    than THRESHOLD_ULPS floats away)."""
    at = np.array([t])
    for _ in range(THRESHOLD_ULPS):
        below = np.nextafter(at, -np.inf)
        if _steps(bw, below, load, unit)[0] >= value:
            at = below
        elif _steps(bw, at, load, unit)[0] < value:
            at = np.nextafter(at, np.inf)
        else:
            return float(at[0])
    return None


def search_bound(lo: float, fits: Callable[[float], bool]) -> float:
    """The bound `least_bound` returns from `lo`: the first of bounds ever further above it that
    fits, then the first of SEARCH_WAYS bounds spread over the range left, each round narrowing
    it that much, until it is within EPS."""
    hi = max(lo, 1e-12)
    while not fits(hi):
        tries = hi * (1 + 2.0 ** np.arange(-30, 33))  # 1 + 1e-9 .. 4e9 times
        j = min(first_fit(fits, tries), len(tries) - 1)
        lo, hi = (tries[j - 1] if j else hi), tries[j]
    while hi - lo > EPS * hi:
        tries = lo + (hi - lo) * np.arange(1, SEARCH_WAYS) / SEARCH_WAYS
        j = first_fit(fits, tries)
        lo, hi = (tries[j - 1] if j else lo), (tries[j] if j < len(tries) else hi)
    return hi


def first_fit(fits: Callable[[float], bool], tries: np.ndarray) -> int:
    """The first of the rising bounds `tries` that fits (len(tries) if none), by bisection: fitting
    is monotone in the bound."""
    lo, hi = 0, len(tries)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(float(tries[mid])):
            hi = mid
        else:
            lo = mid + 1
    return lo


def water_fill(k: int, a: np.ndarray, beta: np.ndarray, box: np.ndarray, grp: np.ndarray,
               a_s: np.ndarray, gamma: np.ndarray, box_s: np.ndarray) -> np.ndarray:
    """The counts n (per OST) of the two-level greedy: k units, the u-th unit on OST j costing
    a_j + beta_j u plus, as the v-th on its OSS grp_j, a_s + gamma_s v; n_j ≤ box_j and the OSS
    totals ≤ box_s. beta > 0, gamma ≥ 0. Raises AllocationError if k units do not fit."""
    live = (box > 0) & np.isfinite(a) & np.isfinite(beta)
    if not live.all():  # an OST with no room, or whose bandwidth is ~0 (infinite cost), takes nothing
        n = np.zeros(len(a), dtype=np.int64)
        n[live] = water_fill(k, a[live], beta[live], box[live], grp[live], a_s, gamma, box_s)
        return n
    n_srv = len(a_s)
    cap_s = np.minimum(box_s, np.bincount(grp, weights=box, minlength=n_srv).astype(np.int64))
    if cap_s.sum() < k:
        raise AllocationError(f"ENOSPC: {k} stripes do not fit (room for {int(cap_s.sum())})")
    n = np.zeros(len(a), dtype=np.int64)
    if k == 0:
        return n

    def ost_units(v: np.ndarray) -> np.ndarray:  # per OST: units costing at most v[its OSS]
        return np.minimum(np.maximum(np.floor((v[grp] - a) / beta), 0), box).astype(np.int64)

    def oss_units(theta: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per OSS, the most units N (lo ≤ N ≤ hi known bounds) whose N-th costs at most theta:
        N fits iff its N-th cheapest OST unit costs at most theta - a_s - gamma_s N."""
        def fits(n_s: np.ndarray) -> np.ndarray:
            return np.bincount(grp, weights=ost_units(theta - a_s - gamma * n_s), minlength=n_srv) >= n_s

        # First probes: if hi does not fit, the units priced at hi's cut, g(hi), are at most the
        # answer N* (g falls as N rises and g(N* + 1) < N* + 1) and fit; then whether g(hi) + 1
        # fits. With gamma as small as a tie-breaker, that is N* nearly always.
        units = np.bincount(grp, weights=ost_units(theta - a_s - gamma * hi), minlength=n_srv).astype(np.int64)
        top = units >= hi
        lo = np.where(top, hi, np.clip(units, lo, hi))
        hi = np.where(top, hi, hi - 1)
        nxt = np.minimum(lo + 1, hi)
        ok = fits(nxt)
        lo, hi = np.where(ok, nxt, lo), np.where(ok, hi, np.minimum(hi, lo))
        while (lo < hi).any():
            mid = (lo + hi + 1) // 2
            ok = fits(mid)
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid - 1)
        return lo

    zero = np.zeros(n_srv, dtype=np.int64)
    lo_t = float((a + beta).min() + (a_s + gamma).min())
    lo_t -= 1 + abs(lo_t)  # below every unit's cost: nothing is taken
    hi_t = float((a + beta * box).max() + (a_s + gamma * cap_s).max())  # every unit is taken
    n_lo, n_hi = zero, cap_s
    for _ in range(BISECT_STEPS):
        if hi_t - lo_t <= 1e-12 * max(1.0, abs(hi_t)):
            break
        # Stop once the units left between the two prices are few enough to merge in bulk.
        if n_hi.sum() - n_lo.sum() <= len(a) and \
                ost_units(hi_t - a_s - gamma * (n_lo + 1)).sum() - n_lo.sum() <= TAIL * len(a):
            break
        mid = (lo_t + hi_t) / 2
        got = oss_units(mid, n_lo, n_hi)
        if got.sum() >= k:
            hi_t, n_hi = mid, got
        else:
            lo_t, n_lo = mid, got
    # Inside each OSS take the OST units priced within the cut of its (n_lo+1)-th unit at lo_t: a
    # prefix (with all ties) of at most n_lo units, as n_lo + 1 do not fit at lo_t. An OSS at its
    # cap has no (n_lo+1)-th unit: its cut is found by bisection. Then merge in the rest.
    cut = lo_t - a_s - gamma * np.where(n_lo < cap_s, n_lo + 1, n_lo)
    full = np.bincount(grp, weights=ost_units(cut), minlength=n_srv) <= n_lo
    if not full.all():
        v_lo, v_hi = np.full(n_srv, float((a + beta).min()) - 1.0), cut
        for _ in range(BISECT_STEPS):
            v_mid = (v_lo + v_hi) / 2
            ok = np.bincount(grp, weights=ost_units(v_mid), minlength=n_srv) <= n_lo
            v_lo = np.where(ok, v_mid, v_lo)
            v_hi = np.where(ok, v_hi, v_mid)
        cut = np.where(full, cut, v_lo)
    n = ost_units(cut)
    return _greedy_rest(k - int(n.sum()), n, hi_t, a, beta, box, grp, a_s, gamma, box_s)


def _optimal(n: np.ndarray, a: np.ndarray, beta: np.ndarray, box: np.ndarray, grp: np.ndarray,
             a_s: np.ndarray, gamma: np.ndarray, box_s: np.ndarray) -> bool:
    """Whether counts n are an optimum of `water_fill`'s problem (the same k units, these costs
    and caps): within every OSS its taken OST units cost no more than any unit it could still
    take, and across OSSs the dearest taken increment (its last OST unit plus its own last unit)
    costs no more than any OSS's next one. That is the optimality condition of the separable
    convex problem (module docstring, step 1): no exchange of one unit lowers the cost."""
    n_srv = len(a_s)
    per = np.bincount(grp, weights=n, minlength=n_srv)
    if (n > box).any() or (per > box_s).any():
        return False
    with np.errstate(invalid="ignore", over="ignore"):
        last = np.where(n > 0, a + beta * n, -np.inf)
        nxt = np.where(n < box, a + beta * (n + 1), np.inf)
        top, low = np.full(n_srv, -np.inf), np.full(n_srv, np.inf)
        np.maximum.at(top, grp, last)
        np.minimum.at(low, grp, nxt)
        taken = np.where(per > 0, top + a_s + gamma * per, -np.inf)
        more = np.where(per < box_s, low + a_s + gamma * (per + 1), np.inf)
        return bool((top <= low).all() and taken.max() <= more.min())


def _greedy_rest(rest: int, n: np.ndarray, theta: float, a: np.ndarray, beta: np.ndarray, box: np.ndarray,
                 grp: np.ndarray, a_s: np.ndarray, gamma: np.ndarray, box_s: np.ndarray) -> np.ndarray:
    """Add the greedy's next `rest` units to `n` (every OSS and OST on a prefix of its costs), all
    priced at most `theta`: per OSS, its OST units cheap enough, merged in cost order, give its
    increments (rising: its G_s is convex); the `rest` smallest increments over all OSSs are the
    greedy's next units (a prefix of each OSS's list, ties in list order)."""
    per = np.bincount(grp, weights=n, minlength=len(a_s)).astype(np.int64)
    theta += 1e-9 * max(1.0, abs(theta))  # a unit priced at theta itself is not lost to rounding
    more = np.clip(np.floor((theta - a_s[grp] - gamma[grp] * (per[grp] + 1) - a) / beta), n, box).astype(np.int64)
    extra = np.minimum(more - n, rest)
    ost = np.repeat(np.arange(len(a)), extra)
    unit = n[ost] + 1 + np.arange(len(ost)) - np.repeat(np.cumsum(extra) - extra, extra)
    cost = a[ost] + beta[ost] * unit
    srv = grp[ost]
    by = np.lexsort((cost, srv))  # each OSS's candidate units in cost order: its merged list
    srv, ost, cost = srv[by], ost[by], cost[by]
    v = np.arange(len(srv)) - np.searchsorted(srv, srv)  # position in its OSS's list
    ok = v < box_s[srv] - per[srv]
    inc = np.where(ok, cost + a_s[srv] + gamma[srv] * (per[srv] + v + 1), np.inf)
    take = np.argsort(inc, kind="stable")[:rest]
    if len(take) < rest or not np.isfinite(inc[take]).all():
        raise AllocationError("ENOSPC: the stripes do not fit in the room left")
    return n + np.bincount(ost[take], minlength=len(a))
