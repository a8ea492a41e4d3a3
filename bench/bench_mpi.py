"""libiez-mpi performance. Every figure is a ratio against the same MPI job run without
libiez in this run, with its budget beside it.

    python -m bench mpi

- The data path, call by call (goal: ratio <= 1.01): the CPU time of one MPI-IO call
  (iez-bench-mpicalls, libiez/tools/mpi_calls.c: the calling thread's CPU over many calls of one
  rank), traced by libiez-mpi on the emulated cluster, against the same program without
  LD_PRELOAD: 1 MiB MPI_File_write_at (the shared file's writes), 16 KiB MPI_File_write (file
  per process, the individual pointer), and 8 B MPI_File_write_at, where nothing but the call's
  own cost is left. Beside each, measured in the same rotation of runs, the floors
  (libiez/tools/floor.c): empty pass-through wrappers of the MPI call and of ROMIO's pwrite
  beneath it that tail-call the real function (what any preloaded library costs), and the same
  returning through a frame of their own after the call (what any wrapper costs that counts
  what the call did: that return, after a system call, mispredicts).
- MPI-IO throughput: iez-bench -a MPIIO under mpiexec (2 ranks, one per core of the test
  machine) on an emulated cluster, traced and placed by libiez-mpi, against the same job without
  LD_PRELOAD, for the writes and for the whole phase, whose open also places the file. One shared
  file of 1 GiB with 1 MiB independent writes, and files per process with 16 KiB writes. This is
  wall time of writes to the page cache: on a shared machine its pairs vary by tens of percent
  either way (other processes, writeback), so it is printed for information beside the per-call
  figures, which carry the budget.
- MPI_File_open for 8 ranks: the write phase's open time as iez-bench measures it (latest open
  end minus earliest start), a shared file placed by rank 0 from the plan, and 8 files per
  process each placed by its rank, against the plain opens.

The files go to a directory on disk (an MPI process's /dev/shm files are not traced), written to
the page cache. Runs alternate with and without libiez, each going first half of the time; the
figure is the median of the pairs' ratios (a pair's two runs see the same load), with the
spread of the pairs (interquartile) beside it.
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

from bench.bench_libiez import paired_ratio, plain_env
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "bench_app" / "iez-bench"
MPILIB = ROOT / "build" / "libiez" / "libiez-mpi.so"
CALLS = ROOT / "build" / "libiez" / "iez-bench-mpicalls"
FLOORS = (("pass-through wrappers, tail calls", ROOT / "build" / "libiez" / "libiez-floor.so"),
          ("pass-through wrappers, returning after", ROOT / "build" / "libiez" / "libiez-floor-after.so"))
REPEATS = 8
PAIRS = 12  # per-call figures: interleaved pairs of runs
RANKS = 2  # one per core here: oversubscribed ranks spin in MPI's collectives and drown the figure
console = Console(width=150, highlight=False)


def check_build() -> str:
    for f in (BENCH, MPILIB, CALLS, *(lib for _, lib in FLOORS)):
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


def calls_cpu(mpiexec: str, path: Path, call: str, size: int, count: int, env: dict[str, str]) -> float:
    """CPU ns of one call, from one iez-bench-mpicalls run of one rank."""
    r = subprocess.run([mpiexec, "-n", "1", str(CALLS), str(path), call, str(size), str(count)],
                       capture_output=True, text=True, timeout=600, env=env)
    path.unlink(missing_ok=True)
    if r.returncode:
        raise RuntimeError(f"iez-bench-mpicalls failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return float(r.stdout.split()[1])


def goal(ratio: float, limit: float) -> str:
    return f"goal <= {limit}: {'met' if ratio <= limit else 'NOT MET'}"


def rotated(runs: int, envs: list[dict[str, str]], measure: Callable[[dict[str, str]], float]) -> list[list[float]]:
    """measure(env) of every env, runs times, in an order that rotates (and reverses every
    other time) so that each env goes first as often as the others: one list per env."""
    out: list[list[float]] = [[] for _ in envs]
    for i in range(runs):
        order = list(range(len(envs)))
        order = order[i % len(envs):] + order[:i % len(envs)]
        for k in order[::-1] if i % 2 else order:
            out[k].append(measure(envs[k]))
    return out


def per_call(mpiexec: str, label: str, path: Path, call: str, size: int, count: int, env_a: dict[str, str],
             env_b: dict[str, str], base: str, budget: str, limit: float | None = None) -> None:
    """Print the CPU of one call with env_a against env_b: PAIRS interleaved pairs of runs,
    each going first half of the time, the median of the pairs' ratios (and whether it meets
    limit, if one is given)."""
    a: list[float] = []
    b: list[float] = []
    for i in track(range(PAIRS), description=label, console=console, transient=True):
        pair = [(a, env_a), (b, env_b)]
        for runs, env in pair if i % 2 else pair[::-1]:
            runs.append(calls_cpu(mpiexec, path, call, size, count, env))
    ratio, low, high = paired_ratio(a, b)
    extra = statistics.median(a) - statistics.median(b)
    verdict = f"{goal(ratio, limit)} " if limit is not None else ""
    figure(f"{label} ({extra:+.0f} ns)", f"{statistics.median(a) / 1e3:.2f} us", ratio, base,
           f"{verdict}{budget} (pairs {low:.3f}-{high:.3f})".strip())


def per_call_floors(mpiexec: str, label: str, path: Path, call: str, size: int, count: int,
                    env: dict[str, str]) -> None:
    """One call's CPU under libiez-mpi and under each floor, against none, in one rotation of
    PAIRS runs each: libiez-mpi against the goal, the floors beside it."""
    envs = [plain_env(), env, *({**plain_env(), "LD_PRELOAD": str(lib)} for _, lib in FLOORS)]
    runs = iter(track(range(PAIRS * len(envs)), description=label, console=console, transient=True))

    def measure(e: dict[str, str]) -> float:
        next(runs, None)
        return calls_cpu(mpiexec, path, call, size, count, e)

    base, *others = rotated(PAIRS, envs, measure)
    for i, (name, cpu) in enumerate(zip([f"{label}, libiez-mpi", *(f"  floor: {n}" for n, _ in FLOORS)], others)):
        ratio, low, high = paired_ratio(cpu, base)
        extra = statistics.median(cpu) - statistics.median(base)
        figure(f"{name} ({extra:+.0f} ns)", f"{statistics.median(cpu) / 1e3:.2f} us", ratio, "without LD_PRELOAD",
               f"{goal(ratio, 1.01) + ' ' if i == 0 else ''}(pairs {low:.3f}-{high:.3f})")


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

    console.print(f"MPI-IO data path: CPU per call, one rank ({PAIRS} rotations of the runs, median of the ratios "
                  "to the run without LD_PRELOAD of the same rotation)")
    for label, call, size, count in (("1 MiB MPI_File_write_at", "write_at", 1 << 20, 2000),
                                     ("16 KiB MPI_File_write", "write", 16 << 10, 100000),
                                     ("8 B MPI_File_write_at", "write_at", 8, 200000)):
        per_call_floors(mpiexec, label, fs / "calls", call, size, count, env)

    console.print(f"MPI-IO throughput (iez-bench -a MPIIO, {RANKS} ranks, write phase incl. open and close; "
                  "wall time, page cache: noisy here)")
    for tag, label, args in (("ssf", "shared file, 1 MiB writes", ["-b", "512m", "-t", "1m"]),
                             ("fpp", "file per process, 16 KiB writes", ["-F", "-b", "128m", "-t", "16k"])):
        a, b = compare(tag, label, mpiexec, RANKS, args, fs, env)
        for key, what in (("xfer_s", "the writes"), ("total_s", "open, writes, close")):
            ratio, low, high = paired_ratio([p[key] for p in a], [p[key] for p in b])
            best_a, best_b = min(p[key] for p in a), min(p[key] for p in b)
            figure(f"{label}: {what}", f"{statistics.median(p[key] for p in a) * 1e3:.1f} ms", ratio,
                   "without libiez-mpi", f"(pairs {low:.3f}-{high:.3f}; best/best {best_a / best_b:.3f})")
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
        ratio, low, high = paired_ratio([p["open_s"] for p in a], [p["open_s"] for p in b])
        med_b = statistics.median(p["open_s"] for p in b)
        figure(label, f"{statistics.median(p['open_s'] for p in a) * 1e3:.2f} ms", ratio,
               f"{med_b * 1e3:.2f} ms without", f"(pairs {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
