"""Talking to an emulated MDS from Python, and starting or stopping it (`iez emulate up/down`)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
import signal
import subprocess
import sys
import time

import zmq

from iez.cluster import Cluster
from iez.emulated.clusterdir import ClusterDir, init_cluster_dir
from iez.emulated.mds import running_pid
from iez.errors import AllocationError, BackendError

# Generous, as a Lustre client is (obd_timeout is 100 s): a busy disk can delay the MDS's
# parameter-tree refresh by seconds. libiez, which must never stall an application, uses its
# own short timeout and falls back to a plain create.
TIMEOUT_MS = 30000


class MdsClient:
    def __init__(self, cd: ClusterDir, timeout_ms: int = TIMEOUT_MS):
        self.cd = cd
        self.timeout_ms = timeout_ms

    def call(self, msg: dict) -> dict:
        # A REQ socket that timed out is unusable, so each call gets a fresh one.
        if not (self.cd.run / "mds.ipc").exists():
            raise BackendError(f"the emulated MDS of {self.cd.root} is not running (start it: iez emulate up {self.cd.root})")
        sock: zmq.Socket = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(self.cd.ipc)
            sock.send(json.dumps(msg).encode())
            if not sock.poll(self.timeout_ms):
                raise BackendError(f"the emulated MDS of {self.cd.root} did not answer within {self.timeout_ms} ms")
            return json.loads(sock.recv())
        finally:
            sock.close()

    def ping(self) -> bool:
        try:
            return bool(self.call({"op": "ping"}).get("ok"))
        except BackendError:
            return False

    def alloc(self, path: str, spec: str) -> str:
        r = self.call({"op": "alloc", "path": path, "layout": spec})
        if not r.get("ok"):
            raise AllocationError(r.get("error", "allocation failed"), errno=r.get("errno", "EINVAL"))
        return r["layout"]

    def refresh(self) -> None:
        self.call({"op": "refresh"})


def up(cd: ClusterDir, wait: float = 15.0, seed: int | None = None) -> int:
    """Start the MDS in the background (own session, log in run/mds.log); return its pid."""
    pid = running_pid(cd)
    if pid is not None and MdsClient(cd, 1000).ping():
        return pid
    log = open(cd.log, "ab")
    cmd = [sys.executable, "-m", "iez.emulated.mds", str(cd.root)] + ([] if seed is None else ["--seed", str(seed)])
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log, start_new_session=True, close_fds=True)
    log.close()
    client = MdsClient(cd, 500)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = cd.log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise BackendError(f"the emulated MDS exited at start: {tail[0]}")
        if cd.sock.exists() and client.ping():
            return proc.pid
        time.sleep(0.05)
    proc.kill()
    raise BackendError(f"the emulated MDS did not come up within {wait:.0f} s (see {cd.log})")


def down(cd: ClusterDir, wait: float = 10.0) -> bool:
    """Stop the MDS; True if one was running."""
    pid = running_pid(cd)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if running_pid(cd) is None:
            return True
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
        except ChildProcessError:
            pass
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    cd.pidfile.unlink(missing_ok=True)
    cd.sock.unlink(missing_ok=True)
    return True


@contextmanager
def running_cluster(path: str | Path, cluster: Cluster, seed: int | None = None) -> Iterator[ClusterDir]:
    """A new emulated cluster at `path` with its MDS up for the duration of the block."""
    cd = init_cluster_dir(path, cluster)
    up(cd, seed=seed)
    try:
        yield cd
    finally:
        down(cd)
