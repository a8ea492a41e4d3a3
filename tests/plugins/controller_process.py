"""`iez controller` alone as a real process on loopback (its own cluster file, SQLite database and
tokens), and signed collector messages to feed it."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import zmq

from iez.collect.message import OstReading, StatsMessage, encode
from iez.controller.local import free_port
from iez.zmqauth import curve_client
from plugins.controller_stack import ADMIN, SITE


CLUSTER = """fsname = "iez"
[mds]
name = "mds0"
[[oss]]
name = "oss0"
osts = [0, 1]
[[oss]]
name = "oss1"
osts = [2, 3]
[ost_defaults]
size = "1TiB"
[[ost]]
index = 0
write_bw = 5e-324
[pools]
slow = [0, 1]
good = [2, 3]
"""


class Controller:
    """`iez controller` as a real process on loopback, with its own cluster file and database."""

    def __init__(self, root: Path, iez_cmd: list[str], env: dict[str, str], *options: str,
                 cluster: str = CLUSTER) -> None:
        self.root, self.cmd, self.env, self.options = root, iez_cmd, env, options
        root.mkdir(parents=True, exist_ok=True)
        (root / "cluster.toml").write_text(cluster)
        (root / "site").write_text(SITE + "\n")
        (root / "admin").write_text(ADMIN + "\n")
        self.port, self.stats_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stats = f"tcp://127.0.0.1:{self.stats_port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Controller":
        log = open(self.root / "controller.log", "ab")
        self.proc = subprocess.Popen(
            self.cmd + ["controller", "--cluster", str(self.root / "cluster.toml"),
                        "--db", f"sqlite:///{self.root / 'iez.db'}", "--listen", f"127.0.0.1:{self.port}",
                        "--stats", self.stats, "--site-token-file", str(self.root / "site"),
                        "--admin-token-file", str(self.root / "admin"), "--no-gate", *self.options],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the controller did not answer: {self.log()}")

    def log(self) -> str:
        return (self.root / "controller.log").read_text(errors="replace")

    def get(self, path: str, token: str = SITE) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def post(self, path: str, token: str | None = SITE, **kw) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url + path, headers={**headers, **kw.pop("headers", {})}, timeout=120, **kw)

    def publish(self, *msgs: StatsMessage) -> None:
        """Publish signed messages as a collector does (PUB connected to the SUB), once delivered."""
        with zmq.Context.instance().socket(zmq.XPUB) as pub:
            pub.setsockopt(zmq.LINGER, 2000)
            curve_client(pub, SITE)
            pub.connect(self.stats)
            assert pub.poll(10_000), "the controller never subscribed"
            pub.recv()
            for m in msgs:
                pub.send_multipart(encode(m, SITE))
        time.sleep(0.3)  # the controller's subscriber takes them in

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def controller(tmp_path, iez_cmd, subenv):
    made: list[Controller] = []

    def start(*options: str, cluster: str = CLUSTER) -> Controller:
        made.append(Controller(tmp_path / f"c{len(made)}", iez_cmd, subenv, *options, cluster=cluster).start())
        return made[-1]

    yield start
    for c in made:
        if c.proc is not None and c.proc.poll() is None:
            c.stop(signal.SIGKILL)


def oss_msg(oss: str, osts: tuple[int, ...], t: float, seq: int = 1, interval: float = 3600.0,
            kib: int = 1 << 30) -> StatsMessage:
    return StatsMessage("oss", oss, seq, t, interval, "h",
                        {f"iez-OST{i:04x}": OstReading(kib, kib, kib, 0.0, 0.0) for i in osts})


def fresh_stats(c: Controller) -> None:
    now = time.time()
    c.publish(oss_msg("oss0", (0, 1), now), oss_msg("oss1", (2, 3), now))


def collector_seq(c: Controller, oss: str) -> int | None:
    got = next(s for s in c.get("/cluster").json()["osses"] if s["name"] == oss)["collector"]
    return None if got is None else got["seq"]
