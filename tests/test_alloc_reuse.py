"""`balanced`'s second pass keeps a group's counts from the first only when they are still an
optimum (`_optimal`): checked against an exact min-cost flow under the looser caps, on random
instances with integer costs, where the check must agree with the flow both ways."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from iez.alloc import balanced
from iez.alloc.balanced import _optimal, water_fill
from iez.alloc.policy import AllocOptions, job_bytes, makespan
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.request import Request

from test_alloc_exact import SLOW, draw_instance, ints, two_level_cost, unit_arc_flow


@SLOW
@given(st.data())
def test_kept_counts_are_optimal_exactly_when_the_flow_says_so(data):
    k, a, beta, box, grp, a_s, gamma, box_s = draw_instance(data, 6, 5, 10)
    n, n_oss = len(a), len(a_s)
    first = water_fill(k, a, beta, box, grp, a_s, gamma, box_s)
    # A looser bound: caps that only rise, as the allowed bound's do over T*'s.
    looser, looser_s = box + ints(data, 0, 3, n).astype(np.int64), box_s + ints(data, 0, 3, n_oss).astype(np.int64)
    best = unit_arc_flow(k, a, beta, looser, grp, a_s, gamma, looser_s)
    still = two_level_cost(first, a, beta, grp, a_s, gamma) == two_level_cost(best, a, beta, grp, a_s, gamma)
    assert _optimal(first, a, beta, looser, grp, a_s, gamma, looser_s) == still
    assert _optimal(first, a, beta, box, grp, a_s, gamma, box_s)  # water_fill's own answer


def test_the_second_pass_keeps_the_first_counts_and_places_as_a_fresh_fill(monkeypatch):
    """Single-stripe files of four sizes on an empty uniform cluster (the bench's job, smaller):
    the capacity optimum is as fast as T*, so the allowed bound's pass keeps the first pass's
    counts; the bytes per OST are those of a pass that fills afresh (up to which of two equal OSTs
    takes which)."""
    cluster = make_cluster(16, 4, 1 << 40)
    snap = Snapshot.from_cluster(cluster)
    reqs = [Request(f"/mnt/iez/r/f.{i}", (1 << 26) << (i % 4), 1, rank=i) for i in range(4000)]
    kept: list[bool] = []
    monkeypatch.setattr(balanced, "_optimal", lambda *a: kept.append(_optimal(*a)) or kept[-1])
    two = get_policy("balanced").place(reqs, cluster, snap, AllocOptions(layout="keep"))
    assert kept and all(kept)
    monkeypatch.setattr(balanced, "_optimal", lambda *a: False)
    fresh = get_policy("balanced").place(reqs, cluster, snap, AllocOptions(layout="keep"))
    assert sorted(job_bytes(two).values()) == sorted(job_bytes(fresh).values())
    assert makespan(cluster, snap, job_bytes(two)) == makespan(cluster, snap, job_bytes(fresh))
