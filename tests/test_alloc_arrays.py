"""Placements as arrays (iez.alloc.policy.Placements), requests as columns (iez.request.RequestColumns)
and the plan written from the arrays (iez.plan.dumps_arrays): the same placements and the same plan
text as the per-file objects give, for every policy, plain, pooled, PFL and hierarchical layouts."""

from __future__ import annotations

import numpy as np
import pytest

from iez.alloc.policy import AllocOptions, Placements
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.errors import AllocationError, ConfigError
from iez.plan import Plan, dumps, dumps_arrays, loads
from iez.request import Request, RequestColumns
from test_alloc_policies import POOLED

MiB = 1 << 20
CLUSTER = POOLED  # 3 OSSs x 4 OSTs, pool "fast"
META = {"app": "a", "run": "1", "policy": "balanced"}


def mixed(n: int = 40) -> list[Request]:
    sizes = (3 * MiB, 64 * MiB, 200 * MiB + 12345, 0)
    return [Request(f"/mnt/t/{{job}}/f.{i}" if i == 7 else f"/mnt/t/f.{i}", sizes[i % 4], 1 + i % 5,
                    create_time=float(i % 3), pool="fast" if i % 6 == 0 else "", writers=1 + i % 3,
                    transfer_size=MiB) for i in range(n)]


def plan_of(placed) -> str:
    plan = Plan(meta=dict(META))
    for p in placed:
        plan.add(p.path, p.layout)
    return dumps(plan)


def arrays_plan(placed: Placements) -> str:
    t = placed.table
    return dumps_arrays(META, placed.paths(), placed.size, placed.offsets, placed.osts, t.pools, t.pool,
                        placed.non_plain())


@pytest.mark.parametrize("layout", ["keep", "auto", "hierarchical"])
def test_the_arrays_plan_is_the_objects_plan(layout):
    reqs = mixed()
    placed = get_policy("balanced").place(reqs, CLUSTER, Snapshot.from_cluster(CLUSTER), AllocOptions(layout=layout))
    assert isinstance(placed, Placements) and len(placed) == len(reqs)
    objects = list(placed)
    assert [p.path for p in objects] == [r.path for r in reqs]
    text = arrays_plan(placed)
    assert text == plan_of(objects)
    assert text.startswith("#iez-plan 2\n")  # one key holds a field
    assert loads(text).entries == {p.path: p.layout for p in objects}
    assert any(p.layout.plain.pool for p in objects if p.layout.plain)


def test_hierarchical_files_are_written_from_their_composite_layouts():
    reqs = [Request(f"/mnt/t/ssf.{i}", 8 << 30, -1, comm_size=8, writers=8, writer_segments=1, transfer_size=MiB,
                    api="mpiio") for i in range(2)] + mixed(10)
    placed = get_policy("balanced").place(reqs, CLUSTER, Snapshot.from_cluster(CLUSTER),
                                          AllocOptions(layout="hierarchical"))
    assert placed.replaced and all(placed[i].layout.components for i in placed.replaced)
    assert arrays_plan(placed) == plan_of(placed)


def test_a_placement_is_built_when_asked_and_equals_a_list():
    reqs = mixed(12)
    placed = get_policy("balanced").place(reqs, CLUSTER, Snapshot.from_cluster(CLUSTER), AllocOptions(layout="keep"))
    assert placed == list(placed) and placed[-1] == list(placed)[-1] and placed[2:4] == list(placed)[2:4]
    assert placed[0].layout is placed[0].layout or placed[0].layout == placed[0].layout
    with pytest.raises(IndexError):
        placed[len(reqs)]
    assert get_policy("balanced").place([], CLUSTER, Snapshot.from_cluster(CLUSTER)) == []


def columns(reqs: list[Request]) -> RequestColumns:
    pools = ("", "fast")
    return RequestColumns(np.array([r.path for r in reqs], dtype=object),
                          np.array([r.write_bytes for r in reqs]), np.array([r.stripe_count for r in reqs]),
                          np.array([r.create_time for r in reqs]), np.array([pools.index(r.pool) for r in reqs]),
                          pools)


@pytest.mark.parametrize("policy", ["balanced", "rr", "bpio"])
def test_columns_place_as_the_requests_do(policy):
    reqs = [Request(r.path, r.write_bytes, r.stripe_count, create_time=r.create_time, pool=r.pool) for r in mixed()]
    snap = Snapshot.from_cluster(CLUSTER)
    opts = AllocOptions(layout="keep")
    cols = columns(reqs)
    assert list(cols) == reqs and cols[1:3] == reqs[1:3]
    got, want = get_policy(policy).place(cols, CLUSTER, snap, opts), get_policy(policy).place(reqs, CLUSTER, snap, opts)
    assert got == want and len(got) == len(reqs)
    if isinstance(got, Placements):
        assert arrays_plan(got) == plan_of(want)


def test_bad_requests_fail_as_objects_do():
    c = make_cluster()
    snap = Snapshot.from_cluster(c)
    with pytest.raises(ConfigError, match="must be whole numbers"):
        get_policy("balanced").place([Request("/a", True, 1)], c, snap)
    with pytest.raises(ConfigError, match="must be whole numbers"):
        get_policy("balanced").place([Request("/a", 1 << 70, 1)], c, snap)
    with pytest.raises(ConfigError, match="read bytes 1.5 must be a whole number"):
        get_policy("balanced").place([Request("/a", 1, 1, read_bytes=1.5)], c, snap)  # type: ignore[arg-type]
    assert get_policy("balanced").place([Request("/a", np.int64(5 * MiB), 2)], c, snap)[0].layout.plain.stripe_count


@pytest.mark.parametrize("paths, why", [
    (["/a", "b"], "not absolute"),
    (["/a", "/b\tc"], "tab, newline"),
    (["/a", "/b\nc"], "tab, newline"),
    (["/a", "/a"], "planned twice"),
    (["/a{"], "without its"),
])
def test_the_array_writer_checks_paths_as_plan_add_does(paths, why):
    n = len(paths)
    with pytest.raises(ConfigError, match=why):
        dumps_arrays({}, paths, np.full(n, MiB), np.arange(n + 1), np.zeros(n, np.int64), [""], np.zeros(n, np.int64))
    with pytest.raises(ConfigError, match=why):
        plan = Plan()
        for p in paths:
            plan.add(p, loads("#iez-plan 1\n/x\tc=1\n").entries["/x"])


def test_stripe_counts_and_pools_without_room_as_the_rule_gives():
    """Counts asked within every pool's reach are kept; 0 takes the default, -1 and counts past a
    pool's usable OSTs take them all; a pool with no usable OST names its first request."""
    snap = Snapshot.from_cluster(CLUSTER)
    fast = len(CLUSTER.pool("fast"))
    reqs = [Request(f"/t/f.{i}", MiB, c, pool=p) for i, (c, p) in enumerate(
        [(1, ""), (3, "fast"), (0, ""), (-1, "fast"), (fast + 1, "fast"), (12, "")])]
    placed = get_policy("balanced").place(reqs, CLUSTER, snap, AllocOptions(layout="keep"))
    assert [p.layout.plain.stripe_count for p in placed] == [1, 3, 2, fast, fast, 12]
    assert get_policy("balanced").place(reqs[:2], CLUSTER, snap, AllocOptions(layout="keep")).table.count.tolist() == [1, 3]
    gone = AllocOptions(layout="keep", exclude=frozenset(CLUSTER.pool("fast")))
    with pytest.raises(AllocationError, match=r"no OST in pool 'fast' can take a stripe of /t/f\.1 "):
        get_policy("balanced").place(reqs, CLUSTER, snap, gone)
