"""`iez-paper`: seed 000's Algorithm 2 as printed (docs/references.md#s000-alg2), kept for fidelity.

    stripeSize   = Method II (calculateStripeSize)
    ossLoad      = cpuweight * cpu + memweight * mem             per OSS
    ostCostToReach = ossLoad                                      request -> OST arcs
    ostCost      = (totalKbytes - kbytesAvail) / totalKbytes     OST -> sink arcs
    ostCapacity  = kbytesAvail / stripeSize                      OST -> sink capacity
    source -> request: cost 0, capacity stripeCount;  request -> OST: capacity 1
    OSTAllocationList = minCostMaxFlow(graph)                     (networkx)

Why it does not balance: every arc cost is linear and the same for every request. Each OST's
cost is fixed before the flow runs and its sink arc holds many stripes (avail / stripe size),
so the min-cost flow sends every request to the same stripeCount cheapest OSTs; the capacity
only stops it once an OST is full. On an empty cluster all costs tie and the solver's tie
order decides. `balanced` fixes this with costs that rise with each unit placed.

Where we differ from the text, and why:
- ostCapacity uses the largest stripe size of the batch (the printed loop leaves whichever
  request came last), and the room excludes other plans' reservations and the OSP's ENOSPC
  watermark, so no OST is promised more than it can take.
- Only OSTs that can take objects get arcs (active, not excluded, in the request's pool);
  degraded ones only when the pool has too few others. The printed graph reaches every OST.
- networkx's network simplex wants integer costs: costs are scaled by 10**6 and rounded.
- ostCost adds other plans' reserved bytes to the used ones: the controller's global view.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from iez.alloc.policy import AllocOptions, make_placements, room_bytes, tables
from iez.alloc.registry import Registration
from iez.cluster import Cluster, Snapshot
from iez.errors import AllocationError
from iez.request import Placement, Request

COST_SCALE = 10**6


class IezPaper:
    name = "iez-paper"

    def place(self, requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
              options: AllocOptions = AllocOptions()) -> list[Placement]:
        if not requests:
            return []
        # Imported here: networkx takes ~0.6 s to load, and the policy table imports every policy.
        import networkx as nx

        osts, table = tables(requests, cluster, snapshot, options)
        stripe = int(room_bytes(table.write_bytes, table.size, table.count).max())
        capacity = np.floor(osts.room / stripe).astype(np.int64)
        ost_cost = np.rint(osts.used / osts.capacity * COST_SCALE).astype(np.int64)
        to_reach = np.rint(osts.oss_load[osts.oss] * COST_SCALE).astype(np.int64)
        total = int(table.count.sum())

        g = nx.DiGraph()
        g.add_node("source", demand=-total)
        g.add_node("sink", demand=total)
        reach = []
        for pool, allowed in enumerate(table.allowed):
            healthy = allowed & ~osts.degraded
            need = int(table.count[table.pool == pool].max())
            reach.append(np.flatnonzero(healthy if healthy.sum() >= need else allowed))
        for i in range(table.n):
            r = ("request", i)
            g.add_edge("source", r, weight=0, capacity=int(table.count[i]))
            for p in reach[table.pool[i]]:
                g.add_edge(r, ("ost", int(p)), weight=int(to_reach[p]), capacity=1)
        for p in np.flatnonzero(np.isin(np.arange(osts.n), np.concatenate(reach))):
            g.add_edge(("ost", int(p)), "sink", weight=int(ost_cost[p]), capacity=int(capacity[p]))

        flow = nx.max_flow_min_cost(g, "source", "sink")
        placed = sum(flow["source"].values())
        if placed < total:
            raise AllocationError(f"ENOSPC: the OSTs have room for {placed} of the {total} stripes "
                                  f"of {stripe} bytes")
        lists = []
        for i in range(table.n):
            chosen = [int(osts.index[node[1]]) for node, f in flow[("request", i)].items() if f > 0]
            lists.append(tuple(chosen))
        return make_placements(requests, table, lists, self.name)


POLICIES = {IezPaper.name: Registration(IezPaper, "paper")}
