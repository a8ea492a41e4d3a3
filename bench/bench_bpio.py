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
  balanced and BPIO, with 0 and 2 other jobs' creates per IOR create drawn into the MDS's
  allocator stream (`others_per_create`), and BPIO's and balanced's improvement over QoS and RR
  (seed 002's formula); with `--full` at 16, 128, 512 and 2,048 nodes, and at 2,048 over
  others_per_create 0, 0.5, 1, 2 and 4; with `--out DIR` Figs. 2 and 3 and the sweep as PNG files
  there (`--sim-only`: without the placement times; `--jobs N`: N processes, one point each; `--draws N`: rr's and qos's first N seeds).
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from threadpoolctl import threadpool_limits

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, load_cluster
from iez.request import Request
from iez.sim import description, engine
from iez.sim.placement import Cache, place
from iez.sim.results import parse
from iez.sim.scenario import load_scenario, variants
from iez.sim.study import Views, live_view, workloads

ROOT = Path(__file__).resolve().parent.parent
SPIDER = ROOT / "scenarios" / "spider2.toml"
SCENARIO = ROOT / "scenarios" / "seed002-ior.toml"
CLIENTS = (2048, 16384)
REPEAT = 3
SIM_NODES = 2048
FULL_NODES = (16, 128, 512, 2048)  # --full: the range of Figs. 2 and 3 (docs/references.md#s002-improvement)
POLICIES = ("qos", "rr", "balanced", "bpio")
DRAWN = ("qos", "rr")  # random: QoS's weights, RR's start, and the other creates drawn into their stream
SEEDS = (1, 2, 3)  # their draws for the IOR job (`--draws N`: the first N); the background's is seed 0
# Other jobs' creates per IOR create in the MDS's one allocator stream (docs/references.md#l-alloc-shared-state):
# swept at SIM_NODES; with --full, Figs. 2 and 3 at FIG_OTHERS. The paper gives no such rate.
OTHERS = (0.0, 0.5, 1.0, 2.0, 4.0)
FIG_OTHERS = (0.0, 2.0)
PAIRS = (("bpio", "qos"), ("bpio", "rr"), ("balanced", "qos"), ("balanced", "rr"))
STYLE = {"bpio": "o-", "balanced": "x--"}  # balanced's dashed over BPIO's line where they are equal
PAPER_GAIN = 20  # % over the default at large scale (docs/references.md#s002-improvement)
PAPER_BW_2048 = 135.6  # GB/s, POSIX with BPIO at 2,048 nodes (the same)
KEEP = AllocOptions(layout="keep")
TIMED = {"balanced": KEEP, "bpio": KEEP, "balanced+routers": AllocOptions(layout="keep", routers=True), "rr": KEEP}
console = Console(width=150, highlight=False)


def cpu_seconds(name: str, reqs, cluster, snap) -> float:
    policy = get_policy(name.split("+")[0])
    t0 = cpu_time()
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


def simulated(points: list[tuple[int, float]], out: Path | None, workers: int = 1,
              draws: int = len(SEEDS)) -> dict[tuple[int, float, str], float]:
    """IOR's write bandwidth per (nodes, others_per_create, policy) on scenarios/seed002-ior.toml,
    the points run by `workers` processes (each places the background itself)."""
    bw: dict[tuple[int, float, str], float] = {}
    # The costliest first (LOD places every create in Python), so the processes end together.
    todo = [(n, r, draws) for n, r in sorted(points, key=lambda p: -p[0] * (1 + p[1]))]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for got, line in pool.imap_unordered(point, todo):
            bw.update(got)
            console.print(line)
    if out:
        figures(bw, points, out)
    return bw


_CACHE: Cache = {}  # a process's placements: the background's, placed once
_VIEWS: Views = {}  # and its live view, simulated once for balanced and BPIO


def point(at: tuple[int, float, int]) -> tuple[dict[tuple[int, float, str], float], str]:
    """One (nodes, others_per_create) point. The background jobs' files were made before the IOR
    job (the busy system it runs in): placed by QoS with the generator's seed 0. The IOR job's
    files: rr and qos draw (the start index, QoS's weights, the other jobs' creates drawn into the
    stream) with seeds SEEDS, the median run being the figure; balanced and BPIO are
    deterministic, balanced seeing the background's OST rates (the live view). Then the rest of
    `iez sim`'s path (description, engine). Also: the most stripes of the IOR job on one OST."""
    n, others, ndraws = at
    doc, base = load_scenario(SCENARIO)
    doc = {**doc, "sweep": {}, "compare": [], "figure": {}}
    bw: dict[tuple[int, float, str], float] = {}
    notes = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in POLICIES:
            doc["job"] = [dict(j) for j in doc["job"]]
            doc["job"][0].update(ranks=n, placement=policy, others_per_create=others)
            (v,) = variants(doc, base)
            scn = v.scenario
            wls = workloads(scn)
            jobs = list(zip(scn.jobs, wls))
            background = place(scn.cluster, jobs[1:], cache=_CACHE)
            view = live_view(scn, wls, Path(tmp) / "view", _VIEWS)
            draws = []
            for seed in SEEDS[:ndraws] if policy in DRAWN else SEEDS[:1]:
                layouts = place(scn.cluster, jobs, seed, placed=background, cache=_CACHE, view=view)
                desc = description.build(scn, wls, layouts)
                most = max(Counter(o for f in wls[0].files for o in layouts[f.path].plain.osts).values())
                draws.append((parse(engine.run(desc, Path(tmp) / f"{policy}-{seed}")).job("ior").write_bw, most))
            draws.sort()
            bw[n, others, policy], most = draws[len(draws) // 2]
            spread = f"{draws[0][0] / 1e9:.1f}..{draws[-1][0] / 1e9:.1f}, " if len(draws) > 1 else ""
            notes[policy] = f"{policy} {bw[n, others, policy] / 1e9:.2f} ({spread}most on an OST {most})"
    line = (f"{n:>5} nodes, others_per_create {others:g}, IOR write GB/s: " + ", ".join(notes[p] for p in POLICIES)
            + "; " + ", ".join(f"{t} vs {b} {gain(bw, n, others, t, b):+.1f} %" for t, b in PAIRS))
    return bw, line


def gain(bw: dict[tuple[int, float, str], float], n: int, others: float, test: str, base: str) -> float:
    """Seed 002's performance improvement, % (docs/references.md#s002-improvement)."""
    return 100 * (bw[n, others, test] / bw[n, others, base] - 1)


def figures(bw: dict[tuple[int, float, str], float], points: list[tuple[int, float]], out: Path) -> None:
    """Figs. 2 and 3 as simulated, with the paper's statements drawn in (docs/references.md#s002-improvement),
    at each others_per_create they were run at; and the gains against others_per_create at SIM_NODES."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rates = sorted({r for _, r in points if sum(1 for _, q in points if q == r) > 1})
    if rates:
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), sharey=True, squeeze=False)
        for ax, r in zip(axes[0], rates):
            nodes = sorted(n for n, q in points if q == r)
            for t, b in PAIRS:
                ax.plot(nodes, [gain(bw, n, r, t, b) for n in nodes], STYLE[t], label=f"{t} vs {b}")
            ax.axhline(PAPER_GAIN, color="grey", ls="--", label=f"paper: BPIO > {PAPER_GAIN} % over default at large scale")
            ax.axhline(0, color="black", lw=0.5)
            ax.set(xscale="log", xticks=nodes, xticklabels=[str(n) for n in nodes], xlabel="nodes (IOR, one rank a node)",
                   ylabel="improvement, %", title=f"other creates per IOR create: {r:g}")
            ax.legend(fontsize=7)
        fig.suptitle("seed 002 Fig. 2 (simulated): 100 x (BW_test / BW_base - 1)")
        fig.tight_layout()
        fig.savefig(out / "fig2-improvement.png", dpi=110)
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), sharey=True, squeeze=False)
        for ax, r in zip(axes[0], rates):
            nodes = sorted(n for n, q in points if q == r)
            for policy in POLICIES:
                ax.plot(nodes, [bw[n, r, policy] / 1e9 for n in nodes], "o-", label=policy)
            ax.plot([2048], [PAPER_BW_2048], "k*", ms=12, label=f"paper: BPIO, POSIX, 2,048 nodes ({PAPER_BW_2048} GB/s)")
            ax.set(xscale="log", yscale="log", xticks=nodes, xticklabels=[str(n) for n in nodes],
                   xlabel="nodes (IOR, one rank a node)", ylabel="IOR write, GB/s",
                   title=f"other creates per IOR create: {r:g}")
            ax.legend(fontsize=7)
        fig.suptitle("seed 002 Fig. 3 (simulated): bandwidth, POSIX and MPI-IO alike")
        fig.tight_layout()
        fig.savefig(out / "fig3-bandwidth.png", dpi=110)
    swept = sorted(r for n, r in points if n == SIM_NODES)
    fig, ax = plt.subplots(figsize=(7, 4))
    for t, b in PAIRS:
        ax.plot(swept, [gain(bw, SIM_NODES, r, t, b) for r in swept], STYLE[t], label=f"{t} vs {b}")
    ax.axhline(PAPER_GAIN, color="grey", ls="--", label=f"paper: BPIO > {PAPER_GAIN} % over default (its R not given)")
    ax.axhline(0, color="black", lw=0.5)
    ax.set(xlabel="other jobs' creates per IOR create (others_per_create, R)", ylabel="improvement, %",
           title=f"seed 002 at {SIM_NODES:,} nodes: gains against the MDS's other creates")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "others-sweep.png", dpi=110)
    console.print(f"figures in {out}: fig2-improvement.png, fig3-bandwidth.png, others-sweep.png")


def main() -> None:
    args = sys.argv[1:]
    out = Path(args[args.index("--out") + 1]) if "--out" in args else None
    t0 = cpu_time()
    if "--sim-only" not in args:
        placement_times()
    points = [(SIM_NODES, r) for r in FIG_OTHERS]
    if "--full" in args:
        points = [(n, r) for r in FIG_OTHERS for n in FULL_NODES] + [(SIM_NODES, r) for r in OTHERS if r not in FIG_OTHERS]
    def option(name: str, default: int) -> int:
        return int(args[args.index(name) + 1]) if name in args else default

    simulated(points, out, option("--jobs", 1), option("--draws", len(SEEDS)))
    console.print(f"bench CPU time {cpu_time() - t0:.0f} s (the workers' and the engine's included)")


def cpu_time() -> float:
    """This process's CPU seconds and its ended children's (the workers, the engine)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    main()
