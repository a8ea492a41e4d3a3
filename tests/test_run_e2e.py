"""`iez run` end to end: a real emulated cluster, a real controller, iez-bench under libiez.
The first run is traced and gets Lustre's default layouts; the second gets exactly the
controller's plan."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from iez.plan import loads as load_plan
from iez.workload.bench import IorJob, command
from test_run import free_port, run

SITE, ADMIN = "site-token-for-tests", "admin-token-for-tests"


@pytest.fixture
def stack(tmp_path, iez_cmd, subenv):
    """An emulated cluster with its MDS, and a controller over it (SQLite)."""
    emu = tmp_path / "emu"
    assert run(iez_cmd + ["emulate", "init", str(emu), "--ost-size", "1GiB"], subenv).returncode == 0
    assert run(iez_cmd + ["emulate", "up", str(emu), "--seed", "3"], subenv).returncode == 0
    port, stats = free_port(), f"tcp://127.0.0.1:{free_port()}"
    env = dict(subenv, IEZ_SITE_TOKEN=SITE, IEZ_ADMIN_TOKEN=ADMIN)
    log = open(tmp_path / "controller.log", "w")
    ctl = subprocess.Popen(iez_cmd + ["controller", "--emulated", str(emu), "--listen", f"127.0.0.1:{port}",
                                      "--stats", stats, "--db", f"sqlite:///{tmp_path / 'iez.db'}", "--no-gate"],
                           env=env, stdout=log, stderr=subprocess.STDOUT)
    # one collector per OSS and one on the MDS, each reading its host's parameter tree
    collectors = [subprocess.Popen(iez_cmd + ["collect", role, f"--{role}-id", host, "--params",
                                              str(emu / "params" / host), "--publish", stats, "--interval", "1"],
                                   env=env, stdout=log, stderr=subprocess.STDOUT)
                  for role, host in [("oss", "oss0"), ("oss", "oss1"), ("oss", "oss2"), ("mds", "mds0")]]
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
    for p in [*collectors, ctl]:
        p.terminate()
        p.wait(timeout=20)
    log.close()
    run(iez_cmd + ["emulate", "down", str(emu)], subenv)


def placement(fl) -> tuple:
    """What placement decides, per component: extent, stripe size, OSTs in stripe order (the
    stored layout also reports the first OST as the stripe offset, as Lustre does)."""
    return tuple((c.start, c.end, c.layout.stripe_size, c.layout.osts) for c in fl.parts())


def layouts_of(iez_cmd, env, files) -> dict[str, tuple]:
    from iez.backend import backend_for

    return {f: placement(backend_for(f).get_layout(f)) for f in files}


def test_first_run_traced_then_placed_by_the_plan(stack, iez_cmd, tmp_path):
    emu, url, env = stack
    out = emu / "fs" / "ior"
    out.mkdir()
    job = IorJob(test_file=str(out / "testFile"), ranks=4, block="8M", transfer="1M", fpp=True, read=False)
    argv = iez_cmd + ["run", "--app", "ior", "--emulated", str(emu), "--"] + command(job, json_report=False)

    r1 = run(argv, env)
    assert r1.returncode == 0, r1.stderr
    assert "warning" not in r1.stderr, r1.stderr
    files = sorted(job.files())
    assert all(os.path.getsize(f) == 8 << 20 for f in files)
    first = layouts_of(iez_cmd, env, files)  # the emulated MDS's own choice (Lustre's LOD)

    from iez.controller.client import ControllerClient

    with ControllerClient(url, SITE) as c:
        reply = c.fetch_plan("ior", wait=60)
    assert reply.status == "ready", reply
    plan = load_plan(reply.text)
    assert sorted(plan.entries) == files  # the predicted names are the files the job will write

    r2 = run(argv, env)
    assert r2.returncode == 0, r2.stderr
    second = layouts_of(iez_cmd, env, files)
    assert second == {f: placement(plan.entries[f]) for f in files}  # exactly the planned layouts
    assert all(os.path.getsize(f) == 8 << 20 for f in files)
    # the controller knows the second run placed every file from the plan
    with ControllerClient(url, SITE) as c:
        status = c.app("ior")
    (run2,) = [r for r in status["runs"] if r["run"] == reply.run]
    assert run2["traced"] and run2["plan_hits"] == 4 and run2["plan_misses"] == 0, status
    assert not status["retrace"]
    assert first.keys() == second.keys()


