"""The control plane at centre scale: collectors publishing every second and plan fetches from
concurrent clients, all real processes on loopback.

Spider II has 144 OSSs x 7 OSTs (docs/references.md#s002-spider). The emulated cluster here has
IEZ_BENCH_OSSS of them (default 144), each with its own `iez collect oss` process publishing
every second over ZeroMQ (CURVE, signed), plus the MDS's collector, and one controller (SQLite,
no gate). A 64-file plan is uploaded and placed; then `wrk` (C, its own process) fetches it,
first with one connection (the baseline), then with many. Printed: fetches/s, p50/p99/max
latency, the controller's CPU (cores, from /proc: utime + stime over the window), and the view's
staleness while it served (collector messages taken against published, the oldest OSS report,
stale OSTs), beside the goals; and the same plan placed directly (`policy.place`) for scale.
IEZ_BENCH_PROFILE=FILE.svg records the controller with py-spy while the clients fetch (the
flame graph in docs/controller.md, "Performance").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.controller.local import LocalControlPlane
from iez.emulated.clusterdir import init_cluster_dir
from iez.emulated.mds_client import down, up
from iez.request import Request

OSSS = int(os.environ.get("IEZ_BENCH_OSSS", "144"))
PROFILE = os.environ.get("IEZ_BENCH_PROFILE", "")
OSTS_PER_OSS = 7
FILES = 64
SECONDS = 10
CONNECTIONS = 64  # concurrent fetch clients (wrk connections)
GOAL_RATE, GOAL_P99_MS = 10_000, 10.0  # fetches/s on one core, p99 latency
MiB = 1 << 20
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def wrk(url: str, token: str, connections: int, seconds: int) -> dict[str, float]:
    """Fetch `url` with wrk for `seconds`: requests/s and latency percentiles (ms)."""
    threads = min(2, connections)
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency",
                          "-H", f"Authorization: Bearer {token}", url],
                         capture_output=True, text=True, check=True).stdout
    def ms(s: str) -> float:
        m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", s)
        assert m, s
        return float(m[1]) * UNITS[m[2]]
    lat = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", out)
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx or not lat or not pct:
        raise RuntimeError(f"wrk: unexpected output or failed fetches:\n{out}")
    timeouts = re.search(r"timeout (\d+)", out)  # wrk's 2 s: a fetch not answered in time
    return {"rate": float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]), "p50": ms(pct["50"]),  # type: ignore[index]
            "p99": ms(pct["99"]), "max": ms(lat[3]), "timeouts": int(timeouts[1]) if timeouts else 0}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def view(cp: LocalControlPlane) -> tuple[int, float, int]:
    """Collector messages taken so far, the oldest OSS report (s), stale OSTs."""
    with cp.client() as c:
        cl = c.cluster()
    taken = sum((h["collector"] or {}).get("messages", 0) for h in cl["osses"])
    return taken, max(h["age"] or 1e9 for h in cl["osses"]), sum(o["stale"] for o in cl["osts"])


def main() -> None:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk not found: apt-get install wrk (scripts/setup.sh installs it)")
    cluster = make_cluster(OSSS, OSTS_PER_OSS, ost_size=1 << 40)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cd = init_cluster_dir(root / "emu", cluster)
        up(cd, wait=120, seed=1)  # its first scan of 1,008 OSTs' trees takes a loaded machine a while
        try:
            with LocalControlPlane(cd, root / "cp") as cp:
                reqs = [Request(str(cd.root / "fs" / "job" / f"out.{i:08d}"), 64 * MiB, 4, rank=i)
                        for i in range(FILES)]
                direct = 1e9
                for _ in range(3):  # the best of three, before the collectors load the machine
                    t = time.perf_counter()
                    get_policy("balanced").place(reqs, cluster, Snapshot.from_cluster(cluster, time.time()),
                                                 AllocOptions(layout="keep"))
                    direct = min(direct, (time.perf_counter() - t) * 1e3)
                t0 = time.perf_counter()
                cp.start_collectors()
                ctl = cp.start_controller("--no-gate", "--layout", "keep")
                print(f"{len(cluster.osses)} OSSs x {OSTS_PER_OSS} OSTs: {len(cluster.osses) + 1} collector processes "
                      f"publishing every second, fresh after {time.perf_counter() - t0:.0f} s")
                with cp.client() as client:
                    client.upload_requests("job", reqs)
                    assert client.fetch_plan("job", wait=60).status == "ready"
                url = f"{cp.url}/apps/job/plan"
                one = wrk(url, cp.site, 1, 5)
                taken0, _, _ = view(cp)
                spy = subprocess.Popen(["py-spy", "record", "-p", str(ctl.pid), "-o", PROFILE, "-d", str(SECONDS),
                                        "-r", "200", "--nonblocking"], stdout=subprocess.DEVNULL) if PROFILE else None
                collectors = [p.pid for name, p in cp.procs.items() if name != "controller"]
                cpu0, w0, ccpu0 = cpu_seconds(ctl.pid), time.monotonic(), sum(map(cpu_seconds, collectors))
                many = wrk(url, cp.site, CONNECTIONS, SECONDS)
                if spy is not None:
                    spy.wait()
                cores = (cpu_seconds(ctl.pid) - cpu0) / (time.monotonic() - w0)
                collector_cores = (sum(map(cpu_seconds, collectors)) - ccpu0) / (time.monotonic() - w0)
                taken, oldest, stale = view(cp)
                window = time.monotonic() - w0
        finally:
            down(cd)
    published = len(cluster.osses) * window  # one message per OSS per second
    print(f"a {FILES}-file plan placed directly: {direct:.1f} ms")
    print(f"{'':24s}{'fetches/s':>10s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} {'timeouts':>9s}")
    for name, r in (("1 client alone", one), (f"{CONNECTIONS} clients", many)):
        print(f"  {name:22s}{r['rate']:10.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['max']:8.1f} {r['timeouts']:9d}")
    print(f"  {CONNECTIONS} clients / 1 alone: {many['rate'] / one['rate']:.2f} x the fetches/s; "
          f"p99 {many['p99'] / one['p99']:.2f} x; p99 = {many['p99'] / direct:.2f} x a direct placement")
    per_core = many["rate"] / cores  # what one core of the controller serves, the loadgen's share aside
    print(f"  controller CPU while serving: {cores:.2f} cores, {1e6 / per_core:.0f} us a fetch = "
          f"{per_core:.0f} fetches/s per core (goal {GOAL_RATE}: {'met' if per_core >= GOAL_RATE else 'NOT met'})")
    print(f"  goal: {GOAL_RATE} fetches/s with p99 < {GOAL_P99_MS:g} ms on one core: "
          f"{'met' if many['rate'] >= GOAL_RATE and many['p99'] < GOAL_P99_MS and cores <= 1.0 else 'NOT met'} "
          f"({many['rate']:.0f}/s, p99 {many['p99']:.2f} ms; wrk shares the machine's {os.cpu_count()} cores)")
    print(f"  view while serving: {taken - taken0} of ~{published:.0f} collector messages taken "
          f"({(taken - taken0) / published:.2f}), oldest OSS report {oldest:.2f} s, stale OSTs {stale} "
          f"(goal: none stale: {'met' if stale == 0 else 'NOT met'}); the collectors took {collector_cores:.2f} cores")


if __name__ == "__main__":
    main()
