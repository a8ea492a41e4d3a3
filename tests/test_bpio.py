"""The `bpio` policy (iez.alloc.bpio) against placements worked out by hand from BPIO's cost
(docs/references.md#s002-bpio-cost): a weighted average, over the path's resources, of their use
by the application's earlier stripes per OST behind them."""

from __future__ import annotations

from pathlib import Path

import pytest

from iez.alloc.balanced import Balanced
from iez.alloc.bpio import Bpio
from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster, parse_cluster
from iez.request import Request

CLUSTER = (Path(__file__).parent / "vectors" / "topology" / "small.toml").read_text()  # its comment draws it
KEEP = AllocOptions(layout="keep")


def place(cluster, reqs, policy=None):
    return (policy or Bpio()).place(reqs, cluster, Snapshot.from_cluster(cluster), KEEP)


def req(k: int, host: str = "", rank: int = 0, count: int = 1) -> Request:
    return Request(f"/f{k}", 1 << 20, count, rank=rank, host=host, create_time=float(k))


def test_cost_by_hand():
    # Fan-outs (OSTs behind): OST 1, OSS 2, r0 2, r1 4, r2 2, g0 4, group r2 2. Each step's
    # cost per OST, OSS term + cheapest router (group + router) + OST term:
    # 1. n1 (a): all 0 -> OST 0 via r0 (first of r0, r1).     use: ost0 oss0 r0 g0
    # 2. n2 (a): r0 = 1/4+1/2, r1 = 1/4 -> OST0 1/2+1/4+1, OST1 1/2+1/4, OST2,3 0+1/4 -> OST 2 via r1
    # 3. n3 (b): r1 = 2/4+1/4, r2 = 0; oss0 only via r1: OST0 1/2+3/4+1, OST1 1/2+3/4,
    #    OST2 1/2+0+1, OST3 1/2+0 -> OST 3 via r2
    # 4. n1 (a): r0 = 2/4+1/2 = 1, r1 = 2/4+1/4 = 3/4: OST0 1/2+3/4+1, OST1 1/2+3/4 = 5/4,
    #    OST2, OST3 1+3/4+1 -> OST 1 (via r1)
    # 5. rank 150, host not listed -> group b by rank: r1 = 3/4+2/4, r2 = 1/2+1/2: oss0 via r1
    #    5/4, oss1 via r2 1: OST0,1 1+5/4+1, OST2,3 1+1+1 -> OST 2 (via r2)
    c = parse_cluster(CLUSTER)
    got = place(c, [req(1, "n1"), req(2, "n2"), req(3, "n3"), req(4, "n1"), req(5, "node99", 150)])
    assert [p.layout.osts() for p in got] == [[0], [2], [3], [1], [2]]
    assert all(p.policy == "bpio" and p.note == "" for p in got)


def test_router_level_changes_the_choice():
    # Without the router levels (weights 0), steps 1 and 2 are as above, and step 3 finds OST 1
    # and OST 3 both at 1/2 + 0: the first in cluster order, though n3 reaches oss0 only through
    # r1, which n1 and n2 already used.
    c = parse_cluster(CLUSTER)
    flat = Bpio({"oss": 1, "ost": 1})
    reqs = [req(1, "n1"), req(2, "n2"), req(3, "n3")]
    assert [p.layout.osts() for p in place(c, reqs, flat)] == [[0], [2], [1]]
    assert [p.layout.osts() for p in place(c, reqs)] == [[0], [2], [3]]


def test_unknown_node_is_placed_as_without_topology_and_noted():
    c = parse_cluster(CLUSTER)
    # Rank 7 on an unlisted host: OSS and OST use only. After n1's OST 0: OST 2 (0 + 0).
    got = place(c, [req(1, "n1"), req(2, "stranger", 7)])
    assert got[1].layout.osts() == [2]
    assert "node stranger (rank 7) is not in the topology" in got[1].note and got[0].note == ""


def test_without_topology_spreads_over_osss_then_osts():
    c = make_cluster(2, 2)
    got = place(c, [req(k, f"h{k}") for k in range(4)])
    assert [p.layout.osts() for p in got] == [[0], [2], [1], [3]]
    assert all(p.note == "" for p in got)


def test_stripes_of_one_file_take_distinct_cheapest_paths():
    c = parse_cluster(CLUSTER)
    got = place(c, [req(1, "n3", count=3)])
    # n3 reaches oss0 through r1 only. 1. all 0: OST 0 via r1; 2. oss0's OSTs cost 1/2 + r1
    # (1/4 + 1/4) + 0 or 1, oss1's 0 + r2 (0) + 0: OST 2 via r2; 3. OST 1: 1/2 + 1/2 + 0 = 1,
    # OST 3: 1/2 + r2 (1/2 + 1/2) + 0 = 3/2: OST 1.
    assert got[0].layout.osts() == [0, 2, 1]


def test_registered_and_balances_a_rank_per_node_job_evenly():
    c = make_cluster(4, 2)
    reqs = [req(k, f"h{k % 4}", rank=k) for k in range(16)]
    got = get_policy("bpio").place(reqs, c, Snapshot.from_cluster(c), KEEP)
    per_ost = [sum(p.layout.osts()[0] == i for p in got) for i in range(8)]
    assert per_ost == [2] * 8


@pytest.mark.parametrize("count", [2, -1])
def test_respects_exclusions_and_counts(count):
    c = parse_cluster(CLUSTER)
    opts = AllocOptions(layout="keep", exclude=frozenset({1}))
    got = Bpio().place([req(1, "n1", count=count)], c, Snapshot.from_cluster(c), opts)
    osts = got[0].layout.osts()
    assert 1 not in osts and len(set(osts)) == len(osts) == (2 if count == 2 else 3)


def test_balanced_with_the_router_level_moves_bytes_off_an_oss_behind_slow_routers():
    # oss1 is reached through r1 and r2 only; at 2e8 and 1e8 bytes/s it gets 2e8 / 2 + 1e8 of
    # router bandwidth against oss0's 1.25e9 (its NIC; its routers would give more).
    c = parse_cluster(CLUSTER.replace("bw = 2e9", "bw = 2e8").replace('name = "r2"\n', 'name = "r2"\nbw = 1e8\n'))
    assert c.topology is not None
    assert c.topology.oss_router_bw(["oss0", "oss1"]) == [1.25e9 + 1e8, 2e8]
    reqs = [Request(f"/g{k}", 1 << 30, 1, rank=k, host="n1") for k in range(8)]
    opts = AllocOptions(layout="keep", capacity_weight=0.0)

    def on_oss1(policy):
        return sum(p.layout.osts()[0] >= 2 for p in policy.place(reqs, c, Snapshot.from_cluster(c), opts))

    plain, routed = on_oss1(Balanced()), on_oss1(Balanced(routers=True))
    assert plain == 4 and routed < plain  # off by default: the OSSs' NICs alone split it evenly
    assert on_oss1(Balanced(routers=True)) == routed and get_policy("balanced").routers is False
