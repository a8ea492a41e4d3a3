"""The controller and the collectors under hostile input (docs/security.md, "The controller", "The
statistics socket"), as tests: real `iez controller` and `iez collect` processes, real uvicorn, real
ZeroMQ on loopback. Plus fuzz targets for the collector message decoder and the HTTP request bodies.

- authentication before the body, and body caps while it streams (a 60 MiB body without a
  token must not cost memory);
- collector messages bounded: clock skew, interval, sequence (no lockout by one forged message);
- one run's failure, whatever the exception, fails that run alone; /health shows the worker;
- SIGTERM while planning a large run stops within seconds, and the run is planned after a restart;
- ZMQ_MAXMSGSIZE on the sockets that receive (the CURVE handshake against peers without the
  token: tests/test_zmq_auth.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
import zmq
from hypothesis import given, strategies as st

from conftest import fuzz_settings
from iez.cluster import make_cluster
from iez.collect.message import (MAX_INTERVAL, TOPIC, MessageError, StatsMessage, decode, encode,
                                 from_json)
from iez.controller.local import free_port
from iez.controller.view import GlobalView
from iez.zmqauth import Zap, curve_client

from plugins.controller_process import Controller, collector_seq, fresh_stats, oss_msg
from plugins.controller_stack import ADMIN, SITE, GiB, MiB


def rss(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


# -- HTTP: authentication first, then the body cap, then parsing ------------------------------------

def test_a_60_mib_body_without_token_is_refused_before_it_is_read(controller):
    c = controller()
    pid = c.proc.pid
    body = b"[" + b"1," * (30 * MiB) + b"1]"  # 60 MiB of JSON: parsed, it would cost ~700 MiB
    before = rss(pid)
    results: list[tuple[int, float]] = []

    def send() -> None:
        t0 = time.monotonic()
        r = c.post("/apps/a/traces", None, content=body, headers={"Content-Type": "application/json"})
        results.append((r.status_code, time.monotonic() - t0))

    threads = [threading.Thread(target=send) for _ in range(4)]  # four at once cost 2.1 GB before
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    after = rss(pid)
    assert [s for s, _ in results] == [401] * 4, c.log()[-2000:]
    assert max(t for _, t in results) < 20, results
    assert after["VmHWM"] - before["VmHWM"] < 8 * MiB, (before, after)
    assert after["VmRSS"] - before["VmRSS"] < 8 * MiB, (before, after)


def test_a_malformed_body_without_token_gets_401(controller):
    c = controller()
    for token in (None, "x" * 40, SITE[:-1]):
        for body in (b"{not json", b"\xff\xfe", b"[" * 100_000):
            r = c.post("/apps/a/requests", token, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 401, (token, body[:10], r.text)
            assert r.headers["WWW-Authenticate"] == "Bearer" and "token" in r.json()["detail"]
    # The admin's routes refuse the site token before reading the body too.
    r = c.post("/apps/a/runs/1/allocate", SITE, content=b"{bad", headers={"Content-Type": "application/json"})
    assert r.status_code == 403 and r.json()["detail"] == "this needs the admin token"


def test_bodies_over_the_route_cap_get_413_declared_or_chunked(controller):
    c = controller("--max-trace-body", "2MiB", "--max-requests-body", "1MiB", "--max-other-body", "1KiB")
    pid = c.proc.pid
    big = json.dumps({"requests": [{"path": f"/fs/a/{i:08d}", "write_bytes": 1} for i in range(30_000)]}).encode()
    assert MiB < len(big) < 2 * MiB
    json_ct = {"Content-Type": "application/json"}
    # Content-Length over the cap: refused up front; the same body fits the larger trace cap.
    r = c.post("/apps/a/requests", content=big, headers=json_ct)
    assert r.status_code == 413 and r.json()["detail"] == f"request body over {MiB} bytes"
    r = c.post("/apps/a/traces", content=big, headers=json_ct)
    assert r.status_code == 201, r.text
    r = c.post("/apps/b/runs/1/allocate", ADMIN, content=b" " * 2048, headers=json_ct)
    assert r.status_code == 413 and "1024 bytes" in r.json()["detail"]

    # Chunked (no Content-Length): counted as it arrives and cut at the cap.
    before = rss(pid)

    def chunks(n: int):
        for _ in range(n):
            yield b" " * (256 << 10)

    r = c.post("/apps/a/requests", content=chunks(200), headers=json_ct)  # 50 MiB, chunked
    assert r.status_code == 413 and r.json()["detail"] == f"request body over {MiB} bytes", r.text
    assert rss(pid)["VmHWM"] - before["VmHWM"] < 8 * MiB
    r = c.post("/apps/c/requests", content=chunks(2), headers=json_ct)  # 512 KiB of spaces: under the cap
    assert r.status_code == 422
    with httpx.Client(base_url=c.url, timeout=30) as http:  # the server answers on
        assert http.get("/health").json()["status"] == "ok"
    assert "Traceback" not in c.log()


def test_uploads_are_read_two_at_a_time_and_the_client_waits_its_turn(controller):
    """Each upload costs about ten times its body while parsed: four 60 MiB traces at once took
    2.8 GB. The controller reads two at once; a third is told 503 + Retry-After before its body is
    read, and ControllerClient tries again until its turn comes."""
    from iez.controller.api_client import ControllerClient
    from iez.request import Request

    c = controller("--max-uploads", "2")
    go = threading.Event()
    sending = threading.Semaphore(0)
    answers: list[httpx.Response] = []

    def slow_body(i: int):
        yield b'{"requests": [{"path": "/fs/slow%d", "write_bytes": 1}' % i
        sending.release()  # the headers are out: the controller has this upload in hand
        go.wait(60)
        yield b"]}"

    slow = [threading.Thread(target=lambda i=i: answers.append(c.post(
        f"/apps/slow{i}/requests", content=slow_body(i), headers={"Content-Type": "application/json"})))
        for i in range(3)]
    for t in slow:
        t.start()
    for _ in slow:
        assert sending.acquire(timeout=30)
    time.sleep(1)  # let the controller see all three before any finishes
    assert c.get("/cluster").status_code == 200  # reads are not held up
    with ControllerClient(c.url, SITE) as client:
        done: list[dict] = []
        waiter = threading.Thread(target=lambda: done.append(client.upload_requests("third", [Request("/fs/x", 1)])))
        waiter.start()
        time.sleep(3)
        assert not done  # told 503, still waiting its turn
        go.set()
        waiter.join(60)
    for t in slow:
        t.join(60)
    # one of the three slow ones was refused before its body was read; 202: accepted, being planned
    assert sorted(r.status_code for r in answers) == [202, 202, 503]
    busy = next(r for r in answers if r.status_code == 503)
    assert busy.headers["Retry-After"] == "2" and busy.json()["detail"] == "2 uploads are being read; try again"
    assert done and done[0]["run"] == 1


def test_the_openapi_spec_and_health_need_no_token_and_the_rest_does(controller):
    c = controller()
    assert httpx.get(f"{c.url}/openapi.json").status_code == 200
    h = httpx.get(f"{c.url}/health").json()
    assert h["status"] == "ok" and h["worker"] == {"alive": True, "last_error": None, "queue": 0, "failed": 0}
    for path in ("/cluster", "/apps", "/nowhere", "/apps/a/plan"):
        assert httpx.get(c.url + path).status_code == 401, path
    assert c.get("/nowhere").status_code == 404


# -- collector messages: bounded time, interval and sequence ------------------------------------------

def test_view_bounds_time_interval_and_sequence():
    c = make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB)
    v = GlobalView(c, max_clock_skew=30.0)
    now = 1_000_000.0
    ok, why = v.apply(oss_msg("oss0", (0, 1), now + 31, seq=1 << 40), now)
    assert not ok and "ahead of this host's clock" in why[0]
    assert v.apply(oss_msg("oss0", (0, 1), now, seq=5), now) == (True, [])  # the real one still gets in
    ok, why = v.apply(oss_msg("oss0", (0, 1), now, seq=5), now + 1)  # a replay
    assert not ok and "no newer" in why[0]
    ok, why = v.apply(oss_msg("oss0", (0, 1), now - 1, seq=4), now + 1)  # an older one replayed
    assert not ok and "no newer" in why[0]
    assert v.apply(oss_msg("oss0", (0, 1), now + 2, seq=1), now + 2)[0]  # the collector restarted
    assert v.apply(oss_msg("oss0", (0, 1), now + 1, seq=2), now + 3)[0]  # its clock stepped back
    # Forged from the future within the skew: the real collector is locked out only that long.
    assert v.apply(oss_msg("oss0", (0, 1), now + 30, seq=1 << 40), now + 3)[0]
    assert not v.apply(oss_msg("oss0", (0, 1), now + 10, seq=3), now + 10)[0]
    assert v.apply(oss_msg("oss0", (0, 1), now + 31, seq=4), now + 31)[0]
    # The longest interval keeps a dead OSS fresh for 3 intervals after its last message, no more.
    assert v.apply(oss_msg("oss1", (2, 3), now, interval=MAX_INTERVAL), now)[0]
    assert 2 in v.snapshot(now + 3 * MAX_INTERVAL).snapshot.osts
    assert 2 not in v.snapshot(now + 3 * MAX_INTERVAL + 1).snapshot.osts


@pytest.mark.parametrize("interval", [0, 0.05, 3600.5, 1e9, float("inf"), True, "60"])
def test_intervals_out_of_bounds_are_refused(interval):
    doc = oss_msg("oss0", (0,), 1000.0).to_json() | {"interval": interval}
    with pytest.raises(MessageError, match=r"interval: expected 0.1..3600 seconds"):
        from_json(doc)


def test_one_forged_message_does_not_lock_a_collector_out(controller):
    c = controller("--max-clock-skew", "2")
    now = time.time()
    # Before: accepted (its huge interval made the skew check pass), and every real message after
    # it was refused as "no newer" until a restart.
    c.publish(oss_msg("oss0", (0, 1), now + 1e6, seq=1 << 40, interval=MAX_INTERVAL))
    assert collector_seq(c, "oss0") is None
    c.publish(oss_msg("oss0", (0, 1), now, seq=7))
    assert collector_seq(c, "oss0") == 7
    # Inside the skew a forgery is taken, and the real collector is back once the skew has passed.
    c.publish(oss_msg("oss0", (0, 1), time.time() + 2, seq=1 << 40))
    c.publish(oss_msg("oss0", (0, 1), time.time(), seq=8))
    assert collector_seq(c, "oss0") == 1 << 40
    time.sleep(2.5)
    c.publish(oss_msg("oss0", (0, 1), time.time(), seq=9))
    assert collector_seq(c, "oss0") == 9
    # A restarted collector (seq 1 again, later time) is taken; a replay of its message is not.
    restart = oss_msg("oss0", (0, 1), time.time(), seq=1)
    c.publish(restart)
    assert collector_seq(c, "oss0") == 1
    c.publish(oss_msg("oss0", (0, 1), time.time(), seq=2), restart)
    assert collector_seq(c, "oss0") == 2
    metrics = c.get("/metrics").text
    assert 'iez_collector_messages_total{result="rejected"} 3' in metrics, metrics
    assert "ahead of this host's clock" in c.log() and "no newer" in c.log()


# -- the worker: one run's failure fails that run alone ------------------------------------------------

# Loaded by the controller's Python at start (PYTHONPATH): `balanced` raises a ValueError, not an
# iez error, for the app "slow"'s files, as a bug in a policy would.
FAULT = """
import iez.alloc.balanced as b
_place = b.Balanced.place
def place(self, requests, *args, **kw):
    if any(q.path.startswith("/fs/slow/") for q in requests):
        raise ValueError("a bug in a policy")
    return _place(self, requests, *args, **kw)
b.Balanced.place = place
"""


def test_a_run_that_raises_fails_alone_and_health_shows_the_worker(tmp_path, iez_cmd, subenv):
    (tmp_path / "fault").mkdir()
    (tmp_path / "fault" / "sitecustomize.py").write_text(FAULT)
    path = ":".join(p for p in (str(tmp_path / "fault"), subenv.get("PYTHONPATH", "")) if p)
    c = Controller(tmp_path / "c", iez_cmd, {**subenv, "PYTHONPATH": path}).start()
    try:
        worker_failure_stays_with_its_run(c)
    finally:
        c.stop(signal.SIGKILL)


def worker_failure_stays_with_its_run(c: Controller) -> None:
    """Before, an exception that was not an iez error killed the worker thread, /health still
    said ok and every plan stayed queued."""
    fresh_stats(c)
    slow = [{"path": f"/fs/slow/{i}", "write_bytes": MiB, "pool": "slow"} for i in range(2)]
    good = [{"path": f"/fs/good/{i}", "write_bytes": MiB, "pool": "good"} for i in range(2)]
    assert c.post("/apps/slow/requests", json={"requests": slow}).status_code == 202
    deadline = time.monotonic() + 30
    while c.get("/apps/slow/plan").status_code == 202 and time.monotonic() < deadline:
        time.sleep(0.2)
    r = c.get("/apps/slow/plan")
    assert r.status_code == 409 and "internal error: ValueError" in r.json()["detail"], r.text
    assert c.post("/apps/good/requests", json={"requests": good}).status_code == 202
    deadline = time.monotonic() + 30
    while (r := c.get("/apps/good/plan")).status_code == 202 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert r.status_code == 200 and "/fs/good/0" in r.text, r.text
    h = httpx.get(f"{c.url}/health")
    assert h.status_code == 200
    w = h.json()["worker"]
    assert w["alive"] and w["failed"] == 1 and w["queue"] == 1  # the failed run is still to do
    assert w["last_error"].startswith("allocate slow run 1: internal error: ValueError")
    assert c.get("/apps/slow").json()["pending"][0]["failed"].startswith("internal error: ValueError")
    assert "Traceback" not in c.log()


def test_health_is_503_when_the_worker_is_not_running(tmp_path):
    from fastapi.testclient import TestClient

    from iez.controller.api import create_app
    from iez.tokens import Tokens
    from iez.controller.service import Controller as Service, Settings

    ctl = Service(Settings(make_cluster(), f"sqlite:///{tmp_path / 'db'}", gate=None, site_key=SITE))
    try:
        with TestClient(create_app(ctl, Tokens(SITE, ADMIN))) as http:
            r = http.get("/health")  # never started, as after a crash of the thread
            assert r.status_code == 503 and r.json()["status"] == "failed"
            assert r.json()["worker"]["alive"] is False
            ctl.start()
            assert http.get("/health").status_code == 200
    finally:
        ctl.close()


# -- SIGTERM while planning a large run ----------------------------------------------------------------

def test_sigterm_while_planning_a_large_run_stops_within_seconds_and_loses_nothing(controller):
    c = controller()
    fresh_stats(c)
    n = 150_000
    reqs = [{"path": f"/fs/big/out.{i:08d}", "write_bytes": MiB, "stripe_count": 2, "pool": "good"}
            for i in range(n)]
    assert c.post("/apps/big/requests", json={"requests": reqs}).status_code == 202
    deadline = time.monotonic() + 60
    while "placing big run 1" not in c.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "placing big run 1" in c.log()
    t0 = time.monotonic()
    rc = c.stop(signal.SIGTERM, timeout=30)
    took = time.monotonic() - t0
    assert rc == 0 and took < 5, (rc, took, c.log()[-2000:])
    assert "planned again at the next start" in c.log()
    assert "Traceback" not in c.log()

    c.start()  # same database: the run is still to plan, and is planned
    fresh_stats(c)
    deadline = time.monotonic() + 120
    while (r := c.get("/apps/big/plan")).status_code == 202 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert r.status_code == 200 and r.headers["X-Iez-Run"] == "1"
    assert sum(1 for ln in r.text.splitlines() if ln.startswith("/fs/big/")) == n


# -- ZeroMQ: frames over the cap are dropped by libzmq before they are allocated -----------------------

def test_a_300_mb_frame_to_the_controller_is_dropped_by_libzmq(controller):
    c = controller()
    before = rss(c.proc.pid)
    with zmq.Context.instance().socket(zmq.XPUB) as pub:
        pub.setsockopt(zmq.LINGER, 0)
        curve_client(pub, SITE)  # even a holder of the token: ZMQ_MAXMSGSIZE drops it
        pub.connect(c.stats)
        assert pub.poll(10_000)
        pub.recv()
        pub.send_multipart([TOPIC, bytearray(300 * MiB), b"0" * 64], copy=False)
        time.sleep(3)
    after = rss(c.proc.pid)
    assert after["VmHWM"] - before["VmHWM"] < 32 * MiB, (before, after)
    fresh_stats(c)  # and it still takes real collectors' messages
    assert collector_seq(c, "oss0") == 1


def test_a_300_mb_frame_to_a_collector_is_dropped_by_libzmq(tmp_path, iez_cmd, subenv):
    params = tmp_path / "params"
    (params / "proc").mkdir(parents=True)
    (tmp_path / "site").write_text(SITE)
    port = free_port()
    ctx = zmq.Context()
    zap = Zap(ctx, SITE)
    with ctx.socket(zmq.XSUB) as sub:  # whoever answers on the controller's address, with the token
        sub.setsockopt(zmq.LINGER, 0)
        zap.secure(sub)
        sub.bind(f"tcp://127.0.0.1:{port}")
        p = subprocess.Popen(iez_cmd + ["collect", "oss", "--oss-id", "oss0", "--params", str(params),
                                        "--proc", str(params / "proc"), "--publish", f"tcp://127.0.0.1:{port}",
                                        "--interval", "0.5", "--token-file", str(tmp_path / "site")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=subenv, start_new_session=True)
        try:
            sub.send(b"\x01" + TOPIC)
            assert zap.wait(sub, 20_000), "the collector did not publish"
            sub.recv_multipart()
            before = rss(p.pid)
            frame = bytearray(300 * MiB)
            frame[0] = 2  # not a (un)subscription, which XSUB would first index itself
            sub.send(frame, copy=False)
            time.sleep(3)
            after = rss(p.pid)
            assert p.poll() is None
            assert after["VmHWM"] - before["VmHWM"] < 32 * MiB, (before, after)
        finally:
            p.send_signal(signal.SIGTERM)
            out = p.communicate(timeout=30)[0].decode()
    zap.close()
    ctx.term()
    assert p.returncode == 0 and "Traceback" not in out, out


# -- fuzz targets ----------------------------------------------------------------------------------------

GOOD = encode(oss_msg("oss0", (0, 1), 1000.0), SITE)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids,
                                                                                     max_size=4), max_leaves=20)


def _signed(doc: object) -> list[bytes]:
    from iez.collect.message import _mac

    body = json.dumps(doc).encode()
    return [TOPIC, body, _mac(SITE.encode(), body)]


def _mutated(data: st.DataObject) -> list[bytes]:
    doc = json.loads(GOOD[1])
    key = data.draw(st.sampled_from(sorted(doc) + ["extra"]))
    doc[key] = data.draw(json_values)
    return _signed(doc)


@pytest.mark.fuzz
@fuzz_settings(400)
@given(st.data())
def test_fuzz_collector_message_decoder(data):
    kind = data.draw(st.sampled_from(["raw", "signed", "mutated", "flipped"]))
    if kind == "raw":
        frames = data.draw(st.lists(st.binary(max_size=200), max_size=5))
    elif kind == "signed":
        frames = _signed(data.draw(json_values))
    elif kind == "mutated":
        frames = _mutated(data)
    else:
        body = bytearray(GOOD[1])
        body[data.draw(st.integers(0, len(body) - 1))] ^= data.draw(st.integers(1, 255))
        frames = [TOPIC, bytes(body), data.draw(st.sampled_from([GOOD[2], _signed({})[2]]))]
    try:
        msg = decode(frames, SITE)
    except MessageError as e:
        assert "\n" not in str(e)
    else:
        assert isinstance(msg, StatsMessage) and 0.1 <= msg.interval <= MAX_INTERVAL
        GlobalView(make_cluster()).apply(msg, 1000.0)  # and the view takes it or says why, never raises


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    """One in-process app (FastAPI through Starlette's TestClient) for the HTTP fuzz target."""
    from fastapi.testclient import TestClient

    from iez.controller.api import BodyCaps, create_app
    from iez.tokens import Tokens
    from iez.controller.service import Controller as Service, Settings

    db = tmp_path_factory.mktemp("fuzz") / "db"
    ctl = Service(Settings(make_cluster(), f"sqlite:///{db}", gate=None, site_key=SITE))
    try:
        yield TestClient(create_app(ctl, Tokens(SITE, ADMIN), caps=BodyCaps(64 << 10, 64 << 10, 4096)))
    finally:
        ctl.close()


def test_deeply_nested_json_is_a_clear_400_and_its_depth_is_counted_outside_strings(http):
    """JSON nested past what the parser takes gets 400 saying so, found by counting the body's
    depth (json_depth), not from the parser's words; inside an upload's structure too, and a body
    that is only deep inside its strings is judged by its fields (422)."""
    from iez.controller.api import MAX_JSON_DEPTH, json_depth

    site = {"Authorization": f"Bearer {SITE}", "Content-Type": "application/json"}
    deep = b"[" * 5000 + b"]" * 5000
    nested = b'{"requests": [{"path": "/fs/x", "write_bytes": ' + deep + b"}]}"
    for body in (deep, nested, b'{"requests": ' + b"[" * 300):  # the last one is cut short, too
        r = http.post("/apps/f/requests", content=body, headers=site)
        assert r.status_code == 400 and r.json() == {"detail": f"body: JSON nested more than {MAX_JSON_DEPTH} deep"}
    in_strings = json.dumps({"requests": [{"path": "/fs/[{" * 50, "write_bytes": "[[\\\"" * 300}]}).encode()
    assert json_depth(in_strings) == 3 and json_depth(deep) == 5000
    assert json_depth(b'{"a": "\\\\", "b": [["\\"]]]}') == 3  # an escaped backslash ends no string
    r = http.post("/apps/f/requests", content=in_strings, headers=site)
    assert r.status_code == 422 and r.json()["detail"].startswith("requests.0.write_bytes:"), r.text
    r = http.post("/apps/f/requests", content=b'{"requests": [1, }', headers=site)  # not deep: the parser's error
    assert r.status_code == 422 and "JSON" in r.json()["detail"], r.text


file_requests = st.fixed_dictionaries({"path": st.one_of(st.just("/fs/x"), st.text(max_size=30)),
                                       "write_bytes": st.one_of(st.integers(), st.text(max_size=8))},
                                      optional={"stripe_count": json_values, "rank": json_values, "pool": json_values,
                                                "observed": json_values, "api": json_values,
                                                "create_time": json_values, "comm_size": json_values,
                                                "read_collective": json_values})


@pytest.mark.fuzz
@fuzz_settings(100)
@given(route=st.sampled_from(["/apps/f/traces", "/apps/f/requests", "/apps/f/runs/1/allocate"]),
       token=st.sampled_from([None, "nope", SITE, ADMIN]),
       body=st.one_of(st.binary(max_size=300),
                      json_values.map(lambda v: json.dumps(v).encode()),
                      st.fixed_dictionaries({"requests": st.lists(file_requests, max_size=3)},
                                            optional={"run": json_values, "label": json_values,
                                                      "source": json_values, "policy": json_values,
                                                      "capacity_weight": json_values,
                                                      "plan_hits": json_values}).map(lambda v: json.dumps(v).encode()),
                      st.integers(4000, 70_000).map(lambda n: b" " * n)))
def test_fuzz_http_bodies(http, route, token, body):
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    r = http.post(route, content=body, headers=headers)  # a server error would raise here
    if token not in (SITE, ADMIN):
        assert r.status_code == 401
    elif route.endswith("allocate") and token == SITE:
        assert r.status_code == 403
    else:
        assert r.status_code in (200, 201, 202, 400, 404, 409, 413, 422), (r.status_code, r.text)
    detail = r.json().get("detail") if r.headers["content-type"].startswith("application/json") else None
    assert r.status_code < 400 or (isinstance(detail, str) and "\n" not in detail), r.text


@pytest.mark.timeout(20)
def test_a_fifo_as_a_token_file_is_refused_without_hanging(tmp_path, monkeypatch):
    """A FIFO planted as the token file hung every reader of it (controller, collectors, iez run)."""
    import os

    from iez.tokens import read_token
    from iez.controller.api_client import ControllerClient, ControllerError
    from iez.errors import ConfigError

    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_token(str(fifo), "IEZ_SITE_TOKEN", "site", "--site-token-file")
    monkeypatch.delenv("IEZ_TOKEN", raising=False)
    monkeypatch.setenv("IEZ_TOKEN_FILE", str(fifo))
    with pytest.raises(ControllerError, match="not a regular file"):
        ControllerClient.from_env("http://127.0.0.1:1")


def test_limits_below_one_are_refused_in_one_line(iez_cmd, subenv, tmp_path):
    (tmp_path / "site").write_text(SITE + "\n")
    (tmp_path / "admin").write_text(ADMIN + "\n")
    for option in (["--max-uploads", "0"], ["--max-other-body", "0"]):
        r = subprocess.run(iez_cmd + ["controller", "--db", f"sqlite:///{tmp_path / 'db'}", "--site-token-file",
                                      str(tmp_path / "site"), "--admin-token-file", str(tmp_path / "admin"),
                                      "--listen", "127.0.0.1:1", *option],
                           capture_output=True, text=True, env=subenv, timeout=60)
        assert r.returncode == 2 and r.stderr == "iez: error: --max-*-body and --max-uploads must be at least 1\n", r.stderr
