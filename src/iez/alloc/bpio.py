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
only left out, and degraded ones taken last; OSTs a client's group reaches through no router
come after all others.
Pure: plain data in, placements out. Costs are exact integers (`units`), and each stripe costs
one min over the classes of OSSs served by the same routers and a few heap operations (`Use`),
not a pass over every OST.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction
from operator import add
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from iez.alloc.policy import AllocOptions, OstTable, make_placements, stripe_bytes, tables
from iez.alloc.registry import Registration
from iez.cluster import Cluster, Snapshot, Topology
from iez.errors import AllocationError, ConfigError
from iez.request import Placement, Request

LEVELS = ("node", "router_group", "router", "oss", "ost")
# Equal weights: neither paper prints BPIO's (docs/references.md#s002-bpio-cost).
WEIGHTS: Mapping[str, float] = dict.fromkeys(LEVELS, 1.0)


@dataclass(frozen=True)
class Paths:
    """The topology as arrays over the cluster's OSSs (cluster order) and routers (topology order)."""

    rgroup: np.ndarray  # per router: its router group's position
    router_fan: np.ndarray  # per router: OSTs behind it
    rgroup_fan: np.ndarray  # per router group: OSTs behind it
    cand: dict[str, np.ndarray]  # per client group: (OSS x k) routers serving it that the group reaches, -1 pads
    serving: list[list[int]]  # per OSS: the routers serving it


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
    made: dict[tuple[str, ...], np.ndarray] = {}  # groups reaching the same routers share one
    for g in topo.clients:
        if tuple(g.routers) not in made:
            lists: list[list[int]] = [[] for _ in cluster.osses]
            for name in g.routers:
                for s in behind[rpos[name]]:
                    lists[s].append(rpos[name])
            width = max(1, max(len(x) for x in lists))
            made[tuple(g.routers)] = np.array([x + [-1] * (width - len(x)) for x in lists], dtype=np.int64)
        cand[g.name] = made[tuple(g.routers)]
    serving = [[k for k, b in enumerate(behind) if s in b] for s in range(len(cluster.osses))]
    return Paths(rgroup, router_fan, rgroup_fan, cand, serving)


class Bpio:
    name = "bpio"

    def __init__(self, weights: Mapping[str, float] = WEIGHTS):
        self.w = {lv: float(weights.get(lv, 0.0)) for lv in LEVELS}
        if not all(0 <= v < math.inf for v in self.w.values()):
            raise ConfigError(f"bpio weights must be finite and >= 0: {self.w}")

    def place(self, requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
              options: AllocOptions = AllocOptions()) -> list[Placement]:
        if not requests:
            return []
        osts, table = tables(requests, cluster, snapshot, options)
        topo = cluster.topology
        use = Use(osts, cluster, paths(topo, cluster) if topo else None, self.w, int(table.count.sum()))
        room = osts.room.tolist()
        lists: list[tuple[int, ...]] = [()] * len(requests)
        notes = list(table.notes)
        # Every stripe's bytes at once: request i's stripes start at first[i].
        counts = table.count.astype(np.int64)
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        at = np.repeat(np.arange(len(counts)), counts)
        each = stripe_bytes(table.write_bytes[at], table.size[at], counts[at], np.arange(len(at)) - first[at]).tolist()
        starts, sizes, pools, index = first.tolist(), counts.tolist(), table.pool.tolist(), osts.index.tolist()
        for i in table.order.tolist():
            r = requests[i]
            group = topo.group_of(r.host, r.rank) if topo else None
            if topo and group is None:
                why = (f"bpio: node {r.host or f'rank{r.rank}'} (rank {r.rank}) is not in the topology: "
                       "placed by OSS and OST use only")
                notes[i] = f"{notes[i]}; {why}" if notes[i] else why
            needs = each[starts[i]:starts[i] + sizes[i]]
            key = (use.same[group.name] if group is not None else None, pools[i])
            chosen: list[int] = []
            for k, need in enumerate(needs):
                p = use.cheapest(key, table.allowed, room, need)  # and counts its path
                if p < 0:
                    raise AllocationError(f"ENOSPC: no OST has room for stripe {k} of {r.path} "
                                          f"({need} bytes)", errno="ENOSPC")
                room[p] -= need
                chosen.append(p)
            use.release()
            lists[i] = tuple(index[p] for p in chosen)
        return make_placements(requests, replace(table, notes=tuple(notes)), lists, self.name)


Key = tuple[str | None, int]  # (client group, or None for a node without routers; pool position)
Entry = tuple[int, int]  # an OST in its class's heap: (X, position)


def units(w: Mapping[str, float], fans: Mapping[str, Sequence[float]]) -> tuple[dict[str, list[int]], int]:
    """Each level's cost of one use, w / f per resource, as integers in a common unit 1/L (the
    weights read as the decimals they print as): costs are then exact, so paths of equal cost tie
    whatever the order of their terms, as the full scan's 1e-12 tolerance ties them, and the first
    OST in cluster order wins."""
    per = {lv: [Fraction(str(w[lv])) / int(f) if f else Fraction(0) for f in fs] for lv, fs in fans.items()}
    scale = math.lcm(*(q.denominator for qs in per.values() for q in qs))
    return {lv: [int(q * scale) for q in qs] for lv, qs in per.items()}, scale


class Side:
    """The OSTs of one pool and health (healthy or degraded): per class, a lazy min-heap of its
    OSTs by X, and its top's key X * n + position (n: the OSTs in the cluster; `Use.empty` for
    none), kept true after every change."""

    def __init__(self, heaps: list[list[Entry]], empty: int):
        self.heaps = heaps
        self.xk = [empty] * len(heaps)


class Use:
    """The application's use of each resource so far, and per client group the router term to
    each class, so that a stripe costs one pass over the classes instead of one over every OST.

    cost(group, OST) = R(group, class) + X(OST): X is the OSS and OST terms, the same for every
    client; R the cheapest router term from the group to the OST's class, the OSSs served by the
    same routers (on Spider II, a leaf switch's). Costs are integers (`units`), and a path's key
    is cost * n + the OST's position, so the least key is the cheapest path with ties to the
    first OST. Per class, a lazy min-heap of its OSTs by X: counts only rise, so a key is a lower
    bound and a top whose key is still its X is the class's cheapest OST (stale ones are re-costed
    and pushed back). A stripe changes X in its class and R in the classes its router group
    serves; a class whose routers are all in one router group carries that group's term in its
    key (its lift), so that a stripe changes R for one group only. OSTs the file already uses,
    or without room for the stripe, are set aside and put back after the file or the stripe."""

    def __init__(self, osts: OstTable, cluster: Cluster, pth: Paths | None, w: Mapping[str, float], stripes: int):
        self.w = w
        self.oss = osts.oss.tolist()
        self.degraded = osts.degraded.tolist()
        self.n_ost = [0] * osts.n
        self.n_oss = [0] * len(cluster.osses)
        # An OSS's class: the OSSs served by the same routers (all of them without topology).
        serving: list[tuple[int, ...]] = [()] * len(cluster.osses)
        cand: dict[str, np.ndarray] = {}
        fans = {"ost": [1], "oss": np.bincount(osts.oss, minlength=len(cluster.osses)).tolist(),
                "router": [], "router_group": []}
        self.rgroup: list[int] = []
        if pth is not None:
            self.rgroup = pth.rgroup.tolist()
            self.router_fan = pth.router_fan.tolist()
            self.rgroup_fan = pth.rgroup_fan.tolist()
            fans.update(router=self.router_fan, router_group=self.rgroup_fan)
            self.n_router = [0] * len(self.rgroup)
            self.n_rgroup = [0] * len(self.rgroup_fan)
            serving = [tuple(r) for r in pth.serving]
            cand = pth.cand
        u, _ = units(w, fans)
        self.u_ost, self.u_oss, self.u_router, self.u_rgroup = u["ost"][0], u["oss"], u["router"], u["router_group"]
        self.n = osts.n
        # keys: reachable paths' below `far`, those reached through no router from `far` to
        # 2 * far (by X), classes without an OST here from 3 * far on
        self.far = (stripes + 1) * (sum(max(x, default=0) for x in u.values()) + 1) * self.n
        self.none, self.empty = 2 * self.far, 4 * self.far
        # Groups reaching the same routers have the same costs: one set of them for them all.
        first: dict[tuple[tuple[int, ...], bytes], str] = {}
        self.same = {g: first.setdefault((c.shape, c.tobytes()), g) for g, c in cand.items()}
        ids = {k: n for n, k in enumerate(dict.fromkeys(serving))}
        self.cls_of = [ids[serving[self.oss[p]]] for p in range(osts.n)]
        rep = [serving.index(k) for k in ids]  # an OSS of each class
        # per group (None: a node without routers), per class: the routers it reaches
        self.cand = {g: [[r for r in row if r >= 0] for row in cand[g][rep].tolist()] for g in first.values()}
        # A class whose routers are all in one router group (its home) has that group's term,
        # its lift, in its OSTs' keys: a group's R to it is its routers' own terms less nothing,
        # and a stripe changes one R, not one per group reaching the class.
        homes = [{self.rgroup[r] for r in serving[s]} for s in rep]
        self.home = [min(h) if len(h) == 1 else -1 for h in homes]
        self.lift = [0] * len(rep)
        # per group, per class: the cheapest router term less the class's lift, times n
        self.R: dict[str | None, list[int]] = {g: [0 if rs else self.far for rs in cl] for g, cl in self.cand.items()}
        self.R[None] = [0] * len(rep)
        # per class: the (row, base) whose entry is base less the lift (no router to it)
        self.flat = [[(self.R[None], 0)] + [(self.R[g], self.far) for g, cl in self.cand.items() if not cl[c]]
                     for c in range(len(rep))]
        n_groups = len(self.rgroup_fan) if pth else 0
        self.homed: list[list[int]] = [[] for _ in range(n_groups)]
        for c, k in enumerate(self.home):
            if k >= 0:
                self.homed[k].append(c)
        # the (row, class, routers) whose R a router's use changes, or its router group's
        Touch = list[list[tuple[list[int], int, list[int]]]]
        self.by_router: Touch = [[] for _ in self.rgroup]
        self.by_rgroup: Touch = [[] for _ in range(n_groups)]
        for g, cl in self.cand.items():
            for c, rs in enumerate(cl):
                for r in rs if self.home[c] >= 0 else ():
                    self.by_router[r].append((self.R[g], c, rs))
                for k in dict.fromkeys(self.rgroup[r] for r in rs) if self.home[c] < 0 else ():
                    self.by_rgroup[k].append((self.R[g], c, rs))
        self.sides: dict[tuple[int, bool], Side] = {}
        self.held: list[tuple[Side, int, Entry]] = []  # the file's OSTs

    def route(self, group: str | None, c: int) -> int:
        """The router a stripe from `group` to class c goes through: the first of the cheapest,
        costed in floating point as the full scan costs them (-1: none, or a client without
        routers)."""
        rs = self.cand[group][c] if group is not None else []
        if len(rs) <= 1:
            return rs[0] if rs else -1
        best, pick = math.inf, -1
        w_rg, w_r = self.w["router_group"], self.w["router"]
        for r in rs:
            k = self.rgroup[r]
            v = w_rg * (self.n_rgroup[k] / self.rgroup_fan[k]) + w_r * self.n_router[r] / self.router_fan[r]
            if v < best:
                best, pick = v, r
        return pick

    def term(self, r: int) -> int:
        """Router r's cost term, its router group's and its own, times n."""
        k = self.rgroup[r]
        return (self.u_rgroup[k] * self.n_rgroup[k] + self.u_router[r] * self.n_router[r]) * self.n

    def own(self, r: int) -> int:
        """Router r's own cost term, times n."""
        return self.u_router[r] * self.n_router[r] * self.n

    def entry(self, p: int) -> Entry:
        s = self.oss[p]
        return self.u_oss[s] * self.n_oss[s] + self.u_ost * self.n_ost[p], p

    def side(self, pool: int, degraded: bool, allowed: list[np.ndarray]) -> Side:
        sd = self.sides.get((pool, degraded))
        if sd is None:
            heaps: list[list[Entry]] = [[] for _ in self.R[None]]
            for p in np.flatnonzero(allowed[pool]).tolist():
                if self.degraded[p] == degraded:
                    heaps[self.cls_of[p]].append(self.entry(p))
            sd = self.sides[pool, degraded] = Side(heaps, self.empty)
            for c, h in enumerate(heaps):
                heapq.heapify(h)
                self.settle(sd, c)
        return sd

    def settle(self, sd: Side, c: int) -> None:
        """Re-cost class c's stale top entries until its top is true; its key."""
        h = sd.heaps[c]
        oss, n_oss, u_oss, n_ost, u_ost = self.oss, self.n_oss, self.u_oss, self.n_ost, self.u_ost
        while h:
            x, p = h[0]
            s = oss[p]
            now = u_oss[s] * n_oss[s] + u_ost * n_ost[p]  # self.entry(p), inline: the hot loop
            if now == x:
                sd.xk[c] = (x + self.lift[c]) * self.n + p
                return
            heapq.heapreplace(h, (now, p))
        sd.xk[c] = self.empty

    def cheapest(self, key: Key, allowed: list[np.ndarray], room: list[int], need: int) -> int:
        """The cheapest OST (ties: the first in cluster order) that the file does not use and that
        has room for `need`, healthy ones first, degraded ones as the last resort; one more
        stripe through its path. -1 if none."""
        group, pool = key
        for degraded in (False, True):
            sd = self.side(pool, degraded, allowed)
            aside: list[tuple[int, Entry]] = []  # without room for this stripe
            found = -1
            while True:
                m = min(map(add, self.R[group], sd.xk))
                if m >= self.none:
                    break
                c = self.cls_of[m % self.n]  # keys end in their OST's position
                e = heapq.heappop(sd.heaps[c])
                if room[e[1]] < need:
                    aside.append((c, e))
                    self.settle(sd, c)
                    continue
                self.held.append((sd, c, e))
                found = e[1]
                self.count(found, c, self.route(group, c) if m < self.far else -1)
                break
            for c, e in aside:
                self.push(sd, c, e[1])
            if found >= 0:
                return found
        return -1

    def count(self, p: int, c: int, router: int) -> None:
        """One more stripe through OST p of class c (and `router`, unless -1); the keys it
        changes."""
        self.n_ost[p] += 1
        self.n_oss[self.oss[p]] += 1
        if router >= 0:
            k = self.rgroup[router]
            self.n_router[router] += 1
            self.n_rgroup[k] += 1
            for row, cc, rs in self.by_router[router]:
                row[cc] = self.own(rs[0]) if len(rs) == 1 else min(map(self.own, rs))
            for row, cc, rs in self.by_rgroup[k]:
                row[cc] = min(map(self.term, rs))
            lift = self.u_rgroup[k] * self.n_rgroup[k]
            for cc in self.homed[k]:
                self.lift[cc] = lift
                for row, base in self.flat[cc]:
                    row[cc] = base - lift * self.n
        others = [cc for cc in self.homed[k] if cc != c] if router >= 0 else []
        for sd in self.sides.values():
            self.settle(sd, c)
            for cc in others:
                self.settle(sd, cc)

    def release(self) -> None:
        """The file is placed: its OSTs go back into their class heaps, re-costed."""
        for sd, c, e in self.held:
            self.push(sd, c, e[1])
        self.held = []

    def push(self, sd: Side, c: int, p: int) -> None:
        """OST p back into its class's heap, re-costed. Every class's top is true between
        stripes, so the class's key changes only if p is its new top."""
        e = self.entry(p)
        h = sd.heaps[c]
        heapq.heappush(h, e)
        if h[0] is e:
            sd.xk[c] = (e[0] + self.lift[c]) * self.n + p


def off_topology(requests: Sequence[Request], topo: Topology) -> list[str]:
    """The creators (node, else `rank N`) of requests whose client the topology does not list,
    which bpio places by OSS and OST use only: for the plan's note."""
    return sorted({q.host or f"rank{q.rank}" for q in requests if topo.group_of(q.host, q.rank) is None})


POLICIES = {Bpio.name: Registration(Bpio, "paper")}
