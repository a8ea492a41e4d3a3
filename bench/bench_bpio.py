"""BPIO against balanced on a Spider II-size model (scenarios/spider2.toml: 1,008 OSTs, 144 OSSs,
432 LNet routers, docs/references.md#s002-spider, #s002-fgr). Every figure is a ratio against a
baseline measured in the same run.

    python -m bench bpio

- placement time: `bpio` and `balanced` with the router level (`Balanced(routers=True)`) for
  2,048 and 16,384 clients (one 1 GiB file each, stripe count 4, one client a node), as ratios of
  plain `balanced`'s time on the same requests (and its seconds, for scale);
- simulated IOR write bandwidth at 2,048 nodes beside two 1,024-node background jobs
  (scenarios/seed002-ior.toml's setting), each policy's against Lustre's RR.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.console import Console

from iez.alloc.balanced import Balanced
from iez.alloc.bpio import Bpio
from iez.alloc.policy import AllocOptions
from iez.cluster import Snapshot, load_cluster
from iez.request import Request
from iez.sim.scenario import load_scenario, variants
from iez.sim.study import simulate

ROOT = Path(__file__).resolve().parent.parent
SPIDER = ROOT / "scenarios" / "spider2.toml"
SCENARIO = ROOT / "scenarios" / "seed002-ior.toml"
CLIENTS = (2048, 16384)
SIM_NODES = 2048
POLICIES = ("rr", "qos", "balanced", "bpio")
console = Console(width=150, highlight=False)


def timed(policy, reqs, cluster, snap) -> float:
    t0 = time.perf_counter()
    policy.place(reqs, cluster, snap, AllocOptions(layout="keep"))
    return time.perf_counter() - t0


def placement_times() -> None:
    cluster = load_cluster(SPIDER)
    snap = Snapshot.from_cluster(cluster)
    nodes = [n for g in cluster.topology.clients for n in g.nodes] if cluster.topology else []
    for n in CLIENTS:
        reqs = [Request(f"/lustre/ior/f{k:06d}", 1 << 30, 4, rank=k, host=nodes[k % len(nodes)], create_time=k)
                for k in range(n)]
        base = timed(Balanced(), reqs, cluster, snap)
        bpio = timed(Bpio(), reqs, cluster, snap)
        routed = timed(Balanced(routers=True), reqs, cluster, snap)
        console.print(f"{n:>6} clients: balanced {base:.2f} s; bpio x{bpio / base:.1f} ({bpio:.2f} s); "
                      f"balanced+routers x{routed / base:.2f}")


def simulated() -> None:
    doc, base = load_scenario(SCENARIO)
    doc = {**doc, "sweep": {}, "compare": [], "figure": {}}
    doc["job"] = [dict(j) for j in doc["job"]]
    doc["job"][0]["ranks"] = SIM_NODES
    bw = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in POLICIES:
            doc["job"][0]["placement"] = policy
            (v,) = variants(doc, base)
            bw[policy] = simulate(v, Path(tmp) / policy).results.job("ior").write_bw
    console.print(f"IOR write at {SIM_NODES} nodes, against RR ({bw['rr'] / 1e9:.1f} GB/s): "
                  + ", ".join(f"{p} x{bw[p] / bw['rr']:.3f}" for p in POLICIES if p != "rr"))


def main() -> None:
    placement_times()
    simulated()


if __name__ == "__main__":
    main()
