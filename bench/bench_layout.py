"""Layouts of shared files, simulated: write and read time of one IOR-like shared file (1 MiB
calls) with 1 to 1,024 writers and 1 GiB to 1 TiB, on the
seed-000 testbed (docs/references.md#s000-testbed: 15 OSTs, 2 clients) and a Spider II-size
cluster (docs/references.md#s002-spider: 1,008 OSTs behind 144 OSSs), under four layouts:

- user: one stripe, placed by Lustre's round-robin (what real logs show for shared files);
- default: the cluster's default stripe count, placed by Lustre's round-robin (LOD);
- auto: `balanced` with `AllocOptions(layout="auto")`, iez's stripe count and size;
- auto+hier: `balanced` with `AllocOptions(layout="hierarchical")`, one component per group of
  writers on disjoint OSTs (docs/references.md#s001-hierarchical).

Three shapes of file (the `case` column):

- block: each writer one contiguous block (IOR -s 1), every writer count and size;
- segmented: IOR -s 16, each writer's bytes in 16 blocks, 16 to 1,024 writers, 64 GiB: the
  policies are told the writers' segments (Request.writer_segments), so `hierarchical` does not
  cut the file and `auto` sizes stripes by the blocks where that pays (docs/layouts.md);
- growth: the file planned at half the bytes it writes and known to grow (the job's `planned`
  and `grows`, Request.grows), every writer count, 64 GiB written: `auto` widens past the plan.

Each figure is the user's time over the layout's (x2.0 = twice as fast), both simulated here.

The bench's clusters differ from their sources in three ways, all so that every layout can be
simulated: OSTs are large enough for 1 TiB on one OST (the user's layout), the Spider II
cluster's default stripe count is 4 (a site default above Lustre's 1), and shared stripes pay
seed004-iocop.toml's extent-lock switch (0.45 ms per 1 MiB grant).

    python -m bench layout
"""

from __future__ import annotations

import tempfile
import tomllib
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from iez.cluster import Cluster, cluster_from_doc
from iez.sim.scenario import Variant, parse_scenario
from iez.sim.study import Run, simulate

GIB = 1 << 30
ROOT = Path(__file__).resolve().parent.parent
WRITERS = (1, 16, 128, 1024)
SIZES = (GIB, 64 * GIB, 1024 * GIB)
SEGMENTS = 16  # the segmented case's IOR -s
CASES = {  # name: (writer counts, sizes, job keys)
    "block": (WRITERS, SIZES, {}),
    "segmented": (WRITERS[1:], (64 * GIB,), {"segments": SEGMENTS}),
    "growth": (WRITERS, (64 * GIB,), {"planned": 0.5, "grows": True}),
}
LAYOUTS = {  # name: (placement policy, AllocOptions.layout, stripe count: 0 = the cluster's default)
    "user": ("rr", "keep", 1),
    "default": ("rr", "keep", 0),
    "auto": ("balanced", "auto", 1),
    "auto+hier": ("balanced", "hierarchical", 1),
}
LOCK_SWITCH = "0.45ms"  # seed004-iocop.toml's calibration for a modern fabric
console = Console(width=150)


def testbed() -> tuple[Cluster, int, dict]:
    """The seed-000 testbed as scenarios/seed000-testbed.toml has it, with 2 TiB OSTs; 2 clients."""
    doc = tomllib.loads((ROOT / "scenarios" / "seed000-testbed.toml").read_text())
    doc["ost_defaults"]["size"] = "2TiB"
    return cluster_from_doc(doc), 2, {"client_nic_bw": 1.25e9}


def spider2() -> tuple[Cluster, int, dict]:
    """144 OSSs x 7 OSTs, the device and network figures of bench_sim.py; 16 ranks a node (Titan)."""
    doc = {"fsname": "spider", "defaults": {"stripe_count": 4},
           "ost_defaults": {"size": "16TiB", "write_bw": 1.0e9, "read_bw": 1.2e9},
           "oss": [{"name": f"oss{s}", "osts": list(range(7 * s, 7 * s + 7)), "nic_bw": 12.5e9} for s in range(144)]}
    return cluster_from_doc(doc), 0, {"client_nic_bw": 6.8e9}


def run_one(cluster: Cluster, clients: int, sim: dict, writers: int, size: int, layout: str, wd: Path,
            case: str = "block") -> Run:
    policy, option, count = LAYOUTS[layout]
    keys = CASES[case][2]
    # The testbed's two clients carry every writer; on Spider II each node runs 16 ranks.
    per_node = -(-writers // clients) if clients else 16
    job = {"name": "ssf", "kind": "ior", "mode": "ssf", "ranks": writers, "ranks_per_node": per_node,
           "block": size // writers // keys.get("segments", 1), "transfer": "1MiB", "read": True,
           "placement": policy, "layout": option, "stripe_count": count or cluster.default_stripe_count, **keys}
    scn = parse_scenario({"sim": {**sim, "lock_switch": LOCK_SWITCH}, "job": [job]}, ROOT)
    scn = replace(scn, cluster=cluster)
    return simulate(Variant(layout, {}, scn), wd)


def times(r: Run) -> tuple[float, float]:
    w, rd = (next(p for p in r.results.jobs[0].phases if p.kind == k) for k in ("write", "read"))
    return w.end - w.start, rd.end - rd.start


def osts_used(r: Run) -> int:
    return len({s[1] for ph in r.description["jobs"][0]["phases"] for s in ph["streams"]})


def main() -> None:
    clusters = {"seed-000 testbed": testbed(), "Spider II-size": spider2()}
    cases = [(c, case, w, s) for c in clusters for case, (ws, ss, _) in CASES.items() for w in ws for s in ss]
    rows: dict[tuple[str, str, int, int], dict[str, Run]] = {}
    with tempfile.TemporaryDirectory() as tmp, \
            Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     console=console, transient=True) as prog:
        task = prog.add_task("simulating", total=len(cases) * len(LAYOUTS))
        for c, case, w, s in cases:
            cluster, clients, sim = clusters[c]
            for lay in LAYOUTS:
                prog.update(task, description=f"{c}: {case}, {w} writers, {s // GIB} GiB, {lay}")
                rows.setdefault((c, case, w, s), {})[lay] = run_one(cluster, clients, sim, w, s, lay,
                                                                   Path(tmp) / "run", case)
                prog.advance(task)
    table = Table(title="shared-file layouts, simulated: the user's time / the layout's (write, read)")
    for col in ("cluster", "case", "writers", "size", "user write s", "user read s"):
        table.add_column(col, justify="left" if col in ("cluster", "case") else "right")
    for lay in list(LAYOUTS)[1:]:
        table.add_column(f"{lay} (OSTs)", justify="right")
    for (c, case, w, s), runs in rows.items():
        uw, ur = times(runs["user"])
        cells = []
        for lay in list(LAYOUTS)[1:]:
            lw, lr = times(runs[lay])
            cells.append(f"x{uw / lw:.2f} / x{ur / lr:.2f} ({osts_used(runs[lay])})")
        table.add_row(c, case, str(w), f"{s // GIB} GiB", f"{uw:.1f}", f"{ur:.1f}", *cells)
    console.print(table)


if __name__ == "__main__":
    main()
