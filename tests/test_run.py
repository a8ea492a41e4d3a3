"""`iez run` end to end: a real emulated cluster, a real controller, iez-bench under libiez.
The first run is traced and gets Lustre's default layouts; the second gets exactly the
controller's plan. Whatever fails on iez's side, the job runs and keeps its exit status."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from iez.plan import loads as load_plan
from iez.workload.bench import IorJob, command

SITE, ADMIN = "site-token-for-tests", "admin-token-for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, **kw)


@pytest.fixture
def stack(tmp_path, iez_cmd, subenv):
    """An emulated cluster with its MDS, and a controller over it (SQLite)."""
    emu = tmp_path / "emu"
    assert run(iez_cmd + ["emulate", "init", str(emu), "--ost-size", "1GiB"], subenv).returncode == 0
    assert run(iez_cmd + ["emulate", "up", str(emu), "--seed", "3"], subenv).returncode == 0
    port = free_port()
    env = dict(subenv, IEZ_SITE_TOKEN=SITE, IEZ_ADMIN_TOKEN=ADMIN)
    log = open(tmp_path / "controller.log", "w")
    ctl = subprocess.Popen(iez_cmd + ["controller", "--emulated", str(emu), "--listen", f"127.0.0.1:{port}",
                                      "--stats", f"tcp://127.0.0.1:{free_port()}", "--db",
                                      f"sqlite:///{tmp_path / 'iez.db'}", "--no-gate"],
                           env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    client_env = dict(subenv, IEZ_CONTROLLER=url, IEZ_TOKEN=SITE)
    deadline = time.time() + 30
    import httpx

    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if ctl.poll() is not None or time.time() > deadline:
            pytest.fail(f"controller did not start: {(tmp_path / 'controller.log').read_text()[-2000:]}")
        time.sleep(0.2)
    yield emu, url, client_env
    ctl.terminate()
    ctl.wait(timeout=20)
    log.close()
    run(iez_cmd + ["emulate", "down", str(emu)], subenv)


def test_controller_down_runs_the_command_unchanged(iez_cmd, subenv, tmp_path):
    port = free_port()  # nothing listens there
    marker = tmp_path / "ran"
    r = run(iez_cmd + ["run", "--app", "x", "--controller", f"http://127.0.0.1:{port}", "--",
                       "sh", "-c", f'echo "$LD_PRELOAD" > {marker}; exit 7'], subenv)
    assert r.returncode == 7  # the job's own status
    assert "unreachable" in r.stderr and "running the command unchanged" in r.stderr
    assert "libiez" not in marker.read_text()  # unchanged: nothing preloaded


def test_signals_reach_the_job_and_its_status_comes_back(iez_cmd, subenv, tmp_path):
    port = free_port()
    p = subprocess.Popen(iez_cmd + ["run", "--app", "x", "--controller", f"http://127.0.0.1:{port}", "--",
                                    "sh", "-c", f"touch {tmp_path}/started; sleep 30"],
                         env=subenv, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while not (tmp_path / "started").exists() and time.time() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 128 + signal.SIGTERM


def test_no_command_is_a_one_line_error(iez_cmd, subenv):
    r = run(iez_cmd + ["run", "--app", "x", "--"], subenv)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no command" in r.stderr
