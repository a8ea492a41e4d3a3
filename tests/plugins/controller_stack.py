"""The whole control plane as real processes (an emulated cluster, collectors, a controller) and
the tokens and helpers the controller tests share."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from iez.controller.local import LocalControlPlane
from iez.emulated.clusterdir import open_cluster_dir
from iez.plan import loads
from iez.request import Request


SITE, ADMIN = "site-" + "a" * 27, "admin-" + "b" * 26
MiB, GiB = 1 << 20, 1 << 30


class Stack(LocalControlPlane):
    """A new emulated cluster with its MDS, plus collectors and a controller, all real processes."""

    def __init__(self, root: Path, iez_cmd: list[str], env: dict[str, str], ost_size: str = "1GiB") -> None:
        self.emu = root / "emu"
        for argv in (["init", str(self.emu), "--oss", "3", "--osts-per-oss", "5", "--ost-size", ost_size],
                     ["up", str(self.emu), "--seed", "1"]):
            r = subprocess.run(iez_cmd + ["emulate", *argv], capture_output=True, text=True, timeout=60, env=env)
            assert r.returncode == 0, r.stderr
        super().__init__(open_cluster_dir(self.emu), root / "cp", interval=0.5, env=env, command=iez_cmd)

    def close(self) -> None:
        codes = self.stop()
        subprocess.run(self.cmd + ["emulate", "down", str(self.emu)], capture_output=True, timeout=60, env=self.env)
        for name, rc in codes.items():
            assert rc == 0, f"{name} exited {rc} on SIGTERM: {self.log(name)[-1500:]}"
        left = subprocess.run(["pgrep", "-f", str(self.emu)], capture_output=True, text=True).stdout.split()
        assert not left, f"stray processes: {left}"


@pytest.fixture
def stack(tmp_path, iez_cmd, subenv):
    s = Stack(tmp_path, iez_cmd, subenv)
    try:
        yield s
    finally:
        s.close()


def requests_for(app: str, root: Path, n: int, size: int, count: int) -> list[Request]:
    return [Request(str(root / "fs" / app / f"out.{i:08d}"), size, count, rank=i) for i in range(n)]


def plan_osts(text: str) -> dict[str, list[int]]:
    return {p: fl.osts() for p, fl in loads(text).entries.items()}
