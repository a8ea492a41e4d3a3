"""The control plane at centre scale: collectors publishing every second and plan fetches from
concurrent clients, all real processes on loopback.

Spider II has 144 OSSs x 7 OSTs (docs/references.md#s002-spider). The emulated cluster here has
IEZ_BENCH_OSSS of them (default 144), each with its own `iez collect oss` process publishing
every second over ZeroMQ (CURVE, signed), plus the MDS's collector, and one controller (SQLite,
no gate). A 64-file plan is uploaded and placed; then `wrk` (C, its own process, one thread:
the machine has two cores) fetches it:

- with one connection (the baseline of the latency figures);
- as fast as CONNECTIONS connections go, in turns: the plan's path, which the controller's
  protocol answers (`server.plan_protocol`), and the same path percent-encoded, which takes
  uvicorn's ASGI path to `ServedPlans` (what served every fetch before: the baseline of the CPU
  per fetch);
- at GOAL_RATE fetches/s offered (wrk paced by a Lua `delay`, as wrk2 would: a request leaves at
  its slot, not when the last answer came back), the goal's load;
- the same again with the collectors stopped (SIGSTOP), last: how much of the tail comes from
  their 145 processes sharing wrk's CPU rather than from the controller.

Printed: fetches/s, p50/p99/max latency, the controller's and wrk's CPU (cores, from /proc and
wait4), the collectors' CPU per message published, and the view's staleness while it served
(collector messages taken against published, the oldest OSS report, stale OSTs), each beside its
baseline and its goal.

The goal is the controller's on one core: as a deployment runs it on a node of its own, the
controller gets CPU 0 to itself (every thread of it, `os.sched_setaffinity`) and everything else
this benchmark starts (the emulated MDS, the collectors, wrk, this process) the other CPUs; the
figures then say what the controller does with its core, not how the collectors' 145 processes
queue beside it. IEZ_BENCH_PIN=0 runs them all on every CPU, as before. IEZ_BENCH_PROFILE=FILE.svg records the controller with py-spy during the
paced run (the flame graph in docs/controller.md, "Performance").
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
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
CONTROLLER_CPU = 0
PIN = os.environ.get("IEZ_BENCH_PIN", "1") != "0" and len(os.sched_getaffinity(0) - {CONTROLLER_CPU}) >= 1
# The emulated servers (the MDS and the collectors) at a lower priority than wrk on the CPUs they
# share: they stand for other nodes, and a wrk waiting behind their rounds (the MDS's refresh is
# one run of up to a few hundred ms each second) counts that wait in the latency it measures. They
# still get every cycle wrk leaves (it takes a third of a CPU); the view's staleness says whether
# they kept up. IEZ_BENCH_NICE=0 runs them as wrk runs.
NICE = int(os.environ.get("IEZ_BENCH_NICE", "10"))
# The emulated cluster on tmpfs: its parameter trees stand for the servers' /proc and /sys, which
# live in memory. On a disk file system every stats file the MDS renames over another (the 1,008
# OSTs', each second) has ext4 start writing it out first (auto_da_alloc), CPU the machine's
# other processes wait for. IEZ_BENCH_SHM=0 keeps it in the temporary directory, as before.
SHM = "/dev/shm" if os.environ.get("IEZ_BENCH_SHM", "1") != "0" and os.access("/dev/shm", os.W_OK) else None
OSTS_PER_OSS = 7
FILES = 64
SECONDS = 8
PAIRS = 2  # turns of the protocol's path and the ASGI path, as fast as they go
CONNECTIONS = 64  # concurrent fetch clients (wrk connections)
PACED_CONNECTIONS, CATCH_UP_MS = 256, 20  # at the goal's rate: 25 ms of latency before one waits
GOAL_RATE, GOAL_P99_MS = 10_000, 10.0  # fetches/s on one core, p99 latency
MiB = 1 << 20
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}

# wrk's delay() before each request, from a schedule of one slot every 1/rate s: requests leave
# at a constant rate whatever the answers' latency (wrk2's open loop, in wrk's own Lua), as long
# as a connection is free (PACED_CONNECTIONS: more than rate x latency). wrk rounds a delay down to
# whole ms; the schedule keeps the mean rate. Slots missed while every connection was busy are
# caught up for CATCH_UP ms at most, then the schedule starts again from now. Latency counts from
# when a request left, not from its slot (wrk2 counts from the slot).
PACE = """
local ffi = require("ffi")
ffi.cdef[[ typedef struct { long tv_sec; long tv_nsec; } iez_ts; int clock_gettime(int, iez_ts *); ]]
local ts = ffi.new("iez_ts")
local period, slot = 1000 / RATE, nil
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6 end
function delay()
  local t = now()
  slot = (slot == nil or slot < t - CATCH_UP) and t or slot + period
  return math.max(0, slot - t)
end
"""


def wrk(url: str, token: str, connections: int, seconds: int, rate: int = 0) -> dict[str, float]:
    """Fetch `url` with wrk (one thread) for `seconds`, as fast as it goes or `rate` a second:
    requests/s, latency percentiles (ms), wrk's own CPU (cores)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(PACE.replace("RATE", str(rate)).replace("CATCH_UP", str(CATCH_UP_MS)))
        script.flush()
        p = subprocess.Popen(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
                              *(["-s", script.name] if rate else []),
                              "-H", f"Authorization: Bearer {token}", url], stdout=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        assert p.stdout is not None
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)  # its rusage: wrk's own CPU
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if p.returncode:
        raise RuntimeError(f"wrk failed ({p.returncode}):\n{out}")

    def ms(s: str) -> float:
        m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", s)
        assert m, s
        return float(m[1]) * UNITS[m[2]]
    lat = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", out)
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)\s*$", out, re.M))  # wrk pads "1.22s " with a space
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx or not lat or set(pct) != {"50", "99"}:
        raise RuntimeError(f"wrk: unexpected output or failed fetches:\n{out}")
    timeouts = re.search(r"timeout (\d+)", out)  # wrk's 2 s: a fetch not answered in time
    return {"rate": float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1]), "p50": ms(pct["50"]),  # type: ignore[index]
            "p99": ms(pct["99"]), "max": ms(lat[3]), "timeouts": int(timeouts[1]) if timeouts else 0,
            "wrk_cores": (usage.ru_utime + usage.ru_stime) / wall}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def view(cp: LocalControlPlane) -> tuple[int, float, int]:
    """Collector messages taken so far, the oldest OSS report (s), stale OSTs."""
    with cp.client() as c:
        cl = c.cluster()
    taken = sum((h["collector"] or {}).get("messages", 0) for h in cl["osses"])
    return taken, max(h["age"] or 1e9 for h in cl["osses"]), sum(o["stale"] for o in cl["osts"])


def served(pid: int, fetch) -> dict[str, float]:
    """`fetch()`'s wrk figures with the controller's CPU (cores) over it."""
    cpu0, w0 = cpu_seconds(pid), time.monotonic()
    r = fetch()
    r["cores"] = (cpu_seconds(pid) - cpu0) / (time.monotonic() - w0)
    return r


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` on `cpus` (threads it makes later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), cpus)


def lower(pid: int) -> None:
    """Every thread of `pid` at niceness NICE (setpriority's PRIO_PROCESS sets one thread)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.setpriority(os.PRIO_PROCESS, int(tid), NICE)


def busy(cpus: list[int]) -> list[float]:
    """Jiffies each CPU spent not idle (/proc/stat), to tell the controller's core from the rest."""
    rows = {r[0]: r[1:] for r in (line.split() for line in Path("/proc/stat").read_text().splitlines())}
    return [sum(map(int, rows[f"cpu{c}"][:8])) - int(rows[f"cpu{c}"][3]) - int(rows[f"cpu{c}"][4]) for c in cpus]


def paced_paused(pid: int, collectors: list[int], fetch) -> dict[str, float]:
    """`served(pid, fetch)` with the collectors stopped (SIGSTOP; the MDS still runs): the
    controller's tail without the collectors' processes queueing beside wrk on its CPU. Run last: the view
    goes stale meanwhile, and the plan is served from memory all the same."""
    def send(sig: int) -> None:
        for c in collectors:
            try:
                os.kill(c, sig)
            except ProcessLookupError:  # a collector that exited: the view line said so already
                pass

    send(signal.SIGSTOP)
    try:
        return served(pid, fetch)
    finally:
        send(signal.SIGCONT)


def py_spy() -> str:
    """py-spy on PATH, else beside this Python (the venv's bin)."""
    return shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk not found: apt-get install wrk (scripts/setup.sh installs it)")
    cluster = make_cluster(OSSS, OSTS_PER_OSS, ost_size=1 << 40)
    load0 = os.getloadavg()[0]
    others = os.sched_getaffinity(0) - {CONTROLLER_CPU}
    if PIN:  # this process and all it starts (MDS, collectors, wrk); the controller moves to its own below
        os.sched_setaffinity(0, others)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=SHM) as emu:
        root = Path(tmp)
        cd = init_cluster_dir(Path(emu) / "emu", cluster)
        mds = up(cd, wait=120, seed=1)  # its first scan of 1,008 OSTs' trees takes a loaded machine a while
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
                if PIN:
                    pin(ctl.pid, {CONTROLLER_CPU})
                for pid in [mds, *(p.pid for name, p in cp.procs.items() if name != "controller")]:
                    lower(pid)
                print(f"{len(cluster.osses)} OSSs x {OSTS_PER_OSS} OSTs: {len(cluster.osses) + 1} collector processes "
                      f"publishing every second, fresh after {time.perf_counter() - t0:.0f} s")
                with cp.client() as client:
                    client.upload_requests("job", reqs)
                    assert client.fetch_plan("job", wait=60).status == "ready"
                url = f"{cp.url}/apps/job/plan"
                asgi_url = f"{cp.url}/apps/job/pla%6E"  # uvicorn decodes it: ServedPlans on the ASGI path
                cpu0, w0 = cpu_seconds(ctl.pid), time.monotonic()
                time.sleep(5)  # no fetches: the subscriber taking the collectors' messages (and the worker idle)
                quiet = (cpu_seconds(ctl.pid) - cpu0) / (time.monotonic() - w0)
                one = served(ctl.pid, lambda: wrk(url, cp.site, 1, 5))
                taken0, _, _ = view(cp)
                collectors = [p.pid for name, p in cp.procs.items() if name != "controller"]
                w0, ccpu0 = time.monotonic(), sum(map(cpu_seconds, collectors))
                fast, asgi = [], []
                for _ in range(PAIRS):
                    fast.append(served(ctl.pid, lambda: wrk(url, cp.site, CONNECTIONS, SECONDS)))
                    asgi.append(served(ctl.pid, lambda: wrk(asgi_url, cp.site, CONNECTIONS, SECONDS)))
                spy = subprocess.Popen([py_spy(), "record", "-p", str(ctl.pid), "-o", PROFILE, "-d", str(SECONDS),
                                        "-r", "200", "--nonblocking"], stdout=subprocess.DEVNULL) if PROFILE else None
                cpus = sorted({CONTROLLER_CPU} | others)
                b0, pw0, beside0 = busy(cpus), time.monotonic(), [sum(map(cpu_seconds, collectors)), cpu_seconds(mds)]
                paced = served(ctl.pid, lambda: wrk(url, cp.site, PACED_CONNECTIONS, SECONDS, rate=GOAL_RATE))
                pw = time.monotonic() - pw0
                cpu_busy = [(b - a) / os.sysconf("SC_CLK_TCK") / pw for a, b in zip(b0, busy(cpus))]
                beside = [(b - a) / pw for a, b in zip(beside0, [sum(map(cpu_seconds, collectors)), cpu_seconds(mds)])]
                if spy is not None:
                    spy.wait()
                window = time.monotonic() - w0
                collector_cpu = sum(map(cpu_seconds, collectors)) - ccpu0
                taken, oldest, stale = view(cp)
                paused = paced_paused(ctl.pid, collectors, lambda: wrk(url, cp.site, PACED_CONNECTIONS, SECONDS,
                                                                        rate=GOAL_RATE))
        finally:
            down(cd)
    published = len(collectors) * window  # one message per collector per second
    where = (f"the controller alone on CPU {CONTROLLER_CPU}, the rest on CPU {', '.join(map(str, sorted(others)))}"
             if PIN else "every process on every CPU (IEZ_BENCH_PIN=0)")
    where += f", the emulated cluster in {SHM or tempfile.gettempdir()}, the MDS and the collectors at nice {NICE}"
    print(f"{where}; busy while {GOAL_RATE}/s was offered: "
          + ", ".join(f"CPU {c} {b:.2f}" for c, b in zip(cpus, cpu_busy)) + " (other work on the machine included); "
          f"of that the collectors {beside[0]:.2f} cores, the MDS {beside[1]:.2f}, wrk {paced['wrk_cores']:.2f}, "
          f"the controller {paced['cores']:.2f} (wrk waiting for a CPU adds to the latency it measures)")
    print(f"a {FILES}-file plan placed directly: {direct:.1f} ms; load average {load0:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after (the machine is shared: latency is the run queue's as much as the controller's)")
    print(f"{'':34s}{'fetches/s':>10s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} {'timeouts':>9s} "
          f"{'ctl cores':>10s} {'us/fetch':>9s} {'wrk cores':>10s}")  # us/fetch: above the quiet rate
    rows = [("1 client alone", one)]
    rows += [(f"{CONNECTIONS} clients, protocol path #{i + 1}", r) for i, r in enumerate(fast)]
    rows += [(f"{CONNECTIONS} clients, ASGI path #{i + 1}", r) for i, r in enumerate(asgi)]
    rows += [(f"{GOAL_RATE}/s offered, {PACED_CONNECTIONS} clients", paced)]
    for name, r in rows:  # a fetch's CPU: the controller's above its rate without fetches (the subscriber)
        r["us"] = 1e6 * (r["cores"] - quiet) / r["rate"]
        print(f"  {name:32s}{r['rate']:10.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['max']:8.1f} {r['timeouts']:9d} "
              f"{r['cores']:10.2f} {r['us']:9.0f} {r['wrk_cores']:10.2f}")
    us_fast, us_asgi = (statistics.median(r["us"] for r in rs) for rs in (fast, asgi))
    best = max(fast, key=lambda r: r["rate"])
    per_core = 1e6 * (1 - quiet) / us_fast  # what one core serves beside the subscriber
    print(f"  controller CPU a fetch (above its {quiet:.3f} cores without fetches): {us_fast:.0f} us on the protocol "
          f"path against {us_asgi:.0f} us on the ASGI path (medians; x{us_asgi / us_fast:.2f}) = {per_core:.0f} "
          f"fetches/s on one core with the subscriber (goal {GOAL_RATE}: {met(per_core >= GOAL_RATE)})")
    print(f"  as fast as {CONNECTIONS} connections go: {best['rate']:.0f} fetches/s, "
          f"{best['rate'] / one['rate']:.2f} x one client alone, p99 {best['p99']:.2f} ms = {best['p99'] / one['p99']:.2f} x "
          f"one client's, {best['p99'] / direct:.2f} x a direct placement")
    print(f"  goal: {GOAL_RATE} fetches/s with p99 < {GOAL_P99_MS:g} ms on one core: "
          f"{met(paced['rate'] >= 0.98 * GOAL_RATE and paced['p99'] < GOAL_P99_MS and paced['cores'] <= 1.0)} "
          f"(offered {GOAL_RATE}/s: {paced['rate']:.0f}/s served, p99 {paced['p99']:.2f} ms = "
          f"{paced['p99'] / one['p99']:.2f} x one client alone's, {paced['cores']:.2f} controller cores; "
          f"wrk {paced['wrk_cores']:.2f} cores of the machine's {os.cpu_count()})")
    print(f"  the same {GOAL_RATE}/s with the collectors stopped (SIGSTOP, the MDS still running): "
          f"{paused['rate']:.0f}/s served, p99 {paused['p99']:.2f} ms = {paused['p99'] / paced['p99']:.2f} x the "
          f"run above, {paused['cores']:.2f} controller cores (the part of the tail that is the collectors' processes "
          f"running beside wrk, not the controller: docs/controller.md, \"Performance\")")
    print(f"  collectors: {1e3 * collector_cpu / published:.2f} ms of CPU a message published, "
          f"{collector_cpu / window:.2f} cores for {len(collectors)} processes")
    print(f"  controller without fetches: {quiet:.3f} cores = {1e6 * quiet / len(collectors):.0f} us a collector "
          f"message taken (the subscriber; the rest of the controller idle)")
    print(f"  view while serving: {taken - taken0} of ~{len(cluster.osses) * window:.0f} OSS messages taken "
          f"({(taken - taken0) / (len(cluster.osses) * window):.2f}), oldest OSS report {oldest:.2f} s, "
          f"stale OSTs {stale} (goal: none stale: {met(stale == 0)})")


if __name__ == "__main__":
    main()
