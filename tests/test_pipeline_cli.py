"""The control-plane CLI as real `iez` subprocesses: trace import, predict, allocate, plan, report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from conftest import BUILD

from iez import plan as planfile
from iez.cluster import Snapshot, make_cluster
from iez.db import Database
from iez.layout.layout import FileLayout, Layout
from iez.metrics import balance_report
from iez.layout.raid0 import bytes_per_ost
from iez.request import Placement, Request


# The machine running the tests may be busy: the gate is tested on its own below.
NO_GATE = ("--no-gate",)
# Tests of CLI behaviour run on SQLite only; the database layer runs on both in test_db.py, and
# the import and end-to-end tests here run on both too.
sqlite_only = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


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


def one_line_error(p: subprocess.CompletedProcess, code: int = 2) -> str:
    """The one error line; `code` 2 for bad input, 1 for a failure while working."""
    assert p.returncode == code, p.stdout + p.stderr
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


@sqlite_only
@pytest.mark.parametrize("args, msg", [
    (["--app", "bad name", "x.darshan"], "bad application name"),
    (["--app", "a", "--run", "3", "x.darshan", "y.darshan"], "--run names one run"),
    (["--app", "a", "/no/such/trace"], "no such shard directory or Darshan log"),
])
def test_import_errors_are_one_line(iez, args, msg):
    assert msg in one_line_error(iez("trace", "import", *args, ok=False))


VECTORS = Path(__file__).resolve().parent / "vectors" / "darshan"


def test_darshan_logs_as_they_come(iez, db_url):
    """The logs of tests/vectors/darshan: a file opened through a symbolic link into Lustre is
    imported (its LUSTRE record), a read-only run imports its reads and says there is nothing to
    place, a log with nothing on Lustre says what it found, and iez report shows the reads."""
    p = iez("trace", "import", str(VECTORS / "symlinked-project.darshan"))  # named after its executable
    assert "vpicio_uni: imported" in p.stdout and "symbolic link into Lustre" in p.stdout
    assert traced(db_url, "vpicio_uni") == [(1, 1)]
    p = iez("trace", "import", str(VECTORS / "read-only.darshan"), "--app", "ior")
    assert "run 1: read 44 files and created none: no layout to choose, no plan to make" in p.stdout
    assert "2 files skipped: anonymised (hashed) names" in p.stderr
    with Database(db_url) as db, db.begin() as tx:
        [info] = tx.runs("ior")
        reads = tx.run_reads("ior", 1)
    assert (info.n_traced, info.n_reads, info.meta["notes"]) == (0, 44, ["44 files on Lustre by the LUSTRE record"])
    assert {(q.read_bytes, q.read_size) for q in reads} == {(1 << 30, 8 << 20)}
    p = iez("report", "ior", "--run", "1")
    assert "ior run 1: 44 files read, not created (44.0G read)" in p.stdout and "(and 24 more)" in p.stdout
    err = one_line_error(iez("trace", "import", str(VECTORS / "off-lustre.darshan"), "--app", "ior", ok=False))
    assert err.endswith("off-lustre.darshan: nothing to import: of the log's 48 files none was written or read on "
                        "Lustre (0 only read, 48 off Lustre, 0 with anonymised (hashed) names)")
    err = one_line_error(iez("trace", "import", str(sample("noposix.darshan")), "--app", "ior", ok=False))
    assert err.endswith("(1 only read, 0 off Lustre, 2 with anonymised (hashed) names)")
    assert traced(db_url, "ior") == []


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


@sqlite_only
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


@sqlite_only
def test_report_and_plan_need_placements(iez):
    assert "no application 'none'" in one_line_error(iez("report", "none", ok=False))
    iez("trace", "import", str(sample("sample-goodost.darshan")), "--app", "ior")
    assert "no placements for 'ior'" in one_line_error(iez("report", "ior", ok=False))
    assert "no prediction for 'ior'" in one_line_error(iez("allocate", "ior", ok=False))


def placements_of(db_url: str, app: str, run: int, policy: str) -> dict[str, FileLayout]:
    with Database(db_url) as db, db.begin() as tx:
        [s] = [s for s in tx.placement_sets(app, run) if s.policy == policy]
        return {p.path: p.layout for p in s.placements}


def test_darshan_log_to_plan_in_three_commands(iez, db_url, tmp_path):
    iez("trace", "import", str(sample("sample-goodost.darshan")), "--app", "ior")
    p = iez("predict", "ior")
    assert "predicted run 2" in p.stdout and "48 files" in p.stdout
    iez("allocate", "ior", "--policy", "balanced", "-o", "ior.plan", *NO_GATE)
    plan = planfile.load(tmp_path / "ior.plan")
    assert (plan.meta["app"], plan.meta["run"], plan.meta["policy"], plan.meta["fsname"]) == ("ior", "2", "balanced", "iez")
    stored = placements_of(db_url, "ior", 2, "balanced")
    assert plan.entries == stored
    with Database(db_url) as db, db.begin() as tx:
        predicted = tx.prediction("ior", 2).requests
        [(_, actual)] = tx.traced_runs("ior")
        assert tx.runs("ior")[1].planned_policy == "balanced"
    assert set(plan.entries) == {q.path for q in predicted} == {q.path for q in actual}
    cluster = make_cluster()
    per_ost: dict[int, int] = {}
    for fl in plan.entries.values():
        lay = fl.plain
        # IOR ran with stripe count 1; the automatic layout gives each of the run's 48 files of
        # 1 GiB 5 stripes (docs/layouts.md, "The cost model"): 240 stripes, 16 on every OST.
        # Method II's one round of 5 stripes, rounded up to the 1 MiB RPC.
        assert lay.stripe_count == 5 and lay.stripe_size == 205 << 20  # 204.8 MiB up to whole MiB
        assert set(lay.osts) <= set(cluster.ost_indices())
        for o in lay.osts:
            per_ost[o] = per_ost.get(o, 0) + 1
    assert sorted(per_ost.values()) == [16] * 15  # as even as it gets
    # the fourth, optional step writes the same plan again from the database
    iez("plan", "ior", "--run", "2", "-o", "again.plan")
    assert planfile.load(tmp_path / "again.plan").entries == plan.entries
    # the baselines place the same run; the report puts all four side by side
    iez("allocate", "ior", "--policy", "rr,qos,iez-paper", *NO_GATE)
    p = iez("report", "ior", "-o", "rep")
    header = next(line for line in p.stdout.splitlines() if "balanced" in line)
    assert [w for w in header.split() if w.isidentifier() or "-" in w] == ["rr", "qos", "iez-paper", "balanced"]
    data = json.loads((tmp_path / "rep" / "report.json").read_text())["policies"]
    assert set(data) == {"rr", "qos", "iez-paper", "balanced"}
    assert all(d["files"] == 48 and d["bound"] == pytest.approx(1.0) for d in data.values())
    # 240 stripes, 16 an OST: each file's fifth stripe is 204 MiB, the others 205, so the best an
    # OST can do is 13 long and 3 short ones, against the mean of 48 GiB / 15
    assert data["balanced"]["job"]["ost_cost"] == pytest.approx((13 * 205 + 3 * 204) / (48 * 1024 / 15))
    # every layout was changed, and the report says so: 20 a policy in the terminal, all in report.json
    changed = data["balanced"]["changed"]
    assert len(changed) == 48 and {(c["asked"], c["chosen"]) for c in changed} == {("1 stripe", "5 x 205.0M")}
    assert all(c["why"].startswith("auto: 5 x 205.0M instead of 1 x 1.0G") for c in changed)
    assert p.stdout.count("... and 28 more") == 4 and "Layouts iez changed" in (tmp_path / "rep" / "index.html").read_text()
    # the plan still carries balanced's placements: allocating other policies does not touch it
    assert planfile.load(tmp_path / "ior.plan").entries == placements_of(db_url, "ior", 2, "balanced")


@sqlite_only
def test_shared_file_from_darshan_on_a_described_cluster(iez, db_url, tmp_path):
    toml = tmp_path / "big.toml"
    toml.write_text('fsname = "scratch"\n[ost_defaults]\nsize = "2TiB"\n'
                    + "".join(f'[[oss]]\nname = "oss{s}"\nosts = {list(range(s * 8, s * 8 + 8))}\n' for s in range(4)))
    iez("trace", "import", str(sample("sample.darshan")), "--app", "vpic")
    iez("predict", "vpic")
    iez("allocate", "vpic", "--cluster", str(toml), "-o", "vpic.plan", *NO_GATE)
    plan = planfile.load(tmp_path / "vpic.plan")
    [(path, fl)] = plan.entries.items()
    assert path.endswith("/vpicio/vpicio.hdf5") and plan.meta["fsname"] == "scratch"
    lay = fl.plain
    # The run asked for 24 stripes; a lone shared file of 2 TiB is spread over all 32 OSTs (docs/layouts.md)
    assert lay.stripe_count == 32 and sorted(lay.osts) == list(range(32))
    # 2 TiB over 32 stripes, Method II rounded to 128 KiB, kept below Lustre's 4 GiB stripe limit
    assert lay.stripe_size % (128 << 10) == 0 and lay.stripe_size < 4 << 30
    assert plan.entries == placements_of(db_url, "vpic", 2, "balanced")


@sqlite_only
def test_allocate_on_an_emulated_cluster_sees_its_usage(iez, iez_cmd, subenv, db_url, tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[[oss]]\nname = "oss0"\nosts = [0, 1, 2]\n[[oss]]\nname = "oss1"\nosts = [3, 4, 5]\n'
                    '[ost_defaults]\nsize = "8GiB"\n[[ost]]\nindex = 2\nused = "6GiB"\n')
    cdir = tmp_path / "emu"
    subprocess.run([*iez_cmd, "emulate", "init", str(cdir), "--cluster", str(toml)], check=True, env=subenv,
                   capture_output=True)
    iez("trace", "import", str(sample("sample-goodost.darshan")), "--app", "ior")
    iez("predict", "ior")
    # 48 GiB do not fit on 6 x 8 GiB with 6 GiB taken: a one-line ENOSPC, nothing stored
    assert "ENOSPC" in one_line_error(iez("allocate", "ior", "--emulated", str(cdir), *NO_GATE, ok=False), 1)
    with Database(db_url) as db, db.begin() as tx:
        tx.add_prediction("ior", 2, [Request(f"/emu/f{i}", 1 << 30, 1, rank=i) for i in range(6)], {}, [1])
    iez("allocate", "ior", "--emulated", str(cdir), "-o", "emu.plan", *NO_GATE)
    entries = planfile.load(tmp_path / "emu.plan").entries
    assert len(entries) == 6 and set(entries) == {f"/emu/f{i}" for i in range(6)}
    with Database(db_url) as db, db.begin() as tx:
        [s] = tx.placement_sets("ior", 2)
        cluster, snap = tx.snapshot(s.snapshot_id)
    assert snap.osts[2].kbytesavail == 2 << 20 and snap.osts[0].kbytesavail == 8 << 20
    # the report counts those 6 GiB in the total usage of OST 2
    iez("report", "ior", "-o", "rep")
    total = json.loads((tmp_path / "rep" / "report.json").read_text())["policies"]["balanced"]["total"]
    job = placements_of(db_url, "ior", 2, "balanced")
    on2 = sum(1 for fl in job.values() if 2 in fl.osts())
    assert total["ost_util"]["2"] == pytest.approx((6 + on2) / 8)


def plan_a_then_b(iez, db_url: str) -> Callable[..., set[int]]:
    """Apps a and b each predict 15 files of 4 GiB on the 10 GiB OSTs of the testbed; a's run is
    planned (-o) and has not run. Returns: allocate b (with options) and give the kbytesavail
    its snapshot saw on each OST."""
    reqs = [Request(f"/mnt/a/f{i}", 4 << 30, 1, rank=i) for i in range(15)]
    with Database(db_url) as db, db.begin() as tx:
        for app in ("a", "b"):
            tx.add_trace(app, reqs[:1])
            tx.add_prediction(app, 2, [q if app == "a" else replace_path(q, "/mnt/b") for q in reqs], {}, [1])
    iez("allocate", "a", "-o", "a.plan", *NO_GATE)

    def avail(*opts: str) -> set[int]:
        iez("allocate", "b", *opts, *NO_GATE)
        with Database(db_url) as db, db.begin() as tx:
            [s] = tx.placement_sets("b", 2)
            return {o.kbytesavail for o in tx.snapshot(s.snapshot_id)[1].osts.values()}

    return avail


@sqlite_only
def test_planned_runs_of_other_apps_hold_their_space(iez, db_url, tmp_path):
    # app a is planned and has not run yet: its bytes count as used when app b is placed
    assert plan_a_then_b(iez, db_url)() == {6 << 20}  # 10 GiB OSTs, 4 GiB promised to a


@sqlite_only
def test_a_plan_older_than_the_reservation_ttl_holds_no_space(iez, db_url, tmp_path):
    from sqlalchemy import text

    avail = plan_a_then_b(iez, db_url)
    with Database(db_url) as db, db.begin() as tx:  # a's plan was made 8 days ago and a never ran
        assert tx.conn.execute(text("UPDATE runs SET planned_at = planned_at - 8 * 86400 "
                                    "WHERE planned_at IS NOT NULL")).rowcount == 1
    assert avail() == {10 << 20}  # the default TTL, 7 days, has passed: a holds nothing
    assert avail("--reservation-ttl", "9d") == {6 << 20}
    assert avail("--reservation-ttl", "0") == {6 << 20}  # 0: until it runs
    r = iez("allocate", "b", "--reservation-ttl", "soon", *NO_GATE, ok=False)
    assert r.returncode == 2 and "--reservation-ttl: cannot read 'soon' as a duration" in r.stderr


def replace_path(q: Request, prefix: str) -> Request:
    from dataclasses import replace

    return replace(q, path=prefix + q.path[len("/mnt/a"):])


@sqlite_only
def test_importing_a_predicted_run_reports_accuracy(iez, db_url):
    log = str(sample("sample-goodost.darshan"))
    iez("trace", "import", log, "--app", "ior")
    iez("predict", "ior")
    # the next run of IOR is the same IOR: it lands on run 2, the predicted one, and matches it
    p = iez("trace", "import", log, "--app", "ior")
    assert "run 2: prediction accuracy 100.0% (48 files predicted, 48 created)" in p.stdout
    assert traced(db_url, "ior") == [(1, 48), (2, 48)]


def test_retrace_notice_when_most_files_missed_the_plan():
    from iez.pipeline import prediction_notes
    from iez.trace.ingest import Ingested

    reqs = [Request(f"/mnt/f{i}", 10, 1, rank=i) for i in range(4)]
    [note] = prediction_notes("ior", 3, Ingested(reqs, plan_hits=1, plan_misses=3), None)
    assert note.startswith("run 3: 3 of 4 created files were not in the plan")
    assert prediction_notes("ior", 3, Ingested(reqs, plan_hits=2, plan_misses=2), None) == []


@sqlite_only
def test_allocation_waits_for_an_idle_host(iez, db_url):
    with Database(db_url) as db, db.begin() as tx:
        tx.add_trace("a", [Request("/mnt/a", 1 << 20, 1)])
        tx.add_prediction("a", 2, [Request("/mnt/a", 1 << 20, 1)], {}, [1])
    # no host uses under 0.01% of its memory: the gate stays shut, nothing is placed
    err = one_line_error(iez("allocate", "a", "--max-cpu", "1000", "--max-mem", "0.0001", "--gate-wait", "0.5",
                             ok=False), 1)
    assert "not allocating now, host busy: memory" in err
    assert "no placements" in one_line_error(iez("report", "a", ok=False))
    assert "max cpu -1.0 must be a positive fraction" in one_line_error(
        iez("allocate", "a", "--max-cpu", "-1", ok=False))
    iez("allocate", "a", "--max-cpu", "1000", "--max-mem", "0.9999")
    assert "a run 2" in iez("report", "a").stdout


WRITER = """
import os, sys
rank = int(os.environ["PMI_RANK"])
with open(f"{sys.argv[1]}/FPP1-Part{rank:08d}-of-00000004.data", "wb") as f:
    for _ in range(3):
        f.write(b"x" * (1 << 20))
"""


def libiez_run(subenv: dict, tmp_path: Path, emu: Path, run: str, mode: str, plan: Path | None = None) -> Path:
    """Four ranks of an HACC-I/O-like FPP writer, each a real process under LD_PRELOAD=libiez."""
    lib = BUILD / "libiez" / "libiez.so"
    if not lib.exists():
        pytest.fail(f"{lib} is missing: build it with cmake -S . -B build && cmake --build build")
    traces = tmp_path / run
    traces.mkdir()
    procs = []
    for rank in range(4):
        env = {**subenv, "PMI_RANK": str(rank), "PMI_SIZE": "4", "IEZ_MODE": mode, "IEZ_RUN": run,
               "IEZ_APP": "hacc", "IEZ_TRACE_DIR": str(traces), "IEZ_EMULATED": str(emu),
               "IEZ_LOG": str(tmp_path / "libiez.log"), "LD_PRELOAD": str(lib)}
        if plan is not None:
            env["IEZ_PLAN"] = str(plan)
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, str(emu / "fs")], env=env))
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    return traces


@sqlite_only
def test_libiez_trace_to_plan_and_the_placed_run_back(iez, iez_cmd, subenv, db_url, tmp_path):
    emu = tmp_path / "emu"
    subprocess.run([*iez_cmd, "emulate", "init", str(emu)], check=True, env=subenv, capture_output=True)
    subprocess.run([*iez_cmd, "emulate", "up", str(emu)], check=True, env=subenv, capture_output=True)
    try:
        run1 = libiez_run(subenv, tmp_path, emu, "job1", "trace")
        # garbage after a shard's records: its intact records are kept, with a warning
        shard = sorted(run1.glob("*.shard"))[0]
        shard.write_bytes(shard.read_bytes() + b"\xff" * 24)
        p = iez("trace", "import", str(run1), "--app", "hacc")
        assert "libiez" in p.stdout and "job1" in p.stdout
        assert p.stderr.startswith(f"iez: warning: {shard}: "), p.stderr
        assert traced(db_url, "hacc") == [(1, 4)]
        iez("predict", "hacc")
        iez("allocate", "hacc", "--emulated", str(emu), "-o", "hacc.plan", *NO_GATE)
        plan = planfile.load(tmp_path / "hacc.plan")
        names = {str(emu / "fs" / f"FPP1-Part{r:08d}-of-00000004.data") for r in range(4)}
        assert set(plan.entries) == names and plan.entries == placements_of(db_url, "hacc", 2, "balanced")
        for f in (emu / "fs").iterdir():
            f.unlink()
        # the next run: libiez places every file as planned, and traces it
        run2 = libiez_run(subenv, tmp_path, emu, "job2", "trace,place", tmp_path / "hacc.plan")
        p = iez("trace", "import", str(run2), "--app", "hacc")
        assert "run 2: prediction accuracy 100.0% (4 files predicted, 4 created)" in p.stdout
    finally:
        subprocess.run([*iez_cmd, "emulate", "down", str(emu)], env=subenv, capture_output=True)
    with Database(db_url) as db, db.begin() as tx:
        info = tx.runs("hacc")[1]
        [_, (_, actual)] = tx.traced_runs("hacc")
    assert (info.label, info.source, info.nprocs, info.plan_hits, info.plan_misses) == ("job2", "libiez", 4, 4, 0)
    # the layouts the files really got (read back, lmm_stripe_offset is the first OST)
    got = {q.path: (q.observed.plain.stripe_size, q.observed.plain.osts) for q in actual}
    assert got == {path: (fl.plain.stripe_size, fl.plain.osts) for path, fl in plan.entries.items()}
    assert {q.write_bytes for q in actual} == {3 << 20} and sorted(q.rank for q in actual) == [0, 1, 2, 3]


@sqlite_only
def test_trace_show_says_whether_iez_changed_the_planned_layouts(iez, iez_cmd, subenv, db_url, tmp_path):
    """A run placed from a plan with the automatic layout: `iez trace show --app` tells, file by
    file, that iez changed the asked layout and why, from the database, before and after the
    trace is imported; the writers' facts are shown with every record."""
    emu = tmp_path / "emu"
    subprocess.run([*iez_cmd, "emulate", "init", str(emu)], check=True, env=subenv, capture_output=True)
    subprocess.run([*iez_cmd, "emulate", "up", str(emu)], check=True, env=subenv, capture_output=True)
    try:
        iez("trace", "import", str(libiez_run(subenv, tmp_path, emu, "job1", "trace")), "--app", "hacc")
        iez("predict", "hacc")
        iez("allocate", "hacc", "--emulated", str(emu), "-o", "hacc.plan", *NO_GATE)
        for f in (emu / "fs").iterdir():
            f.unlink()
        run2 = libiez_run(subenv, tmp_path, emu, "job2", "trace,place", tmp_path / "hacc.plan")
    finally:
        subprocess.run([*iez_cmd, "emulate", "down", str(emu)], env=subenv, capture_output=True)
    with Database(db_url) as db, db.begin() as tx:
        [placed] = tx.placement_sets("hacc", 2)
    notes = {p.path: p.note for p in placed.placements}
    assert len(notes) == 4 and all(n.startswith("auto: ") and "instead of 1 x 3.0M" in n for n in notes.values())

    def show(*args: str) -> list[str]:
        return [line.strip() for line in iez("trace", "show", str(run2), *args).stdout.splitlines()]

    plain = show()
    assert plain[-1].startswith("whether iez changed a planned layout, and why, is in the interaction database")
    # the writers' facts: one writer of 1 MiB writes at 1 MiB offsets each
    rows = [line.split() for line in plain if "FPP1-Part" in line]
    assert len(rows) == 4 and all(r[8:11] == ["1", "1.0M", "1.0M"] for r in rows), plain
    for args in ((), ("--run", "2")):
        lines = show("--app", "hacc", *args)
        assert sum(line.endswith("hit, iez changed it") for line in lines) == 4
        assert "plan of hacc run 2 (balanced): iez changed 4 of the layouts this trace placed" in lines
        assert sorted(line for line in lines if ": auto: " in line) == sorted(f"{p}: {n}" for p, n in notes.items())
    # placed wider than they asked, the files still count as foreseen: their asked count is kept
    p = iez("trace", "import", str(run2), "--app", "hacc")
    assert "run 2: prediction accuracy 100.0% (4 files predicted, 4 created)" in p.stdout
    with Database(db_url) as db, db.begin() as tx:
        [_, (_, actual)] = tx.traced_runs("hacc")
    assert {q.stripe_count for q in actual} == {1} and {q.observed.plain.stripe_count for q in actual} != {1}
    doc = json.loads(iez("trace", "show", str(run2), "--json", "--app", "hacc").stdout)  # run 2 by its label, job2
    assert doc["plan"] == {"app": "hacc", "run": 2, "policy": "balanced", "notes": notes}
    assert {(r["writers"], r["transfer_size"], r["write_align"]) for r in doc["records"]} == {(1, 1 << 20, 1 << 20)}
    err = one_line_error(iez("trace", "show", str(run2), "--app", "hacc", "--run", "1", ok=False))
    assert "hacc has no planned run 1 in the database" in err


@sqlite_only
@pytest.mark.parametrize("bad, msg", [
    ("[ost_defaults]\nwrite_bw = nan\n", "ost_defaults.write_bw: expected a finite number > 0, got nan"),
    ("[[ost]]\nindex = 1\nread_bw = -1e9\n", "ost[0].read_bw: expected a finite number > 0, got -1000000000.0"),
    ("[defaults]\nstripe_size = 'wide'\n", "defaults.stripe_size: cannot read 'wide' as a size"),
])
def test_allocate_refuses_a_bad_cluster_file_in_one_line(iez, tmp_path, bad, msg):
    """`write_bw = nan` once gave `iez allocate` a traceback (and killed the controller's worker)."""
    toml = tmp_path / "cluster.toml"
    toml.write_text('[[oss]]\nname = "oss0"\nosts = [0, 1]\n' + bad)
    iez("trace", "import", str(sample("sample-goodost.darshan")), "--app", "ior")
    iez("predict", "ior")
    err = one_line_error(iez("allocate", "ior", "--cluster", str(toml), *NO_GATE, ok=False))
    assert err.startswith(f"iez: error: {toml}: {msg}")
