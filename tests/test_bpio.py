"""The `bpio` policy (iez.alloc.bpio) against placements worked out by hand from BPIO's cost
(docs/references.md#s002-bpio-cost): a weighted average, over the path's resources, of their use
by the application's earlier stripes per OST behind them."""

from __future__ import annotations

import random
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from iez.alloc.bpio import WEIGHTS, Bpio, paths, units
from iez.alloc.policy import AllocOptions, stripe_bytes, tables
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster, parse_cluster
from iez.errors import AllocationError
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


# oss1 is reached through r1 and r2 only; at 2e8 and 1e8 bytes/s it gets 2e8 / 2 + 1e8 of router
# bandwidth against oss0's 1.25e9 (its NIC; its routers would give more).
SLOW_ROUTERS = CLUSTER.replace("bw = 2e9", "bw = 2e8").replace('name = "r2"\n', 'name = "r2"\nbw = 1e8\n')
TIME_ONLY = AllocOptions(layout="keep", capacity_weight=0.0)


def gib_files(n: int) -> list[Request]:
    return [Request(f"/g{k}", 1 << 30, 1, rank=k, host="n1") for k in range(n)]


def on_oss1(osts) -> int:
    return sum(o >= 2 for o in osts)


def test_balanced_with_the_router_level_moves_bytes_off_an_oss_behind_slow_routers():
    c = parse_cluster(SLOW_ROUTERS)
    assert c.topology is not None
    assert c.topology.oss_router_bw(["oss0", "oss1"]) == [1.25e9 + 1e8, 2e8]

    def placed(**kw):
        got = get_policy("balanced").place(gib_files(8), c, Snapshot.from_cluster(c), replace(TIME_ONLY, **kw))
        return [p.layout.osts()[0] for p in got]

    plain, routed = on_oss1(placed()), on_oss1(placed(routers=True))
    assert plain == 4 and routed < plain  # off by default: the OSSs' NICs alone split it evenly
    assert AllocOptions().routers is False


def test_allocate_and_the_controller_take_the_router_option(iez_cmd, subenv, tmp_path):
    from iez import plan as planfile
    from iez.controller.service import Controller, Settings
    from iez.db import Database

    db = f"sqlite:///{tmp_path / 'iez.db'}"
    (tmp_path / "c.toml").write_text(SLOW_ROUTERS)
    with Database(db) as d, d.begin() as tx:
        tx.add_trace("app", gib_files(8))
        tx.add_prediction("app", 2, gib_files(8), {}, [1])
    subenv.pop("IEZ_DB", None)

    def allocate(*opts: str) -> int:
        out = tmp_path / "app.plan"
        subprocess.run([*iez_cmd, "allocate", "app", "--policy", "balanced", "--cluster", str(tmp_path / "c.toml"),
                        "--layout", "keep", "--capacity-weight", "0", "--no-gate", "--db", db, "-o", str(out), *opts],
                       check=True, capture_output=True, env=subenv, cwd=tmp_path, timeout=120)
        return on_oss1(o for fl in planfile.load(out).entries.values() for o in fl.osts())

    assert allocate("--routers") < allocate() == 4
    settings = Settings(cluster=parse_cluster(SLOW_ROUTERS), db_url=db, routers=True, capacity_weight=0.0)
    for routers in (True, False):
        controller = Controller(replace(settings, routers=routers))
        try:
            assert controller.options.routers is routers
        finally:
            controller.close()


def scan(requests, cluster, snapshot, options, w):
    """The former bpio search, kept as the reference: every stripe costs all OSTs at once
    (numpy), the first of the rounding-equal cheapest wins; OSTs the client reaches through no
    router only when no other fits (the former code added 1e18 to their cost, which also
    erased their own)."""
    osts, table = tables(requests, cluster, snapshot, options)
    topo = cluster.topology
    pth = paths(topo, cluster) if topo else None
    oss_fan = np.bincount(osts.oss, minlength=len(cluster.osses)).astype(float)
    n_ost, n_oss = np.zeros(osts.n), np.zeros(len(cluster.osses))
    n_router = np.zeros(len(topo.routers) + 1) if topo else np.zeros(1)
    n_rgroup = np.zeros(int(pth.rgroup.max()) + 1) if pth else np.zeros(0)
    room, rc = osts.room.copy(), np.full(len(n_router), np.inf)
    out = [()] * len(requests)
    for i in table.order.tolist():
        r = requests[i]
        group = topo.group_of(r.host, r.rank) if topo else None
        free, count = table.allowed[int(table.pool[i])].copy(), int(table.count[i])
        cand = pth.cand[group.name] if group is not None else None
        chosen = []
        for need in stripe_bytes(table.write_bytes[i:i + 1], table.size[i:i + 1], count, np.arange(count)).tolist():
            per_oss = w["oss"] * n_oss / oss_fan
            if cand is not None:
                rc[:-1] = (w["router_group"] * (n_rgroup / pth.rgroup_fan)[pth.rgroup]
                           + w["router"] * n_router[:-1] / pth.router_fan)
                per = rc[cand]
                pick = per.argmin(axis=1)
                best = per[np.arange(len(cluster.osses)), pick]
                far = (best == np.inf)[osts.oss]
                per_oss += np.where(best < np.inf, best, 0)
            else:
                far = np.zeros(osts.n, bool)
            cost = per_oss[osts.oss] + w["ost"] * n_ost
            fits = free & (room >= need)
            healthy = fits & ~osts.degraded
            take = healthy if healthy.any() else fits
            cost[~(take & ~far if (take & ~far).any() else take)] = np.inf
            if cost.min() == np.inf:
                return "ENOSPC"
            p = int(np.argmax(cost <= cost.min() + 1e-12))
            s = int(osts.oss[p])
            free[p] = False
            room[p] -= need
            chosen.append(int(osts.index[p]))
            n_ost[p] += 1
            n_oss[s] += 1
            if cand is not None and cand[s, pick[s]] >= 0:
                n_router[cand[s, pick[s]]] += 1
                n_rgroup[pth.rgroup[cand[s, pick[s]]]] += 1
        out[i] = tuple(chosen)
    return out


def random_cluster(rng: random.Random) -> str:
    """A cluster with uneven OSSs, routers serving overlapping OSS sets in groups, client groups
    reaching several routers of an OSS or none, a pool, small OSTs some of them used, degraded ones."""
    n_oss = rng.randint(2, 5)
    osts, lines = 0, []
    for s in range(n_oss):
        k = rng.randint(1, 4)
        lines += [f'[[oss]]\nname = "oss{s}"\nosts = {list(range(osts, osts + k))}']
        osts += k
    lines.append('[ost_defaults]\nsize = "64MiB"')
    for o in range(osts):
        state = rng.choice(["active"] * 5 + ["degraded"])
        lines.append(f'[[ost]]\nindex = {o}\nused = "{rng.choice([0, 8, 40])}MiB"\nstate = "{state}"')
    lines.append(f"[pools]\nhalf = {list(range(0, osts, 2))}")
    routers = []
    for r in range(rng.randint(n_oss, 2 * n_oss)):
        served = sorted({r % n_oss, rng.randrange(n_oss)})  # every OSS served, some twice
        routers.append(f"r{r}")
        lines.append(f'[[router]]\nname = "r{r}"\ngroup = "g{r % 3}"\noss = {[f"oss{s}" for s in served]}')
    lines.append(f'[[client_group]]\nname = "all"\nnodes = ["n0"]\nranks = [0, 9]\nrouters = {routers}')
    for g in range(1, 3):
        reach = rng.sample(routers, rng.randint(1, len(routers)))
        lines.append(f'[[client_group]]\nname = "c{g}"\nnodes = ["n[{g}1-{g}9]"]\nrouters = {reach}')
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(60))
def test_heaps_place_as_the_full_scan(seed):
    rng = random.Random(seed)
    c = parse_cluster(random_cluster(rng))
    weights = rng.choice([WEIGHTS, {"oss": 1, "ost": 2, "router": 0.5, "router_group": 3}, {"oss": 1, "ost": 1}])
    reqs = [Request(f"/f{k}", rng.choice([1, 3, 9]) << 20, rng.choice([1, 2, 3, -1]), rank=rng.randrange(40),
                    host=rng.choice(["n0", "n11", "n23", "", "elsewhere"]), create_time=float(rng.randrange(5)),
                    pool=rng.choice(["", "", "half"]))
            for k in range(rng.randint(1, 30))]
    opts = AllocOptions(layout="keep", exclude=frozenset(rng.sample(range(len(c.osts)), 1)))
    want = scan(reqs, c, Snapshot.from_cluster(c), opts, {**dict.fromkeys(WEIGHTS, 0.0), **weights})
    try:
        got = [p.layout.osts() for p in Bpio(weights).place(reqs, c, Snapshot.from_cluster(c), opts)]
    except AllocationError:
        got = "ENOSPC"
    assert got == (want if want == "ENOSPC" else [list(x) for x in want])


def test_a_spider2_job_spans_the_zones_and_bpio_evens_its_osts_and_routers():
    # scenarios/spider2.toml: 2,048 consecutive nodes span the 12 zones (64-node blocks in turn);
    # bpio gives every OST 8 or 9 of the 8,192 stripes and, in each zone, every leaf's router
    # within one stripe of the others.
    from collections import Counter

    from iez.cluster import load_cluster

    c = load_cluster(Path(__file__).parent.parent / "scenarios" / "spider2.toml")
    topo = c.topology
    assert topo is not None
    nodes = [n for g in topo.clients for n in g.nodes][:2048]
    zone = {n: topo.group_of(n, -1).name.split("-")[0] for n in nodes}
    assert Counter(zone.values()).keys() == {f"zone{k:02d}" for k in range(12)}
    got = place(c, [Request(f"/f{k}", 1 << 30, 4, rank=k, host=n, create_time=k) for k, n in enumerate(nodes)])
    per_ost = Counter(o for p in got for o in p.layout.osts())
    assert len(per_ost) == 1008 and set(per_ost.values()) == {8, 9}
    leaf = {o.index: int(o.oss[3:]) // 4 for o in c.osts}
    per_router = Counter((zone[n], leaf[o]) for n, p in zip(nodes, got) for o in p.layout.osts())
    for z in set(zone.values()):
        counts = [per_router[z, k] for k in range(36)]
        assert max(counts) - min(counts) <= 1, (z, counts)


@pytest.mark.parametrize("seed", range(20))
def test_decimal_weights_tie_as_the_full_scan(seed):
    # Weights that binary floating point does not hold exactly (3 x 0.1 != 0.3): the full scan
    # ties such costs by its 1e-12 tolerance, bpio by its exact integer costs.
    rng = random.Random(1000 + seed)
    c = parse_cluster(random_cluster(rng))
    weights = {"oss": 0.1, "ost": 0.3, "router": 0.7, "router_group": 0.2}
    reqs = [Request(f"/f{k}", 1 << 20, rng.choice([1, 2, -1]), rank=rng.randrange(40),
                    host=rng.choice(["n0", "n11", "n23", ""]), create_time=float(k)) for k in range(40)]
    want = scan(reqs, c, Snapshot.from_cluster(c), KEEP, {**dict.fromkeys(WEIGHTS, 0.0), **weights})
    assert want != "ENOSPC"
    assert [p.layout.osts() for p in place(c, reqs, Bpio(weights))] == [list(x) for x in want]


def test_units_are_exact_integers_over_a_common_denominator():
    u, scale = units({"oss": 0.1, "ost": 0.3}, {"oss": [7, 0], "ost": [1]})
    assert scale == 70 and u == {"oss": [1, 0], "ost": [21]}  # 0.1 / 7 = 1/70, 0.3 = 21/70
