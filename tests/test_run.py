"""`iez run` when iez cannot help: whatever fails on iez's side, the job runs unchanged and keeps
its exit status; signals reach it. (With a controller: tests/test_run_e2e.py.)"""

from __future__ import annotations

import signal
import socket
import subprocess
import time



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, **kw)


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
