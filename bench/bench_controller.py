"""Allocation latency through the controller vs a direct call of the same policy.

A real controller process (SQLite, no gate) on an emulated seed-000 testbed (3 OSSs x 5 OSTs)
with its four collectors publishing every second. For jobs of N file-per-process files
(stripe count 4), each figure against the direct `policy.place` time measured in the same run:
- inside the controller: placing the run and storing its plan (iez_allocation_seconds);
- end to end: POST the requests, then GET until the plan is served (HTTP, database, worker).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from iez.alloc.policy import AllocOptions, get_policy
from iez.cluster import Snapshot, make_cluster
from iez.controller.auth import new_token
from iez.controller.client import ControllerClient, request_json
from iez.emulated.client import running_cluster
from iez.request import Request

SIZES = (64, 1024, 8192)
REPEAT = 3
MiB = 1 << 20


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(root: Path, app: str, n: int) -> list[Request]:
    return [Request(str(root / "fs" / app / f"out.{i:08d}"), 64 * MiB, 4, rank=i) for i in range(n)]


def allocation_seconds(url: str, token: str) -> float:
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    m = re.search(r'^iez_allocation_seconds_sum\{policy="balanced"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        site, admin = new_token(), new_token()
        (root / "site").write_text(site)
        (root / "admin").write_text(admin)
        http, stats = free_port(), free_port()
        url = f"http://127.0.0.1:{http}"
        iez = [sys.executable, "-m", "iez"]
        cluster = make_cluster(ost_size=1 << 40)
        procs = []
        with running_cluster(root / "emu", cluster, seed=1) as cd:
            try:
                for host in [s.name for s in cluster.osses] + ["mds0"]:
                    role = "mds" if host == "mds0" else "oss"
                    procs.append(subprocess.Popen(iez + ["collect", role, f"--{role}-id", host, "--params",
                                                         str(cd.params / host), "--publish", f"tcp://127.0.0.1:{stats}",
                                                         "--interval", "1", "--token-file", str(root / "site")],
                                                  stderr=subprocess.DEVNULL))
                procs.append(subprocess.Popen(iez + ["controller", "--emulated", str(cd.root), "--db",
                                                     f"sqlite:///{root / 'iez.db'}", "--listen", f"127.0.0.1:{http}",
                                                     "--stats", f"tcp://127.0.0.1:{stats}", "--no-gate",
                                                     "--site-token-file", str(root / "site"),
                                                     "--admin-token-file", str(root / "admin")],
                                                  stderr=subprocess.DEVNULL))
                client = ControllerClient(url, site)
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if client.health()["fresh_osts"] == len(cluster.osts):
                            break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                    time.sleep(0.1)
                policy = get_policy("balanced")
                snap = Snapshot.from_cluster(cluster, time.time())
                print(f"{len(cluster.osts)} OSTs / {len(cluster.osses)} OSSs, FPP files of 64 MiB, stripe count 4, "
                      f"median of {REPEAT}:")
                for n in SIZES:
                    direct, inside, e2e = [], [], []
                    for k in range(REPEAT):
                        reqs = job(cd.root, f"b{n}x{k}", n)
                        t0 = time.perf_counter()
                        policy.place(reqs, cluster, snap, AllocOptions())
                        direct.append(time.perf_counter() - t0)
                        before = allocation_seconds(url, site)
                        body = {"requests": [request_json(q) for q in reqs]}
                        t0 = time.perf_counter()
                        r = client.http.post(f"/apps/b{n}x{k}/requests", json=body)
                        r.raise_for_status()
                        while client.http.get(f"/apps/b{n}x{k}/plan").status_code != 200:
                            time.sleep(0.005)
                        e2e.append(time.perf_counter() - t0)
                        inside.append(allocation_seconds(url, site) - before)
                    d, i, e = (statistics.median(x) for x in (direct, inside, e2e))
                    print(f"  {n:5d} files: direct place {d * 1000:8.1f} ms | in the controller (place + store) "
                          f"{i * 1000:8.1f} ms = {i / d:5.2f} x direct | upload to plan served "
                          f"{e * 1000:8.1f} ms = {e / d:5.2f} x direct")
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    p.wait(timeout=30)


if __name__ == "__main__":
    main()
