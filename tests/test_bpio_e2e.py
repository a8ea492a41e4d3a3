"""BPIO on real processes (docs/allocation.md, `bpio`): ranks of a job, each a real process under
libiez on the emulated cluster, are traced, predicted, placed by `iez allocate --policy bpio` on
a cluster with a topology, and in the next run each rank's file lands on the OSTs planned for its
path. All the ranks run on this one host, which the topology does not list, so the client groups
name them by rank (`[[client_group]] ranks`): ranks 0-1 reach oss2 and oss3 through router r1,
ranks 2-3 oss0 and oss1 through r0. The controller, run with `policy = "bpio"`, places them alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from conftest import BUILD, need_tool

from iez import plan as planfile
from iez.db import Database

RANKS = 4
CLUSTER = """
fsname = "bpio"
[ost_defaults]
size = "2GiB"
""" + "".join(f'[[oss]]\nname = "oss{s}"\nosts = [{2 * s}, {2 * s + 1}]\n' for s in range(4)) + """
[[router]]
name = "r0"
oss = ["oss0", "oss1"]
[[router]]
name = "r1"
oss = ["oss2", "oss3"]
[[client_group]]
name = "left"
ranks = [0, 1]
routers = ["r1"]
[[client_group]]
name = "right"
ranks = [2, 3]
routers = ["r0"]
"""
# rank -> OSTs on its paths: the low ranks on the high OSSs, where no OSS-order placement puts them
REACH = {0: {4, 5, 6, 7}, 1: {4, 5, 6, 7}, 2: {0, 1, 2, 3}, 3: {0, 1, 2, 3}}
WRITER = """
import os, sys
rank = int(os.environ["PMI_RANK"])
with open(f"{sys.argv[1]}/out.{rank:04d}", "wb") as f:
    f.write(b"x" * (2 << 20))
"""


def run_job(env: dict, tmp: Path, emu: Path, run: str, mode: str, plan: Path | None = None,
            hosts: list[str] | None = None) -> Path:
    """The writers as RANKS processes, or under mpiexec as one rank on each of `hosts` (IEZ_HOST)."""
    lib = BUILD / "libiez" / "libiez.so"
    if not lib.exists():
        pytest.fail(f"{lib} is missing: build it with cmake -S . -B build && cmake --build build")
    traces = tmp / run
    traces.mkdir()
    e = {**env, "IEZ_MODE": mode, "IEZ_RUN": run, "IEZ_APP": "ior", "IEZ_TRACE_DIR": str(traces),
         "IEZ_EMULATED": str(emu), "IEZ_LOG": str(tmp / "libiez.log"), "LD_PRELOAD": str(lib),
         **({"IEZ_PLAN": str(plan)} if plan else {})}
    writer = [sys.executable, "-c", WRITER, str(emu / "fs")]
    if hosts:
        argv = [need_tool("mpiexec", "apt-get install mpich")]
        for k, host in enumerate(hosts):  # one MPMD part per rank, each with its node's name
            argv += [*([":"] if k else []), "-n", "1", "-env", "IEZ_HOST", host, *writer]
        r = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return traces
    procs = [subprocess.Popen(writer, env={**e, "PMI_RANK": str(rank), "PMI_SIZE": str(RANKS)})
             for rank in range(RANKS)]
    assert [p.wait(timeout=120) for p in procs] == [0] * RANKS
    return traces


Job = Callable[[Path, str, str, "Path | None"], Path]  # (cluster dir, run, IEZ_MODE, plan) -> its traces


def placed_twice(iez_cmd: list[str], subenv: dict, tmp: Path, cluster: str, job: Job) -> tuple[planfile.Plan, str]:
    """On an emulated cluster of `cluster`: `job` traced, predicted and placed by `iez allocate
    --policy bpio` (the plan), then run again from the plan and traced: the plan and the database."""
    db = f"sqlite:///{tmp / 'iez.db'}"
    subenv.pop("IEZ_DB", None)
    subenv["HOME"] = str(tmp / "home")

    def iez(*args: str) -> str:
        p = subprocess.run([*iez_cmd, *args], capture_output=True, text=True, env=subenv, cwd=tmp, timeout=300)
        assert p.returncode == 0, f"iez {' '.join(args)}: {p.stderr}"
        return p.stdout

    (tmp / "c.toml").write_text(cluster)
    emu = tmp / "emu"
    iez("emulate", "init", str(emu), "--cluster", str(tmp / "c.toml"))
    iez("emulate", "up", str(emu))
    try:
        iez("trace", "import", str(job(emu, "job1", "trace", None)), "--app", "ior", "--db", db)
        iez("predict", "ior", "--db", db)
        iez("allocate", "ior", "--policy", "bpio", "--emulated", str(emu), "-o", "ior.plan", "--no-gate", "--db", db)
        plan = planfile.load(tmp / "ior.plan")
        for f in (emu / "fs").iterdir():
            f.unlink()
        iez("trace", "import", str(job(emu, "job2", "trace,place", tmp / "ior.plan")), "--app", "ior", "--db", db)
    finally:
        subprocess.run([*iez_cmd, "emulate", "down", str(emu)], env=subenv, capture_output=True)
    return plan, db


def test_each_rank_lands_on_the_osts_of_its_path(iez_cmd, subenv, tmp_path):
    plan, db = placed_twice(iez_cmd, subenv, tmp_path, CLUSTER,
                            lambda emu, run, mode, plan: run_job(subenv, tmp_path, emu, run, mode, plan))
    planned = {Path(p).name: fl.osts() for p, fl in plan.entries.items()}
    assert len(planned) == RANKS
    for name, osts in planned.items():
        assert set(osts) <= REACH[int(name[-4:])], (name, osts)  # bpio kept each rank on its own paths
    # and spread them: no OSS carries two of the four files
    assert len({o // 2 for osts in planned.values() for o in osts}) == RANKS
    with Database(db) as d, d.begin() as tx:
        [_, (_, actual)] = tx.traced_runs("ior")
    got = {Path(q.path).name: list(q.observed.plain.osts) for q in actual}
    assert got == {n: list(o) for n, o in planned.items()} and sorted(q.rank for q in actual) == list(range(RANKS))


def controller_plan(tmp_path: Path, cluster: str, requests: list) -> str:
    """The plan a controller with `policy = "bpio"` on `cluster` serves for uploaded requests."""
    import time

    from plugins.controller_stack import SITE

    from iez.cluster import parse_cluster
    from iez.collect.message import OstReading, StatsMessage, encode
    from iez.controller.service import Controller, Settings

    ctl = Controller(Settings(parse_cluster(cluster), f"sqlite:///{tmp_path / 'db'}", gate=None, site_key=SITE,
                              policy="bpio"))
    try:
        now = time.time()
        for s in range(4):  # every OSS reports its two empty 2 GiB OSTs
            osts = {f"bpio-OST{i:04x}": OstReading(2 << 20, 2 << 20, 2 << 20, 0.0, 0.0) for i in (2 * s, 2 * s + 1)}
            assert ctl.on_message(encode(StatsMessage("oss", f"oss{s}", 1, now, 10.0, "h", osts), SITE), now) == []
        ctl.upload_requests("ior", requests)
        assert ctl.step()
        return ctl.plan("ior").text
    finally:
        ctl.close()


def test_the_controller_places_by_bpio(tmp_path):
    from plugins.controller_stack import plan_osts

    from iez.request import Request

    got = plan_osts(controller_plan(tmp_path, CLUSTER, [Request(f"/fs/out.{r:04d}", 2 << 20, 1, rank=r)
                                                        for r in range(RANKS)]))
    assert len(got) == RANKS and all(set(osts) <= REACH[int(p[-4:])] for p, osts in got.items())
