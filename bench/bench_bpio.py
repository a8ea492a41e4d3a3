"""BPIO against balanced on a Spider II-size model (scenarios/spider2.toml: 1,008 OSTs, 144 OSSs,
432 LNet routers, docs/references.md#s002-spider, #s002-fgr). Every figure is a ratio against a
baseline measured in the same run.

    python -m bench bpio

- placement time: `bpio`, `balanced` with the router level (`AllocOptions(routers=True)`) and
  Lustre's `rr` for 2,048 and 16,384 clients (one 1 GiB file each, stripe count 4, one client a
  node, the nodes drawn at random from Titan's), as ratios of plain `balanced`'s CPU
  time on the same requests (one BLAS thread; medians of REPEAT interleaved rounds, rr's single;
  its seconds, for scale);
- simulated IOR write bandwidth at 2,048 nodes beside two 1,024-node background jobs
  (scenarios/seed002-ior.toml's setting) for QoS (Lustre's default on a busy system), RR,
  balanced and BPIO, and BPIO's improvement over QoS and RR (seed 002's formula); with `--full`
  at 16, 128, 512 and 2,048 nodes, and with `--out DIR` Figs. 2 and 3 as PNG files there.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from threadpoolctl import threadpool_limits

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, load_cluster
from iez.layout.layout import FileLayout
from iez.request import Request
from iez.sim import description, engine
from iez.sim.placement import place
from iez.sim.results import parse
from iez.sim.scenario import load_scenario, variants
from iez.sim.study import workloads

ROOT = Path(__file__).resolve().parent.parent
SPIDER = ROOT / "scenarios" / "spider2.toml"
SCENARIO = ROOT / "scenarios" / "seed002-ior.toml"
CLIENTS = (2048, 16384)
REPEAT = 3
SIM_NODES = 2048
FULL_NODES = (16, 128, 512, 2048)  # --full: the range of Figs. 2 and 3 (docs/references.md#s002-improvement)
POLICIES = ("qos", "rr", "balanced", "bpio")
QOS_SEEDS = (1, 2, 3)  # the IOR job's QoS draws; the background's is seed 0
PAPER_GAIN = 20  # % over the default at large scale (docs/references.md#s002-improvement)
PAPER_BW_2048 = 135.6  # GB/s, POSIX with BPIO at 2,048 nodes (the same)
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
        # One BLAS thread: otherwise its idle workers spin after balanced's numpy calls, and the
        # process's CPU time bills their spinning to the next policy timed (bpio x2 at 2,048).
        with threadpool_limits(1):
            for k in range(REPEAT):  # interleaved: the machine's load falls on all alike
                for name in TIMED:
                    if name != "rr" or not k:  # rr once: its LOD model takes a minute at 16,384
                        times[name].append(cpu_seconds(name, reqs, cluster, snap))
        med = {name: statistics.median(t) for name, t in times.items()}
        base = med["balanced"]
        console.print(f"{n:>6} clients, CPU time: balanced {base:.3f} s; "
                      + "; ".join(f"{name} x{med[name] / base:.2f} ({med[name]:.3f} s)" for name in TIMED
                                  if name != "balanced"))


def simulated(nodes: tuple[int, ...], out: Path | None) -> dict[tuple[int, str], float]:
    """IOR's write bandwidth per (nodes, policy) on scenarios/seed002-ior.toml. The background
    jobs' files were made before the IOR job (the busy system it runs in): placed once, by QoS
    with the generator's seed 0; the IOR job's files per run, by QoS with seeds QOS_SEEDS (the
    median run is the figure; QoS is a weighted random choice), then the rest of `iez sim`'s path
    (description, engine)."""
    doc, base = load_scenario(SCENARIO)
    doc = {**doc, "sweep": {}, "compare": [], "figure": {}}
    bw: dict[tuple[int, str], float] = {}
    background: dict[str, FileLayout] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in nodes:
            draws: list[float] = []
            for policy in POLICIES:
                doc["job"] = [dict(j) for j in doc["job"]]
                doc["job"][0].update(ranks=n, placement=policy)
                (v,) = variants(doc, base)
                scn = v.scenario
                wls = workloads(scn)
                jobs = list(zip(scn.jobs, wls))
                background = background or place(scn.cluster, jobs[1:])
                for seed in QOS_SEEDS if policy == "qos" else (1,):
                    desc = description.build(scn, wls, {**background, **place(scn.cluster, jobs[:1], seed)})
                    got = parse(engine.run(desc, Path(tmp) / f"{n}-{policy}-{seed}")).job("ior").write_bw
                    draws += [got] if policy == "qos" else []
                    bw[n, policy] = got
            bw[n, "qos"] = statistics.median(draws)
            console.print(f"{n:>5} nodes, IOR write GB/s: "
                          + ", ".join(f"{p} {bw[n, p] / 1e9:.2f}" for p in POLICIES)
                          + f" (qos over {len(draws)} seeds: {min(draws) / 1e9:.2f}..{max(draws) / 1e9:.2f})"
                          + f"; bpio vs qos {100 * (bw[n, 'bpio'] / bw[n, 'qos'] - 1):+.1f} % "
                          + f"({100 * (bw[n, 'bpio'] / max(draws) - 1):+.1f}..{100 * (bw[n, 'bpio'] / min(draws) - 1):+.1f}), "
                          + f"vs rr {100 * (bw[n, 'bpio'] / bw[n, 'rr'] - 1):+.1f} %")
    if out:
        figures(bw, nodes, out)
    return bw


def figures(bw: dict[tuple[int, str], float], nodes: tuple[int, ...], out: Path) -> None:
    """Figs. 2 and 3 as simulated, with the paper's statements drawn in (docs/references.md#s002-improvement)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    for base in ("qos", "rr"):
        ax.plot(nodes, [100 * (bw[n, "bpio"] / bw[n, base] - 1) for n in nodes], "o-",
                label=f"BPIO vs {base}" + (" (Lustre's default on a busy system)" if base == "qos" else ""))
    ax.axhline(PAPER_GAIN, color="grey", ls="--", label=f"paper: > {PAPER_GAIN} % at large scale")
    ax.set(xscale="log", xticks=nodes, xticklabels=[str(n) for n in nodes], xlabel="nodes (IOR, one rank a node)",
           ylabel="improvement, %", title="seed 002 Fig. 2 (simulated): 100 x (BW_BPIO / BW_default - 1)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig2-improvement.png", dpi=110)
    fig, ax = plt.subplots(figsize=(7, 4))
    for policy in POLICIES:
        ax.plot(nodes, [bw[n, policy] / 1e9 for n in nodes], "o-", label=policy)
    ax.plot([2048], [PAPER_BW_2048], "k*", ms=12, label=f"paper: BPIO, POSIX, 2,048 nodes ({PAPER_BW_2048} GB/s)")
    ax.set(xscale="log", yscale="log", xticks=nodes, xticklabels=[str(n) for n in nodes],
           xlabel="nodes (IOR, one rank a node)", ylabel="IOR write, GB/s",
           title="seed 002 Fig. 3 (simulated): bandwidth, POSIX and MPI-IO alike")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fig3-bandwidth.png", dpi=110)
    console.print(f"figures: {out / 'fig2-improvement.png'}, {out / 'fig3-bandwidth.png'}")


def main() -> None:
    args = sys.argv[1:]
    out = Path(args[args.index("--out") + 1]) if "--out" in args else None
    t0 = time.process_time()
    placement_times()
    simulated(FULL_NODES if "--full" in args else (SIM_NODES,), out)
    console.print(f"bench CPU time {time.process_time() - t0:.0f} s (the engine's, in subprocesses, apart)")


if __name__ == "__main__":
    main()
