"""The trace-then-place loop of real programs on an emulated cluster, measured: each program of
`iez.workload.programs` runs three times in its job directory under plain `LD_PRELOAD` (traced,
then placed twice, a new `SLURM_JOB_ID` each time), and every run is imported, predicted and
allocated through the `iez` command as a site would (`iez trace import DIR --app NAME`, `iez
predict`, `iez allocate --emulated -o PLAN`). After each placed run the job directory's files,
their layouts (read back through the backend) and the run's trace go to `iez.workload.hitrate`.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from iez import plan as planfile
from iez.backend import backend_for
from iez.errors import BackendError, IezError
from iez.layout.layout import FileLayout
from iez.preload import libiez_path, preload_env, uses_mpi
from iez.trace.shard import read_trace
from iez.workload.bench import bench_path
from iez.workload.hitrate import Create, Lookup, ProgramResult, judge
from iez.workload.programs import Program

RUNS = 3  # traced once, then placed twice
STEP_TIMEOUT = 120.0
CLI_TIMEOUT = 300.0


class StepFailed(IezError):
    """A program's run or one of the loop's iez commands failed."""


@dataclass(frozen=True)
class Site:
    """Where the loop runs: the emulated cluster (up), a work directory for traces, plans and
    each program's database, the `iez` command and the programs' inputs."""

    cluster: Path
    work: Path
    inputs: Path
    iez: tuple[str, ...] = (sys.executable, "-m", "iez")


def job_ids(seed: int, n: int = RUNS) -> list[str]:
    """Increasing Slurm-like job ids with uneven gaps (other users' jobs run in between), so
    that no run-to-run arithmetic can foresee the next one."""
    rng = random.Random(seed)
    ids = [rng.randrange(1_000_000, 9_000_000)]
    for _ in range(n - 1):
        ids.append(ids[-1] + rng.choice((1, 7, 38, 211, 1517, 40213)) + rng.randrange(100))
    return [str(i) for i in ids]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _run(argv: Sequence[str], what: str, timeout: float, output: Path | None = None,
         **kw) -> subprocess.CompletedProcess:
    """Run `argv`; its output is captured, or appended to `output` (as a batch system writes a
    job's output file)."""
    try:
        if output is None:
            p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
        else:
            with open(output, "ab") as out:
                p = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"{what}: ran longer than {timeout:g} s") from None
    except OSError as e:
        raise StepFailed(f"{what}: {e.strerror or e}") from None
    if p.returncode != 0:
        said = output.read_text(errors="replace") if output is not None else p.stderr or p.stdout
        raise StepFailed(f"{what}: exit {p.returncode}: {_last_line(said)}")
    return p


def missing_tools(program: Program) -> list[str]:
    """What the program needs that is not installed, each with its install hint."""
    out = [f"{tool} is not installed: {hint}" for tool, hint in program.tools if not shutil.which(tool)]
    for module, hint in program.modules:
        probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
        if probe.returncode != 0:
            out.append(f"Python module {module} is missing: {hint}")
    return out


def surviving_files(root: Path) -> dict[str, FileLayout | None]:
    """Every regular file under `root` (symbolic links not followed) and the layout it carries."""
    backend = backend_for(root)
    out: dict[str, FileLayout | None] = {}
    for d, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            if os.path.isfile(path) and not os.path.islink(path):
                try:
                    out[path] = backend.get_layout(path)
                except BackendError:
                    out[path] = None
    return out


def trace_facts(traces: Path, root: Path) -> tuple[list[Create], tuple[int, int]]:
    """The creates under `root` the run's trace records (with the name each file ended up with
    and its creator's run-time fields), and libiez's (hits, misses)."""
    trace = read_trace(traces)
    prefix = str(root) + os.sep
    creates = [Create(r.path, r.renamed_to or r.path, r.open_time, r.plan_hit,
                      {k: v for k, v in (("job", r.job_id), ("array", r.array_task), ("host", r.host),
                                         ("rank", str(r.rank))) if v})
               for r in trace.records if r.created and r.path.startswith(prefix)]
    return creates, (sum(s.plan_hits for s in trace.shards), sum(s.plan_misses for s in trace.shards))


def plan_lookup(plan: planfile.Plan) -> Lookup:
    """A created name's layout in `plan`, as libiez matches it in a process with those fields."""
    matchers: dict[tuple[tuple[str, str], ...], Callable[[str], str | None]] = {}

    def lookup(name: str, fields: Mapping[str, str]) -> FileLayout | None:
        key = tuple(sorted(fields.items()))
        if key not in matchers:
            matchers[key] = plan.matcher(fields)
        found = matchers[key](name)
        return plan.entries[found] if found is not None else None

    return lookup


class Loop:
    """One program's three runs and the commands between them."""

    def __init__(self, site: Site, program: Program, jobs: Sequence[str], base_env: Mapping[str, str]):
        self.site, self.program, self.jobs = site, program, list(jobs)
        self.home = site.work / program.name
        self.db = f"sqlite:///{self.home / 'iez.db'}"
        self.jobdir = site.cluster / "fs" / program.name
        self.base = {k: v for k, v in base_env.items() if not k.startswith(("IEZ_", "SLURM_"))}

    def iez(self, *args: str) -> subprocess.CompletedProcess:
        return _run([*self.site.iez, *args, "--db", self.db], f"iez {' '.join(args[:2])}", CLI_TIMEOUT,
                    env=self.base, cwd=self.home)

    def argvs(self) -> list[list[str]]:
        bench = bench_path() if self.program.uses_bench else ""
        return [self.program.argv(step, self.site.inputs, sys.executable, bench) for step in self.program.steps]

    def run(self, job: str, plan: Path | None) -> Path:
        """Run the program once in a fresh job directory, its output to slurm-JOB.out beside
        (outside the job directory); returns its trace directory."""
        shutil.rmtree(self.jobdir, ignore_errors=True)
        self.jobdir.mkdir(parents=True)
        traces = self.home / "traces" / job
        for argv in self.argvs():
            lib = libiez_path("mpi" if uses_mpi(argv) else "posix")
            env = preload_env(self.base, lib, {
                "IEZ_EMULATED": str(self.site.cluster), "IEZ_TRACE_DIR": str(traces),
                "IEZ_PLAN": str(plan) if plan else None, "IEZ_LOG": str(self.home / f"libiez.{job}.log")})
            env["SLURM_JOB_ID"] = job
            _run(argv, f"{self.program.name} (job {job}): {Path(argv[0]).name}", STEP_TIMEOUT,
                 self.home / f"slurm-{job}.out", env=env, cwd=self.jobdir)
        return traces

    def plan_next(self, traces: Path) -> Path:
        """Import the run, predict the next, allocate it: the next run's plan."""
        plan = self.home / "plans" / f"after-{traces.name}.plan"
        self.iez("trace", "import", str(traces), "--app", self.program.name)
        self.iez("predict", self.program.name)
        self.iez("allocate", self.program.name, "--emulated", str(self.site.cluster), "-o", str(plan), "--no-gate")
        return plan

    def measure(self) -> ProgramResult:
        result = ProgramResult(self.program.name)
        missing = missing_tools(self.program)
        if missing:
            result.error = "; ".join(missing)
            return result
        (self.home / "plans").mkdir(parents=True, exist_ok=True)
        plan: Path | None = None
        try:
            for i, job in enumerate(self.jobs):
                traces = self.run(job, plan)
                if i:  # a placed run; without a plan (the commands failed) none of its files is placed
                    lookup = plan_lookup(planfile.load(plan)) if plan else lambda _name, _fields: None
                    creates, counters = trace_facts(traces, self.jobdir)
                    result.runs.append(judge(self.program.name, job, surviving_files(self.jobdir), creates,
                                             lookup, counters))
                if i + 1 < len(self.jobs):
                    try:
                        plan = self.plan_next(traces)
                    except StepFailed as e:  # the job still runs next time, as at a site: unplanned
                        result.error = result.error or str(e)
                        plan = None
        except IezError as e:
            result.error = result.error or str(e)
        return result


def measure(site: Site, programs: Sequence[Program], seed: int = 0, workers: int = 2,
            base_env: Mapping[str, str] | None = None) -> list[ProgramResult]:
    """Each program's loop, `workers` programs at a time (each has its own job directory and
    database; they share the cluster), in the order given."""
    env = dict(os.environ if base_env is None else base_env)
    loops = [Loop(site, p, job_ids(seed + i), env) for i, p in enumerate(programs)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(Loop.measure, loops))


@contextmanager
def emulated_cluster(directory: Path, iez: Sequence[str] = Site.iez) -> Iterator[Path]:
    """`iez emulate init DIR` and `iez emulate up DIR`; `iez emulate down DIR` at the end."""
    _run([*iez, "emulate", "init", str(directory)], "iez emulate init", CLI_TIMEOUT)
    _run([*iez, "emulate", "up", str(directory)], "iez emulate up", CLI_TIMEOUT)
    try:
        yield directory
    finally:
        subprocess.run([*iez, "emulate", "down", str(directory)], capture_output=True, timeout=CLI_TIMEOUT)
