"""The controller: its global view and metrics directly, then the whole control plane as real
processes: an emulated cluster, OSS and MDS collectors over ZeroMQ on loopback, and the
controller's uvicorn server, driven through its HTTP API and Python client.

`Stack` is shared with test_controller_reliability.py."""

from __future__ import annotations

import subprocess
import threading
import time

import httpx
import pytest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from iez.alloc.gate import HostLoad
from iez.alloc.policy import AllocOptions
from iez.cluster import make_cluster
from iez.collect.message import OstReading, StatsMessage
from iez.tokens import Tokens, read_token
from iez.controller.api_client import ControllerError
from iez.controller.exposition import Exposition, Histogram, add_known
from iez.controller.view import GlobalView
from iez.db import Database
from iez.errors import ConfigError
from iez.plan import loads
from iez.request import Request

from plugins.controller_stack import ADMIN, SITE, GiB, MiB, Stack, plan_osts, requests_for


# -- the global view, pure ------------------------------------------------------------------------

def oss_msg(oss: str, osts: dict[int, int], t: float, interval: float = 10.0, load=HostLoad(0.1, 0.2),
            fs: str = "iez") -> StatsMessage:
    """An OSS message: OST index -> KiB available of 1 GiB."""
    return StatsMessage("oss", oss, 1, t, interval, "h",
                        {f"{fs}-OST{i:04x}": OstReading(1 << 20, a, a, 0.0, 5.0) for i, a in osts.items()},
                        load=load)


def test_view_trusts_fresh_statistics_only():
    c = make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB)
    v = GlobalView(c)
    assert v.apply(oss_msg("oss0", {0: 100, 1: 200}, 1000.0), 1000.5) == (True, [])
    assert v.apply(oss_msg("oss1", {2: 300, 3: 400}, 1010.0), 1010.0) == (True, [])
    snap = v.snapshot(1020.0)  # oss0 is 20 s old: fresh for 3 intervals of 10 s
    assert sorted(snap.snapshot.osts) == [0, 1, 2, 3] and not snap.stale
    assert snap.snapshot.osts[1].kbytesavail == 200 and snap.snapshot.osts[1].write_bps == 5.0
    assert snap.snapshot.osses["oss0"].cpu == 0.1
    snap = v.snapshot(1031.0)  # oss0 is 30.5 s old: stale, its OSTs and its load are not trusted
    assert sorted(snap.snapshot.osts) == [2, 3] and snap.stale == {0, 1}
    assert "oss0" not in snap.snapshot.osses
    desc = v.describe(1031.0)
    assert [o["stale"] for o in desc["osts"]] == [True, True, False, False]
    assert desc["osts"][0]["age"] == 30.5 and desc["osses"][0]["stale"]
    assert GlobalView(c, stale_after=100.0).apply(oss_msg("oss0", {0: 1}, 1000.0), 1000.0)[0]
    v100 = GlobalView(c, stale_after=100.0)
    v100.apply(oss_msg("oss0", {0: 1}, 1000.0), 1000.0)
    assert 0 in v100.snapshot(1099.0).snapshot.osts and 0 not in v100.snapshot(1101.0).snapshot.osts


def test_view_refuses_what_it_cannot_trust():
    c = make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB)
    v = GlobalView(c)
    ok, why = v.apply(oss_msg("oss9", {0: 1}, 100.0), 100.0)
    assert not ok and "unknown OSS 'oss9'" in why[0]
    ok, why = v.apply(oss_msg("oss0", {0: 1}, 100.0), 200.0)  # read 100 s ago: a replay, or a bad clock
    assert not ok and "staleness limit" in why[0]
    assert v.apply(oss_msg("oss0", {0: 1, 2: 5}, 100.0), 100.0) == (
        True, ["oss oss0 reports OST 2, which the cluster description does not put on it: ignored "
               "(update it after a failover)"])
    ok, why = v.apply(oss_msg("oss0", {0: 1}, 100.0), 101.0)
    assert not ok and "no newer" in why[0]
    assert v.apply(oss_msg("oss0", {0: 7}, 101.0, fs="other"), 101.0) == (True, [])  # another fs: not ours
    assert sorted(v.snapshot(101.0).snapshot.osts) == []
    ok, why = v.apply(StatsMessage("mds", "mdsX", 1, 100.0, 10.0), 100.0)
    assert not ok and "unknown MDS" in why[0]


def test_view_takes_ost_states_from_a_fresh_mds_only():
    c = make_cluster(n_oss=1, osts_per_oss=2, ost_size=GiB)
    v = GlobalView(c)
    v.apply(oss_msg("oss0", {0: 10, 1: 10}, 100.0, interval=100.0), 100.0)
    v.apply(StatsMessage("mds", "mds0", 1, 100.0, 1.0, ost_states={"iez-OST0001": "inactive"}), 100.0)
    assert v.snapshot(101.0).snapshot.osts[1].state == "inactive"
    assert v.describe(101.0)["osts"][1]["state_from"] == "mds"
    # The MDS collector went silent: its view is stale, the cluster description's state is used.
    assert v.snapshot(110.0).snapshot.osts[1].state == "active"
    assert v.describe(110.0)["mds"]["stale"]


# -- metrics and tokens ----------------------------------------------------------------------------

def test_prometheus_text():
    h = Histogram((0.1, 1.0))
    for x in (0.05, 0.5, 0.5, 5.0):
        h.observe(x)

    def families():
        lat = HistogramMetricFamily("x_seconds", "h.", labels=["policy"])
        lat.add_metric(["balanced"], h.cumulative(), h.sum)
        y = GaugeMetricFamily("y", "g.", labels=["ost", "note"])
        add_known(y, ["1", 'a "q"\\'], 0.5)
        add_known(y, ["2", ""], None)
        return [lat, y]

    text = Exposition(families).render().decode()
    assert "_created" not in text
    got = {f.name: (f.type, f.documentation, [(s.name, s.labels, s.value) for s in f.samples])
           for f in text_string_to_metric_families(text)}
    assert got == {
        "x_seconds": ("histogram", "h.", [
            ("x_seconds_bucket", {"policy": "balanced", "le": "0.1"}, 1),
            ("x_seconds_bucket", {"policy": "balanced", "le": "1.0"}, 3),
            ("x_seconds_bucket", {"policy": "balanced", "le": "+Inf"}, 4),
            ("x_seconds_count", {"policy": "balanced"}, 4), ("x_seconds_sum", {"policy": "balanced"}, 6.05)]),
        "y": ("gauge", "g.", [("y", {"ost": "1", "note": 'a "q"\\'}, 0.5)])}


def test_tokens(tmp_path, monkeypatch):
    t = Tokens(SITE, ADMIN)
    assert (t.role(SITE), t.role(ADMIN), t.role("x" * 32), t.role(None)) == ("site", "admin", None, None)
    with pytest.raises(ConfigError, match="must differ"):
        Tokens(SITE, SITE)
    f = tmp_path / "t"
    f.write_text("short\n")
    with pytest.raises(ConfigError, match="at least 16"):
        read_token(str(f), "X", "site", "--site-token-file")
    monkeypatch.delenv("IEZ_T", raising=False)
    with pytest.raises(ConfigError, match="give --t FILE or set IEZ_T"):
        read_token(None, "IEZ_T", "site", "--t")
    monkeypatch.setenv("IEZ_T", SITE)
    assert read_token(None, "IEZ_T", "site", "--t") == SITE


def test_upload_schema_carries_the_writers_facts():
    """The client sends a request's writers' facts and the API hands them on; out of bounds
    (negative, over 4 PiB, an alignment not a power of two, not an integer) they are refused."""
    from pydantic import ValidationError

    from iez.controller.api import FileRequest
    from iez.controller.api_client import request_json

    q = Request("/fs/ssf", 64 * MiB, 4, comm_size=1024, api="mpiio", writers=1024, transfer_size=MiB,
                write_align=64 * 1024)
    assert FileRequest.model_validate(request_json(q)).request("") == q
    assert FileRequest.model_validate({"path": "/fs/old", "write_bytes": 1}).request("").writers == 0  # unknown
    for bad in ({"writers": -1}, {"writers": 1 << 31}, {"transfer_size": -4096}, {"transfer_size": 1 << 60},
                {"write_align": 3 * 4096}, {"write_align": 1 << 60}, {"write_align": "4096"}, {"writers": 2.5}):
        with pytest.raises(ValidationError):
            FileRequest.model_validate({"path": "/fs/x", "write_bytes": 1, **bad})


# -- the whole control plane as real processes -------------------------------------------------------

def test_requests_in_plan_out(stack):
    stack.start_collectors()
    stack.start_controller()
    c = stack.client()
    reqs = requests_for("ior", stack.emu, 8, 64 * MiB, 4)
    assert c.upload_requests("ior", reqs) == {"app": "ior", "run": 1, "files": 8, "status": "pending"}
    got = c.fetch_plan("ior", wait=30)
    assert (got.status, got.run) == ("ready", 1)
    plan = loads(got.text)
    assert plan.meta["app"] == "ior" and plan.meta["run"] == "1" and plan.meta["policy"] == "balanced"
    assert sorted(plan.entries) == sorted(q.path for q in reqs)
    per_ost: dict[int, int] = {}
    # The requests ask for 4 stripes; the controller's default layout mode is auto (docs/layouts.md):
    # it spreads the run's eight files wider, the same for all, and stores why with each placement.
    [count] = {len(fl.osts()) for fl in plan.entries.values()}
    assert count > 4
    for fl in plan.entries.values():
        osts = fl.osts()
        assert len(osts) == count == len(set(osts)) and count * fl.plain.stripe_size >= 64 * MiB
        for i in osts:
            per_ost[i] = per_ost.get(i, 0) + 1
    assert max(per_ost.values()) - min(per_ost.get(i, 0) for i in range(15)) <= 1  # 8 x count stripes on 15 OSTs
    with Database(stack.db) as db, db.begin() as tx:
        [stored] = tx.placement_sets("ior", 1)
    assert all(p.note.startswith(f"auto: {count} x ") and "instead of 4 x 16.0M" in p.note for p in stored.placements)
    assert c.fetch_plan("ior", run=1).text == got.text
    assert c.fetch_plan("nobody").status == "none"
    assert c.fetch_plan("ior", run=7).status == "none"
    with pytest.raises(ControllerError, match="409.*already planned"):
        c.upload_requests("ior", reqs, run=1)
    status = c.app("ior")
    assert status["runs"][0]["planned"] == "balanced" and status["pending"] == []

    # The run happened: its trace goes up; the controller predicts run 2 and plans it.
    up = c.upload_ingested("ior", reqs, run=1, plan_hits=8, nprocs=8)
    assert up["run"] == 1 and up["next"] == 2 and not up["retrace"]
    assert up["notes"] == ["run 1: prediction accuracy 100.0% (8 files predicted, 8 created)"]
    nxt = c.fetch_plan("ior", wait=60)
    assert (nxt.status, nxt.run) == ("ready", 2)
    assert sorted(loads(nxt.text).entries) == sorted(q.path for q in reqs)  # AIPA: the same files again
    with pytest.raises(ControllerError, match="409.*already has a trace"):
        c.upload_ingested("ior", reqs, run=1)

    # Metrics: per-OST and per-OSS utilization, OSTCost, allocation latency.
    m = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {stack.site}"}).text
    samples = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(m) for s in f.samples]
    assert sum(name == "iez_used_ratio" and labels["component"] == "ost" for name, labels, _ in samples) == 15
    assert sum(name == "iez_used_ratio" and labels["component"] == "oss" for name, labels, _ in samples) == 3
    assert any(name == "iez_ost_cost_ratio" and labels == {"fsname": "iez"} for name, labels, _ in samples)
    assert ("iez_allocation_seconds_count", {"policy": "balanced"}, 2) in samples
    assert ("iez_work_total", {"kind": "predict", "result": "ok"}, 1) in samples
    assert ("iez_plan_files_total", {"app": "ior", "result": "hit"}, 8) in samples
    view = c.cluster()
    assert len(view["osts"]) == 15 and not any(o["stale"] for o in view["osts"])
    assert view["mds"]["collector"]["messages"] >= 1
    spec = httpx.get(f"{stack.url}/openapi.json").json()
    assert {"/apps/{app}/plan", "/apps/{app}/traces", "/apps/{app}/requests", "/cluster", "/health",
            "/metrics", "/apps/{app}/runs/{run}/allocate"} <= set(spec["paths"])


def test_a_plan_is_served_as_stored_with_its_etag(stack):
    """The plan file is rendered once, when the run is placed, and stored: every fetch (the first,
    the cached ones, after a kill -9 and restart) answers those bytes with an ETag, and 304 to a
    client that holds them. Serving from memory still needs a token; a re-placement is served at once."""
    stack.start_collectors()
    stack.start_controller()
    c = stack.client()
    c.upload_requests("wrf", requests_for("wrf", stack.emu, 4, 32 * MiB, 2))
    got = c.fetch_plan("wrf", wait=30)
    assert got.status == "ready", got.reason
    with Database(stack.db) as db, db.begin() as tx:
        _, _, stored = tx.planned_run("wrf")
    url = f"{stack.url}/apps/wrf/plan"
    auth = {"Authorization": f"Bearer {stack.site}"}

    def get(**headers: str) -> httpx.Response:
        return httpx.get(url, headers={**auth, **headers})

    first, again = get(), get()
    assert first.status_code == again.status_code == 200 and first.content == again.content == stored
    tag = first.headers["etag"]
    assert tag == again.headers["etag"] and first.headers["x-iez-run"] == "1"
    assert first.headers["content-type"] == "text/plain; charset=utf-8"
    same = get(**{"If-None-Match": f'"other", W/{tag}'})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == tag
    assert get(**{"If-None-Match": '"other"'}).content == stored
    assert httpx.get(f"{stack.url}/apps/wrf/runs/1/plan", headers={**auth, "If-None-Match": tag}).status_code == 304
    assert httpx.get(url).status_code == 401  # held in memory, still not served without a token
    assert httpx.get(url, headers={"Authorization": "Bearer " + "x" * 32}).status_code == 401
    stack.kill("controller")
    stack.start_controller()
    back = get()
    assert back.content == stored and back.headers["etag"] == tag
    stack.client(admin=True).allocate("wrf", 1, policy="rr")  # placed again: the new plan at once
    replaced = get(**{"If-None-Match": tag})
    assert replaced.status_code == 200 and loads(replaced.text).meta["policy"] == "rr" and replaced.headers["etag"] != tag


def test_two_applications_from_two_clients_are_placed_together(stack):
    from iez.alloc.registry import get_policy
    from iez.cluster import Snapshot

    stack.start_collectors()
    # One stripe a file, as asked, so that ten files on ten OSTs shows the global view at work.
    stack.start_controller("--no-gate", "--layout", "keep")
    apps = {a: requests_for(a, stack.emu, 5, 100 * MiB, 1) for a in ("hacc", "ior")}
    # Without the global view each application alone would take the same five emptiest OSTs.
    alone = {a: {i for p in get_policy("balanced").place(r, stack.cluster, Snapshot.from_cluster(stack.cluster),
                                                         AllocOptions(layout="keep"))
                 for i in p.layout.osts()} for a, r in apps.items()}
    assert alone["hacc"] & alone["ior"]

    plans: dict[str, str] = {}
    start = threading.Barrier(2)

    def job(app: str) -> None:
        with stack.client() as c:  # each application its own client
            start.wait()
            c.upload_requests(app, apps[app])
            plans[app] = c.fetch_plan(app, wait=30).text

    threads = [threading.Thread(target=job, args=(a,)) for a in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    used = [i for text in plans.values() for osts in plan_osts(text).values() for i in osts]
    assert len(used) == 10 and len(set(used)) == 10  # ten files on ten different OSTs


def test_admin_replaces_a_run_and_the_site_token_may_not(stack):
    stack.start_collectors()
    stack.start_controller()
    site, admin = stack.client(), stack.client(admin=True)
    site.upload_requests("vpic", requests_for("vpic", stack.emu, 3, 32 * MiB, 2))
    assert site.fetch_plan("vpic", wait=30).status == "ready"
    with pytest.raises(ControllerError, match="403"):
        site.allocate("vpic", 1, policy="rr")
    got = admin.allocate("vpic", 1, policy="rr")
    assert got["policy"] == "rr" and got["files"] == 3
    # the answer says how many layouts iez changed from the asked ones (auto, the default) and why
    assert got["layouts_changed"] == len(got["notes"]) == 3
    assert all(n.startswith("auto: ") and "instead of 2 x 16.0M" in n for n in got["notes"].values())
    assert loads(site.fetch_plan("vpic").text).meta["policy"] == "rr"
    with pytest.raises(ControllerError, match="404"):
        admin.allocate("vpic", 5)


def test_controller_on_postgresql(stack, pg_url):
    stack.start_collectors()
    stack.start_controller(db=pg_url)
    c = stack.client()
    c.upload_requests("wrf", requests_for("wrf", stack.emu, 4, 16 * MiB, 2))
    first = c.fetch_plan("wrf", wait=30)
    assert first.status == "ready"
    stack.kill("controller")
    stack.start_controller("--no-gate", db=pg_url)
    assert c.fetch_plan("wrf").text == first.text  # served from PostgreSQL after a restart
    c.upload_ingested("wrf", requests_for("wrf", stack.emu, 4, 16 * MiB, 2), run=1, plan_hits=4)
    assert c.fetch_plan("wrf", wait=60).run == 2


def test_controller_command_line_errors(tmp_path, iez_cmd, subenv):
    (tmp_path / "s").write_text(SITE)
    (tmp_path / "a").write_text(ADMIN)
    env = {k: v for k, v in subenv.items() if not k.startswith("IEZ_")}
    tok = ["--site-token-file", str(tmp_path / "s"), "--admin-token-file", str(tmp_path / "a")]
    for argv, msg in [
        ([], "no site token"),
        (["--site-token-file", str(tmp_path / "s"), "--admin-token-file", str(tmp_path / "s")], "must differ"),
        (tok + ["--listen", "nowhere"], "HOST:PORT"),
        (tok + ["--policy", "best"], "unknown allocation policy"),
        (tok + ["--capacity-weight", "3"], "capacity weight"),
        (tok + ["--emulated", str(tmp_path)], "not an emulated iez cluster"),
        (tok + ["--stats", "bogus://x", "--db", f"sqlite:///{tmp_path / 'db'}"], "cannot bind the statistics socket"),
    ]:
        r = subprocess.run(iez_cmd + ["controller", *argv], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2 and msg in r.stderr, (argv, r.stderr)
        assert r.stderr.strip().splitlines()[-1].startswith("iez: error: ")


def test_work_held_for_stale_osts_does_not_block_other_applications(tmp_path):
    from dataclasses import replace

    from iez.collect.message import encode
    from iez.controller.service import Controller, Settings

    cluster = replace(make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB), pools={"fast": (0, 1)})
    ctl = Controller(Settings(cluster, f"sqlite:///{tmp_path / 'db'}", gate=None, site_key=SITE))
    try:
        now = time.time()
        assert ctl.on_message(encode(oss_msg("oss1", {2: 1 << 19, 3: 1 << 19}, now), SITE), now) == []
        assert "bad signature" in ctl.on_message(encode(oss_msg("oss0", {0: 1}, now), "x" * 32), now)[0]
        ctl.upload_requests("fastapp", [Request("/fs/f0", MiB, 1, pool="fast")])
        ctl.upload_requests("other", [Request("/fs/o0", MiB, 1), Request("/fs/o1", MiB, 1)])
        assert ctl.step() and not ctl.step()  # "other" placed; "fastapp" waits for oss0's statistics
        held = ctl.plan("fastapp")
        assert held.status == "pending" and "OSTs [0, 1] have no fresh statistics" in held.reason
        assert {i for osts in plan_osts(ctl.plan("other").text).values() for i in osts} == {2, 3}
        ctl.on_message(encode(oss_msg("oss0", {0: 1 << 19, 1: 1 << 19}, now + 1), SITE), now + 1)
        assert ctl.step()
        assert ctl.plan("fastapp").status == "ready"
        assert ctl.messages == {"accepted": 2, "rejected": 1}
    finally:
        ctl.close()


def test_a_pending_plan_is_read_once_then_answered_from_memory_with_the_workers_state(tmp_path):
    """An upload runs no pending-work query; the first fetch of its plan reads the database, later
    ones are answered from memory, saying why the work waits (or that it failed) as the worker
    says now, until the worker's next write: then the plan itself, read once too."""
    from sqlalchemy import event

    from iez.collect.message import encode
    from iez.controller.service import Controller, Settings

    ctl = Controller(Settings(make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB), f"sqlite:///{tmp_path / 'db'}",
                              gate=None, site_key=SITE))
    began: list[int] = []
    event.listen(ctl.db.engine, "begin", lambda _: began.append(1))
    try:
        now = time.time()
        for oss, osts in (("oss0", {0: 1 << 19, 1: 1 << 19}), ("oss1", {2: 1 << 19, 3: 1 << 19})):
            ctl.on_message(encode(oss_msg(oss, osts, now), SITE), now)
        ctl.upload_requests("a", [Request("/fs/a0", MiB, 1)])
        assert len(began) == 1  # the upload's one transaction
        assert (ctl.plan("a").status, ctl.plan("a", 1).status, len(began)) == ("pending", "pending", 3)
        [key] = {w.key for w in (ctl.plans.waits_for("a", None), ctl.plans.waits_for("a", 1))}
        ctl.held[key] = "held back: the test"
        assert [(r.status, r.run, r.reason) for r in (ctl.plan("a"), ctl.plan("a", 1))] == \
            [("pending", 1, "held back: the test")] * 2 and len(began) == 3
        ctl.failed[key] = "it broke"
        assert (ctl.plan("a").status, ctl.plan("a").reason) == ("failed", "it broke")  # read again, not held
        del ctl.failed[key]
        assert ctl.step() and ctl.plan("a").status == "ready"
        before = len(began)
        assert ctl.plan("a").status == ctl.plan("a", 1).status == "ready" and len(began) == before
    finally:
        ctl.close()


def test_a_polled_pending_plan_is_answered_before_fastapi_as_fastapi_answers_it(tmp_path):
    """A client polls a plan being made: once the controller holds the work it waits for, the
    poll is answered by ServedPlans (no route, no worker thread), with the same reply as the
    route's, the worker's reason included; a failure, an unknown token or a plan not held go on."""
    from fastapi.testclient import TestClient

    from iez.controller.api import ServedPlans, create_app
    from iez.controller.service import Controller, Settings

    ctl = Controller(Settings(make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB), f"sqlite:///{tmp_path / 'db'}",
                              gate=None, site_key=SITE))
    app = create_app(ctl, Tokens(SITE, ADMIN))
    served = ServedPlans(app, ctl, Tokens(SITE, ADMIN))
    site = {b"authorization": f"Bearer {SITE}".encode()}
    try:
        ctl.upload_requests("a", [Request("/fs/a0", MiB, 1)])
        assert served.answer("/apps/a/plan", site) is None  # not held yet: the route reads the database
        with TestClient(app, headers={"Authorization": f"Bearer {SITE}"}) as http:
            for why in ("queued", "held back: the test"):
                route = http.get("/apps/a/plan")
                status, headers, body = served.answer("/apps/a/plan", site)
                assert (status, body, route.status_code, route.content) == (202, route.content, 202, body)
                assert dict(headers)[b"retry-after"] == b"2" and why in route.json()["detail"]
                assert served.answer("/apps/a/runs/1/plan", site) is None  # run 1's fetch not made yet
                assert served.answer("/apps/a/plan", {b"authorization": b"Bearer " + b"x" * 32}) is None
                ctl.held[ctl.plans.waits_for("a", None).key] = "held back: the test"
            ctl.failed[ctl.plans.waits_for("a", None).key] = "it broke"
            assert served.answer("/apps/a/plan", site) is None and http.get("/apps/a/plan").status_code == 409
    finally:
        ctl.close()


def test_a_plan_reserves_its_space_until_the_reservation_ttl(tmp_path):
    from sqlalchemy import text

    from iez.collect.message import encode
    from iez.controller.service import Controller, Settings

    cluster = make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB)
    ctl = Controller(Settings(cluster, f"sqlite:///{tmp_path / 'db'}", gate=None, site_key=SITE, reservation_ttl=60))
    try:
        now = time.time()
        for oss, osts in (("oss0", (0, 1)), ("oss1", (2, 3))):
            ctl.on_message(encode(oss_msg(oss, {i: 1 << 20 for i in osts}, now), SITE), now)

        def planned(app: str) -> dict[int, int]:
            """Plan 4 files of 256 MiB for app; the KiB available its allocation saw per OST."""
            ctl.upload_requests(app, [Request(f"/fs/{app}{i}", 256 * MiB, 1) for i in range(4)])
            assert ctl.step() and ctl.plan(app).status == "ready"
            with ctl.db.begin() as tx:
                [s] = tx.placement_sets(app, 1)
                return {i: o.kbytesavail for i, o in tx.snapshot(s.snapshot_id)[1].osts.items()}

        assert planned("a") == dict.fromkeys(range(4), 1 << 20)
        assert planned("b") == dict.fromkeys(range(4), 3 << 18)  # a's 256 MiB a OST are promised
        with ctl.db.begin() as tx:  # a and b planned two minutes ago, and neither ran
            tx.conn.execute(text("UPDATE runs SET planned_at = planned_at - 120"))
        assert planned("c") == dict.fromkeys(range(4), 1 << 20)  # older than the TTL: nothing reserved
    finally:
        ctl.close()


def test_client_uploads_a_real_darshan_log_and_the_next_run_is_planned(tmp_path, iez_cmd, subenv):
    from darshan.log_utils import get_log_path

    stack = Stack(tmp_path, iez_cmd, subenv, ost_size="16GiB")
    try:
        stack.start_collectors()
        stack.start_controller()
        c = stack.client()
        got = c.upload_trace("ior", get_log_path("sample-goodost.darshan"))  # a 48-process IOR, FPP, 1 GiB each
        assert got["run"] == 1 and got["files"] == 48 and not got["retrace"]
        plan = c.fetch_plan("ior", wait=60)
        assert plan.status == "ready" and plan.run == 2 and len(loads(plan.text)) == 48
        # A run that missed its plan for most files says so: the job should be traced again.
        reqs = requests_for("ior", stack.emu, 4, MiB, 1)
        assert c.upload_ingested("ior", reqs, run=2, plan_hits=1, plan_misses=3)["retrace"]
        assert c.app("ior")["retrace"]
        # Files that cannot fit: planning fails, says why, and the job is told (409).
        c.upload_requests("huge", requests_for("huge", stack.emu, 100, 3 * GiB, 1))  # 300 GiB on 240
        failed = c.fetch_plan("huge", wait=30)
        assert failed.status == "failed" and "ENOSPC" in failed.reason
        assert c.app("huge")["pending"][0]["failed"].startswith("ENOSPC")
    finally:
        stack.close()
