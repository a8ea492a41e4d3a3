"""OST allocation performance: the speed of `balanced` against networkx Algorithm 2
(`iez-paper`, docs/references.md#s000-alg2), its end-to-end time at Spider II scale (requests as
columns in, plan text out) against a plain numpy greedy of the same stripes, and the balance of `balanced` against Lustre's rr / qos
on the seed-000 scenarios (docs/references.md#s000-testbed) and the Darshan sample logs. Every
figure is a ratio against a baseline measured here.

    python -m bench alloc
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from dataclasses import replace
import darshan.log_utils as lu
import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

from iez.alloc.balanced import rr_orders, solve
from iez.alloc.policy import AllocOptions, OstTable, Placements, job_bytes, makespan, ost_table, tables
from iez.alloc.registry import get_policy
from iez.alloc.scenarios import GiB, paper_scenarios, uneven_fill
from iez.cluster import DEFAULT_NIC_BW, Snapshot, make_cluster
from iez.errors import AllocationError
from iez.metrics import balance_report, integer_bound
from iez.plan import dumps_arrays
from iez.request import Placement, Request, RequestColumns
from iez.trace.darshan import read_log
from iez.trace.ingest import ingest

MiB = 1 << 20
TiB = 1 << 40
NX_BUDGET = 20.0  # seconds networkx may take per case before we stop it
PAPER_CLIENTS = 2  # the paper's testbed: 1 MDS, 3 OSSs and 2 clients (references: s000-testbed)
SEEDS = range(5)  # rr and qos draw a random start: their figures are means over these seeds
# Seed 000's jobs ask a stripe count and the paper's allocator kept it: the allocators are compared
# on where they put those stripes, not on how many (the automatic layout has bench_layout).
KEEP = "keep"
SPEED_CASES = ((15, 64, 8), (15, 1024, 4), (1008, 2048, 4), (1008, 16384, 4), (1008, 100000, 1))
console = Console(width=150)


# -- speed ---------------------------------------------------------------------------------------


def speed_requests(n_osts: int, files: int, count: int) -> list[Request]:
    # The 15-OST cases are IOR-like (equal files); the 1008-OST ones mix four file sizes, as
    # several applications' files would.
    sizes = [GiB if files <= 64 else 64 * MiB] if n_osts == 15 else [64 * MiB, 256 * MiB, GiB, 4 * GiB]
    return [Request(f"/mnt/iez/bench/f.{i:08d}", sizes[i % len(sizes)], count, rank=i) for i in range(files)]


def speed_cluster(n_osts: int):
    return make_cluster() if n_osts == 15 else make_cluster(126, 8, 64 * TiB)


def best_of(fn, runs: int = 5) -> float:
    best = math.inf
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _networkx_child(conn, n_osts: int, files: int, count: int) -> None:
    cluster = speed_cluster(n_osts)
    reqs = speed_requests(n_osts, files, count)
    t = time.perf_counter()
    get_policy("iez-paper").place(reqs, cluster, Snapshot.from_cluster(cluster), AllocOptions(layout=KEEP))
    conn.send(time.perf_counter() - t)


def networkx_time(n_osts: int, files: int, count: int) -> float | None:
    """Seconds networkx Algorithm 2 takes, or None if it exceeds NX_BUDGET (it is then stopped)."""
    parent, child = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=_networkx_child, args=(child, n_osts, files, count))
    proc.start()
    got = parent.recv() if parent.poll(NX_BUDGET) else None
    if proc.is_alive():
        proc.kill()
    proc.join()
    return got


def speed() -> None:
    table = Table(title="balanced vs networkx iez-paper (Algorithm 2): time to place")
    for col in ("OSTs x files x stripes", "balanced solve", "balanced place()", "networkx", "speed-up"):
        table.add_column(col, justify="right")
    for n_osts, files, count in track(SPEED_CASES, description="timing", console=console, transient=True):
        cluster = speed_cluster(n_osts)
        snap = Snapshot.from_cluster(cluster)
        reqs = speed_requests(n_osts, files, count)
        opts = AllocOptions(layout=KEEP)
        osts, tab = tables(reqs, cluster, snap, opts)
        orders = rr_orders(cluster, tab, osts)
        core = best_of(lambda: solve(tab, osts, orders, opts))
        whole = best_of(lambda: get_policy("balanced").place(reqs, cluster, snap, opts))
        nx_t = networkx_time(n_osts, files, count)
        nx_s = f"{nx_t:.3f} s" if nx_t is not None else f"> {NX_BUDGET:.0f} s"
        ratio = f"{nx_t / whole:,.0f}x" if nx_t is not None else f"> {NX_BUDGET / whole:,.0f}x"
        table.add_row(f"{n_osts} x {files} x {count}", f"{core * 1e3:.1f} ms", f"{whole * 1e3:.1f} ms", nx_s, ratio)
    console.print(table)
    load = os.getloadavg()[0]
    console.print(f"speed-up = networkx time / balanced place() time, both on this machine in this run (best of 5; "
                  f"load average {load:.1f} on {os.cpu_count()} cores while it ran). place() here starts from "
                  "Request objects; the goals are end to end from columns (the table below).")


# -- balance -------------------------------------------------------------------------------------


def mean_over_seeds(policy: str, reqs, cluster, snap) -> tuple[float, float, float]:
    """(job OSTCost, total OSTCost, analytic time) of a randomised baseline, mean over SEEDS."""
    rows = []
    for seed in SEEDS:
        on = job_bytes(get_policy(policy).place(reqs, cluster, snap, AllocOptions(seed=seed, layout=KEEP)))
        rep = balance_report(cluster, on)
        rows.append((rep.job.ost_cost, rep.total.ost_cost, makespan(cluster, snap, on)))
    return tuple(np.mean(rows, axis=0))


def figures(policy: str, reqs, cluster, snap, **opts) -> tuple[float, float, float]:
    on = job_bytes(get_policy(policy).place(reqs, cluster, snap, AllocOptions(**{"layout": KEEP, **opts})))
    rep = balance_report(cluster, on)
    return rep.job.ost_cost, rep.total.ost_cost, makespan(cluster, snap, on)


def balance_on_empty() -> None:
    cluster = make_cluster()
    snap = Snapshot.from_cluster(cluster)
    table = Table(title="OSTCost of the job's bytes, empty 15-OST testbed (the paper's metric)")
    for col in ("scenario", "bound", "rr", "qos", "balanced", "balanced/rr", "time vs rr", "paper RR -> iez"):
        table.add_column(col, justify="right")
    for sc in track(paper_scenarios(), description="empty testbed", console=console, transient=True):
        reqs = list(sc.requests)
        bound = integer_bound(sum(r.stripe_count for r in reqs), len(cluster.osts))
        rr, qos = mean_over_seeds("rr", reqs, cluster, snap), mean_over_seeds("qos", reqs, cluster, snap)
        bal = figures("balanced", reqs, cluster, snap)
        paper = f"{sc.paper[0]:.2f} -> {sc.paper[1]:.2f}" if sc.paper else ""
        table.add_row(sc.name, f"{bound:.3f}", f"{rr[0]:.3f}", f"{qos[0]:.3f}", f"{bal[0]:.3f}",
                      f"{bal[0] / rr[0]:.3f}", f"{bal[2] / rr[2]:.3f}", paper)
    console.print(table)
    console.print(
        "bound = ceil(k/n)/(k/n) for k equal stripes on n OSTs; files whose Method II stripes are not equal "
        "(HACC-I/O's short last stripe) can beat it, and SSF cannot go below n/c. rr and qos: mean of "
        f"{len(SEEDS)} random starts. time vs rr: balanced's analytic write time / rr's (<= 1 is the rule).")


def balance_on_uneven() -> None:
    cluster = uneven_fill(make_cluster(), 0.1, 0.4, seed=0)
    snap = Snapshot.from_cluster(cluster)
    table = Table(title="OSTCost of total usage, testbed starting 10-40% full (target <= 1.01)")
    for col in ("scenario", "start", "rr", "qos", "balanced", "time vs rr", "balanced, 2 clients",
                "time vs rr", "best possible", "its time vs rr"):
        table.add_column(col, justify="right")
    start = balance_report(cluster, {}).total.ost_cost
    met = at_best = 0
    refused: list[str] = []
    scenarios = paper_scenarios()
    for sc in track(scenarios, description="uneven testbed", console=console, transient=True):
        reqs = list(sc.requests)
        rr, qos = mean_over_seeds("rr", reqs, cluster, snap), mean_over_seeds("qos", reqs, cluster, snap)
        try:
            bal = figures("balanced", reqs, cluster, snap)
        except AllocationError:
            # e.g. 64 GiB on 8 stripes: 8 GiB an OST, more room than most OSTs here have. RR and
            # QoS place it anyway (LOD checks free space, not the file's size) and overfill them.
            worst = max(max(balance_report(cluster, job_bytes(get_policy(p).place(reqs, cluster, snap, AllocOptions(layout=KEEP)))).total
                            .ost_util.values()) for p in ("rr", "qos"))
            refused.append(f"{sc.name} (RR/QoS fill an OST to {worst:.0%})")
            table.add_row(sc.name, f"{start:.3f}", f"{rr[1]:.3f}", f"{qos[1]:.3f}", "ENOSPC", "", "ENOSPC", "", "", "")
            continue
        # The paper's testbed wrote from 2 client nodes; at 10 GbE each they bound the job.
        two = AllocOptions(client_bw=PAPER_CLIENTS * DEFAULT_NIC_BW, layout=KEEP)
        rr2 = np.mean([makespan(cluster, snap, job_bytes(get_policy("rr").place(reqs, cluster, snap, replace(
            two, seed=s))), two) for s in SEEDS])
        on2 = job_bytes(get_policy("balanced").place(reqs, cluster, snap, two))
        cost2 = balance_report(cluster, on2).total.ost_cost
        best = figures("balanced", reqs, cluster, snap, capacity_weight=1.0, max_slowdown=math.inf)
        met += cost2 <= 1.01
        at_best += cost2 <= best[1] + 0.005
        table.add_row(sc.name, f"{start:.3f}", f"{rr[1]:.3f}", f"{qos[1]:.3f}", f"{bal[1]:.3f}",
                      f"{bal[2] / rr[2]:.3f}", f"{cost2:.3f}", f"{makespan(cluster, snap, on2, two) / rr2:.3f}",
                      f"{best[1]:.3f}", f"{best[2] / rr[2]:.2f}")
    console.print(table)
    console.print(
        "balanced: default weight 0.5, time judged on the servers alone (OST and OSS bandwidth). "
        f"balanced, 2 clients: the same with the paper testbed's {PAPER_CLIENTS} client nodes at 10 GbE "
        "(AllocOptions.client_bw), which bound the job's speed and so leave the servers slack. "
        "best possible: capacity balance alone, no time bound (the exact optimum for these stripes), "
        "with what it would cost the job. "
        f"Within 0.005 of the best possible without being slower than RR: {at_best} of {len(scenarios)}; "
        f"<= 1.01: {met} of {len(scenarios)}. Stripe granularity (a 128 MiB stripe is 1.25% of a 10 GiB OST) "
        "and job size set the floor: a job much smaller than the cluster (HACC-I/O's 3-12 GB, one SSF file) cannot even out 150 GB, and "
        "with the servers as the bottleneck, evening out more than the job's own spread would slow it."
        + (f" Refused, as no placement with the asked stripe count fits: {'; '.join(refused)}." if refused else ""))


def darshan_logs() -> None:
    table = Table(title="Darshan sample logs (NERSC Edison IOR runs): OSTCost of the job's bytes")
    for col in ("log", "files", "bound", "observed (real Lustre)", "rr", "qos", "balanced", "time vs rr"):
        table.add_column(col, justify="right")
    for name in ("sample-goodost.darshan", "sample-badost.darshan"):
        reqs = ingest(read_log(lu.get_log_path(name)).records).requests
        n = 1 + max(o for r in reqs if r.observed for o in r.observed.osts())
        cluster = make_cluster(n // 2, 2, 64 * TiB)  # the logs name n OSTs; we assume 2 per OSS
        snap = Snapshot.from_cluster(cluster)
        observed = [Placement(r.path, r.observed, r.write_bytes, r.app, r.run, "observed") for r in reqs]
        seen = balance_report(cluster, job_bytes(observed)).job.ost_cost
        rr, qos = mean_over_seeds("rr", reqs, cluster, snap), mean_over_seeds("qos", reqs, cluster, snap)
        bal = figures("balanced", reqs, cluster, snap)
        bound = integer_bound(sum(r.stripe_count for r in reqs), n)
        table.add_row(name, str(len(reqs)), f"{bound:.4f}", f"{seen:.4f}", f"{rr[0]:.4f}", f"{qos[0]:.4f}",
                      f"{bal[0]:.4f}", f"{bal[2] / rr[2]:.3f}")
    console.print(table)


RR_NOTE = """\
Where our RR differs from the paper's: on an empty cluster Lustre's RR gives each file the next
stripe_count slots of its OSS-interleaved array, so with equal files the OSTs differ by at most
one stripe: 1.025 for 64 files x 8 stripes and 1.41 for 8 x 4 on 15 OSTs, the integer bounds.
The paper reports 1.47, 1.22, 1.37 and 1.17 for RR. Its Fig. 7 mean (51% for 64 GB on 150 GB,
i.e. 43% from the job) shows the testbed already held data: LOD then uses QoS, not RR, once free
space differs by more than 17%, and the paper's "RR" figures include that existing data. Our
empty-cluster rr/qos rows measure the allocator alone; the uneven table (total usage) is the
closer analogue of the paper's testbed and figures."""


# -- end to end at scale ------------------------------------------------------------------------

# Goals (CPU seconds, requests in to plan out) for single-stripe files on Spider II's 1,008 OSTs.
SCALE_GOALS = ((100_000, 0.020), (1_000_000, 0.200))
SCALE_PAIRS = {100_000: 7, 1_000_000: 3}  # (subject, baseline) pairs timed, interleaved


def scale_columns(files: int) -> RequestColumns:
    """`files` single-stripe files of four sizes, as columns (speed_requests' files)."""
    sizes = np.array([64 * MiB, 256 * MiB, GiB, 4 * GiB], dtype=np.int64)
    paths = np.array([f"/mnt/iez/bench/f.{i:08d}" for i in range(files)], dtype=object)
    return RequestColumns(paths, sizes[np.arange(files) % 4], np.ones(files, np.int64), np.zeros(files),
                          np.zeros(files, np.int64))


def end_to_end(cols: RequestColumns, cluster, snap: Snapshot) -> str:
    """Requests in, plan text out: `balanced` and the plan written from its arrays."""
    placed = get_policy("balanced").place(cols, cluster, snap, AllocOptions(layout=KEEP))
    assert isinstance(placed, Placements)
    t = placed.table
    return dumps_arrays({"app": "bench", "run": "1"}, placed.paths(), placed.size, placed.offsets, placed.osts,
                        t.pools, t.pool, placed.non_plain())


def numpy_greedy(cols: RequestColumns, osts: OstTable) -> np.ndarray:
    """The baseline: each stripe to the next OST in order of utilization, dealt round-robin over
    them in bulk, and the bytes each OST gets (no time model, no exactness, no plan)."""
    by_use = np.argsort(osts.used / osts.capacity, kind="stable")
    chosen = by_use[np.arange(len(cols)) % len(by_use)]
    np.bincount(chosen, cols.write_bytes.astype(float), len(by_use))
    return chosen


def cpu_seconds(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def heap_defaults_seconds(files: int) -> float:
    """The end-to-end median in a process of its own left with glibc's malloc defaults (no
    `keep_freed_memory`), for the record: the goal is read in the process as iez runs it."""
    code = f"from bench.bench_alloc import scale_seconds; print(scale_seconds({files}))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def scale_seconds(files: int) -> float:
    """The median CPU time of end-to-end runs of `files` files in this process (warmed once)."""
    cluster = speed_cluster(1008)
    snap = Snapshot.from_cluster(cluster)
    cols = scale_columns(files)
    end_to_end(cols, cluster, snap)
    return statistics.median(cpu_seconds(lambda: end_to_end(cols, cluster, snap)) for _ in range(SCALE_PAIRS[files]))


def at_scale() -> None:
    cluster = speed_cluster(1008)
    snap = Snapshot.from_cluster(cluster)
    osts = ost_table(cluster, snap, AllocOptions(layout=KEEP))
    table = Table(title="balanced end to end on 1008 OSTs / 126 OSSs: request columns in, plan text out "
                        "(CPU time, median of interleaved pairs)")
    for col in ("files", "end to end", "numpy greedy", "end to end / greedy", "goal", "goal / greedy", "",
                "glibc defaults", "peak memory", "per file"):
        table.add_column(col, justify="right")
    for files, goal in SCALE_GOALS:
        cols = scale_columns(files)
        end_to_end(cols, cluster, snap)  # warm: the cluster's RR arrays are built once
        subject, base = [], []
        for _ in range(SCALE_PAIRS[files]):
            subject.append(cpu_seconds(lambda: end_to_end(cols, cluster, snap)))
            base.append(cpu_seconds(lambda: numpy_greedy(cols, osts)))
        e2e, greedy = statistics.median(subject), statistics.median(base)
        peak = peak_bytes(lambda: end_to_end(cols, cluster, snap))
        table.add_row(f"{files:,}", f"{e2e * 1e3:.1f} ms", f"{greedy * 1e3:.2f} ms", f"{e2e / greedy:.1f}x",
                      f"<= {goal * 1e3:.0f} ms", f"{goal / greedy:.1f}x", "met" if e2e <= goal else "NOT met",
                      f"{heap_defaults_seconds(files) * 1e3:.1f} ms", f"{peak / MiB:.0f} MiB", f"{peak / files:.0f} B")
    console.print(table)
    console.print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores. goal / greedy: the goal in units "
                  "of the greedy's time in this run, to read against end to end / greedy on a loaded machine. Peak "
                  "memory: tracemalloc's peak of one end-to-end run (the request columns themselves not counted). This process "
                  "keeps freed memory as every iez process does (iez.heap: glibc's mmap and trim thresholds raised); glibc "
                  "defaults: the same runs in a process of their own without that (not the goal's configuration).")


def main() -> None:
    speed()
    at_scale()
    balance_on_empty()
    balance_on_uneven()
    darshan_logs()
    console.print(RR_NOTE)


if __name__ == "__main__":
    main()
