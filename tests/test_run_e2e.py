"""`iez run` end to end: a real emulated cluster, collectors and a controller (iez.demo.stack),
iez-bench under libiez. The first run is traced and gets Lustre's default layouts; the second
gets exactly the controller's plan."""

from __future__ import annotations

import os
import subprocess

import pytest

from iez.cluster import make_cluster
from iez.demo.stack import control_plane
from iez.plan import loads as load_plan
from iez.workload.bench import IorJob, command


@pytest.fixture
def stack(tmp_path):
    with control_plane(tmp_path / "plane", make_cluster(ost_size=1 << 30), seed=3) as s:
        yield s


def placement(fl) -> tuple:
    """What placement decides, per component: extent, stripe size, OSTs in stripe order (the
    stored layout also reports the first OST as the stripe offset, as Lustre does)."""
    return tuple((c.start, c.end, c.layout.stripe_size, c.layout.osts) for c in fl.parts())


def layouts_of(stack, files) -> dict[str, tuple]:
    from iez.backend import backend_for

    return {f: placement(backend_for(f).get_layout(f)) for f in files}


def test_first_run_traced_then_placed_by_the_plan(stack, iez_cmd, subenv):
    out = stack.cd.fs / "ior"
    out.mkdir()
    job = IorJob(test_file=str(out / "testFile"), ranks=4, block="8M", transfer="1M", fpp=True, read=False)
    argv = iez_cmd + ["run", "--app", "ior", "--emulated", str(stack.cd.root), "--"] + command(job, json_report=False)
    env = stack.client_env(subenv)

    r1 = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert r1.returncode == 0, r1.stderr
    assert "warning" not in r1.stderr, r1.stderr
    files = sorted(job.files())
    assert all(os.path.getsize(f) == 8 << 20 for f in files)
    first = layouts_of(stack, files)  # traced run: the emulated MDS's own choice (Lustre's LOD)
    assert all(len(p[0][3]) == 1 for p in first.values())  # the file-system default, 1 stripe

    with stack.client() as c:
        reply = c.fetch_plan("ior", wait=60)
    assert reply.status == "ready", reply
    plan = load_plan(reply.text)
    assert sorted(plan.entries) == files  # the predicted names are the files the job will write

    r2 = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert r2.returncode == 0, r2.stderr
    assert layouts_of(stack, files) == {f: placement(plan.entries[f]) for f in files}  # exactly the plan
    assert all(os.path.getsize(f) == 8 << 20 for f in files)
    with stack.client() as c:
        status = c.app("ior")
    (run2,) = [r for r in status["runs"] if r["run"] == reply.run]
    assert run2["traced"] and run2["plan_hits"] == 4 and run2["plan_misses"] == 0, status
    assert not status["retrace"]
