"""The whole control plane on one machine, as real processes on loopback: a collector for every
host of an emulated cluster and a controller. For `iez demo`, tests and benchmarks.

    with LocalControlPlane(cluster_dir, workdir) as cp:     # tokens, ports and logs in workdir
        cp.start_collectors()
        cp.start_controller()                               # waits until every OST is fresh
        plan = cp.client().fetch_plan("ior", wait=30)

Every process runs in its own session with its log in `workdir/<name>.log`; leaving the block
stops them all (SIGTERM, then SIGKILL after a grace period), so nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from iez.tokens import new_token
from iez.controller.api_client import ControllerClient, ControllerError
from iez.emulated.clusterdir import ClusterDir
from iez.errors import IezError

START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalControlPlane:
    def __init__(self, cd: ClusterDir, workdir: str | Path, db_url: str | None = None, interval: float = 1.0,
                 env: dict[str, str] | None = None, command: list[str] | None = None) -> None:
        self.cd = cd
        self.cluster = cd.cluster()
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db = db_url or f"sqlite:///{self.dir / 'iez.db'}"
        self.interval = interval
        self.env = dict(os.environ if env is None else env)
        self.cmd = command or [sys.executable, "-m", "iez"]
        self.procs: dict[str, subprocess.Popen] = {}
        self.site, self.admin = new_token(), new_token()
        for name, token in (("site.token", self.site), ("admin.token", self.admin)):
            path = self.dir / name
            path.write_text(token + "\n")
            path.chmod(0o600)
        self.http_port, self.stats_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"

    def __enter__(self) -> "LocalControlPlane":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log(self, name: str) -> str:
        try:
            return (self.dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.dir / f"{name}.log", "ab") as log:
            p = subprocess.Popen(self.cmd + argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env,
                                 start_new_session=True)
        self.procs[name] = p
        return p

    def start_collector(self, host: str) -> subprocess.Popen:
        """The collector of `host` (an OSS or the MDS), named after it."""
        role = "mds" if host == self.cluster.mds.name else "oss"
        # the emulated host's own /proc (an idle server), not this machine's
        return self._spawn(host, ["collect", role, f"--{role}-id", host, "--params", str(self.cd.host_params(host)),
                                  "--proc", str(self.cd.host_params(host) / "proc"),
                                  "--publish", f"tcp://127.0.0.1:{self.stats_port}", "--interval", str(self.interval),
                                  "--token-file", str(self.dir / "site.token")])

    def start_collectors(self) -> None:
        for host in [s.name for s in self.cluster.osses] + [self.cluster.mds.name]:
            self.start_collector(host)

    def start_controller(self, *options: str, db: str | None = None, wait_fresh: bool = True) -> subprocess.Popen:
        """The controller (`options` default to --no-gate); returns once it answers and, with
        `wait_fresh`, once every OST has fresh statistics."""
        p = self._spawn("controller", [
            "controller", "--emulated", str(self.cd.root), "--db", db or self.db,
            "--listen", f"127.0.0.1:{self.http_port}", "--stats", f"tcp://127.0.0.1:{self.stats_port}",
            "--site-token-file", str(self.dir / "site.token"), "--admin-token-file", str(self.dir / "admin.token"),
            *(options or ("--no-gate",))])
        self.wait_health(lambda h: True, "the controller to answer", process=p)
        if wait_fresh:
            self.wait_health(lambda h: h["fresh_osts"] == len(self.cluster.osts), "every OST to have fresh statistics",
                             process=p)
        return p

    def wait_health(self, cond: Callable[[dict[str, Any]], Any], what: str, timeout: float = START_TIMEOUT,
                    process: subprocess.Popen | None = None) -> dict[str, Any]:
        """Poll /health until `cond(health)` holds; a one-line IezError after `timeout` seconds."""
        client = ControllerClient(self.url, timeout=5)
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | str = "no answer"
        try:
            while time.monotonic() < deadline:
                if process is not None and process.poll() is not None:
                    tail = self.log("controller").strip().splitlines()[-1:] or ["no output"]
                    raise IezError(f"the controller exited ({process.returncode}): {tail[0]}")
                try:
                    last = client.health()
                    if cond(last):
                        return last
                except ControllerError as e:
                    last = str(e)
                time.sleep(0.1)
        finally:
            client.close()
        raise IezError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last})")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send `sig` to one process (default kill -9) and reap it; returns its exit status."""
        p = self.procs.pop(name)
        p.send_signal(sig)
        return p.wait(timeout=30)

    def client(self, admin: bool = False) -> ControllerClient:
        return ControllerClient(self.url, self.admin if admin else self.site)

    def stop(self, grace: float = 20.0) -> dict[str, int]:
        """Stop every process (SIGTERM, SIGKILL after `grace` s); their exit statuses by name."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = {}
        for name, p in self.procs.items():
            try:
                codes[name] = p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[name] = p.wait()
        self.procs.clear()
        return codes
