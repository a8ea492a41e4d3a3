"""libiez-mpi performance. Every figure is a ratio against the same MPI job run without
libiez in this run, with its budget beside it.

    python -m bench mpi

- MPI-IO throughput: iez-bench -a MPIIO under mpiexec (2 ranks, one per core of the test
  machine) on an emulated cluster, traced and placed by libiez-mpi, against the same job without
  LD_PRELOAD (budget: time ratio <= 1.01, i.e. bandwidth at least 1/1.01 of it), for the writes
  and for the whole phase, whose open also places the file (a fixed cost per create, which the
  page cache's speed here makes look large). One shared file of 1 GiB with 1 MiB independent
  writes, and files per process with 16 KiB writes, where libiez's cost per call shows most.
- MPI_File_open for 8 ranks: the write phase's open time as iez-bench measures it (latest open
  end minus earliest start), a shared file placed by rank 0 from the plan, and 8 files per
  process each placed by its rank, against the plain opens.

The files go to a directory on disk (an MPI process's /dev/shm files are not traced), written to
the page cache. Runs alternate with and without libiez, each going first half of the time, and
the best of each is compared (the machine may be shared); the median of paired runs is printed
too.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import track

from bench.bench_libiez import plain_env
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "bench_app" / "iez-bench"
MPILIB = ROOT / "build" / "libiez" / "libiez-mpi.so"
REPEATS = 8
RANKS = 2  # one per core here: oversubscribed ranks spin in MPI's collectives and drown the figure
console = Console(width=150, highlight=False)


def check_build() -> str:
    for f in (BENCH, MPILIB):
        if not f.exists():
            raise RuntimeError(f"{f} is missing: install MPICH (apt-get install mpich libmpich-dev) and build "
                               "(cmake -S . -B build && cmake --build build)")
    mpiexec = shutil.which("mpiexec")
    if not mpiexec:
        raise RuntimeError("mpiexec is not installed (apt-get install mpich)")
    return mpiexec


def job(mpiexec: str, ranks: int, args: list[str], env: dict[str, str]) -> dict:
    """The write phase of one iez-bench run (its JSON report's)."""
    r = subprocess.run([mpiexec, "-n", str(ranks), str(BENCH), "-a", "MPIIO", "-w", "--json", *args],
                       capture_output=True, text=True, timeout=600, env=env)
    if r.returncode:
        raise RuntimeError(f"iez-bench failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    (phase,) = json.loads(r.stdout.strip().splitlines()[-1])["phases"]
    return phase


def figure(name: str, value: str, ratio: float, base: str, budget: str) -> None:
    console.print(f"  {name:<52} {value:>14}   ratio {ratio:7.4f} against {base:<24} {budget}")


def compare(tag: str, label: str, mpiexec: str, ranks: int, args: list[str], out: Path,
            env_iez: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """The write phases of REPEATS runs with libiez-mpi and without, alternating which goes first
    (a run may pay for the one before it, e.g. in writeback); run i writes in out/<tag>-<i>-iez
    or out/<tag>-<i>-plain."""
    with_iez, without = [], []
    for i in track(range(REPEATS), description=label, console=console, transient=True):
        pair = [(without, plain_env(), "plain"), (with_iez, env_iez, "iez")]
        for runs, env, kind in pair if i % 2 else pair[::-1]:
            d = out / f"{tag}-{i}-{kind}"
            d.mkdir()
            runs.append(job(mpiexec, ranks, [*args, "-o", str(d / "f")], env))
            shutil.rmtree(d)
    return with_iez, without


def on_cluster(prefix: str, measure: Callable[[str, Path, Path], None]) -> None:
    """measure(mpiexec, scratch directory, cluster root) on a fresh emulated cluster."""
    mpiexec = check_build()
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with running_cluster(scratch / "emu", make_cluster(ost_size=64 << 30), seed=1) as cd:
            measure(mpiexec, scratch, cd.root)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    on_cluster("iez-bench-mpi-", measure)


def measure(mpiexec: str, scratch: Path, cluster: Path) -> None:
    fs = cluster / "fs"
    env = {**plain_env(), "LD_PRELOAD": str(MPILIB), "IEZ_EMULATED": str(cluster), "IEZ_APP": "bench",
           "IEZ_TRACE_DIR": str(scratch / "traces"), "IEZ_RUN": "1"}

    console.print(f"MPI-IO throughput (iez-bench -a MPIIO, {RANKS} ranks, write phase incl. open and close)")
    for tag, label, args in (("ssf", "shared file, 1 MiB writes", ["-b", "512m", "-t", "1m"]),
                             ("fpp", "file per process, 16 KiB writes", ["-F", "-b", "128m", "-t", "16k"])):
        a, b = compare(tag, label, mpiexec, RANKS, args, fs, env)
        for key, what, budget in (("xfer_s", "the writes", "budget <= 1.01"),
                                  ("total_s", "open, writes, close", "")):
            best_a, best_b = min(p[key] for p in a), min(p[key] for p in b)
            figure(f"{label}: {what}", f"{best_a * 1e3:.1f} ms", best_a / best_b, "without libiez-mpi", budget)
            med = statistics.median(x[key] / y[key] for x, y in zip(a, b))
            figure(f"{label}: {what}, median of pairs", f"{med:.4f}", med, "its pair without it", "")
        extra = min(p["open_s"] for p in a) - min(p["open_s"] for p in b)
        console.print(f"  {label}: open {extra * 1e3:+.2f} ms with placement (the emulated MDS is a Python "
                      f"process); best bandwidth {max(p['bw_mib_s'] for p in a):.0f} MiB/s to the page cache")

    console.print("MPI_File_open for 8 ranks (open time of the write phase), placed from a plan")
    for tag, label, args, names in (
            ("open-ssf", "shared file (rank 0 places, 1 create)", ["-b", "64k", "-t", "64k"], ["f"]),
            ("open-fpp", "files per process (8 creates)", ["-F", "-b", "64k", "-t", "64k"],
             [f"f.{r:08d}" for r in range(8)])):
        plan = scratch / f"{tag}.plan"  # every run's files are in it: each create is a hit
        plan.write_text("#iez-plan 1\n#app=bench\n" + "".join(
            f"{fs / f'{tag}-{i}-iez' / n}\tc=4,S=1048576\n" for i in range(REPEATS) for n in names))
        a, b = compare(tag, label, mpiexec, 8, args, fs, {**env, "IEZ_PLAN": str(plan)})
        best_a, best_b = min(p["open_s"] for p in a), min(p["open_s"] for p in b)
        figure(label, f"{best_a * 1e3:.2f} ms", best_a / best_b, f"{best_b * 1e3:.2f} ms without", "")
        med = statistics.median(x["open_s"] / y["open_s"] for x, y in zip(a, b))
        figure(f"{label}: median of paired runs", f"{med:.4f}", med, "its pair without it", "")


if __name__ == "__main__":
    main()
