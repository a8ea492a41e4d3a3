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
  the same layout work (MDS ALLOC, xattr) done by hand (budget: <= 5 us of CPU added). The
  budget's figure takes both in one process under LD_PRELOAD, in turns of 10 creates each (the
  work by hand through raw system calls libiez does not see): each turn pair sees the same load,
  and its difference is libiez's cost; the median of 400 pairs. Beside it, for information, the
  same in separate processes against no LD_PRELOAD (pairs of runs): each run's CPU holds the
  emulated MDS's wakeups (a Python process on the same cores), which spread the pairs by more
  than the budget.
- plan load: 1M entries (budget: < 0.5 s and < 200 MB), against reading the file.
- tracing memory and CPU: fio writing 2000 files, traced against not (the paper's miniRecorder:
  ~0.3% memory, <1% CPU, docs/references.md#s000-minirecorder).

The files live on tmpfs (/dev/shm): no device time hides libiez's cost, the worst case for it.
Runs alternate with and without libiez, because the machine may be shared. Each figure with a
goal says whether it is met.
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


def met(value: float, limit: float, what: str = "") -> str:
    """`goal <= LIMIT: met` (or NOT MET) for a figure whose goal is value <= limit."""
    return f"goal <= {limit:g}{what}: {'met' if value <= limit else 'NOT MET'}"


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
                   "fio without libiez", f"{met(ratio, 1.01)} (pairs {low:.3f}-{high:.3f})")
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
    n, runs, spec = 2000, 8, "S=1048576,c=2"
    interleaved, block = 4000, 10
    cluster = scratch / "emu"
    for cmd in (["emulate", "init", str(cluster), "--ost-size", "64GiB"], ["emulate", "up", str(cluster), "--seed", "1"]):
        r = subprocess.run([str(IEZ), *cmd], capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError(f"iez {cmd[0]} {cmd[1]}: {r.stderr.strip()}")
    try:
        fs = cluster / "fs"
        planned = [fs / f"r{r}" / f"f{i}" for r in range(runs) for i in range(n + 1)]  # f{n}: the warm-up
        planned += [fs / "il" / f"f{i}" for i in range(interleaved + 1)]
        filler = [f"/lustre/other/job{i % 13}/out.{i:07d}" for i in range(100000 - len(planned))]
        plan = scratch / "create.plan"
        plan.write_text("#iez-plan 1\n" + "".join(f"{p}\t{spec}\n" for p in [*map(str, planned), *filler]))
        env = iez_env(scratch, IEZ_PLAN=str(plan), IEZ_EMULATED=str(cluster))
        creates = str(BUILD / "iez-test-creates")
        (fs / "il").mkdir()
        with console.status("creates, interleaved in one process"):
            out, _, _ = run_rusage([creates, str(fs / "il"), str(interleaved), "interleave", str(cluster / "run"), spec,
                                    str(block)], env)
        turns = [[float(x) for x in line.split()] for line in out.splitlines()]  # (by hand, libiez) ns
        a, b = [], []  # (wall, CPU) of the timed creates, as the program measures them
        for r in track(range(runs), description="creates", console=console, transient=True):
            for d in (fs / f"r{r}", fs / f"h{r}"):
                d.mkdir()
            sides = [(b, [creates, str(fs / f"h{r}"), str(n), "layout", str(cluster / "run"), spec], plain_env()),
                     (a, [creates, str(fs / f"r{r}"), str(n), "open"], env)]
            for into, cmd, e in sides if r % 2 else sides[::-1]:
                into.append([float(x) for x in run_rusage(cmd, e)[0].split()[1:3]])
        placed = lum.decode(os.getxattr(fs / "r0" / "f0", "user.lustre.lov")).plain
        if placed is None or placed.stripe_count != 2:
            raise RuntimeError("libiez did not give the planned files their layout: the figure would mean nothing")
        console.print("create path (100k-entry plan, emulated cluster; CPU of the creating process)")
        extra = [(y - x) / 1e3 for x, y in turns]
        low, mid, high = statistics.quantiles(extra, n=4)
        ratio, _, _ = paired_ratio([y for _, y in turns], [x for x, _ in turns])
        figure(f"CPU per create, interleaved (+{mid:.2f} us)", f"{statistics.median(y for _, y in turns) / 1e3:.1f} us",
               ratio, "the layout work by hand", f"{met(mid, 5, ' us added')} ({len(turns)} pairs of {block}: "
               f"+{low:.1f} to +{high:.1f} us)")
        # separate processes: each run's CPU holds the emulated MDS's wakeups, spread wider than the budget
        for i, what in ((1, "CPU"), (0, "wall time")):
            diff = statistics.median((x[i] - y[i]) / n * 1e6 for x, y in zip(a, b))
            ratio, low, high = paired_ratio([x[i] for x in a], [x[i] for x in b])
            figure(f"{what} per create, separate runs ({diff:+.1f} us)", f"{statistics.median(x[i] for x in a) / n * 1e6:.1f} us",
                   ratio, "by hand without LD_PRELOAD", f"({runs} pairs of {n}: {low:.3f}-{high:.3f})")
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
    figure("load time", f"{t_load:.3f} s", t_load / t_read, "reading the file", met(t_load, 0.5, " s"))
    figure("max RSS", f"{rss_load / 1024:.0f} MiB", rss_load / rss_read, "reading the file",
           met(rss_load * 1024 / 1e6, 200, " MB"))
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
           "fio without libiez", met(cpu_a / cpu_b, 1.01))
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
