"""`iez run` when iez cannot help: whatever fails on iez's side, the job runs unchanged and keeps
its exit status; signals reach it. (With a controller: tests/test_run_e2e.py.)"""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import threading
import time

import pytest

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


# -- hostile input: `iez run` never fails a job for iez's own reasons (docs/security.md) ---------


@pytest.mark.parametrize("app", ["a/b", "../x", "a\nb", "", "-x", "x" * 129])
def test_a_bad_app_name_is_refused_before_the_job_starts(iez_cmd, subenv, tmp_path, app):
    """It aborted the job with a traceback (mkdtemp with a '/' in its prefix)."""
    marker = tmp_path / "ran"
    r = run(iez_cmd + ["run", f"--app={app}", "--controller", f"http://127.0.0.1:{free_port()}", "--",
                       "touch", str(marker)], subenv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("iez: error: bad application name "), r.stderr
    assert not marker.exists()  # refused before anything started


class FakeController:
    """A real HTTP server on loopback that answers as a broken controller would: `routes` maps
    "GET /apps/x/plan" to (status, headers, body). Requests it gets are kept in `got`."""

    def __init__(self, routes: dict[str, tuple[int, dict, bytes]]):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.routes, self.got = routes, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.got.append((f"{self.command} {self.path}", body))
                status, headers, out = owner.routes.get(f"{self.command} {self.path}", (404, {}, b'{"detail": "no"}'))
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = _answer

            def log_message(self, *a) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> "FakeController":
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def one_warning(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iez: warning: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("routes, why", [
    ({"GET /apps/x/plan": (202, {}, b"<html>busy</html>")}, "JSONDecodeError"),
    ({"GET /apps/x/plan": (200, {"X-Iez-Run": "seven"}, b"#iez-plan 1\n")}, "ValueError"),
])
def test_a_controller_answering_nonsense_runs_the_job_unchanged(iez_cmd, subenv, tmp_path, routes, why):
    marker = tmp_path / "ran"
    with FakeController(routes) as c:
        r = run(iez_cmd + ["run", "--app", "x", "--wait", "0", "--controller", c.url, "--",
                           "sh", "-c", f'echo "$LD_PRELOAD" > {marker}; exit 3'], subenv)
    assert r.returncode == 3 and "running the command unchanged" in one_warning(r) and why in r.stderr
    assert "libiez" not in marker.read_text()


@pytest.mark.parametrize("how", ["url", "libiez", "trace-dir", "token-file"])
def test_iez_side_failures_before_the_job_run_it_unchanged(iez_cmd, subenv, tmp_path, how):
    marker, opts = tmp_path / "ran", []
    with FakeController({}) as c:  # 404: no plan yet, trace this run
        url = c.url
        if how == "url":
            url = "http://[::1"  # httpx: InvalidURL, not an HTTPError
        elif how == "libiez":
            subenv["IEZ_LIBIEZ"] = str(tmp_path / "missing.so")
        elif how == "trace-dir":
            (tmp_path / "file").write_text("")
            opts = ["--trace-dir", str(tmp_path / "file" / "trace")]
        else:
            subenv["IEZ_TOKEN_FILE"] = str(tmp_path / "missing-token")
        r = run(iez_cmd + ["run", "--app", "x", "--controller", url, *opts, "--",
                           "sh", "-c", f"touch {marker}; exit 5"], subenv)
    assert r.returncode == 5 and marker.exists(), r.stderr
    assert "running the command unchanged" in one_warning(r)


def test_a_failed_upload_keeps_the_job_status_and_advises_the_retry_to_the_controller(iez_cmd, subenv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with FakeController({"POST /apps/x/traces": (500, {}, b'{"detail": "disk full"}')}) as bad:
        r = run(iez_cmd + ["run", "--app", "x", "--controller", bad.url, "--",
                           "sh", "-c", f"echo data > {out}/f; exit 4"], subenv)
    assert r.returncode == 4
    warning = one_warning(r)
    assert "trace not uploaded" in warning and "HTTP 500: disk full" in warning
    assert "trace import" not in warning  # a local import is not what the controller needs
    retry = warning.split("retry with: ", 1)[1]
    assert retry.startswith("iez trace upload ") and f"--controller {bad.url}" in retry
    # the advice works: run as given, it uploads the kept trace (with the file the job wrote)
    ok = (200, {}, b'{"app": "x", "run": 1, "files": 1}')
    with FakeController({"POST /apps/x/traces": ok}) as good:
        argv = shlex.split(retry.replace(bad.url, good.url))
        up = run(iez_cmd + argv[1:], subenv)
        assert up.returncode == 0, up.stderr
        [(what, body)] = good.got
    assert what == "POST /apps/x/traces"
    assert [q["path"] for q in json.loads(body)["requests"]] == [str(out / "f")]


def test_a_command_that_cannot_be_executed_is_one_line(iez_cmd, subenv, tmp_path):
    """As a shell says it: no traceback (Popen raised ELOOP, ENOEXEC and the like)."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with FakeController({}) as c:
        r = run(iez_cmd + ["run", "--app", "x", "--controller", c.url, "--", str(tmp_path / "loop")], subenv)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("iez: error: "), r.stderr
    assert "Traceback" not in r.stderr
