"""`balanced` is exact where its docstring says so: checked against an exact min-cost flow
(networkx network simplex on the unit-arc graph) and against Lustre's own RR walk, on random
instances."""

from __future__ import annotations

import random
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iez.alloc.balanced import (
    MIN_UNIT,
    TIE,
    _run_loads,
    _runs,
    deal,
    job_time,
    rr_first_slots,
    rr_orders,
    rr_reference,
    water_fill,
)
from iez.alloc.lustre_rr import RRState, alloc_rr
from iez.alloc.policy import AllocOptions, ost_table, request_table, stripe_bytes, stripe_size, tables
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.errors import AllocationError
from iez.layout.raid0 import bytes_per_stripe
from iez.request import Request

SLOW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def chain_cost(a: float, step: float, n: int) -> float:
    """Σ_{k=1..n} (a + step k)."""
    return n * a + step * n * (n + 1) / 2


def unit_arc_flow(k: int, a, beta, box, grp, a_s, gamma, box_s, scale: float = 1.0) -> np.ndarray:
    """Per-OST units of a min-cost flow of k units: source -> OST j -> unit arcs (cost a_j + beta_j u)
    -> its OSS -> unit arcs (cost a_s + gamma_s v) -> sink. Costs are scaled to integers."""
    g = nx.DiGraph()
    g.add_node("src", demand=-k)
    g.add_node("sink", demand=k)
    for j in range(len(a)):
        g.add_edge("src", ("ost", j), capacity=int(box[j]), weight=0)
        for u in range(1, int(box[j]) + 1):
            g.add_edge(("ost", j), ("u", j, u), capacity=1, weight=round((a[j] + beta[j] * u) * scale))
            g.add_edge(("u", j, u), ("oss", int(grp[j])), capacity=1, weight=0)
    for s in range(len(a_s)):
        for v in range(1, int(box_s[s]) + 1):
            g.add_edge(("oss", s), ("v", s, v), capacity=1, weight=round((a_s[s] + gamma[s] * v) * scale))
            g.add_edge(("v", s, v), "sink", capacity=1, weight=0)
    flow = nx.min_cost_flow(g)
    return np.array([flow["src"][("ost", j)] for j in range(len(a))])


def two_level_cost(n, a, beta, grp, a_s, gamma) -> float:
    per = np.bincount(grp, weights=n, minlength=len(a_s))
    return (sum(chain_cost(a[j], beta[j], int(n[j])) for j in range(len(a)))
            + sum(chain_cost(a_s[s], gamma[s], int(per[s])) for s in range(len(a_s))))


def ints(data, lo: int, hi: int, size: int) -> np.ndarray:
    return np.array(data.draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size)), float)


def draw_instance(data, max_osts: int, max_box: int, max_box_s: int) -> tuple:
    """A random water-filling instance with integer costs: k units, per-OST a, beta, box, OSS of
    each OST, per-OSS a_s, gamma, box_s; k at most what the boxes hold."""
    n_oss = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(1, max_osts))
    grp = np.array(data.draw(st.lists(st.integers(0, n_oss - 1), min_size=n, max_size=n)))
    a, beta, box = ints(data, 0, 30, n), ints(data, 1, 9, n), ints(data, 0, max_box, n).astype(np.int64)
    a_s, gamma = ints(data, 0, 30, n_oss), ints(data, 0, 9, n_oss)
    box_s = ints(data, 0, max_box_s, n_oss).astype(np.int64)
    cap = int(np.minimum(box_s, np.bincount(grp, weights=box, minlength=n_oss)).sum())
    return data.draw(st.integers(0, cap)), a, beta, box, grp, a_s, gamma, box_s


@SLOW
@given(st.data())
def test_water_fill_equals_min_cost_flow(data):
    """Integer costs, so the two optimal values must be exactly equal."""
    k, a, beta, box, grp, a_s, gamma, box_s = draw_instance(data, 7, 6, 12)
    got = water_fill(k, a, beta, box, grp, a_s, gamma, box_s)
    assert got.sum() == k and (got <= box).all() and (got >= 0).all()
    assert (np.bincount(grp, weights=got, minlength=len(a_s)) <= box_s).all()
    best = unit_arc_flow(k, a, beta, box, grp, a_s, gamma, box_s)
    assert two_level_cost(got, a, beta, grp, a_s, gamma) == two_level_cost(best, a, beta, grp, a_s, gamma)


@SLOW
@given(st.data())
def test_water_fill_with_float_costs_and_many_ties(data):
    """Identical OSTs (everything ties) and float costs, at sizes where the bulk bisection and the
    heap both run; optimality is checked by the exchange condition (no cheaper unit left out)."""
    n_oss = data.draw(st.integers(1, 8))
    per = data.draw(st.integers(1, 8))
    grp = np.repeat(np.arange(n_oss), per)
    n = len(grp)
    uniform = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = np.full(n, 0.3) if uniform else rng.uniform(0, 2, n)
    beta = np.full(n, 0.01) if uniform else rng.uniform(0.001, 0.1, n)
    box = rng.integers(0, 300, n)
    a_s, gamma = rng.uniform(0, 0.01, n_oss), rng.uniform(0, 0.001, n_oss)
    box_s = rng.integers(0, 2000, n_oss)
    cap = int(np.minimum(box_s, np.bincount(grp, weights=box, minlength=n_oss)).sum())
    k = data.draw(st.integers(0, cap))
    got = water_fill(k, a, beta, box, grp, a_s, gamma, box_s)
    assert got.sum() == k
    per_oss = np.bincount(grp, weights=got, minlength=n_oss).astype(int)
    # Inside each OSS: no untaken OST unit is cheaper than a taken one.
    for s in range(n_oss):
        j = np.flatnonzero(grp == s)
        taken = [a[i] + beta[i] * got[i] for i in j if got[i] > 0]
        left = [a[i] + beta[i] * (got[i] + 1) for i in j if got[i] < box[i]]
        if taken and left:
            assert max(taken) <= min(left) + 1e-9
    # Across OSSs: the last unit taken by any OSS costs no more than the next unit of another.
    def oss_unit(s, v):  # cost of the v-th unit of OSS s (its v-th cheapest OST unit + its own)
        j = np.flatnonzero(grp == s)
        costs = sorted(a[i] + beta[i] * u for i in j for u in range(1, box[i] + 1))
        return costs[v - 1] + a_s[s] + gamma[s] * v
    last = [oss_unit(s, per_oss[s]) for s in range(n_oss) if per_oss[s] > 0]
    nxt = [oss_unit(s, per_oss[s] + 1) for s in range(n_oss)
           if per_oss[s] < min(box_s[s], box[grp == s].sum())]
    if last and nxt:
        assert max(last) <= min(nxt) + 1e-9


def test_water_fill_refuses_what_does_not_fit():
    one = np.ones(2)
    with pytest.raises(AllocationError, match="ENOSPC"):
        water_fill(5, one, one, np.array([2, 2]), np.array([0, 0]), np.zeros(1), np.zeros(1), np.array([9]))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_deal_gives_distinct_osts_and_keeps_counts(data):
    m = data.draw(st.integers(1, 40))
    count = data.draw(st.integers(1, 12))
    # Any counts with n_j <= m summing to m * count.
    n_osts = data.draw(st.integers(count, count + 10))
    counts = np.zeros(n_osts, np.int64)
    rng = random.Random(data.draw(st.integers(0, 10**9)))
    for _ in range(m * count):
        counts[rng.choice([j for j in range(n_osts) if counts[j] < m])] += 1
    mat = deal(np.repeat(np.arange(n_osts), counts), m, count)
    assert mat.shape == (m, count)
    assert all(len(set(row)) == count for row in mat.tolist())
    assert (np.bincount(mat.ravel(), minlength=n_osts) == counts).all()
    # The files' last stripes are spread: n_j / count on each OST, within two (an OST's run can
    # straddle two columns, each off by less than one).
    last = np.bincount(mat[:, -1], minlength=n_osts)
    assert (np.abs(last - counts / count) < 2).all()


def test_rr_walk_is_lustres():
    """rr_first_slots + the runs they start reproduce lod_ost_alloc_rr (2.15+) slot for slot,
    precession included, and the run loads count every slot."""
    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randint(1, 20)
        files = rng.randint(1, 30)
        counts = np.array([rng.randint(1, n) for _ in range(files)] if rng.random() < 0.5
                          else [rng.randint(1, n)] * files)
        s0 = rng.randrange(n)
        state = RRState(start_idx=s0, offset_idx=0, start_count=10**9)  # start at s0, no reseed
        lustre: list[int] = []
        for c in counts:
            lustre += alloc_rr(list(range(n)), state, int(c), int(c), lambda o, sp, ch: o not in ch, random.Random(0))
        first = rr_first_slots(counts, n, np.array([s0]))[0]
        ours = [int((f + j) % n) for f, c in zip(first, counts) for j in range(c)]
        assert ours == lustre
        runs = (np.arange(files), np.zeros(files, np.int64), counts, np.ones(files))
        loads = _run_loads(first[None, :], runs, n)[0]
        assert np.allclose(loads, np.bincount(ours, minlength=n))


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 1 << 40), st.integers(1, 64), st.sampled_from(["method2", "method1"]))
def test_stripe_bytes_is_the_raid0_map(w, count, method):
    size = stripe_size(w, count, method)
    assert size % 65536 == 0 and 0 < size < 1 << 32
    per = bytes_per_stripe(size, count, 0, w)
    got = stripe_bytes(np.array([w]), np.array([size]), np.array([count]), np.arange(count)[:, None])[:, 0]
    assert got.tolist() == per


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_rr_reference_is_a_real_placement(data):
    """What `balanced` falls back on: RR's placement at its best start, a valid layout for every
    file whose bytes are the ones the reference's time is computed from."""
    cluster = make_cluster(data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)), 1 << 40)
    snap = Snapshot.from_cluster(cluster)
    n = len(cluster.osts)
    sizes = data.draw(st.lists(st.integers(1, 1 << 32), min_size=1, max_size=30))
    counts = data.draw(st.lists(st.integers(1, n), min_size=len(sizes), max_size=len(sizes)))
    reqs = [Request(f"/f{i}", w, c) for i, (w, c) in enumerate(zip(sizes, counts))]
    opts = AllocOptions()
    osts, table = tables(reqs, cluster, snap, opts)
    rr = rr_reference(table, osts, rr_orders(cluster, table, osts))
    offsets = np.concatenate([[0], np.cumsum(table.count)])
    on = np.zeros(osts.n)
    for i in range(table.n):
        mine = rr.stripes[offsets[i]:offsets[i + 1]]
        assert len(set(mine.tolist())) == table.count[i]
        for k, p in enumerate(mine):
            on[p] += stripe_bytes(table.write_bytes[i], table.size[i], table.count[i], k)
    assert np.allclose(on, rr.job)
    assert rr.time == pytest.approx(job_time(rr.job, osts))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1 << 36), st.integers(1, 16)), min_size=1, max_size=8),
       st.sampled_from(["method2", "method1", "fixed"]))
def test_runs_carry_each_stripes_real_bytes(files, method):
    """The three runs a file's bytes are cut into (whole rounds, full stripes, the short one)
    put on each stripe what the RAID-0 map does."""
    cluster = make_cluster(2, 8)
    opts = AllocOptions(stripe_method=method)
    table = request_table([Request(f"/f{i}", w, c) for i, (w, c) in enumerate(files)], cluster,
                          ost_table(cluster, Snapshot.from_cluster(cluster), opts), opts)
    idx = np.arange(table.n)
    file_of, start, length, weight = _runs(table, idx)
    for f in idx:
        got = np.zeros(table.count[f])
        for s, n, w in zip(start[file_of == f], length[file_of == f], weight[file_of == f]):
            got[s:s + n] += w
        want = [stripe_bytes(table.write_bytes[f], table.size[f], table.count[f], k) for k in range(table.count[f])]
        assert got.tolist() == want


# -- the whole flow, files included --------------------------------------------------------------


def documented_costs(cluster, snap, files: int, count: int, file_bytes: int):
    """The unit costs of the balanced module docstring for one group on an empty-of-this-job
    cluster: OST j's k-th unit (u_j + k w)/(C_j ū) + ε k w/(b_j T0); OSS s's ε k w/(b_s T0)."""
    t = ost_table(cluster, snap, AllocOptions())
    total = files * file_bytes
    size = stripe_size(file_bytes, count)
    w = max(total / (files * count), MIN_UNIT)
    level = (t.used[t.ok].sum() + total) / t.capacity[t.ok].sum()
    rate = np.minimum(t.oss_bw, np.bincount(t.oss, weights=t.bw * t.ok, minlength=len(t.oss_bw)))
    t0 = max(total, MIN_UNIT) / rate.sum()
    a = t.used / (t.capacity * level)
    beta = w / (t.capacity * level) + TIE * w / (t.bw * t0)
    gamma = TIE * w / (t.oss_bw * t0)
    box = np.minimum(np.floor(t.room / size), files).astype(np.int64)
    return t, a, beta, gamma, box


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_balanced_is_the_convex_min_cost_flow(data):
    """One group (equal files), no time bound (weight 1, max_slowdown inf): the OST counts of
    `balanced` reach the optimum of the full graph source -> file -> OST -> unit arcs -> OSS ->
    unit arcs -> sink, solved by networkx."""
    n_oss, per = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4))
    cluster = make_cluster(n_oss, per, 1 << 30)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    cluster = cluster.with_used({o.index: int(rng.uniform(0, 0.6) * o.capacity) for o in cluster.osts})
    snap = Snapshot.from_cluster(cluster)
    for o in cluster.osts:
        if rng.random() < 0.3:
            snap = snap.with_ost(replace(snap.osts[o.index], write_bps=float(rng.uniform(0, 3e8))))
    n = len(cluster.osts)
    count = data.draw(st.integers(1, n))
    files = data.draw(st.integers(1, 6))
    size = count * (64 << 20)
    reqs = [Request(f"/f{i}", size, count) for i in range(files)]
    # The flow is checked for the count the files ask for, so their layout is kept.
    opts = AllocOptions(capacity_weight=1.0, max_slowdown=float("inf"), layout="keep")
    t, a, beta, gamma, box = documented_costs(cluster, snap, files, count, size)
    if box.sum() < files * count:
        with pytest.raises(AllocationError):
            get_policy("balanced").place(reqs, cluster, snap, opts)
        return
    placed = get_policy("balanced").place(reqs, cluster, snap, opts)
    got = np.zeros(n, np.int64)
    for p in placed:
        for o in p.layout.plain.osts:
            got[t.position[o]] += 1

    scale = 1e7
    g = nx.DiGraph()
    g.add_node("src", demand=-files * count)
    g.add_node("sink", demand=files * count)
    for f in range(files):
        g.add_edge("src", ("file", f), capacity=count, weight=0)
        for j in range(n):
            g.add_edge(("file", f), ("ost", j), capacity=1, weight=0)
    for j in range(n):
        for u in range(1, int(box[j]) + 1):
            g.add_edge(("ost", j), ("u", j, u), capacity=1, weight=round((a[j] + beta[j] * u) * scale))
            g.add_edge(("u", j, u), ("oss", int(t.oss[j])), capacity=1, weight=0)
    for s in range(n_oss):
        for v in range(1, files * count + 1):
            g.add_edge(("oss", s), ("v", s, v), capacity=1, weight=round(gamma[s] * v * scale))
            g.add_edge(("v", s, v), "sink", capacity=1, weight=0)
    flow = nx.min_cost_flow(g)
    best = np.array([sum(flow[("file", f)][("ost", j)] for f in range(files)) for j in range(n)])
    zero = np.zeros(n_oss)
    f_got = two_level_cost(got, a, beta, t.oss, zero, gamma)
    f_best = two_level_cost(best, a, beta, t.oss, zero, gamma)
    assert f_got <= f_best + files * count * 2 / scale
