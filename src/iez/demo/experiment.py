"""`iez demo`: the iez paper's evaluation, run for real with the whole control plane on one machine.

Started as real processes (`iez.demo.stack`): an emulated cluster (1 MDS, 3 OSSs x 5 OSTs) with
its MDS, one collector per OSS and one on the MDS over ZeroMQ, and the controller (SQLite).
For each scenario of the paper's evaluation (IOR and HACC-I/O, FPP and SSF, two applications at
once: docs/references.md#s000-figs7-9 and the entries after it), the real workload program
`iez-bench` runs twice through `iez run`, each job writing into a directory whose default layout
asks for the paper's stripe count (as `lfs setstripe -c 8 DIR`):
1. default: the first run of the application is traced; the emulated MDS lays its files out
   with Lustre's own allocator (LOD's QoS/RR);
2. iez: the controller has predicted the next run from the trace and placed it with its policy
   against the collectors' live statistics; the same command runs placed by libiez.
After each run the per-OST usage is read back from the OSSs' parameter trees with the parsers a
real OSS is read with, and the layouts the files got are simulated on the testbed's hardware.
Every scenario runs on the paper's empty testbed and on the same testbed drifted out of balance;
one too big for the drifted cluster runs at the largest half of its size that fits (`fitted`).

Seed 000's scenarios keep the stripe counts the paper gave them (the controller's
`--layout-keep`): iez chooses their OSTs and stripe sizes only. One more scenario shows what the
layout itself does (docs/layouts.md): IOR's shared file in a directory whose default layout is
one stripe, as real jobs' shared files have it, so Lustre leaves it on one OST (job OSTCost 15 on
15 OSTs, the worst there is); the controller places its next run with the automatic layout.

Data is scaled down (OST capacity and every file by `scale`) so the whole demo runs in minutes;
utilizations and OSTCost are ratios, so the scaling leaves them comparable with the paper's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import DEFAULT_POLICY, get_policy
from iez.alloc.scenarios import Scenario, ior, paper_scenarios, uneven_fill
from iez.backend.emulated import EmulatedBackend
from iez.cluster import Cluster, make_cluster
from iez.demo.simulate import SimRates, seed000_hardware, simulate_rates
from iez.demo.stack import Stack, control_plane
from iez.emulated.mds_client import MdsClient
from iez.errors import AllocationError, IezError
from iez.layout.auto import RPC_SIZE
from iez.layout.layout import FileLayout, Layout
from iez.lustre.params import ParamTree
from iez.lustre.targets import target_space
from iez.metrics import BalanceReport, balance_report, integer_bound
from iez.request import Request
from iez.workload.bench import HACC_HEADER, HACC_RECORD, HaccJob, IorJob, command

LUSTRE_DEFAULT_STRIPE = 1 << 20  # the testbed's default stripe size (Lustre <= 2.15)
MiB = 1 << 20
MIN_STRIPE = 65536
PLAN_WAIT = 120.0  # s, for the controller to predict and place a run


@dataclass(frozen=True)
class DemoOptions:
    out: Path = Path("demo-out")
    scale: int = 32  # OST capacity and every file are divided by this
    seed: int = 1  # the emulated MDS's random choices (RR start, QoS) and the drifted fill
    only: tuple[str, ...] = ()  # run only scenarios whose name contains one of these
    policy: str = DEFAULT_POLICY
    drift: tuple[float, float] = (0.1, 0.4)  # the drifted cluster's OSTs start this full


# The two clusters every scenario runs on: the paper's empty testbed, and the same testbed
# after it has drifted out of balance (each OST already 10-40% full with other users' data).
STATES = ("empty", "drifted")
KEEP = "keep"  # the layout mode of seed 000's scenarios: the paper's stripe counts


def demo_scenarios() -> list[tuple[Scenario, str]]:
    """Every scenario with the layout mode the controller places it with (docs/layouts.md).
    The shared file of the last is 4 GiB: the job of seed 000's Fig. 12
    (docs/references.md#s000-figs12-13) made small enough that the traced run's one OST holds it
    at any scale, on the drifted cluster too (32x: 128 MiB, OSTs of 320 MiB)."""
    shared = Scenario("IOR SSF 16 procs 4 GiB c=1, layout auto", tuple(ior(16, 256 * MiB, 1, "ssf")), None,
                      "Fig. 12, on the default 1 stripe")
    return [(s, KEEP) for s in paper_scenarios()] + [(shared, "auto")]


# `iez demo --quick`: one scenario of each kind (FPP, HACC-I/O, SSF, two apps, the automatic layout)
QUICK = ("IOR FPP 16 procs c=8", "HACC-I/O FPP 16 procs c=8", "IOR SSF 16 procs 32 GiB", "HACC-I/O c=8 + IOR c=4",
         "layout auto")


@dataclass(frozen=True)
class AppJob:
    """One application of a scenario: the iez-bench job and the directory it writes into."""

    app: str  # as the scenario names it (ior, hacc-io)
    directory: Path
    stripe_count: int
    job: IorJob | HaccJob

    def requests(self) -> list[Request]:
        shared = not self.job.fpp and self.job.ranks > 1
        return [Request(path=p, write_bytes=n, stripe_count=self.stripe_count, rank=0 if shared else k, app=self.app,
                        comm_size=self.job.ranks if shared else 1)
                for k, (p, n) in enumerate(self.job.files().items())]


@dataclass
class Run:
    """One scenario under one allocator: what each OST received, measured on the cluster, and
    the I/O rates the simulator gives those very layouts on the testbed's hardware."""

    job_bytes: dict[int, int]
    report: BalanceReport
    seconds: float
    layouts: dict[str, FileLayout]  # what each file got, read back from the file system
    rates: SimRates | None = None
    plan_hits: int | None = None  # files placed from the plan (iez run), as the controller counted
    plan_misses: int | None = None


@dataclass
class Outcome:
    state: str  # "empty" or "drifted"
    scenario: Scenario
    files: int
    stripes: int
    bytes: int  # written per run, after scaling
    bound: float | None  # best OSTCost equal stripes can reach, when stripes are equal
    runs: dict[str, Run] = field(default_factory=dict)  # "default", "iez"
    layout: str = KEEP  # the layout mode iez placed it with
    replaced: str = ""  # the scenario it stands in for, and why that one did not fit the cluster


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def scaled_cluster(scale: int) -> Cluster:
    """The paper's testbed (1 MDS, 3 OSS x 5 OSTs of 10 GiB, references: s000-testbed) divided by
    `scale`."""
    c = make_cluster(ost_size=(10 << 30) // scale)
    stripe = max(MIN_STRIPE, LUSTRE_DEFAULT_STRIPE // scale // MIN_STRIPE * MIN_STRIPE)
    return replace(c, default_stripe_size=stripe)


def clusters(opts: DemoOptions) -> dict[str, Cluster]:
    # the testbed's hardware, so the allocator plans for the bandwidths the simulator models
    base = seed000_hardware(scaled_cluster(opts.scale))
    return {"empty": base, "drifted": uneven_fill(base, *opts.drift, seed=opts.seed)}


def jobs_for(sc: Scenario, scale: int, root: Path) -> list[AppJob]:
    """The scenario's applications as iez-bench jobs, their data divided by `scale`."""
    by_app: dict[str, list[Request]] = defaultdict(list)
    for r in sc.requests:
        by_app[r.app].append(r)
    out = []
    for app, reqs in by_app.items():
        d = root / slug(sc.name) / app
        first = reqs[0]
        if app.startswith("hacc"):
            # through MPI-IO, one file per rank on MPI_COMM_SELF, as HACC-IO does (references: s000-testbed)
            job: IorJob | HaccJob = HaccJob(path=str(d / "FPP1"), particles=[r.write_bytes // HACC_RECORD // scale
                                                                              for r in reqs],
                                            ranks=len(reqs), fpp=True, header=HACC_HEADER // scale, read=False,
                                            api="MPIIO")
        elif first.comm_size > 1:  # one shared file (SSF)
            block = first.write_bytes // first.comm_size // scale
            job = IorJob(test_file=str(d / "testFile"), ranks=first.comm_size, block=block,
                         transfer=min(block, 1 << 20), fpp=False, read=False)
        else:
            block = first.write_bytes // scale
            job = IorJob(test_file=str(d / "testFile"), ranks=len(reqs), block=block, transfer=min(block, 1 << 20),
                         fpp=True, read=False)
        out.append(AppJob(app, d, first.stripe_count, job))
    return out


def equal_stripes_bound(reqs: Sequence[Request], n_osts: int) -> float | None:
    """ceil(k/n)/(k/n) when every stripe carries the same bytes (equal files and counts)."""
    if len({(r.write_bytes, r.stripe_count) for r in reqs}) != 1:
        return None
    return integer_bound(sum(r.stripe_count for r in reqs), n_osts)


def rpc_bound(write_bytes: int, n_osts: int) -> float:
    """The best OSTCost any layout can give `write_bytes` when its stripes are whole 1 MiB RPCs,
    the smallest stripe the automatic layout makes (docs/layouts.md): the integer bound of that
    many equal stripes on `n_osts` OSTs."""
    return integer_bound(max(1, round(write_bytes / RPC_SIZE)), n_osts)


def app_name(state: str, sc: Scenario, app: str) -> str:
    """The application's name at the controller: one per cluster and scenario."""
    return f"{state}-{slug(sc.name)}-{app}"


def measured_usage(stack: Stack) -> dict[int, int]:
    """Bytes used per OST as the OSSs report them (kbytestotal - kbytesfree), read with the
    parsers a real OSS is read with."""
    MdsClient(stack.cd).refresh()
    used: dict[int, int] = {}
    for s in stack.cluster.osses:
        space = target_space(ParamTree(stack.cd.host_params(s.name)).get("obdfilter.*.kbytes*")).by_index("OST")
        for i, t in space.items():
            if t.kbytestotal is None or t.kbytesfree is None:
                raise IezError(f"OST {i} on {s.name} reports no kbytestotal/kbytesfree")
            used[i] = (t.kbytestotal - t.kbytesfree) * 1024
    return used


def run_jobs(stack: Stack, jobs: Sequence[AppJob], names: dict[str, str]) -> None:
    """Each application through `iez run`, all at once (they are concurrent in the paper,
    docs/references.md#s000-fig14)."""
    env = stack.client_env(dict(os.environ))
    procs = []
    for j in jobs:
        argv = [sys.executable, "-m", "iez", "run", "--app", names[j.app], "--emulated", str(stack.cd.root),
                "--wait", str(PLAN_WAIT), "--", *command(j.job, json_report=False)]
        procs.append((j, subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True)))
    for j, p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise IezError(f"{names[j.app]}: iez run exited {p.returncode}: {err.strip().splitlines()[-1:] or ''}")
        if "warning" in err:
            raise IezError(f"{names[j.app]}: iez run warned: {err.strip().splitlines()[0]}")


def measure(stack: Stack, jobs: Sequence[AppJob], base: dict[int, int], seconds: float) -> Run:
    after = measured_usage(stack)
    job = {i: max(0, after.get(i, 0) - base.get(i, 0)) for i in after}
    backend = EmulatedBackend(stack.cd.root)
    layouts = {p: backend.get_layout(p) for j in jobs for p in j.job.files()}
    return Run(job_bytes=job, report=balance_report(stack.cluster, job), seconds=seconds, layouts=layouts)


def remove_files(jobs: Sequence[AppJob]) -> None:
    """Delete what the jobs wrote, keeping the directories and their default layouts."""
    for j in jobs:
        for p in j.job.files():
            Path(p).unlink(missing_ok=True)


def fits(reqs: Sequence[Request], cluster: Cluster, backend: EmulatedBackend, policy: str, layout: str) -> str:
    """'' if the policy can place the job on the cluster as it is now, else why not."""
    try:
        get_policy(policy).place(reqs, cluster, backend.stats(), AllocOptions(layout=layout))
    except AllocationError as e:
        return f"does not fit: {e}"
    return ""


SHRINK_TRIES = 4  # halvings of a scenario's bytes before it is given up (1/16 of its size)


def shrunk(sc: Scenario, times: int) -> Scenario:
    """The scenario with every file 2**times smaller, named by its new total ("64 GiB" -> "32 GiB")
    and without the paper's figures, which were for the full size."""
    reqs = tuple(replace(r, write_bytes=r.write_bytes >> times) for r in sc.requests)
    total = sum(r.write_bytes for r in reqs) / (1 << 30)
    name, n = re.subn(r"\b\d+ GiB\b", f"{total:g} GiB", sc.name, count=1)
    return replace(sc, name=name if n else f"{sc.name}, 1/{1 << times} size", requests=reqs, paper=None)


def fitted(sc: Scenario, scale: int, cluster: Cluster, backend: EmulatedBackend, policy: str,
           layout: str, root: Path) -> tuple[Scenario, str]:
    """The scenario, or the largest of its halvings that the policy can place on the cluster as
    it is now, and '' or why the original did not fit; a row of the demo is never empty."""
    why = ""
    for times in range(SHRINK_TRIES + 1):
        cand = shrunk(sc, times) if times else sc
        reqs = [r for j in jobs_for(cand, scale, root) for r in j.requests()]
        no = fits(reqs, cluster, backend, policy, layout)
        if not no:
            return cand, why
        why = why or no
    raise AllocationError(f"{sc.name}: {why}, even at 1/{1 << SHRINK_TRIES} of its size")


def replan(stack: Stack, names: Sequence[str]) -> None:
    """Have the controller place each application's coming run again, now, one after the other:
    its view then shows the cluster without the traced run's files (deleted), and each app sees
    the space the previous ones' plans reserve (the global view). A plan made while the traced
    run's files still filled the OSTs may have failed (ENOSPC); placing it again now succeeds."""
    stack.settle()
    with stack.client(admin=True) as c:
        for name in names:
            reply = c.fetch_plan(name, wait=PLAN_WAIT)
            if reply.status not in ("ready", "failed"):
                raise IezError(f"{name}: the controller has no plan ({reply.status}: {reply.reason})")
            coming = [r["run"] for r in c.app(name)["runs"] if not r.get("traced")]
            if not coming:
                raise IezError(f"{name}: the controller predicted no coming run ({reply.reason})")
            c.allocate(name, max(coming))


def plan_counts(stack: Stack, names: Sequence[str]) -> tuple[int, int]:
    hits = misses = 0
    with stack.client() as c:
        for name in names:
            last = [r for r in c.app(name)["runs"] if r.get("traced")][-1]
            hits += last.get("plan_hits") or 0
            misses += last.get("plan_misses") or 0
    return hits, misses


def simulate(run: Run, cluster: Cluster, reqs: Sequence[Request], opts: DemoOptions, state: str, sc: Scenario,
             which: str) -> None:
    """Bandwidth that one disk cannot show: the simulator's rates for the layouts the run got,
    at the paper's sizes (the scaling undone)."""
    run.rates = simulate_rates(cluster, reqs, run.layouts, clients=2, scale=opts.scale,
                               workdir=opts.out / "sim" / state / slug(sc.name) / which)


def run_demo(opts: DemoOptions, progress=None) -> tuple[dict[str, Cluster], list[Outcome]]:
    """Run every selected scenario under the default allocator and under iez, on each cluster."""
    scenarios = [(s, mode) for s, mode in demo_scenarios()
                 if not opts.only or any(o.lower() in s.name.lower() for o in opts.only)]
    if not scenarios:
        raise IezError(f"no scenario matches {', '.join(opts.only)}")
    opts.out.mkdir(parents=True, exist_ok=True)
    models = clusters(opts)
    task = progress.add_task("starting", total=2 * len(scenarios) * len(models)) if progress else None

    def step(text: str, advance: int = 0) -> None:
        if progress:
            progress.update(task, description=text, advance=advance)

    outcomes: list[Outcome] = []
    for state, cluster in models.items():
        work = opts.out / state
        if work.exists():
            shutil.rmtree(work)
        step(f"{state} cluster: starting the MDS, collectors and controller")
        keep = [app_name(state, sc, r.app) for sc, mode in scenarios if mode == KEEP for r in sc.requests]
        with control_plane(work, cluster, seed=opts.seed, policy=opts.policy, layout="auto",
                           layout_keep=sorted(set(keep))) as stack:
            outcomes += [_run_scenario(state, stack, sc, mode, opts, step) for sc, mode in scenarios]
    return models, outcomes


def _run_scenario(state: str, stack: Stack, sc: Scenario, layout: str, opts: DemoOptions,
                  step: Callable[..., None]) -> Outcome:
    cluster, backend = stack.cluster, EmulatedBackend(stack.cd.root)
    shown, why = fitted(sc, opts.scale, cluster, backend, opts.policy, layout, stack.cd.fs)
    # the directories and application names stay the original's (the controller keeps its layouts)
    jobs = jobs_for(replace(sc, requests=shown.requests), opts.scale, stack.cd.fs)
    reqs = [r for j in jobs for r in j.requests()]
    written = sum(r.write_bytes for r in reqs)
    # with the paper's stripe counts kept, equal stripes bound the job; with iez's layout, its bytes
    bound = equal_stripes_bound(reqs, len(cluster.osts)) if layout == KEEP else rpc_bound(written, len(cluster.osts))
    oc = Outcome(state, shown, len(reqs), sum(r.stripe_count for r in reqs), written, bound, layout=layout,
                 replaced=f"in place of {sc.name}, which {why}" if why else "")
    names = {j.app: app_name(state, sc, j.app) for j in jobs}
    for j in jobs:  # the scenario's stripe count, asked for the Lustre way: a directory default
        j.directory.mkdir(parents=True, exist_ok=True)
        backend.set_default(j.directory, Layout(stripe_count=j.stripe_count))
    for which in ("default", "iez"):
        step(f"{state} cluster, {sc.name}: {'traced run, Lustre default' if which == 'default' else 'placed by iez'}")
        if which == "iez":
            remove_files(jobs)
            replan(stack, list(names.values()))
        base = measured_usage(stack)
        t0 = time.perf_counter()
        run_jobs(stack, jobs, names)
        oc.runs[which] = run = measure(stack, jobs, base, time.perf_counter() - t0)
        if which == "iez":
            run.plan_hits, run.plan_misses = plan_counts(stack, list(names.values()))
        simulate(run, cluster, reqs, opts, state, shown, which)
        step(f"{state} cluster, {sc.name}", 1)
    shutil.rmtree(stack.cd.fs / slug(sc.name))
    with stack.client(admin=True) as c:  # these jobs will not run again: their next runs reserve nothing
        for name in names.values():
            c.release(name)
    return oc
