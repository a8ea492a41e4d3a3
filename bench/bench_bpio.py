"""BPIO against balanced on a Spider II-size model (scenarios/spider2.toml: 1,008 OSTs, 144 OSSs,
432 LNet routers, docs/references.md#s002-spider, #s002-fgr). Every figure is a ratio against a
baseline measured in the same run.

    python -m bench bpio

- placement time: `bpio`, `balanced` with the router level (`AllocOptions(routers=True)`) and
  Lustre's `rr` for 2,048 and 16,384 clients (one 1 GiB file each, stripe count 4, one client a
  node, the nodes drawn at random over Titan's 12 regions), as ratios of plain `balanced`'s CPU
  time on the same requests (medians of REPEAT interleaved rounds; its seconds, for scale);
- simulated IOR write bandwidth at 2,048 nodes beside two 1,024-node background jobs
  (scenarios/seed002-ior.toml's setting), each policy's against Lustre's RR.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, load_cluster
from iez.request import Request
from iez.sim.scenario import load_scenario, variants
from iez.sim.study import simulate

ROOT = Path(__file__).resolve().parent.parent
SPIDER = ROOT / "scenarios" / "spider2.toml"
SCENARIO = ROOT / "scenarios" / "seed002-ior.toml"
CLIENTS = (2048, 16384)
REPEAT = 3
SIM_NODES = 2048
POLICIES = ("rr", "qos", "balanced", "bpio")
KEEP = AllocOptions(layout="keep")
TIMED = {"balanced": KEEP, "bpio": KEEP, "balanced+routers": AllocOptions(layout="keep", routers=True), "rr": KEEP}
console = Console(width=150, highlight=False)


def cpu_seconds(name: str, reqs, cluster, snap) -> float:
    policy = get_policy(name.split("+")[0])
    t0 = time.process_time()
    policy.place(reqs, cluster, snap, TIMED[name])
    return time.process_time() - t0


def placement_times() -> None:
    cluster = load_cluster(SPIDER)
    snap = Snapshot.from_cluster(cluster)
    nodes = [n for g in cluster.topology.clients for n in g.nodes] if cluster.topology else []
    rng = random.Random(2)
    for n in CLIENTS:
        reqs = [Request(f"/lustre/ior/f{k:06d}", 1 << 30, 4, rank=k, host=rng.choice(nodes), create_time=k)
                for k in range(n)]
        times: dict[str, list[float]] = {name: [] for name in TIMED}
        for _ in range(REPEAT):  # interleaved: the machine's load falls on all alike
            for name in TIMED:
                times[name].append(cpu_seconds(name, reqs, cluster, snap))
        med = {name: statistics.median(t) for name, t in times.items()}
        base = med["balanced"]
        console.print(f"{n:>6} clients, CPU time: balanced {base:.3f} s; "
                      + "; ".join(f"{name} x{med[name] / base:.2f} ({med[name]:.3f} s)" for name in TIMED
                                  if name != "balanced"))


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
