"""Split writing's collective write under libiez-mpi (docs/libiez.md, "Split writing";
docs/references.md#s001-hierarchical). Ratios against runs of the same job in this run:

    python -m bench splitwrite

iez-bench -a MPIIO -c -w (MPI_File_write_at_all) of an IOR shared file with interleaved
segments (rank r writes block r of every segment: each aggregator's data come from every rank),
placed by the plan in one PFL component per rank on its own OSTs, on an emulated cluster, under
libiez-mpi with IEZ_SPLIT=aggregate (libiez's own aggregation, one aggregator per component),
IEZ_SPLIT=hints (ROMIO's two-phase write with the split hints) and IEZ_SPLIT=off (MPICH's own
collective write with its defaults: one aggregator per host). The emulated OSTs are directories of
one disk, written through the page cache: there are no OSTs to keep apart here, so this measures
what each write costs (the exchange, the copies, the writes' sizes), not the gain on Lustre of
keeping each aggregator on one component's OSTs (seed 001's up to 220 %).

Two ranks (one per core here: oversubscribed ranks spin in MPI's collectives). Each repeat runs the
three modes in a rotated order; the best of each is compared, and the median of the per-repeat
ratios is printed too.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from rich.progress import track

from bench.bench_libiez import plain_env
from bench.bench_mpi import MPILIB, RANKS, console, figure, job, on_cluster

REPEATS = 6
MiB = 1 << 20
SEGMENTS, BLOCK = 64, MiB  # 128 MiB with two ranks
MODES = ("aggregate", "hints", "off")


def layout(ranks: int) -> str:
    """One component per rank's share of the file, two 1 MiB stripes each, on its own OSTs."""
    comp = SEGMENTS * BLOCK
    return ";".join(f"{g * comp}-{(g + 1) * comp if g < ranks - 1 else 'EOF'}/S={MiB},c=2,o={2 * g}:{2 * g + 1}"
                    for g in range(ranks))


def write_phase(mpiexec: str, out: Path, env: dict[str, str]) -> dict:
    """The write phase of one collective iez-bench run; the file is created anew each time, so
    that the plan places it and split writing applies."""
    out.unlink(missing_ok=True)
    args = ["-c", "-b", f"{BLOCK >> 20}m", "-t", f"{BLOCK >> 20}m", "-s", str(SEGMENTS), "-k", "-o", str(out)]
    return job(mpiexec, RANKS, args, env)


def main() -> None:
    on_cluster("iez-bench-splitwrite-", measure)


def measure(mpiexec: str, scratch: Path, cluster: Path) -> None:
    out = cluster / "fs" / "ssf"
    plan = scratch / "plan"
    plan.write_text(f"#iez-plan 1\n#app=bench\n{out}\t{layout(RANKS)}\n")
    env = {**plain_env(), "LD_PRELOAD": str(MPILIB), "IEZ_EMULATED": str(cluster), "IEZ_APP": "bench",
           "IEZ_MODE": "place", "IEZ_PLAN": str(plan), "IEZ_LOG": str(scratch / "libiez.log")}
    console.print(f"collective write throughput (iez-bench -a MPIIO -c -w, {RANKS} ranks, {SEGMENTS} interleaved "
                  f"segments of {BLOCK >> 20} MiB per rank, one component per rank, page cache)")
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for i in track(range(REPEATS), description="modes", console=console, transient=True):
        for mode in MODES[i % 3:] + MODES[:i % 3]:
            runs[mode].append(write_phase(mpiexec, out, {**env, "IEZ_SPLIT": mode}))
    log = (scratch / "libiez.log").read_text() if (scratch / "libiez.log").exists() else ""
    if "MPI's own write" in log:
        raise RuntimeError(f"libiez's aggregation fell back to MPI's write: {log.strip()[-300:]}")
    best = {m: min(p["xfer_s"] for p in runs[m]) for m in MODES}
    for mode in ("aggregate", "hints"):
        figure(f"IEZ_SPLIT={mode}: the writes", f"{best[mode] * 1e3:.1f} ms", best[mode] / best["off"],
               "MPICH's own (off)", "")
        med = statistics.median(x["xfer_s"] / y["xfer_s"] for x, y in zip(runs[mode], runs["off"]))
        figure(f"IEZ_SPLIT={mode}: median of repeats", f"{med:.4f}", med, "its repeat's off", "")
    figure("aggregate against hints", f"{best['aggregate'] * 1e3:.1f} ms", best["aggregate"] / best["hints"],
           "ROMIO with the hints", "")
    console.print("  best bandwidth: " + ", ".join(f"{m} {max(p['bw_mib_s'] for p in runs[m]):.0f} MiB/s"
                                                   for m in MODES))


if __name__ == "__main__":
    main()
