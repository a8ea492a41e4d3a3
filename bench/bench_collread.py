"""The Lustre-aware collective read of libiez-mpi (docs/libiez.md, "Lustre-aware collective read";
docs/references.md#s003-figs4-5). Ratios against runs of the same job in this run:

    python -m bench collread

- Throughput: iez-bench -a MPIIO -c -r (MPI_File_read_at_all) of a shared file on an emulated
  cluster, 4 OSTs of 1 MiB stripes, block = transfer = stripe as in seed 003's benchmark, with
  IEZ_COLLREAD=lustre against IEZ_COLLREAD=off (MPICH's own collective read), both under
  libiez-mpi. The emulated OSTs are directories of one disk, read from the page cache: there are
  no disk seeks to save here, so this measures what the new read costs (one more copy, the
  exchange), not what it gains on Lustre (the paper's 1.34x to 2.7x).
- Per-call overhead with the new read off: 8-byte collective reads (iez-bench -c -r -t 8) under
  libiez-mpi with IEZ_COLLREAD=off and tracing on, against the same job without libiez-mpi
  (goal: time ratio <= 1.01).

Two ranks (one per core here: oversubscribed ranks spin in MPI's collectives). Runs alternate,
each going first half of the time; the best of each is compared, and the median of paired runs
is printed too.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

from rich.progress import track

from bench.bench_libiez import plain_env
from bench.bench_mpi import BENCH, MPILIB, RANKS, console, figure, on_cluster

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


def report(label: str, a: list[dict], b: list[dict], base: str, budget: str) -> None:
    best_a, best_b = min(p["xfer_s"] for p in a), min(p["xfer_s"] for p in b)
    figure(f"{label}: the reads", f"{best_a * 1e3:.1f} ms", best_a / best_b, base, budget)
    med = statistics.median(x["xfer_s"] / y["xfer_s"] for x, y in zip(a, b))
    figure(f"{label}: median of pairs", f"{med:.4f}", med, "its pair", "")


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
    report("iez's Lustre-aware read", a, b, "MPICH's collective read", "")
    console.print(f"  best bandwidth: iez {max(p['bw_mib_s'] for p in a):.0f} MiB/s, "
                  f"MPICH {max(p['bw_mib_s'] for p in b):.0f} MiB/s")

    small = ["-b", "128k", "-t", "8", "-s", "1", "-k", "-o", str(fs / "calls")]
    subprocess.run([mpiexec, "-n", str(RANKS), str(BENCH), "-a", "MPIIO", "-w", *small], check=True,
                   capture_output=True, env={**env, "IEZ_COLLREAD": "off"})
    console.print("per-call overhead with the new read off (8-byte MPI_File_read_at_all, 16384 per rank)")
    a, b = paired("overhead", mpiexec, small, {**env, "IEZ_COLLREAD": "off"}, plain_env())
    report("libiez-mpi, IEZ_COLLREAD=off, tracing", a, b, "without libiez-mpi", "budget <= 1.01")
    per_call = (min(p["xfer_s"] for p in a) - min(p["xfer_s"] for p in b)) / a[0]["ops"] * RANKS
    console.print(f"  {per_call * 1e9:+.0f} ns per call")


if __name__ == "__main__":
    main()
