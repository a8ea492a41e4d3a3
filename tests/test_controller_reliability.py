"""Reliability, with real processes: kill -9 the controller in the middle
of a run; kill a collector; malformed and unauthenticated HTTP. Plus recovery of work the
controller had accepted but not yet done when it was killed."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, func, select

from iez.controller.api_client import ControllerError
from iez.db.schema import metadata
from iez.plan import loads

from plugins.controller_stack import MiB, plan_osts, requests_for

# The application: creates every file of its plan with the planned layout (through the emulated
# client, as libiez does) and writes a known pattern slowly, so that the test can kill the
# controller while it runs. Prints one JSON line per file written.
APP = r"""
import json, os, sys, time
from iez.backend.emulated import EmulatedBackend
from iez.plan import load

cluster, plan_path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
be = EmulatedBackend(cluster)
for n, (path, layout) in enumerate(sorted(load(plan_path).entries.items())):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    be.create(path, layout)
    with open(path, "r+b") as f:
        for k in range(size // (1 << 20)):
            f.write(bytes([(n + k) % 251]) * (1 << 20))
            f.flush()
            time.sleep(0.02)
    print(json.dumps({"path": path, "n": n}), flush=True)
"""


def expected_sha(n: int, size: int) -> str:
    h = hashlib.sha256()
    for k in range(size // MiB):
        h.update(bytes([(n + k) % 251]) * MiB)
    return h.hexdigest()


def test_kill_9_controller_mid_run_loses_nothing(stack, tmp_path):
    from iez.backend.emulated import EmulatedBackend

    stack.start_collectors()
    stack.start_controller()
    c = stack.client()
    size = 8 * MiB
    reqs = requests_for("ior", stack.emu, 8, size, 4)
    c.upload_requests("ior", reqs)
    got = c.fetch_plan("ior", wait=30)
    assert got.status == "ready"
    plan_file = tmp_path / "ior.plan"
    plan_file.write_text(got.text)

    app = subprocess.Popen([sys.executable, "-c", APP, str(stack.emu), str(plan_file), str(size)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=stack.env)
    first = app.stdout.readline()  # one file is written: the run is under way
    assert first, app.stderr.read()
    stack.kill("controller")  # kill -9 in the middle of the run
    out, err = app.communicate(timeout=120)
    assert app.returncode == 0, err
    assert len([first, *out.splitlines()]) == 8

    # No file lost or corrupted, and each has the layout its plan gave it.
    be = EmulatedBackend(stack.emu)
    planned = loads(got.text).entries
    for n, path in enumerate(sorted(planned)):
        data = open(path, "rb").read()
        assert len(data) == size and hashlib.sha256(data).hexdigest() == expected_sha(n, size), path
        assert be.get_layout(path).osts() == planned[path].osts()

    # While the controller is down the job's upload fails in one clean line (iez run warns, goes on).
    with pytest.raises(ControllerError, match="unreachable") as e:
        c.upload_ingested("ior", reqs, run=1, plan_hits=8)
    assert e.value.status == 0

    # Restarted on the same database: the plan it made is still served, the upload now lands,
    # and the next run is planned on statistics that now include the run's bytes.
    stack.start_controller()
    assert c.fetch_plan("ior", run=1).text == got.text
    assert c.app("ior")["runs"][0]["planned"] == "balanced"
    assert c.upload_ingested("ior", reqs, run=1, plan_hits=8)["run"] == 1
    nxt = c.fetch_plan("ior", wait=60)
    assert nxt.run == 2 and nxt.status == "ready"
    used = {o["index"]: o["utilization"] for o in c.cluster()["osts"]}
    assert sum(used.values()) > 0


def test_work_accepted_before_a_kill_is_done_after_the_restart(stack, tmp_path):
    busy, idle = tmp_path / "busy", tmp_path / "idle"
    for d, load in ((busy, "64.00"), (idle, "0.00")):
        d.mkdir()
        (d / "loadavg").write_text(f"{load} {load} {load} 1/100 4242\n")
        (d / "meminfo").write_text("MemTotal: 1000000 kB\nMemFree: 900000 kB\nMemAvailable: 900000 kB\n")
    stack.start_collectors()
    stack.start_controller("--gate-proc", str(busy))
    c = stack.client()
    c.upload_requests("hacc", requests_for("hacc", stack.emu, 4, 16 * MiB, 1))
    held = c.fetch_plan("hacc", wait=3)
    assert held.status == "pending" and "host busy: CPU" in held.reason  # the gate (docs/references.md#s000-gate)
    assert stack.wait_health(lambda h: h["waiting"], "the gate")["pending"] == 1
    stack.kill("controller")
    stack.start_controller("--gate-proc", str(idle))
    got = c.fetch_plan("hacc", wait=30)  # nothing uploaded again: the database held the work
    assert got.status == "ready" and len(loads(got.text)) == 4


def test_a_killed_collector_makes_its_osts_stale_and_allocation_avoids_them(stack):
    stack.start_collectors()
    stack.start_controller()
    oss1 = set(stack.cluster.oss_by_name("oss1").osts)
    stack.kill("oss1")  # kill -9
    h = stack.wait_health(lambda h: h["stale_osts"], "oss1's OSTs to go stale")
    assert set(h["stale_osts"]) == oss1 and h["fresh_osts"] == 10
    c = stack.client()
    view = c.cluster()
    assert {o["index"] for o in view["osts"] if o["stale"]} == oss1
    assert next(s for s in view["osses"] if s["name"] == "oss1")["stale"]
    metrics = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {stack.site}"}).text
    samples = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(metrics) for s in f.samples]
    assert ("iez_stale", {"component": "ost", "target": "iez-OST0005"}, 1) in samples
    assert ("iez_stale", {"component": "oss", "target": "oss1"}, 1) in samples
    # stale figures are not shown as fact
    assert not any(name == "iez_used_ratio" and labels["target"] == "iez-OST0005" for name, labels, _ in samples)

    c.upload_requests("ior", requests_for("ior", stack.emu, 10, 32 * MiB, 4))
    used = {i for osts in plan_osts(c.fetch_plan("ior", wait=30).text).values() for i in osts}
    assert used and not used & oss1 and used == set(range(15)) - oss1  # 40 stripes on the 10 OSTs left

    stack.start_collector("oss1")  # back: trusted again
    stack.wait_health(lambda h: not h["stale_osts"], "oss1 to report again")
    c.upload_requests("vpic", requests_for("vpic", stack.emu, 10, 32 * MiB, 4))
    used = {i for osts in plan_osts(c.fetch_plan("vpic", wait=30).text).values() for i in osts}
    assert used & oss1


def table_rows(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {t.name: conn.execute(select(func.count()).select_from(t)).scalar() for t in metadata.sorted_tables}
    finally:
        engine.dispose()


GOOD = {"path": "/emu/fs/a", "write_bytes": 1048576, "stripe_count": 2}


def upload(**over):
    return {"requests": [{**GOOD, **over}]}


BAD = [  # (method, path, token, body or raw bytes, expected status)
    ("POST", "/apps/a/requests", None, upload(), 401),
    ("POST", "/apps/a/requests", "x" * 40, upload(), 401),
    ("GET", "/cluster", None, None, 401),
    ("GET", "/metrics", "nope", None, 401),
    ("GET", "/apps/a/plan", None, None, 401),
    ("POST", "/apps/a/runs/1/allocate", "site", {}, 403),
    ("POST", "/apps/a/requests", "site", b"{not json", 422),
    ("POST", "/apps/a/requests", "site", b"", 422),
    ("POST", "/apps/a/requests", "site", b"\xff\xfe", 422),
    ("POST", "/apps/a/requests", "site", b"[" * 100_000 + b"]" * 100_000, 400),  # nested past any parser's depth
    ("POST", "/apps/a/requests", "site", [1, 2], 422),
    ("POST", "/apps/a/requests", "site", {"requests": []}, 422),
    ("POST", "/apps/a/requests", "site", {"requests": [GOOD], "extra": 1}, 422),
    ("POST", "/apps/a/requests", "site", upload(path="relative/x"), 422),
    ("POST", "/apps/a/requests", "site", upload(path="/a\tb"), 422),
    ("POST", "/apps/a/requests", "site", upload(path="/" + "x" * 5000), 422),
    ("POST", "/apps/a/requests", "site", upload(write_bytes=-1), 422),
    ("POST", "/apps/a/requests", "site", upload(write_bytes="lots"), 422),
    ("POST", "/apps/a/requests", "site", upload(write_bytes=1 << 60), 422),
    ("POST", "/apps/a/requests", "site", upload(write_bytes=1.5), 422),
    ("POST", "/apps/a/requests", "site", upload(stripe_count=2001), 422),
    ("POST", "/apps/a/requests", "site", upload(stripe_count=-2), 422),
    ("POST", "/apps/a/requests", "site", upload(stripe_count="4"), 422),
    ("POST", "/apps/a/requests", "site", upload(rank=-1), 422),
    ("POST", "/apps/a/requests", "site", upload(api="fortran"), 422),
    ("POST", "/apps/a/requests", "site", upload(pool="a-pool-name-too-long"), 422),
    ("POST", "/apps/a/requests", "site", upload(pool="fast"), 422),  # not a pool of this cluster
    ("POST", "/apps/a/requests", "site", upload(unknown=1), 422),
    ("POST", "/apps/a/requests", "site", {"requests": [GOOD, GOOD]}, 422),  # the same path twice
    ("POST", "/apps/a/requests", "site", {"requests": [GOOD], "run": 0}, 422),
    ("POST", "/apps/bad%20name/requests", "site", upload(), 422),
    ("POST", "/apps/-x/requests", "site", upload(), 422),
    ("POST", "/apps/a/traces", "site", {"requests": [{**GOOD, "observed": "S=12,c=1"}]}, 422),
    ("POST", "/apps/a/traces", "site", {"requests": [GOOD], "plan_hits": -1}, 422),
    ("POST", "/apps/a/traces", "site", {"requests": [GOOD], "source": "strace"}, 422),
    ("POST", "/apps/a/traces", "site", {"requests": [{**GOOD, "create_time": "soon"}]}, 422),
    ("POST", "/apps/a/runs/1/allocate", "admin", {"capacity_weight": 2}, 422),
    ("POST", "/apps/a/runs/1/allocate", "admin", {"policy": "best"}, 422),
    ("POST", "/apps/a/runs/0/allocate", "admin", {}, 422),
    ("POST", "/apps/a/runs/1/allocate", "admin", {}, 404),
    ("GET", "/apps/a", "site", None, 404),
    ("POST", "/apps/a/requests", "site", b"[" * 200_000 + b"]" * 200_000, 413),
]


def test_malformed_and_unauthenticated_requests_are_refused_and_write_nothing(stack):
    stack.start_collectors()
    stack.start_controller("--no-gate", "--max-requests-body", "300000")
    before = table_rows(stack.db)
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        for method, path, token, body, status in BAD:
            token = {"site": stack.site, "admin": stack.admin}.get(token, token)
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            kw = {"content": body, "headers": {**headers, "Content-Type": "application/json"}} \
                if isinstance(body, bytes) else {"json": body, "headers": headers}
            r = http.request(method, path, **kw)
            assert r.status_code == status, (method, path, body if not isinstance(body, bytes) else body[:40], r.text)
            detail = r.json()["detail"]
            assert isinstance(detail, str) and detail and "\n" not in detail
            if status == 401:
                assert r.headers["WWW-Authenticate"] == "Bearer"
        assert table_rows(stack.db) == before  # nothing written
        # The same upload, well formed and authenticated, is stored: the refusals were for cause.
        ok = http.post("/apps/a/requests", json=upload(path=str(stack.emu / "fs/a")),
                       headers={"Authorization": f"Bearer {stack.site}"})
        assert ok.status_code == 202, ok.text
    assert table_rows(stack.db)["predicted_requests"] == before["predicted_requests"] + 1
    assert "Traceback" not in stack.log("controller")


def test_uploads_can_be_reserved_for_the_admin_token(stack):
    stack.start_collectors()
    stack.start_controller("--no-gate", "--uploads", "admin")
    reqs = requests_for("ior", stack.emu, 2, 8 * MiB, 1)
    with pytest.raises(ControllerError, match="403"):
        stack.client().upload_requests("ior", reqs)
    assert stack.client(admin=True).upload_requests("ior", reqs)["status"] == "pending"
    assert stack.client().fetch_plan("ior", wait=30).status == "ready"  # reading stays with the site token
    assert json.loads(httpx.get(f"{stack.url}/apps", headers={"Authorization": f"Bearer {stack.site}"}).text) == ["ior"]
