"""`bpio`: BPIO's topology-aware balanced placement along the whole I/O path
(docs/references.md#s002-bpio-cost).

Each client, the node of the rank that creates a file (`Request.host`, else its rank through the
topology's client groups: `Topology.group_of`), is bound to the storage targets on its cheapest
paths. A path is (node, router group, router, OSS, OST), a router being one that the client's
group reaches and that serves the OSS (fine-grained routing). Its cost is a weighted average of
how often each of its resources has been used by the application's earlier requests:

    cost(path) = sum_l w_l * n_l / f_l  /  sum_l w_l

n_l is the stripes placed so far in this batch (the application's requests, in create order)
whose path crossed the resource at level l; f_l its fan-out, the OSTs behind it (1 for an OST, an
OSS's OSTs, the OSTs of the OSSs a router or router group serves, every OST for a node), so a
resource used once per OST behind it weighs as much as an OST used once. Each stripe takes the
cheapest path to an OST its file does not use yet (ties: the first OST in cluster order, then the
first router), and its resources' counts rise by one.

A cluster without topology, or a client whose node the topology does not list, has paths
(node, OSS, OST) only; such a client's placements say so in their note. Stripe counts and sizes
are the shared ones (`policy.tables`); like BPIO, the cost counts the application's own use, not
other jobs' load or free space: OSTs that may take no object, or have no room for the stripe, are
only left out, and degraded ones taken last.
Pure: plain data in, placements out. Cost per stripe O(OSTs + OSSs x routers per OSS), in numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from iez.alloc.policy import AllocOptions, make_placements, stripe_bytes, tables
from iez.alloc.registry import Registration
from iez.cluster import Cluster, Snapshot, Topology
from iez.errors import AllocationError
from iez.request import Placement, Request

LEVELS = ("node", "router_group", "router", "oss", "ost")
# Equal weights: neither paper prints BPIO's (docs/references.md#s002-bpio-cost).
WEIGHTS: Mapping[str, float] = dict.fromkeys(LEVELS, 1.0)
UNREACHABLE = 1e18  # cost added to an OST the client reaches through no router: chosen last


@dataclass(frozen=True)
class Paths:
    """The topology as arrays over the cluster's OSSs (cluster order) and routers (topology order)."""

    rgroup: np.ndarray  # per router: its router group's position
    router_fan: np.ndarray  # per router: OSTs behind it
    rgroup_fan: np.ndarray  # per router group: OSTs behind it
    cand: dict[str, np.ndarray]  # per client group: (OSS x k) routers serving it that the group reaches, -1 pads


def paths(topo: Topology, cluster: Cluster) -> Paths:
    oss_pos = {s.name: k for k, s in enumerate(cluster.osses)}
    per_oss = np.array([len(s.osts) for s in cluster.osses], dtype=float)
    names = [topo.router_group(r) for r in topo.routers]
    gpos = {g: k for k, g in enumerate(dict.fromkeys(names))}
    rgroup = np.array([gpos[g] for g in names], dtype=np.int64)
    behind = [{oss_pos[s] for s in r.osses} for r in topo.routers]
    router_fan = np.array([per_oss[list(b)].sum() for b in behind])
    rgroup_fan = np.array([per_oss[list(set().union(*(b for b, g in zip(behind, rgroup) if g == k)))].sum()
                           for k in range(len(gpos))])
    rpos = {r.name: k for k, r in enumerate(topo.routers)}
    cand = {}
    for g in topo.clients:
        lists: list[list[int]] = [[] for _ in cluster.osses]
        for name in g.routers:
            for s in behind[rpos[name]]:
                lists[s].append(rpos[name])
        width = max(1, max(len(x) for x in lists))
        cand[g.name] = np.array([x + [-1] * (width - len(x)) for x in lists], dtype=np.int64)
    return Paths(rgroup, router_fan, rgroup_fan, cand)


class Bpio:
    name = "bpio"

    def __init__(self, weights: Mapping[str, float] = WEIGHTS):
        self.w = {lv: float(weights.get(lv, 0.0)) for lv in LEVELS}

    def place(self, requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
              options: AllocOptions = AllocOptions()) -> list[Placement]:
        if not requests:
            return []
        osts, table = tables(requests, cluster, snapshot, options)
        topo = cluster.topology
        pth = paths(topo, cluster) if topo else None
        w = self.w
        ost_fan = np.ones(osts.n)
        oss_fan = np.bincount(osts.oss, minlength=len(cluster.osses)).astype(float)
        n_ost, n_oss = np.zeros(osts.n), np.zeros(len(cluster.osses))
        n_router = np.zeros(len(topo.routers) + 1) if topo else np.zeros(1)  # last: the -1 pad
        n_rgroup = np.zeros(int(pth.rgroup.max()) + 1) if pth else np.zeros(0)
        room = osts.room.copy()
        rc = np.full(len(n_router), np.inf)  # per router its cost; the last, the pad, stays inf
        oss_range = np.arange(len(cluster.osses))
        lists: list[tuple[int, ...]] = [()] * len(requests)
        notes = list(table.notes)
        for i in table.order.tolist():
            r = requests[i]
            node = r.host or f"rank{r.rank}"
            group = topo.group_of(r.host, r.rank) if topo else None
            if topo and group is None:
                why = f"bpio: node {node} (rank {r.rank}) is not in the topology: placed by OSS and OST use only"
                notes[i] = f"{notes[i]}; {why}" if notes[i] else why
            free = table.allowed[int(table.pool[i])].copy()
            count = int(table.count[i])
            needs = stripe_bytes(table.write_bytes[i:i + 1], table.size[i:i + 1], count, np.arange(count)).tolist()
            cand = pth.cand[group.name] if group is not None and pth is not None else None
            chosen: list[int] = []
            # The node's own term and the division by the weights' sum are the same for every
            # path of this client, so the argmin over the sums below is the average's.
            for k, need in enumerate(needs):
                per_oss = w["oss"] * n_oss / oss_fan
                if cand is not None and pth is not None:
                    rc[:-1] = (w["router_group"] * (n_rgroup / pth.rgroup_fan)[pth.rgroup]
                               + w["router"] * n_router[:-1] / pth.router_fan)
                    per = rc[cand]  # -1 pads read the inf
                    pick = per.argmin(axis=1)
                    best = per[oss_range, pick]
                    per_oss += np.where(best < np.inf, best, UNREACHABLE)
                cost = per_oss[osts.oss] + w["ost"] * n_ost / ost_fan
                fits = free & (room >= need)
                healthy = fits & ~osts.degraded  # degraded OSTs: the last resort, as for Lustre
                cost[~(healthy if healthy.any() else fits)] = np.inf
                least = cost.min()
                if least == np.inf:
                    raise AllocationError(f"ENOSPC: no OST has room for stripe {k} of {r.path} "
                                          f"({need} bytes)", errno="ENOSPC")
                p = int(np.argmax(cost <= least + 1e-12))  # the first of the (rounding-)equal cheapest
                s = int(osts.oss[p])
                free[p] = False
                room[p] -= need
                chosen.append(p)
                n_ost[p] += 1
                n_oss[s] += 1
                if cand is not None and pth is not None and cand[s, pick[s]] >= 0:
                    rt = int(cand[s, pick[s]])
                    n_router[rt] += 1
                    n_rgroup[pth.rgroup[rt]] += 1
            lists[i] = tuple(int(osts.index[p]) for p in chosen)
        return make_placements(requests, replace(table, notes=tuple(notes)), lists, self.name)


POLICIES = {Bpio.name: Registration(Bpio, "paper")}
