"""`iez demo`: seed 000's load-balance evaluation, run for real on an emulated cluster.

For each scenario of seed 000 §IV (IOR and HACC-I/O, FPP and SSF, two applications at once):
1. default: the files are created through the emulated MDS, which lays them out with Lustre's
   own allocator (LOD's QoS/RR), and their bytes are written;
2. iez: the same requests are allocated by an iez policy (`balanced` by default) against the
   cluster's live statistics, the files are created with those layouts, and written.
After each run the per-OST usage is read back from the OSSs' parameter trees with the same
parsers a real OSS is read with, and OSTCost (eq. 7) is computed from it.

Data is scaled down (OST capacity and every file by `scale`) so the whole demo runs in minutes;
utilizations and OSTCost are ratios, so the scaling leaves them comparable with the paper's.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from iez.alloc.policy import AllocOptions, get_policy
from iez.alloc.scenarios import Scenario, paper_scenarios, uneven_fill
from iez.backend.emulated import EmulatedBackend
from iez.cluster import Cluster, make_cluster
from iez.demo.simulate import SimRates, seed000_hardware, simulate_rates
from iez.emulated.client import MdsClient, running_cluster
from iez.emulated.clusterdir import ClusterDir
from iez.errors import AllocationError, IezError
from iez.layout.layout import FileLayout, Layout
from iez.layout.raid0 import bytes_per_ost
from iez.lustre.params import ParamTree
from iez.lustre.targets import target_space
from iez.metrics import BalanceReport, balance_report, integer_bound
from iez.request import Placement, Request

LUSTRE_DEFAULT_STRIPE = 1 << 20  # the testbed's default stripe size (Lustre <= 2.15)
MIN_STRIPE = 65536
CHUNK = 1 << 20


@dataclass(frozen=True)
class DemoOptions:
    out: Path = Path("demo-out")
    scale: int = 32  # OST capacity and every file are divided by this
    seed: int = 1  # the emulated MDS's random choices (RR start, QoS) and the drifted fill
    only: tuple[str, ...] = ()  # run only scenarios whose name contains one of these
    policy: str = "balanced"
    drift: tuple[float, float] = (0.1, 0.4)  # the drifted cluster's OSTs start this full


# The two clusters every scenario runs on: the paper's empty testbed, and the same testbed
# after it has drifted out of balance (each OST already 10-40% full with other users' data).
STATES = ("empty", "drifted")


@dataclass
class Run:
    """One scenario under one allocator: what each OST received, measured on the cluster, and
    the I/O rates the simulator gives those very layouts on the testbed's hardware."""

    job_bytes: dict[int, int]
    report: BalanceReport
    seconds: float
    layouts: dict[str, FileLayout]  # what each file got, read back from the file system
    rates: SimRates | None = None


@dataclass
class Outcome:
    state: str  # "empty" or "drifted"
    scenario: Scenario
    files: int
    stripes: int
    bytes: int  # written per run, after scaling
    bound: float | None  # best OSTCost equal stripes can reach, when stripes are equal
    runs: dict[str, Run] = field(default_factory=dict)  # "default", "iez"
    skipped: str = ""  # why the scenario did not run on this cluster (it does not fit)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def scaled_cluster(scale: int) -> Cluster:
    """The seed-000 testbed (1 MDS, 3 OSS x 5 OSTs of 10 GiB) divided by `scale`."""
    c = make_cluster(ost_size=(10 << 30) // scale)
    stripe = max(MIN_STRIPE, LUSTRE_DEFAULT_STRIPE // scale // MIN_STRIPE * MIN_STRIPE)
    return replace(c, default_stripe_size=stripe)


def scaled_requests(sc: Scenario, scale: int, root: Path) -> list[Request]:
    d = root / slug(sc.name)
    return [replace(r, path=str(d / r.app / Path(r.path).name), write_bytes=max(1, r.write_bytes // scale))
            for r in sc.requests]


def equal_stripes_bound(reqs: Sequence[Request], n_osts: int) -> float | None:
    """ceil(k/n)/(k/n) when every stripe carries the same bytes (equal files and counts)."""
    if len({(r.write_bytes, r.stripe_count) for r in reqs}) != 1:
        return None
    return integer_bound(sum(r.stripe_count for r in reqs), n_osts)


def write_file(path: Path, nbytes: int, buf: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        left = nbytes
        while left:
            left -= os.write(fd, buf[:min(left, len(buf))])
    finally:
        os.close(fd)


def measured_usage(cd: ClusterDir, cluster: Cluster) -> dict[int, int]:
    """Bytes used per OST as the OSSs report them (kbytestotal - kbytesfree), read with the
    parsers a real OSS is read with."""
    MdsClient(cd).refresh()
    used: dict[int, int] = {}
    for s in cluster.osses:
        space = target_space(ParamTree(cd.host_params(s.name)).get("obdfilter.*.kbytes*")).by_index("OST")
        for i, t in space.items():
            used[i] = (t.kbytestotal - t.kbytesfree) * 1024
    return used


def place_iez(reqs: Sequence[Request], cluster: Cluster, backend: EmulatedBackend, policy: str) -> list[Placement]:
    """Allocate app by app with the global view: each app sees what the earlier ones reserved."""
    snap = backend.stats()
    reserved: dict[int, int] = defaultdict(int)
    out: list[Placement] = []
    by_app: dict[str, list[Request]] = defaultdict(list)
    for r in reqs:
        by_app[r.app].append(r)
    for app_reqs in by_app.values():
        placed = get_policy(policy).place(app_reqs, cluster, snap, AllocOptions(reserved=dict(reserved)))
        for p in placed:
            for ost, n in bytes_per_ost(p.layout, p.write_bytes).items():
                reserved[ost] += n
        out.extend(placed)
    return out


def run_one(cd: ClusterDir, cluster: Cluster, reqs: Sequence[Request], layouts: Sequence[Layout | FileLayout],
            advance: Callable[[int], None]) -> Run:
    backend = EmulatedBackend(cd.root)
    base = measured_usage(cd, cluster)
    buf = b"\0" * CHUNK
    t0 = time.perf_counter()
    for r, lay in zip(reqs, layouts):
        Path(r.path).parent.mkdir(parents=True, exist_ok=True)
        backend.create(r.path, lay)
        write_file(Path(r.path), r.write_bytes, buf)
        advance(r.write_bytes)
    seconds = time.perf_counter() - t0
    after = measured_usage(cd, cluster)
    job = {i: max(0, after.get(i, 0) - base.get(i, 0)) for i in after}
    layouts = {r.path: backend.get_layout(r.path) for r in reqs}
    return Run(job_bytes=job, report=balance_report(cluster, job), seconds=seconds, layouts=layouts)


def simulate(run: Run, cluster: Cluster, reqs: Sequence[Request], opts: DemoOptions, state: str, sc: Scenario,
             which: str) -> None:
    """Bandwidth that one disk cannot show: the simulator's rates for the layouts the run got,
    at the paper's sizes (the scaling undone)."""
    run.rates = simulate_rates(cluster, reqs, run.layouts, clients=2, scale=opts.scale,
                               workdir=opts.out / "sim" / state / slug(sc.name) / which)


def clusters(opts: DemoOptions) -> dict[str, Cluster]:
    # the testbed's hardware, so the allocator plans for the bandwidths the simulator models
    base = seed000_hardware(scaled_cluster(opts.scale))
    return {"empty": base, "drifted": uneven_fill(base, *opts.drift, seed=opts.seed)}


def run_demo(opts: DemoOptions, progress=None) -> tuple[dict[str, Cluster], list[Outcome]]:
    """Run every selected scenario under the default allocator and under iez, on each cluster."""
    scenarios = [s for s in paper_scenarios() if not opts.only or any(o.lower() in s.name.lower() for o in opts.only)]
    if not scenarios:
        raise IezError(f"no scenario matches {', '.join(opts.only)}")
    opts.out.mkdir(parents=True, exist_ok=True)
    models = clusters(opts)
    per_pass = 2 * sum(max(1, r.write_bytes // opts.scale) for s in scenarios for r in s.requests)
    task = progress.add_task("writing", total=per_pass * len(models)) if progress else None

    def advance(n: int) -> None:
        if progress:
            progress.update(task, advance=n)

    outcomes: list[Outcome] = []
    for state, cluster in models.items():
        work = opts.out / f"cluster-{state}"
        if work.exists():
            shutil.rmtree(work)
        with running_cluster(work, cluster, seed=opts.seed) as cd:
            outcomes += _run_pass(state, cd, cluster, scenarios, opts, progress, task, advance)
    return models, outcomes


def _run_pass(state: str, cd: ClusterDir, cluster: Cluster, scenarios: Sequence[Scenario], opts: DemoOptions,
              progress, task, advance: Callable[[int], None]) -> list[Outcome]:
    backend = EmulatedBackend(cd.root)
    outcomes = []
    for sc in scenarios:
        reqs = scaled_requests(sc, opts.scale, cd.fs)
        oc = Outcome(state, sc, len(reqs), sum(r.stripe_count for r in reqs), sum(r.write_bytes for r in reqs),
                     equal_stripes_bound(reqs, len(cluster.osts)))
        try:  # on the emptied cluster, as the default run will see it
            placed = place_iez(reqs, cluster, backend, opts.policy)
        except AllocationError as e:
            oc.skipped = f"does not fit: {e}"
            outcomes.append(oc)
            advance(2 * oc.bytes)
            continue
        if progress:
            progress.update(task, description=f"{state} cluster, {sc.name}: default")
        oc.runs["default"] = run_one(cd, cluster, reqs, [Layout(stripe_count=r.stripe_count) for r in reqs], advance)
        simulate(oc.runs["default"], cluster, reqs, opts, state, sc, "default")
        shutil.rmtree(cd.fs / slug(sc.name))
        if progress:
            progress.update(task, description=f"{state} cluster, {sc.name}: iez")
        oc.runs["iez"] = run_one(cd, cluster, reqs, [p.layout for p in placed], advance)
        simulate(oc.runs["iez"], cluster, reqs, opts, state, sc, "iez")
        shutil.rmtree(cd.fs / slug(sc.name))
        outcomes.append(oc)
    return outcomes
