"""The engine's input (docs/simulator.md, "Description format"), built from a scenario.

The platform comes from the cluster model plus `[sim]`; each job's extents go through the RAID-0
mapping of its files' layouts and become streams, one per (client node, OST object): the bytes
one node moves to or from one stripe of one file in one phase. A stripe that two or more nodes
write is a shared object, on which extent locks can contend. Pure: dicts in, dicts out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from iez.cluster import Cluster
from iez.errors import ConfigError
from iez.layout.layout import FileLayout
from iez.layout.raid0 import range_bytes
from iez.sim.collread import two_phase
from iez.sim.scenario import Scenario
from iez.sim.workload import Phase, Workload

FORMAT = "iez-sim/1"


def client_names(cluster: Cluster, n: int) -> list[str]:
    """The simulated client nodes' names: the topology's nodes in order (docs/cluster-toml.md,
    "Topology"), else c00000, c00001, ..."""
    if cluster.topology is None:
        return [f"c{k:05d}" for k in range(n)]
    nodes = [name for g in cluster.topology.clients for name in g.nodes]
    if n > len(nodes):
        raise ConfigError(f"the jobs need {n} client nodes but the cluster's topology lists {len(nodes)}")
    return nodes[:n]


class Routes:
    """Fine-grained routing: the router a client's stream to an OST crosses, among those its client
    group reaches that serve the OST's OSS (LNet spreads peers over them: by node here)."""

    def __init__(self, cluster: Cluster, names: list[str]):
        topo = cluster.topology
        assert topo is not None
        pos = {r.name: k for k, r in enumerate(topo.routers)}
        self.oss = {o.index: o.oss for o in cluster.osts}
        self.group = [topo.group_of(n, -1) for n in names]
        self.reach: dict[tuple[str, str], list[int]] = {}
        for g in topo.clients:
            for name in g.routers:
                r = topo.routers[pos[name]]
                for s in r.osses:
                    self.reach.setdefault((g.name, s), []).append(pos[name])
        self.routes = [[pos[r] for r in g.routers] if g else [] for g in self.group]

    def via(self, node: int, ost: int) -> int:
        g = self.group[node]
        cand = self.reach.get((g.name, self.oss[ost]), []) if g else []
        if not cand:
            raise ConfigError(f"client node {node} reaches OST {ost} through no router of the topology")
        return cand[node % len(cand)]


def platform(scn: Scenario, n_clients: int, routes: Routes | None = None) -> dict[str, Any]:
    c, sim = scn.cluster, scn.sim
    if sim.clients and sim.clients < n_clients:
        raise ConfigError(f"the jobs need {n_clients} client nodes but sim.clients is {sim.clients}")
    if sim.lnet_routers and c.topology:
        raise ConfigError("sim.lnet_routers: the cluster has a topology, whose routers the simulator uses")
    n = max(n_clients, sim.clients)
    oss_pos = {s.name: k for k, s in enumerate(c.osses)}
    names = client_names(c, n)
    p: dict[str, Any] = {
        "osses": [{"name": s.name, "nic_bw": s.nic_bw} for s in c.osses],
        "osts": [{"index": o.index, "oss": oss_pos[o.oss], "read_bw": o.read_bw, "write_bw": o.write_bw}
                 for o in c.osts],
        "clients": [{"name": names[k], "nic_bw": sim.client_nic_bw,
                     **({"router": k % sim.lnet_routers} if sim.lnet_routers else {}),
                     **({"routes": routes.routes[k]} if routes else {})} for k in range(n)],
        "mds": {"create_rate": sim.mds_create_rate or c.mds.create_rate, "open_rate": sim.mds_open_rate},
    }
    if sim.lnet_routers:
        p["routers"] = [{"name": f"rtr{k}", "bw": sim.lnet_router_bw} for k in range(sim.lnet_routers)]
    if c.topology:
        p["routers"] = [{"name": r.name, "bw": r.bw} for r in c.topology.routers]
    if sim.fabric_bw:
        p["fabric_bw"] = sim.fabric_bw
    if sim.contention:
        p["contention"] = [list(pt) for pt in sim.contention]
    return p


def _shared_paths(wl: Workload) -> set[str]:
    nodes: dict[str, set[int]] = defaultdict(set)
    for ph in wl.phases:
        for e in ph.extents:
            nodes[e.path].add(wl.node_of(e.rank))
    return {p for p, n in nodes.items() if len(n) > 1}


def _phase(ph: Phase, wl: Workload, layouts: dict[str, FileLayout], objects: dict[tuple[str, int, int], int],
           shared: set[str], ost_ok: set[int], first: int, routes: Routes | None) -> dict[str, Any]:
    if ph.kind == "compute":
        return {"kind": "compute", "label": ph.label, "seconds": ph.seconds}
    for e in ph.extents:
        if e.path not in layouts:
            raise ConfigError(f"job {wl.name}: no layout for {e.path}")
    # Bytes each node moves on each (file, component, stripe): its own extents, or in a two-phase
    # collective read what its aggregators read for every rank (iez.sim.collread).
    pieces: dict[tuple[int, str, int, int], int] = defaultdict(int)
    exchange: dict[tuple[int, int], int] = {}
    if ph.collective_read != "off":
        tp = two_phase(ph.collective_read, ph.extents, layouts, wl.node_of)
        pieces.update(tp.reads)
        exchange = tp.exchange
    else:
        for e in ph.extents:
            for (c, s), n in range_bytes(layouts[e.path], e.offset, e.offset + e.length).items():
                pieces[(wl.node_of(e.rank), e.path, c, s)] += n
    streams: dict[tuple[int, int, int], int] = defaultdict(int)
    grant = 0
    for (node, path, c, s), n in pieces.items():
        lay = layouts[path].parts()[c].layout
        ost = lay.osts[s]
        if ost not in ost_ok:
            raise ConfigError(f"job {wl.name}: {path} is placed on OST {ost}, which the cluster does not have")
        obj = -1
        if path in shared:
            obj = objects.setdefault((path, c, s), len(objects))
            # One lock grant covers one call's extent on one stripe at most.
            grant = max(grant, min(ph.call_size, lay.stripe_size) if ph.call_size else lay.stripe_size)
        streams[(node, ost, obj)] += n
    out: dict[str, Any] = {
        "kind": ph.kind, "label": ph.label, "calls": ph.calls, "call_size": ph.call_size,
        "streams": [[node, ost, n, obj, *([routes.via(first + node, ost)] if routes else [])]
                    for (node, ost, obj), n in sorted(streams.items())],
    }
    if grant:
        out["grant"] = grant
    if exchange:
        out["exchange"] = [[a, b, n] for (a, b), n in sorted(exchange.items())]
    for key, counts in (("creates", ph.creates), ("opens", ph.opens)):
        per_node: dict[int, int] = defaultdict(int)
        for rank, k in counts:
            per_node[wl.node_of(rank)] += k
        if per_node:
            out[key] = [[node, k] for node, k in sorted(per_node.items())]
    return out


def build(scn: Scenario, workloads: list[Workload], layouts: dict[str, FileLayout]) -> dict[str, Any]:
    """The description of one run: `workloads[k]` is the workload of `scn.jobs[k]`."""
    jobs = []
    objects: dict[tuple[str, int, int], int] = {}
    ost_ok = set(scn.cluster.ost_indices())
    n = max(sum(wl.nodes for wl in workloads), scn.sim.clients)
    routes = Routes(scn.cluster, client_names(scn.cluster, n)) if scn.cluster.topology else None
    first = 0
    for entry, wl in zip(scn.jobs, workloads):
        shared = _shared_paths(wl)
        job: dict[str, Any] = {
            "name": wl.name, "submit": entry.submit, "nodes": list(range(first, first + wl.nodes)),
            "phases": [_phase(ph, wl, layouts, objects, shared, ost_ok, first, routes) for ph in wl.phases],
        }
        if entry.windows:
            job["windows"] = [list(w) for w in entry.windows]
        first += wl.nodes
        jobs.append(job)
    sim = scn.sim
    return {
        "format": FORMAT,
        "engine": {"optim": sim.optim},
        "platform": platform(scn, first, routes),
        "io": {"rpc_size": sim.rpc_size, "rpcs_in_flight": sim.rpcs_in_flight, "rpc_rtt": sim.rpc_rtt,
               "lock_switch": sim.lock_switch, "call_overhead": sim.call_overhead,
               "osc_overhead": sim.osc_overhead},
        "access": {"granularity": scn.access.granularity, "overhead": scn.access.overhead},
        "jobs": jobs,
    }
