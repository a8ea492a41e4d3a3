"""Allocation latency through the controller vs a direct call of the same policy.

A real controller process (SQLite, no gate) on an emulated seed-000 testbed (3 OSSs x 5 OSTs)
with its four collectors publishing every second. For jobs of N file-per-process files
(stripe count 4), each figure against the direct `policy.place` time measured in the same run:
- inside the controller: placing the run and storing its plan (iez_allocation_seconds), and the
  worker's CPU time for it (the controller's log) against placing's CPU time here;
- end to end: POST the requests, then GET until the plan is served (HTTP, database, worker), in
  wall time and in the controller's CPU time against placing's CPU time (less noisy on a shared machine);
- a run of BIG files: its upload, and upload to plan served;
- its plan served: its first GET (read from the database) and a later one (from the
  controller's memory), against the goal of 100 ms (docs/controller.md, "Performance");
- the trace of a planned run uploaded (its files created from the plan, with the layouts they
  got, as `iez run` uploads it), in the controller's CPU against placing's CPU here.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

from iez.alloc.policy import AllocOptions, Policy
from iez.alloc.registry import get_policy
from iez.cluster import Cluster, Snapshot, make_cluster
from iez.controller.api_client import ControllerClient, request_json
from iez.controller.local import LocalControlPlane
from iez.emulated.mds_client import running_cluster
from iez.request import Request

SIZES = (64, 1024, 8192)
REPEAT = 3
BIG = 100_000
GOAL_SERVED_MS = 100.0
GOAL_RATIO = 2.0  # place + store, and upload to plan served, against placing alone (docs/controller.md, "Performance")
MiB = 1 << 20
POLL = 0.02  # seconds between GETs of a pending plan (each costs the controller CPU)
IDLE = 2.0  # seconds the controller's idle CPU (the collectors' messages) is measured over


def job(root: Path, app: str, n: int) -> list[Request]:
    return [Request(str(root / "fs" / app / f"out.{i:08d}"), 64 * MiB, 4, rank=i) for i in range(n)]


def allocation_seconds(url: str, token: str) -> float:
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    m = re.search(r'^iez_allocation_seconds_sum\{policy="balanced"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process `pid` so far, from /proc (clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def placing_cpu(cp: LocalControlPlane, app: str) -> float:
    """The worker's CPU time placing and storing `app`'s run, from the controller's log."""
    m = re.search(rf"placed {app} run \d+ with balanced: \d+ files in \S+ s \((\S+) s of CPU\)", cp.log("controller"))
    return float(m.group(1)) if m else float("nan")


def goal(ratio: float) -> str:
    return f"goal <= {GOAL_RATIO:.0f} x: {'met' if ratio <= GOAL_RATIO else 'NOT met'}"


def direct_seconds(policy: Policy, reqs: list[Request], cluster: Cluster, snap: Snapshot) -> tuple[float, float]:
    """Wall and CPU time of placing `reqs` here, without the controller."""
    t0, c0 = time.perf_counter(), time.process_time()
    policy.place(reqs, cluster, snap, AllocOptions(layout="keep"))
    return time.perf_counter() - t0, time.process_time() - c0


def upload_served(client: ControllerClient, app: str, reqs: list[Request], pid: int, idle: float
                  ) -> tuple[float, float, float]:
    """POST the requests, then GET until the plan is served: the upload's wall time, the whole
    wall time and the controller's CPU time for it (less what it spends idle: the collectors)."""
    body = {"requests": [request_json(q) for q in reqs]}
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    client.http.post(f"/apps/{app}/requests", json=body, timeout=600).raise_for_status()
    posted = time.perf_counter() - t0
    while client.http.get(f"/apps/{app}/plan", timeout=600).status_code != 200:
        time.sleep(POLL)
    wall = time.perf_counter() - t0
    return posted, wall, cpu_seconds(pid) - c0 - idle * wall


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cluster = make_cluster(ost_size=1 << 40)
        with running_cluster(root / "emu", cluster, seed=1) as cd, LocalControlPlane(cd, root / "cp") as cp:
            cp.start_collectors()
            # the printed stripe count 4 is the files' own
            pid = cp.start_controller("--no-gate", "--layout", "keep").pid
            client = cp.client()
            policy = get_policy("balanced")
            snap = Snapshot.from_cluster(cluster, time.time())
            c0 = cpu_seconds(pid)
            time.sleep(IDLE)
            idle = (cpu_seconds(pid) - c0) / IDLE
            print(f"{len(cluster.osts)} OSTs / {len(cluster.osses)} OSSs, FPP files of 64 MiB, stripe count 4, "
                  f"median of {REPEAT}; wall times, and the controller's CPU against placing's CPU here "
                  f"(its idle {idle * 100:.1f} % of a core taken out):")
            for n in SIZES:
                direct, direct_cpu, inside, inside_cpu, e2e, e2e_cpu = [], [], [], [], [], []
                for k in range(REPEAT):
                    app = f"b{n}x{k}"
                    reqs = job(cd.root, app, n)
                    d, dc = direct_seconds(policy, reqs, cluster, snap)
                    before = allocation_seconds(cp.url, cp.site)
                    _, e, ec = upload_served(client, app, reqs, pid, idle)
                    for got, x in ((direct, d), (direct_cpu, dc), (inside, allocation_seconds(cp.url, cp.site) - before),
                                   (inside_cpu, placing_cpu(cp, app)), (e2e, e), (e2e_cpu, ec)):
                        got.append(x)
                d, dc, i, ic, e, ec = (statistics.median(x) for x in (direct, direct_cpu, inside, inside_cpu, e2e, e2e_cpu))
                print(f"  {n:5d} files: direct place {d * 1000:7.1f} ms | in the controller (place + store) "
                      f"{i * 1000:7.1f} ms = {i / d:5.2f} x direct, {goal(i / d)}; its CPU {ic * 1000:6.1f} ms = "
                      f"{ic / dc:5.2f} x placing's, {goal(ic / dc)} | upload to plan served "
                      f"{e * 1000:7.1f} ms = {e / d:5.2f} x direct, {goal(e / d)}; controller CPU {ec * 1000:7.1f} ms "
                      f"= {ec / dc:5.2f} x placing's {dc * 1000:.1f} ms, {goal(ec / dc)}")
            print(f"  goal: store and serve add at most 1x the placement (each <= {GOAL_RATIO:.0f} x placing)")
            reqs = job(cd.root, "big", BIG)
            d, dc = direct_seconds(policy, reqs, cluster, snap)
            posted, e, ec = upload_served(client, "big", reqs, pid, idle)
            print(f"  {BIG} files: direct place {d * 1000:.0f} ms | upload {posted * 1000:.0f} ms = {posted / d:.2f} x "
                  f"direct | upload to plan served {e * 1000:.0f} ms = {e / d:.2f} x direct, {goal(e / d)}; controller "
                  f"CPU {ec * 1000:.0f} ms = {ec / dc:.2f} x placing's {dc * 1000:.0f} ms, {goal(ec / dc)}")
            client.close()  # the fetch above left the plan in memory: start again from the database
            cp.kill("controller", signal.SIGTERM)
            pid = cp.start_controller("--no-gate", "--layout", "keep").pid
            served, size = [], 0
            for _ in range(REPEAT + 1):  # curl: a C client, as libiez is, so the figure is the server's
                out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w",
                                      "%{http_code} %{size_download} %{time_total}",
                                      "-H", f"Authorization: Bearer {cp.site}", f"{cp.url}/apps/big/plan"],
                                     capture_output=True, text=True, check=True).stdout.split()
                assert out[0] == "200", out
                size = int(out[1])
                served.append(float(out[2]))
            first, later = served[0], statistics.median(served[1:])
            print(f"  a plan of {BIG} files ({size >> 20} MiB) served: first {first * 1000:.1f} ms "
                  f"(from the database), then {later * 1000:.1f} ms (from memory) = {later / d:.3f} x its direct "
                  f"placement ({d * 1000:.0f} ms); goal <= {GOAL_SERVED_MS:.0f} ms: "
                  f"{'met' if max(first, later) * 1000 <= GOAL_SERVED_MS else 'NOT met'}")

            n = SIZES[-1]
            app = f"b{n}x0"  # planned above (run 1), not run yet
            reqs = job(cd.root, app, n)
            _, dc = direct_seconds(policy, reqs, cluster, snap)
            made = policy.place(reqs, cluster, snap, AllocOptions(layout="keep"))
            traced = [replace(q, placed=True, observed=p.layout) for q, p in zip(reqs, made)]
            client = ControllerClient(cp.url, cp.site, timeout=600)  # the code before this took 12-16 s
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            client.upload_ingested(app, traced, 1, plan_hits=n)
            wall = time.perf_counter() - t0
            tc = cpu_seconds(pid) - c0 - idle * wall
            client.close()
            print(f"  the trace of a planned run of {n} files uploaded (created from the plan, with their layouts): "
                  f"{wall * 1000:.0f} ms, controller CPU {tc * 1000:.0f} ms = {tc / dc:.2f} x placing's {dc * 1000:.1f} ms")


if __name__ == "__main__":
    main()
