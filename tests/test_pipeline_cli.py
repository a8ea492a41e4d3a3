"""The control-plane CLI as real `iez` subprocesses: trace import, predict, allocate, plan, report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pg import db_url, pg_server, pg_url  # noqa: F401  (fixtures)

from iez import plan as planfile
from iez.cluster import Snapshot, make_cluster
from iez.db import Database
from iez.layout.layout import FileLayout, Layout
from iez.metrics import balance_report
from iez.layout.raid0 import bytes_per_ost
from iez.request import Placement, Request


def sample(name: str) -> Path:
    from darshan.log_utils import get_log_path

    return Path(get_log_path(name))


@pytest.fixture
def iez(iez_cmd, subenv, db_url, tmp_path):
    """Run `iez ARGS --db URL`; returns the CompletedProcess."""
    subenv.pop("IEZ_DB", None)
    subenv["HOME"] = str(tmp_path / "home")  # never touch the real default database

    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([*iez_cmd, *args, "--db", db_url], capture_output=True, text=True, env=subenv,
                           cwd=tmp_path, timeout=300)
        if ok and p.returncode != 0:
            pytest.fail(f"iez {' '.join(args)} failed ({p.returncode}): {p.stderr}")
        return p

    return run


def one_line_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iez: error: "), p.stderr
    return lines[0]


def truncated_log(tmp_path: Path) -> Path:
    data = sample("sample-badost.darshan").read_bytes()
    out = tmp_path / "cut.darshan"
    out.write_bytes(data[: len(data) - 650])  # the LUSTRE and STDIO regions are cut short
    return out


def traced(db_url: str, app: str) -> list[tuple[int, int]]:
    with Database(db_url) as db, db.begin() as tx:
        return [(n, len(reqs)) for n, reqs in tx.traced_runs(app)]


def test_darshan_import_and_a_truncated_log_keeps_the_database(iez, db_url, tmp_path):
    p = iez("trace", "import", str(sample("sample-goodost.darshan")), "--app", "ior")
    assert "darshan" in p.stdout and "6909118" in p.stdout  # source and job id
    assert traced(db_url, "ior") == [(1, 48)]
    err = one_line_error(iez("trace", "import", str(truncated_log(tmp_path)), "--app", "ior", ok=False))
    assert "corrupt or truncated Darshan log" in err
    # a good log and a bad one in one command: neither is stored
    err = one_line_error(iez("trace", "import", str(sample("sample.darshan")), str(truncated_log(tmp_path)),
                             "--app", "ior", ok=False))
    assert "cut.darshan" in err
    assert traced(db_url, "ior") == [(1, 48)]
    iez("trace", "import", str(sample("sample.darshan")), "--app", "ior")
    assert traced(db_url, "ior") == [(1, 48), (2, 1)]


@pytest.mark.parametrize("args, msg", [
    (["--app", "bad name", "x.darshan"], "bad application name"),
    (["--app", "a", "--run", "3", "x.darshan", "y.darshan"], "--run names one run"),
    (["--app", "a", "/no/such/trace"], "no such shard directory or Darshan log"),
])
def test_import_errors_are_one_line(iez, args, msg):
    assert msg in one_line_error(iez("trace", "import", *args, ok=False))


def seed_placements(db_url: str) -> tuple[list[Request], dict[str, list[Placement]]]:
    """A traced run, its prediction, and two policies' placements (as iez allocate stores them)."""
    reqs = [Request(path=f"/mnt/iez/hacc/FPP1-Part{r:08d}-of-00000008.data", write_bytes=803405824,
                    stripe_count=8, rank=r, create_time=r * 0.1) for r in range(8)]
    cluster = make_cluster().with_used({0: 4 << 30, 7: 1 << 30})
    placed = {
        "rr": [Placement(q.path, FileLayout(plain=Layout(stripe_size=100532224, osts=tuple(range(8)))),
                         q.write_bytes) for q in reqs],
        "balanced": [Placement(q.path, FileLayout(plain=Layout(stripe_size=100532224,
                                                               osts=tuple((q.rank * 8 + k) % 15 for k in range(8)))),
                               q.write_bytes) for q in reqs],
    }
    with Database(db_url) as db, db.begin() as tx:
        tx.add_trace("hacc", reqs)
        tx.add_prediction("hacc", 2, reqs, {}, [1])
        sid = tx.add_snapshot(cluster, Snapshot.from_cluster(cluster), "default")
        for name, pl in placed.items():
            tx.set_placements("hacc", 2, name, pl, sid, {q.path: q.rank for q in reqs})
    return reqs, placed


def test_plan_writes_the_stored_placements(iez, db_url, tmp_path):
    _, placed = seed_placements(db_url)
    iez("plan", "hacc", "--run", "2", "-o", "hacc.plan")
    plan = planfile.load(tmp_path / "hacc.plan")
    assert plan.meta["app"] == "hacc" and plan.meta["run"] == "2" and plan.meta["policy"] == "balanced"
    assert plan.entries == {p.path: p.layout for p in placed["balanced"]}
    iez("plan", "hacc", "--policy", "rr", "-o", "rr.plan")
    assert planfile.load(tmp_path / "rr.plan").entries == {p.path: p.layout for p in placed["rr"]}
    assert "no qos placements" in one_line_error(iez("plan", "hacc", "--policy", "qos", "-o", "q", ok=False))
    assert "no placements for run 1" in one_line_error(iez("plan", "hacc", "--run", "1", "-o", "q", ok=False))
    with Database(db_url) as db, db.begin() as tx:
        assert tx.runs("hacc")[1].planned_policy == "rr"


def test_report_compares_policies_with_the_metrics_of_seed_000(iez, db_url, tmp_path):
    _, placed = seed_placements(db_url)
    p = iez("report", "hacc", "-o", "rep")
    assert "OSTCost, job" in p.stdout and "rr" in p.stdout and "balanced" in p.stdout
    out = tmp_path / "rep"
    data = json.loads((out / "report.json").read_text())
    cluster = make_cluster().with_used({0: 4 << 30, 7: 1 << 30})
    for name, pl in placed.items():
        job: dict[int, int] = {}
        for q in pl:
            for ost, n in bytes_per_ost(q.layout, q.write_bytes).items():
                job[ost] = job.get(ost, 0) + n
        want = balance_report(cluster, job)
        got = data["policies"][name]
        assert got["job"]["ost_cost"] == pytest.approx(want.job.ost_cost)
        assert got["total"]["ost_cost"] == pytest.approx(want.total.ost_cost)
        assert got["job"]["oss_cost"] == pytest.approx(want.job.oss_cost)
        assert {int(k): v for k, v in got["total"]["ost_util"].items()} == pytest.approx(want.total.ost_util)
    # rr piles all 64 stripes on OSTs 0-7; balanced spreads them over all 15
    assert sum(1 for v in data["policies"]["rr"]["job_bytes"].values() if v) == 8
    assert data["policies"]["rr"]["job"]["ost_cost"] > 1.8 > 1.2 > data["policies"]["balanced"]["job"]["ost_cost"]
    for png in ("ost_utilization.png", "oss_utilization.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png in (out / "index.html").read_text()


def test_report_and_plan_need_placements(iez):
    assert "no application 'none'" in one_line_error(iez("report", "none", ok=False))
    iez("trace", "import", str(sample("sample-goodost.darshan")), "--app", "ior")
    assert "no placements for 'ior'" in one_line_error(iez("report", "ior", ok=False))
    assert "no prediction for 'ior'" in one_line_error(iez("allocate", "ior", ok=False))
