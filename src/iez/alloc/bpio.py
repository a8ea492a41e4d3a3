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
Pure: plain data in, placements out. Each stripe costs a few operations on heaps of path costs
(`Use`), not a pass over every OST.
"""

from __future__ import annotations

import heapq
import math
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
    for g in topo.clients:
        lists: list[list[int]] = [[] for _ in cluster.osses]
        for name in g.routers:
            for s in behind[rpos[name]]:
                lists[s].append(rpos[name])
        width = max(1, max(len(x) for x in lists))
        cand[g.name] = np.array([x + [-1] * (width - len(x)) for x in lists], dtype=np.int64)
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
        use = Use(osts, cluster, paths(topo, cluster) if topo else None, self.w)
        room = osts.room.tolist()
        lists: list[tuple[int, ...]] = [()] * len(requests)
        notes = list(table.notes)
        # Every stripe's bytes at once: request i's stripes start at first[i].
        counts = table.count.astype(np.int64)
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        at = np.repeat(np.arange(len(counts)), counts)
        each = stripe_bytes(table.write_bytes[at], table.size[at], counts[at], np.arange(len(at)) - first[at]).tolist()
        for i in table.order.tolist():
            r = requests[i]
            group = topo.group_of(r.host, r.rank) if topo else None
            if topo and group is None:
                why = (f"bpio: node {r.host or f'rank{r.rank}'} (rank {r.rank}) is not in the topology: "
                       "placed by OSS and OST use only")
                notes[i] = f"{notes[i]}; {why}" if notes[i] else why
            count = int(table.count[i])
            needs = each[first[i]:first[i] + count]
            key = (use.same[group.name] if group is not None else None, int(table.pool[i]))
            chosen: list[int] = []
            for k, need in enumerate(needs):
                p = use.cheapest(key, table.allowed, room, need)  # and counts its path
                if p < 0:
                    raise AllocationError(f"ENOSPC: no OST has room for stripe {k} of {r.path} "
                                          f"({need} bytes)", errno="ENOSPC")
                room[p] -= need
                chosen.append(p)
            use.release(table.allowed)
            lists[i] = tuple(int(osts.index[p]) for p in chosen)
        return make_placements(requests, replace(table, notes=tuple(notes)), lists, self.name)


Key = tuple[str | None, int]  # (client group, or None for a node without routers; pool position)
Entry = tuple[float, int, float]  # an OST in its class's heap: (rounded X, position, X)


class Use:
    """The application's use of each resource so far, and lazy min-heaps of path costs, so a
    stripe costs a few heap operations instead of a pass over every OST.

    cost(group, OST) = R(group, class) + X(OST): X is the OSS and OST terms, the same for every
    client; R the cheapest router term from the group to the OST's class, the OSSs served by the
    same routers (on Spider II, a leaf switch's). Two levels of heaps, per pool and health: per
    class, its OSTs by X; per client group, the classes by R + their cheapest OST. Counts only
    rise, so costs only rise: a key is a lower bound, and a popped key that is still the cost is
    the minimum (stale ones are re-costed and pushed back). Costs are rounded to 1e-9 so that
    paths of equal cost tie whatever the floating-point order of their terms, and the first OST
    in cluster order wins. OSTs the file already uses, or without room for the stripe, are set
    aside and put back after the file or the stripe."""

    def __init__(self, osts: OstTable, cluster: Cluster, pth: Paths | None, w: Mapping[str, float]):
        self.w = w
        self.w_oss, self.w_ost = w["oss"], w["ost"]
        self.oss = osts.oss.tolist()
        self.degraded = osts.degraded.tolist()
        self.oss_fan = np.bincount(osts.oss, minlength=len(cluster.osses)).astype(float).tolist()
        self.n_ost = [0.0] * osts.n
        self.n_oss = [0.0] * len(cluster.osses)
        # An OSS's class: the OSSs served by the same routers (all of them without topology).
        serving: list[tuple[int, ...]] = [()] * len(cluster.osses)
        self.cand: dict[str, list[list[int]]] = {}
        if pth is not None:
            self.rgroup = pth.rgroup.tolist()
            self.router_fan = pth.router_fan.tolist()
            self.rgroup_fan = pth.rgroup_fan.tolist()
            self.n_router = [0.0] * len(self.rgroup)
            self.n_rgroup = [0.0] * len(self.rgroup_fan)
            serving = [tuple(r) for r in pth.serving]
            # per client group, per OSS: the routers serving it that the group reaches
            self.cand = {g: [[int(x) for x in row if x >= 0] for row in c.tolist()] for g, c in pth.cand.items()}
        # Groups reaching the same routers have the same costs: one set of heaps for them all.
        first: dict[str, str] = {}
        self.same = {g: first.setdefault(repr(c), g) for g, c in self.cand.items()}
        ids = {k: n for n, k in enumerate(dict.fromkeys(serving))}
        self.cls_of = [ids[serving[self.oss[p]]] for p in range(osts.n)]
        self.rep = [serving.index(k) for k in ids]  # an OSS of each class
        self.classes: dict[tuple[int, int, bool], list[Entry]] = {}  # (class, pool, degraded)
        self.groups: dict[tuple[str | None, int, bool], list[tuple[bool, float, int, int, int]]] = {}
        self.version: dict[tuple[str | None, int, bool], list[int]] = {}
        self.held: list[tuple[tuple[int, int, bool], Entry]] = []  # the file's OSTs

    def route(self, group: str | None, c: int) -> tuple[float, int]:
        """The cheapest router from `group` to class c and its cost term (inf, -1: none; 0, -1
        for a client without routers)."""
        if group is None:
            return 0.0, -1
        best, pick = math.inf, -1
        w_rg, w_r = self.w["router_group"], self.w["router"]
        for r in self.cand[group][self.rep[c]]:
            g = self.rgroup[r]
            v = w_rg * (self.n_rgroup[g] / self.rgroup_fan[g]) + w_r * self.n_router[r] / self.router_fan[r]
            if v < best:
                best, pick = v, r
        return best, pick

    @staticmethod
    def key(route: float, x: float) -> tuple[bool, float]:
        """A path's place in a group's heap: those the group reaches through no router last,
        by their own cost."""
        return (False, round(route + x, 9)) if route < math.inf else (True, round(x, 9))

    def x(self, p: int) -> float:
        s = self.oss[p]
        return self.w_oss * self.n_oss[s] / self.oss_fan[s] + self.w_ost * self.n_ost[p]

    def entry(self, p: int) -> Entry:
        x = self.x(p)
        return round(x, 9), p, x

    def class_heap(self, ck: tuple[int, int, bool], allowed: list[np.ndarray]) -> list[Entry]:
        h = self.classes.get(ck)
        if h is None:
            c, pool, degraded = ck
            h = [self.entry(p) for p in np.flatnonzero(allowed[pool]).tolist()
                 if self.cls_of[p] == c and self.degraded[p] == degraded]
            heapq.heapify(h)
            self.classes[ck] = h
        return h

    def group_heap(self, gk: tuple[str | None, int, bool], allowed: list[np.ndarray]) -> list:
        h = self.groups.get(gk)
        if h is None:
            self.groups[gk], self.version[gk] = h, _ = [], [0] * len(self.rep)
            for c in range(len(self.rep)):
                self.refresh(gk, c, allowed)
        return h

    def refresh(self, gk: tuple[str | None, int, bool], c: int, allowed: list[np.ndarray],
                route: float | None = None) -> None:
        """Push class c's entry into a client group's heap from its class heap's top (a lower
        bound), with the group's router term to it (`route`, else computed)."""
        h = self.class_heap((c, gk[1], gk[2]), allowed)
        if h:
            _, p, x = h[0]
            v = self.version[gk]
            v[c] += 1
            r = self.route(gk[0], c)[0] if route is None else route
            heapq.heappush(self.groups[gk], (*self.key(r, x), p, c, v[c]))

    def top(self, h: list[Entry], room: list[int], need: int, full: list[Entry]) -> Entry | None:
        """The class heap's cheapest OST with room for `need` (set aside in `full` those without)."""
        oss, n_oss, oss_fan, n_ost, w_oss, w_ost = self.oss, self.n_oss, self.oss_fan, self.n_ost, self.w_oss, self.w_ost
        while h:
            e = h[0]
            p = e[1]
            s = oss[p]
            x = w_oss * n_oss[s] / oss_fan[s] + w_ost * n_ost[p]  # self.x(p), inline: the hot loop
            if x != e[2]:
                heapq.heapreplace(h, (round(x, 9), p, x))
            elif room[p] < need:
                full.append(heapq.heappop(h))
            else:
                return e
        return None

    def put_back(self, ck: tuple[int, int, bool], entries: list[Entry], allowed: list[np.ndarray]) -> None:
        """Return set-aside OSTs to their class heap; where one is cheaper than the class's top,
        the groups' entries for the class are no longer lower bounds: refresh them."""
        h = self.class_heap(ck, allowed)
        lower = not h or min(entries) < h[0]
        for e in entries:
            heapq.heappush(h, e)
        if lower:
            for gk in self.groups:
                if gk[1:] == ck[1:]:
                    self.refresh(gk, ck[0], allowed)

    def cheapest(self, key: Key, allowed: list[np.ndarray], room: list[int], need: int) -> int:
        """The cheapest OST (ties: the first in cluster order) that the file does not use and that
        has room for `need`, healthy ones first, degraded ones as the last resort; one more
        stripe through its path. -1 if none."""
        group, pool = key
        for degraded in (False, True):
            gk = (group, pool, degraded)
            h = self.group_heap(gk, allowed)
            version = self.version[gk]
            full: list[Entry] = []
            found = -1
            while h:
                far, cost, p, c, v = heapq.heappop(h)
                if v != version[c]:
                    continue
                ch = self.classes[(c, pool, degraded)]
                t = self.top(ch, room, need, full)
                if t is None:
                    continue  # back with the class's set-aside OSTs
                r, pick = self.route(group, c)
                now = self.key(r, t[2])
                if now != (far, cost) or t[1] != p:
                    version[c] += 1
                    heapq.heappush(h, (*now, t[1], c, version[c]))
                    continue
                self.held.append(((c, pool, degraded), heapq.heappop(ch)))
                self.refresh(gk, c, allowed, r)
                self.count(p, pick)
                found = p
                break
            for c in dict.fromkeys(self.cls_of[e[1]] for e in full):
                self.put_back((c, pool, degraded), [e for e in full if self.cls_of[e[1]] == c], allowed)
            if found >= 0:
                return found
        return -1

    def count(self, p: int, router: int) -> None:
        """One more stripe through OST p (and `router`, unless -1)."""
        self.n_ost[p] += 1
        self.n_oss[self.oss[p]] += 1
        if router >= 0:
            self.n_router[router] += 1
            self.n_rgroup[self.rgroup[router]] += 1

    def release(self, allowed: list[np.ndarray]) -> None:
        """The file is placed: its OSTs go back into their class heaps, re-costed."""
        held, self.held = self.held, []
        for ck, e in held:
            self.put_back(ck, [self.entry(e[1])], allowed)


def off_topology(requests: Sequence[Request], topo: Topology) -> list[str]:
    """The creators (node, else `rank N`) of requests whose client the topology does not list,
    which bpio places by OSS and OST use only: for the plan's note."""
    return sorted({q.host or f"rank{q.rank}" for q in requests if topo.group_of(q.host, q.rank) is None})


POLICIES = {Bpio.name: Registration(Bpio, "paper")}
