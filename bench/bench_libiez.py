"""libiez performance. Every figure is a ratio against the same work done without
libiez in this run (or, for the plan load, against only reading the file), with its
budget beside it.

    python -m bench libiez

- data path: fio sequential (1 MiB) and small (4 KiB) writes to a traced file, against fio
  without LD_PRELOAD (budget: ratio <= 1.01, of the write time and of fio's CPU time, the one a
  loaded machine does not blur); and the CPU one small pwrite costs in a tight loop, to a traced
  file and to a descriptor that is not traced (/dev/null). These figures are medians of the
  ratios of interleaved pairs, with the pairs' interquartile range beside them.
- create path: creates of planned files with a 100k-entry plan on an emulated cluster, against
  the same layout work (MDS ALLOC, xattr) done by hand without libiez (budget: <= 5 us added).
- plan load: 1M entries (budget: < 0.5 s and < 200 MB), against reading the file.
- tracing memory and CPU: fio writing 2000 files, traced against not (the paper's miniRecorder:
  ~0.3% memory, <1% CPU, docs/references.md#s000-minirecorder).

The files live on tmpfs (/dev/shm): no device time hides libiez's cost, the worst case for it.
Runs alternate with and without libiez and the best of each is compared, because the machine
may be shared.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import track

from iez.layout import lum

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "libiez"
LIB = BUILD / "libiez.so"
IEZ = Path(sys.executable).with_name("iez")
REPEATS = 9
console = Console(width=150, highlight=False)


def check_build() -> None:
    for f in (LIB, BUILD / "iez-probe", BUILD / "iez-test-creates", BUILD / "iez-test-writes"):
        if not f.exists():
            raise RuntimeError(f"{f} is missing: build libiez (cmake -S . -B build && cmake --build build)")
    if not shutil.which("fio"):
        raise RuntimeError("fio is not installed (apt-get install fio)")


def plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("IEZ_") and k != "LD_PRELOAD"}


def iez_env(scratch: Path, **extra: str) -> dict[str, str]:
    return {**plain_env(), "LD_PRELOAD": str(LIB), "IEZ_TRACE_DIR": str(scratch / "traces"), "IEZ_APP": "bench",
            "IEZ_RUN": "1", **extra}


def run_rusage(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[str, float, int]:
    """stdout, CPU seconds (user + system, its reaped children included) and max RSS (KiB)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            err.seek(0)
            raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {err.read().decode(errors='replace').strip()[-300:]}")
    return out.decode(), ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def fio(scratch: Path, env: dict[str, str], *args: str) -> tuple[float, float, int]:
    """(write time s, CPU s, max RSS KiB) of one fio run."""
    out, cpu, rss = run_rusage(["fio", "--output-format=json", "--ioengine=psync", *args], env, cwd=scratch)
    job = json.loads(out)["jobs"][0]["write"]
    return job["runtime"] / 1000, cpu, rss


def alternate(label: str, with_iez, without, repeats: int = REPEATS) -> tuple[list, list]:
    """repeats pairs of runs, each side going first half of the time (a run may pay for the one
    before it)."""
    a, b = [], []
    for i in track(range(repeats), description=label, console=console, transient=True):
        if i % 2:
            a.append(with_iez())
        b.append(without())
        if not i % 2:
            a.append(with_iez())
    return a, b


def figure(name: str, value: str, ratio: float, base: str, budget: str) -> None:
    console.print(f"  {name:<44} {value:>16}   ratio {ratio:7.4f} against {base:<28} {budget}")


def paired_ratio(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """The median of the pairs' ratios a/b and its interquartile range (low, high)."""
    low, mid, high = statistics.quantiles([x / y for x, y in zip(a, b)], n=4)
    return mid, low, high


# -- data path ------------------------------------------------------------------------------------

def data_path(scratch: Path) -> None:
    console.print("data path (fio to a traced file on tmpfs)")
    for label, bs, loops in (("sequential writes, 1 MiB", "1m", "4"), ("small writes, 4 KiB", "4k", "2")):
        args = ["--name=w", f"--filename={scratch / 'fio.dat'}", "--rw=write", f"--bs={bs}", "--size=1g",
                f"--loops={loops}", "--unlink=1"]
        a, b = alternate(label, lambda: fio(scratch, iez_env(scratch), *args), lambda: fio(scratch, plain_env(), *args))
        for i, what in ((0, "write time"), (1, "CPU")):
            ratio, low, high = paired_ratio([x[i] for x in a], [x[i] for x in b])
            figure(f"{label}: {what}", f"{statistics.median(x[i] for x in a) * 1e3:.1f} ms", ratio,
                   "fio without libiez", f"budget <= 1.01 (pairs {low:.3f}-{high:.3f})")
    count, size = 500000, 512
    # a traced file, and a descriptor libiez looked at once and does not trace (a device, as
    # stdout to a tty or a pipe): what every later write to it costs
    for label, target in (("512 B pwrite loop", scratch / "loop.dat"), ("512 B writes to /dev/null", "/dev/null")):
        cmd = [str(BUILD / "iez-test-writes"), str(target), str(count), str(size), "pwrite"]
        a, b = alternate(label, lambda: [float(x) for x in run_rusage(cmd, iez_env(scratch))[0].split()],
                         lambda: [float(x) for x in run_rusage(cmd, plain_env())[0].split()], repeats=15)
        for i, what in ((0, "time"), (1, "CPU")):
            ratio, low, high = paired_ratio([x[i] for x in a], [x[i] for x in b])
            med_a, med_b = statistics.median(x[i] for x in a), statistics.median(x[i] for x in b)
            figure(f"{label}: {what} per call ({med_a - med_b:+.1f} ns)", f"{med_a:.1f} ns", ratio,
                   "the loop without libiez", f"(pairs {low:.3f}-{high:.3f})")


# -- create path --------------------------------------------------------------------------------

def create_path(scratch: Path) -> None:
    n, runs, spec = 2000, 5, "S=1048576,c=2"
    cluster = scratch / "emu"
    for cmd in (["emulate", "init", str(cluster), "--ost-size", "64GiB"], ["emulate", "up", str(cluster), "--seed", "1"]):
        r = subprocess.run([str(IEZ), *cmd], capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError(f"iez {cmd[0]} {cmd[1]}: {r.stderr.strip()}")
    try:
        fs = cluster / "fs"
        planned = [fs / f"r{r}" / f"f{i}" for r in range(runs) for i in range(n + 1)]  # f{n}: the warm-up
        filler = [f"/lustre/other/job{i % 13}/out.{i:07d}" for i in range(100000 - len(planned))]
        plan = scratch / "create.plan"
        plan.write_text("#iez-plan 1\n" + "".join(f"{p}\t{spec}\n" for p in [*map(str, planned), *filler]))
        env = iez_env(scratch, IEZ_PLAN=str(plan), IEZ_EMULATED=str(cluster))
        creates = str(BUILD / "iez-test-creates")
        a, b = [], []  # (wall, CPU) of the timed creates, as the program measures them
        for r in track(range(runs), description="creates", console=console, transient=True):
            for d in (fs / f"r{r}", fs / f"h{r}"):
                d.mkdir()
            out, _, _ = run_rusage([creates, str(fs / f"h{r}"), str(n), "layout", str(cluster / "run"), spec], plain_env())
            b.append([float(x) for x in out.split()[1:3]])
            out, _, _ = run_rusage([creates, str(fs / f"r{r}"), str(n), "open"], env)
            a.append([float(x) for x in out.split()[1:3]])
        placed = lum.decode(os.getxattr(fs / "r0" / "f0", "user.lustre.lov")).plain
        if placed is None or placed.stripe_count != 2:
            raise RuntimeError("libiez did not give the planned files their layout: the figure would mean nothing")
        # The client's CPU time is libiez's own cost; the wall time also holds the emulated MDS's
        # answer (a Python process on the same, maybe busy, cores), so its difference is noisy.
        cpu_a, cpu_b = min(x[1] for x in a), min(x[1] for x in b)
        wall_a, wall_b = min(x[0] for x in a), min(x[0] for x in b)
        console.print(f"create path ({n} creates, 100k-entry plan, emulated cluster)")
        figure(f"CPU per create (+{(cpu_a - cpu_b) / n * 1e6:.1f} us, budget <= 5 us)", f"{cpu_a / n * 1e6:.1f} us",
               cpu_a / cpu_b, "the layout work by hand", "")
        figure(f"wall time per create ({(wall_a - wall_b) / n * 1e6:+.1f} us)", f"{wall_a / n * 1e6:.1f} us",
               wall_a / wall_b, "the layout work by hand", "")
    finally:
        subprocess.run([str(IEZ), "emulate", "down", str(cluster)], capture_output=True, timeout=60)


# -- plan load ----------------------------------------------------------------------------------

def plan_load(scratch: Path) -> None:
    plan = scratch / "1m.plan"
    rng = random.Random(3)
    with open(plan, "w") as f:
        f.write("#iez-plan 1\n#app=bench\n")
        for i in range(1_000_000):
            o = rng.sample(range(1008), 4)
            f.write(f"/lustre/scratch/bench/job{i % 7}/dir{i % 1000:04d}/file.{i:07d}.dat\t"
                    f"S=1048576,c=4,o={o[0]}:{o[1]}:{o[2]}:{o[3]}\n")
    probe = str(BUILD / "iez-probe")
    loads, reads = [], []
    for _ in track(range(5), description="plan load", console=console, transient=True):
        reads.append(subprocess.run([probe, "read", str(plan)], capture_output=True, text=True).stdout.split())
        loads.append(subprocess.run([probe, "load", str(plan)], capture_output=True, text=True).stdout.split())
    if loads[0][:2] != ["OK", "1000000"]:
        raise RuntimeError(f"plan load failed: {' '.join(loads[0])}")
    t_load, t_read = min(float(x[2]) for x in loads), min(float(x[2]) for x in reads)
    rss_load, rss_read = min(int(x[3]) for x in loads), min(int(x[3]) for x in reads)
    console.print(f"plan load (1M entries, {plan.stat().st_size / 2**20:.0f} MiB)")
    figure("load time", f"{t_load:.3f} s", t_load / t_read, "reading the file", f"budget < 0.5 s ({t_load / 0.5:.2f})")
    figure("max RSS", f"{rss_load / 1024:.0f} MiB", rss_load / rss_read, "reading the file",
           f"budget < 200 MB ({rss_load * 1024 / 200e6:.2f})")
    plan.unlink()


# -- tracing overhead -----------------------------------------------------------------------------

def tracing(scratch: Path) -> None:
    d = scratch / "many"
    d.mkdir()
    # --thread: the job runs in fio's own process, so its CPU is all counted
    args = ["--name=many", f"--directory={d}", "--nrfiles=2000", "--filesize=256k", "--bs=4k", "--rw=write",
            "--file_service_type=sequential", "--create_on_open=1", "--unlink=1", "--thread"]
    traces = scratch / "traces-many"
    env = iez_env(scratch, IEZ_MODE="trace", IEZ_TRACE_DIR=str(traces))
    a, b = alternate("tracing fio", lambda: fio(scratch, env, *args), lambda: fio(scratch, plain_env(), *args))
    cpu_a, cpu_b = min(x[1] for x in a), min(x[1] for x in b)
    console.print("tracing (the paper: ~0.3% memory, <1% CPU)")
    figure(f"fio, 2000 files of 256 KiB: CPU ({(cpu_a / cpu_b - 1) * 100:+.1f}%)", f"{cpu_a:.3f} s", cpu_a / cpu_b,
           "fio without libiez", "")
    shards = list(traces.glob("*.shard"))
    console.print(f"  its trace: {sum(s.stat().st_size for s in shards) / len(shards) / 2**10:.0f} KiB per run")
    # what each traced file costs: opens and closes only, in a process that does nothing else
    n, creates = 20000, str(BUILD / "iez-test-creates")
    a, b = [], []
    for r in track(range(3), description="tracing creates", console=console, transient=True):
        for tag, out, e in (("p", b, plain_env()), ("t", a, iez_env(scratch, IEZ_MODE="trace", IEZ_TRACE_DIR=str(traces)))):
            run_dir = scratch / f"{tag}{r}"
            run_dir.mkdir()
            out.append([float(x) for x in run_rusage([creates, str(run_dir), str(n), "open"], e)[0].split()[1:]])
            shutil.rmtree(run_dir)
    cpu = (min(x[1] for x in a) - min(x[1] for x in b)) / n
    rss = (min(x[2] for x in a) - min(x[2] for x in b)) * 1024 / n
    figure(f"per traced file: CPU of open+close (+{cpu * 1e6:.2f} us)", f"{min(x[1] for x in a) / n * 1e6:.2f} us",
           min(x[1] for x in a) / min(x[1] for x in b), "untraced", "")
    figure("per traced file: memory (record, tables)", f"{rss:.0f} B", min(x[2] for x in a) / min(x[2] for x in b),
           f"the {min(x[2] for x in b) / 1024:.1f} MiB process untraced", "")


def main() -> None:
    check_build()
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    scratch = Path(tempfile.mkdtemp(prefix="iez-bench-", dir=base))
    try:
        data_path(scratch)
        create_path(scratch)
        plan_load(scratch)
        tracing(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
