"""A job that only reads (analysis, post-processing) still gets a plan when it reads striped
files collectively (docs/plan-format.md, `collread`; docs/libiez.md, "Chosen by the plan"): its
traced run is imported, predicted to create nothing, placed, and the plan, with no entries and
collread=lustre, turns the Lustre-aware collective read on in the next run under mpiexec; through
the CLI and through the controller's worker. A job that reads nothing collectively still gets no
plan."""

from __future__ import annotations

import subprocess
import time

import pytest

from conftest import need_built
from iez import plan as planfile
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.request import Request
from test_collread import BENCH, MPILIB, readers_per_ost
from test_collread_plan import HERE
from test_split_writing import Job

# IOR-like, interleaved: 3 ranks, 4 segments, block = transfer = stripe (seed 003's read)
IOR = ["-a", "MPIIO", "-b", "64k", "-t", "64k", "-s", "4", "-k"]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    need_built(MPILIB, BENCH)
    with running_cluster(tmp_path_factory.mktemp("collro") / "emu", make_cluster(4, 4), seed=5) as cd:
        yield cd


def test_a_job_that_only_reads_collectively_gets_a_plan_with_no_files(emu, tmp_path, iez_cmd, subenv):
    job = Job(emu, tmp_path, "ro")
    f = job.path("input")
    job.plan({"input": "S=65536,c=2"})  # the run that wrote the input, striped over two OSTs
    job.mpi(3, [BENCH, *IOR, "-w", "-o", f], IEZ_TRACE_DIR=str(tmp_path / "writer"), IEZ_COLLREAD="off")
    db = f"sqlite:///{tmp_path / 'iez.db'}"
    env = {**subenv, "HOME": str(tmp_path / "home")}
    env.pop("IEZ_DB", None)

    def iez(*args: object, ok: bool = True) -> str:
        p = subprocess.run([*iez_cmd, *map(str, args), "--db", db], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=300)
        assert (p.returncode == 0) is ok, f"iez {args}: {p.stdout}{p.stderr}"
        return p.stdout + p.stderr

    # The analysis job: traced, no plan followed (MPICH's read).
    trace = {"IEZ_MODE": "trace", "IEZ_NID": "10.0.0.%r@tcp"}
    job.mpi(3, [BENCH, *IOR, "-c", "-r", "-o", f], IEZ_TRACE_DIR=str(tmp_path / "t1"), IEZ_RUN="r1",
            IEZ_APP="post", IEZ_IOLOG=str(tmp_path / "mpich"), **trace)
    mpich = readers_per_ost(tmp_path / "mpich", f)
    assert len(mpich) == 2 and all(len(nids) > 1 for nids in mpich.values()), mpich
    out = iez("trace", "import", tmp_path / "t1", "--app", "post")
    assert "created none" in out and "asks for the Lustre-aware collective read" in out, out
    assert "no plan to make" not in out
    out = iez("predict", "post")
    assert "predicted run 2 from run(s) 1: 0 files" in out and "places no file" in out, out
    out = iez("allocate", "post", "--policy", "rr", "--emulated", emu.root, "-o", "post.plan", "--no-gate")
    assert "predicted to create no file: nothing placed; plan written to post.plan" in out, out
    plan = planfile.load(tmp_path / "post.plan")
    assert len(plan) == 0 and plan.meta["collread"] == "lustre" and plan.meta["run"] == "2", plan.meta
    out = iez("plan", "post", "-o", "again.plan")  # from the stored run: no placements, the same plan
    again = planfile.load(tmp_path / "again.plan")
    assert "run 2: 0 files (rr)" in out and len(again) == 0 and again.meta["collread"] == "lustre", out

    # The next run follows the plan (IEZ_MODE with place, no IEZ_COLLREAD): one client per OST.
    job.mpi(3, [BENCH, *IOR, "-c", "-r", "-R", "-o", f], IEZ_PLAN=str(tmp_path / "post.plan"),
            IEZ_TRACE_DIR=str(tmp_path / "t2"), IEZ_RUN="r2", IEZ_APP="post", IEZ_IOLOG=str(tmp_path / "iez"),
            IEZ_NID="10.0.0.%r@tcp")
    per_ost = readers_per_ost(tmp_path / "iez", f)
    assert len(per_ost) == 2 and all(len(nids) == 1 for nids in per_ost.values()), per_ost
    assert HERE in job.log() and "rejected" not in job.log(), job.log()

    # Reading the same file independently: nothing to plan, as before.
    job.mpi(3, [BENCH, *IOR, "-r", "-o", f], IEZ_TRACE_DIR=str(tmp_path / "t3"), IEZ_RUN="r3", IEZ_APP="indep",
            **trace)
    out = iez("trace", "import", tmp_path / "t3", "--app", "indep")
    assert "created none: no layout to choose, no plan to make" in out, out
    assert "has no traced run to learn from" in iez("predict", "indep", ok=False)


def test_the_controller_plans_a_job_that_only_reads_collectively(tmp_path):
    """The worker predicts and places a read-only run whose reads were collective, and serves a
    plan with no files and collread=lustre; a read-only run that did not read collectively
    leaves no work."""
    from iez.collect.message import encode
    from iez.controller.service import Controller, NotFound, Settings
    from iez.controller.work import pending_work
    from plugins.controller_stack import SITE
    from test_controller import oss_msg

    ctl = Controller(Settings(make_cluster(n_oss=2, osts_per_oss=2), f"sqlite:///{tmp_path / 'db'}", gate=None,
                              site_key=SITE))
    try:
        now = time.time()
        ctl.on_message(encode(oss_msg("oss0", {0: 1 << 19, 1: 1 << 19}, now), SITE), now)
        ctl.on_message(encode(oss_msg("oss1", {2: 1 << 19, 3: 1 << 19}, now), SITE), now)
        read = Request("/fs/in.h5", 0, read_bytes=1 << 30, read_collective=True)
        got = ctl.upload_trace("post", [], reads=[read], meta={"collective_reads": [read.path]})
        assert "asks for the Lustre-aware collective read" in got["notes"][-1], got
        ctl.upload_trace("indep", [], reads=[read], meta={"collective_reads": []})
        with ctl.db.begin() as tx:
            assert [(w.kind, w.app, w.run) for w in pending_work(tx)] == [("predict", "post", 1)]
        assert ctl.step() and ctl.step() and not ctl.step()  # predicted, then placed
        served = ctl.plan("post")
        plan = planfile.loads(served.text)
        assert (served.status, served.run, len(plan), plan.meta["collread"]) == ("ready", 2, 0, "lustre")
        with pytest.raises(NotFound, match="its next run should be traced"):
            ctl.plan("indep")
    finally:
        ctl.close()
