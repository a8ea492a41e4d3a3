"""iez audit against a Dask cluster started on its own: `dask scheduler` and `dask worker` as
real processes on loopback, started and stopped here; the answers equal the embedded run's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_darshan import need_log

LOGS = ("ior_hdf5_example.darshan", "sample-goodost.darshan", "dxt.darshan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_cmd() -> str:
    exe = Path(sys.executable).with_name("dask")
    if not exe.exists():
        pytest.fail("the dask command is missing: .venv/bin/pip install 'distributed>=2024.1'")
    return str(exe)


@pytest.fixture
def dask_cluster(tmp_path):
    """A scheduler and one worker (two processes of one thread), each in its own process group."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([dask_cmd(), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sched.log", "w"),
                              start_new_session=True)]
    procs.append(subprocess.Popen([dask_cmd(), "worker", address, "--nworkers", "2", "--nthreads", "1",
                                   "--no-dashboard", "--local-directory", str(tmp_path / "worker")],
                                  stdout=subprocess.DEVNULL, stderr=open(tmp_path / "worker.log", "w"),
                                  start_new_session=True))
    try:
        from distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout="5s") as c:
                    if len(c.scheduler_info()["workers"]) >= 2:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the dask scheduler and workers did not come up in 60 s: "
                            + (tmp_path / "worker.log").read_text()[-2000:])
            time.sleep(0.5)
        yield address
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def audit(iez_cmd, subenv, logs: Path, out: Path, *extra: str) -> dict:
    proc = subprocess.run([*iez_cmd, "audit", str(logs), "-o", str(out), "--json", *extra],
                          capture_output=True, text=True, env=subenv, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_audit_on_a_separate_scheduler_equals_the_embedded_run(iez_cmd, subenv, tmp_path, dask_cluster):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in LOGS:
        (logs / name).write_bytes(need_log(name).read_bytes())
    (logs / "empty.darshan").write_bytes(b"")
    remote = audit(iez_cmd, subenv, logs, tmp_path / "remote", "--scheduler", dask_cluster)
    local = audit(iez_cmd, subenv, logs, tmp_path / "local", "--workers", "1")
    assert remote["jobs"] == len(LOGS) and remote["failures"] == {"empty": 1}
    for key in ("jobs", "failures", "findings", "bad_bytes", "ost_cost_recorded", "ost_cost_iez", "worst_jobs"):
        assert remote[key] == local[key], key
    assert remote["time_recorded"] == pytest.approx(local["time_recorded"])
    # The tasks ran in the two worker processes (every log, the empty one too), and
    # both are still up: a damaged log kills no worker.
    from distributed import Client

    with Client(dask_cluster, timeout="5s") as c:
        ran = c.run(lambda dask_worker: dask_worker.state.executed_count)
    assert len(ran) == 2 and sum(ran.values()) >= len(LOGS) + 1
