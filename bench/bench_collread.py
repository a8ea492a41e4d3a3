"""The Lustre-aware collective read of libiez-mpi (docs/libiez.md, "Lustre-aware collective read";
docs/references.md#s003-figs4-5). Ratios against runs of the same job in this run:

    python -m bench collread

- Throughput: iez-bench -a MPIIO -c -r (MPI_File_read_at_all) of a shared file on an emulated
  cluster, 4 OSTs of 1 MiB stripes, block = transfer = stripe as in seed 003's benchmark, with
  IEZ_COLLREAD=lustre against IEZ_COLLREAD=off (MPICH's own collective read), both under
  libiez-mpi. The emulated OSTs are directories of one disk, read from the page cache: there are
  no disk seeks to save here, so this measures what the new read costs (one more copy, the
  exchange), not what it gains on Lustre (the paper's 1.34x to 2.7x).
- Per-call overhead with the new read off: the CPU time of one MPI_File_read_at_all
  (iez-bench-mpicalls, one rank: the calling thread's CPU, so other processes' load does not
  count) under libiez-mpi with IEZ_COLLREAD=off and tracing on, against the same program without
  libiez-mpi (goal: ratio <= 1.01), for 1 MiB reads (seed 003's transfer size) and for 8-byte
  reads, where nothing but the call's own cost is left (no goal: the ns libiez adds per call).

Throughput: two ranks (one per core here: oversubscribed ranks spin in MPI's collectives). Runs
alternate, each going first half of the time; the figure is the median of the pairs' ratios,
with their interquartile range beside it.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

from rich.progress import track

from bench.bench_libiez import plain_env
from bench.bench_mpi import BENCH, MPILIB, PAIRS, RANKS, console, figure, on_cluster, paired_ratio, per_call

REPEATS = 6


def read_phase(mpiexec: str, args: list[str], env: dict[str, str]) -> dict:
    """The read phase of one collective iez-bench run (its JSON report's)."""
    r = subprocess.run([mpiexec, "-n", str(RANKS), str(BENCH), "-a", "MPIIO", "-c", "-r", "--json", *args],
                       capture_output=True, text=True, timeout=600, env=env)
    if r.returncode:
        raise RuntimeError(f"iez-bench failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    (phase,) = json.loads(r.stdout.strip().splitlines()[-1])["phases"]
    return phase


def paired(label: str, mpiexec: str, args: list[str], env_a: dict[str, str],
           env_b: dict[str, str]) -> tuple[list[dict], list[dict]]:
    a: list[dict] = []
    b: list[dict] = []
    for i in track(range(REPEATS), description=label, console=console, transient=True):
        pair = [(a, env_a), (b, env_b)]
        for runs, env in pair if i % 2 else pair[::-1]:
            runs.append(read_phase(mpiexec, args, env))
    return a, b


def report(label: str, a: list[dict], b: list[dict], base: str) -> None:
    ratio, low, high = paired_ratio([p["xfer_s"] for p in a], [p["xfer_s"] for p in b])
    figure(f"{label}: the reads", f"{statistics.median(p['xfer_s'] for p in a) * 1e3:.1f} ms", ratio, base,
           f"(pairs {low:.3f}-{high:.3f})")


def main() -> None:
    on_cluster("iez-bench-collread-", measure)


def measure(mpiexec: str, scratch: Path, cluster: Path) -> None:
    fs = cluster / "fs"
    plan = scratch / "plan"
    plan.write_text(f"#iez-plan 1\n#app=bench\n{fs / 'ssf'}\tS=1048576,c=4\n{fs / 'calls'}\tS=1048576,c=4\n")
    env = {**plain_env(), "LD_PRELOAD": str(MPILIB), "IEZ_EMULATED": str(cluster), "IEZ_APP": "bench",
           "IEZ_TRACE_DIR": str(scratch / "traces"), "IEZ_RUN": "1", "IEZ_PLAN": str(plan)}

    big = ["-b", "1m", "-t", "1m", "-s", "128", "-k", "-o", str(fs / "ssf")]  # 256 MiB
    subprocess.run([mpiexec, "-n", str(RANKS), str(BENCH), "-a", "MPIIO", "-c", "-w", *big], check=True,
                   capture_output=True, env={**env, "IEZ_COLLREAD": "off"})
    console.print(f"collective read throughput (iez-bench -a MPIIO -c -r, {RANKS} ranks, 256 MiB, 4 OSTs, 1 MiB "
                  "stripes and transfers, page cache)")
    a, b = paired("throughput", mpiexec, big, {**env, "IEZ_COLLREAD": "lustre"}, {**env, "IEZ_COLLREAD": "off"})
    report("iez's Lustre-aware read", a, b, "MPICH's collective read")
    console.print(f"  best bandwidth: iez {max(p['bw_mib_s'] for p in a):.0f} MiB/s, "
                  f"MPICH {max(p['bw_mib_s'] for p in b):.0f} MiB/s")

    console.print(f"per-call overhead with the new read off (MPI_File_read_at_all, CPU per call, one rank, "
                  f"{PAIRS} interleaved pairs, median of the pairs' ratios)")
    off = {**env, "IEZ_COLLREAD": "off"}
    for label, size, count in (("1 MiB, IEZ_COLLREAD=off, tracing", 1 << 20, 3000),
                               ("8 B, IEZ_COLLREAD=off, tracing", 8, 200000)):
        per_call(mpiexec, label, fs / "calls", "read_at_all", size, count, off, plain_env(), "without libiez-mpi",
                 "budget <= 1.01" if size > 8 else "")


if __name__ == "__main__":
    main()
