"""IO-Cop with real processes: `iez access serve` as a subprocess, C clients (iocop-client, the
line socket) and Python clients (ZeroMQ) as separate processes, kill -9 and restarts."""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from iez.access.token_client import AccessClient
from iez.access.protocol import AccessError
from iez.access.server import Spawned
from iez.access.token_client import fetch_status

from plugins.access_controllers import events, holds, wait_until

PY = sys.executable


def max_concurrent(intervals) -> int:
    marks = sorted([(a, 1) for a, *_ in intervals] + [(b, -1) for _, b, *_ in intervals], key=lambda m: (m[0], m[1]))
    n = best = 0
    for _, d in marks:
        n += d
        best = max(best, n)
    return best


def waiting_apps(c: Spawned) -> list[str]:
    return [w["app"] for w in fetch_status(c.zmq, 5)["waiting"]]


def c_client(exe, c: Spawned, appid, *args, **kw) -> subprocess.Popen:
    return subprocess.Popen([exe, c.line_addr, appid, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def finish(p: subprocess.Popen, timeout=30) -> str:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args}: exit {p.returncode}: {err}"
    return out


def queue_in_order(exe, c: Spawned, specs) -> list[subprocess.Popen]:
    """Start C clients one after the other, each once the previous one is queued."""
    procs = []
    for appid, args in specs:
        procs.append(c_client(exe, c, appid, *args))
        wait_until(lambda: appid in waiting_apps(c) or any(
            h["app"] == appid for h in fetch_status(c.zmq, 5)["holders"]), what=f"{appid} to be queued")
    return procs


# -- grant order, per policy ---------------------------------------------------------------------
@pytest.mark.parametrize("policy, opts, blocker, specs, order, most", [
    ("exclusive", [], {}, [("1:a", []), ("2:b", []), ("3:c", [])], ["1:a", "2:b", "3:c"], 1),
    ("k-concurrent", ["-k", "2"], {}, [("1:a", []), ("2:b", []), ("3:c", [])], ["1:a", "2:b", "3:c"], 2),
    ("priority", ["--priority", "app:urgent*=5", "--priority", "user:vip=3"], {},
     [("1:a", []), ("2:b", ["--register-opts", "user=vip"]), ("3:urgent", [])], ["3:urgent", "2:b", "1:a"], 1),
    ("fair-share", ["--fair-by", "user"], {"user": "alice"},
     [("1:a", ["--register-opts", "user=alice"]), ("2:b", ["--register-opts", "user=bob"]),
      ("3:c", ["--register-opts", "user=alice"]), ("4:d", ["--register-opts", "user=bob"])],
     ["2:b", "4:d", "1:a", "3:c"], 1),
    ("ost-aware", [], {"osts": {0, 1, 2, 3}},
     [("1:w1", ["--register-opts", "osts=2,5"]), ("2:w2", ["--opts", "osts=8-9"]),
      ("3:w3", ["--opts", "osts=5,6"]), ("4:w4", ["--register-opts", "osts=10"])],
     ["2:w2", "4:w4", "1:w1", "3:w3"], 3),
])
def test_grant_order_per_policy(controllers, iocop_client, tmp_path, policy, opts, blocker, specs, order, most):
    c = controllers("--policy", policy, "--heartbeat", "0.5", *opts)
    b = AccessClient(c.zmq, "0:blocker", **blocker)
    assert b.io_begin("io") is not None
    time.sleep(0.6 if policy == "fair-share" else 0.0)  # the blocker's user builds up usage
    procs = queue_in_order(iocop_client, c, [(a, ["--hold-ms", "150", *args]) for a, args in specs])
    b.io_end()
    b.close()
    for p in procs:
        finish(p)
    ev = events(tmp_path / "events.jsonl")
    granted = [e["app"] for e in ev if e["ev"] == "grant" and e["app"] != "0:blocker"]
    assert granted == order
    assert max_concurrent(holds(ev)) == most
    if policy == "ost-aware":  # w2 and w4 shared the OSTs' time with the blocker
        t_release = next(e["t"] for e in ev if e["ev"] == "release" and e["app"] == "0:blocker")
        assert all(e["t"] < t_release for e in ev if e["ev"] == "grant" and e["app"] in ("2:w2", "4:w4"))


# -- exclusive: never two holders ---------------------------------------------------------------
def test_exclusive_never_has_two_holders(controllers, iocop_client, tmp_path):
    c = controllers("--policy", "exclusive", "--heartbeat", "0.5")
    procs = [c_client(iocop_client, c, f"{i}:c", "--cycles", "8", "--hold-ms", "15") for i in range(6)]
    runs = [subprocess.Popen([PY, "-m", "iez", "access", "run", "--server", c.zmq, "--appid", f"r{i}:sleep",
                              "--", "sleep", "0.1"], stderr=subprocess.PIPE, text=True) for i in range(3)]
    client_holds = []
    for p in procs:
        rows = [line.split("\t") for line in finish(p).splitlines()]
        grants = {r[2]: float(r[4]) for r in rows if r[0] == "grant"}
        client_holds += [(grants[r[2]], float(r[3])) for r in rows if r[0] == "release"]
    for r in runs:
        assert r.wait(60) == 0, r.stderr.read()
    ev = events(tmp_path / "events.jsonl")
    h = holds(ev)
    assert len(h) == 6 * 8 + 3 and max_concurrent(h) == 1
    # As the clients saw it too: no two clients held at once.
    client_holds.sort()
    assert all(a[1] <= b[0] for a, b in zip(client_holds, client_holds[1:]))
    assert {e["ev"] for e in ev} == {"register", "acquire", "grant", "release", "unregister"}


# -- leases ------------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time, logging
    from iez.access.token_client import AccessClient
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    c = AccessClient(sys.argv[1], sys.argv[2])
    g = c.io_begin("io")
    print("held", g.token, flush=True)
    sys.stdin.readline()  # the test says when to let go
    held = c.io_end()
    print("lost" if held is None else f"released {held}", flush=True)
    c.close()
""")


def start_holder(c: Spawned, appid: str) -> subprocess.Popen:
    p = subprocess.Popen([PY, "-c", HOLDER, c.zmq, appid], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("held"), p.stderr.read()
    return p


@pytest.mark.parametrize("how", ["kill -9", "SIGSTOP"])
def test_a_dead_or_hung_holder_loses_the_token_within_two_heartbeats(controllers, iocop_client, tmp_path, how):
    hb = 0.5
    c = controllers("--heartbeat", str(hb))
    holder = start_holder(c, "1:holder")
    waiter = c_client(iocop_client, c, "2:waiter")
    wait_until(lambda: waiting_apps(c) == ["2:waiter"], what="the waiter to queue")
    time.sleep(3 * hb)  # the live holder's heartbeats keep its token meanwhile
    assert waiting_apps(c) == ["2:waiter"]
    t_kill = time.time()
    os.kill(holder.pid, signal.SIGKILL if how == "kill -9" else signal.SIGSTOP)
    out = finish(waiter)
    grant = next(line.split("\t") for line in out.splitlines() if line.startswith("grant"))
    ev = events(tmp_path / "events.jsonl")
    expire = next(e for e in ev if e["ev"] == "expire")
    assert expire["app"] == "1:holder" and expire["silent"] >= 2 * hb
    # Revoked no later than two heartbeats after the holder stopped (100 ms for the timer and
    # scheduling on a shared machine); the waiter got the token in the same instant.
    assert t_kill < expire["t"] <= t_kill + 2 * hb + 0.1
    assert abs(float(grant[4]) - expire["t"]) < 0.05
    if how == "SIGSTOP":  # the hung holder wakes up and learns it lost the token
        os.kill(holder.pid, signal.SIGCONT)
        out, err = holder.communicate("\n", timeout=20)
        assert out.strip() == "lost" and "revoked" in err
    else:
        holder.wait(10)


# -- restart -------------------------------------------------------------------------------------
WAITER = textwrap.dedent("""
    import sys, time
    from iez.access.token_client import AccessClient
    c = AccessClient(sys.argv[1], sys.argv[2], down_wait=30)
    g = c.io_begin("io")
    print("grant", time.time(), g.token, flush=True)
    c.io_end()
    c.close()
""")


def test_controller_restart_mid_queue_keeps_the_queue(controllers, iocop_client, tmp_path):
    c = controllers("--heartbeat", "0.5")
    holder = start_holder(c, "0:holder")
    py_waiter = subprocess.Popen([PY, "-c", WAITER, c.zmq, "2:py"], stdout=subprocess.PIPE, text=True)
    wait_until(lambda: waiting_apps(c) == ["2:py"], what="the Python waiter")
    waiters = queue_in_order(iocop_client, c, [(f"{i}:c", ["--timeout-ms", "15000"]) for i in (3, 4, 5)])
    before = fetch_status(c.zmq, 5)
    assert [w["app"] for w in before["waiting"]] == ["2:py", "3:c", "4:c", "5:c"]
    c.proc.kill()  # kill -9 the controller mid-queue
    c.proc.wait()
    time.sleep(0.5)
    c2 = controllers("--heartbeat", "0.5", zmq_bind=c.zmq, line_bind=c.line, events="events2.jsonl")
    after = fetch_status(c2.zmq, 5)
    assert [w["app"] for w in after["waiting"]] == ["2:py", "3:c", "4:c", "5:c"]
    assert [h["app"] for h in after["holders"]] == ["0:holder"]
    assert after["holders"][0]["token"] == before["holders"][0]["token"]
    out, err = holder.communicate("\n", timeout=30)
    assert out.startswith("released"), err
    assert py_waiter.wait(30) == 0
    for p in waiters:
        finish(p)
    ev = events(tmp_path / "events2.jsonl")
    assert [e["app"] for e in ev if e["ev"] == "grant"] == ["2:py", "3:c", "4:c", "5:c"]
    assert not [e for e in ev if e["ev"] in ("expire", "abandon")]


# -- authentication ------------------------------------------------------------------------------
def test_only_the_holder_can_release(controllers, iocop_client, tmp_path):
    c = controllers()
    owner = AccessClient(c.zmq, "1:owner")
    token = owner.io_begin("io").token
    evil = AccessClient(c.zmq, "2:evil")
    with pytest.raises(AccessError) as e:  # a registered app cannot release someone else's token
        evil._authed("RELEASE", str(token))
    assert e.value.errno == "EPERM"
    forged = "\n".join([f"RELEASE\t1:owner\t{'0' * 32}\t{token}", f"RELEASE\t9:nobody\t{'0' * 32}\t{token}",
                        f"RELEASE\t1:owner\tnot-a-secret\t{token}", f"HEARTBEAT\t1:owner\t{'0' * 32}"])
    r = subprocess.run([iocop_client, c.line_addr, "--raw"], input=forged + "\n", capture_output=True, text=True)
    assert [line.split("\t")[:2] for line in r.stdout.splitlines()] == [
        ["ERR", "EACCES"], ["ERR", "ENOENT"], ["ERR", "EACCES"], ["ERR", "EACCES"]]
    st = fetch_status(c.zmq, 5)
    assert [(h["app"], h["token"]) for h in st["holders"]] == [("1:owner", token)]
    assert owner.io_end() is not None
    assert [e["ev"] for e in events(tmp_path / "events.jsonl") if e["app"] == "1:owner"] == [
        "register", "acquire", "grant", "release"]
    owner.close()
    evil.close()


# -- many clients --------------------------------------------------------------------------------
def test_a_thousand_clients_churn_and_nothing_is_lost(controllers, iocop_client, tmp_path):
    n, cycles = 1000, 3
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    c = controllers("--policy", "exclusive", "--heartbeat", "1")
    out = tmp_path / "clients.out"
    t0 = time.monotonic()
    with open(out, "ab") as f:  # O_APPEND: each client's line is one write, never interleaved
        procs = [subprocess.Popen([iocop_client, c.line_addr, f"{i}:churn", "--cycles", str(cycles),
                                   "--timeout-ms", "20000"], stdout=f, stderr=subprocess.STDOUT)
                 for i in range(n)]
    codes = [p.wait(timeout=240) for p in procs]
    elapsed = time.monotonic() - t0
    assert codes.count(0) == n, out.read_text()[-2000:]
    lines = [line.split("\t") for line in out.read_text().splitlines()]
    assert sum(1 for r in lines if r[0] == "done") == n
    ev = events(tmp_path / "events.jsonl")
    h = holds(ev)
    assert len(h) == n * cycles and len({t for *_, t in h}) == n * cycles
    assert max_concurrent(h) == 1
    kinds = {k: sum(1 for e in ev if e["ev"] == k) for k in {e["ev"] for e in ev}}
    assert kinds == {"register": n, "acquire": n * cycles, "grant": n * cycles, "release": n * cycles,
                     "unregister": n}
    st = fetch_status(c.zmq, 5)
    assert st["apps"] == [] and st["holders"] == [] and st["waiting"] == []
    assert elapsed < 120, f"{n} clients x {cycles} cycles took {elapsed:.0f} s"
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)


# -- the client when the controller is down ---------------------------------------------------------
def test_client_proceeds_without_token_when_controller_is_down(caplog, tmp_path):
    dead = "tcp://127.0.0.1:9"  # discard port: nothing listens
    c = AccessClient(dead, "1:alone", down_wait=1.0, try_timeout=0.3)
    with caplog.at_level(logging.WARNING, logger="iez.access"):
        t0 = time.monotonic()
        assert c.io_begin("io") is None
        first = time.monotonic() - t0
        t0 = time.monotonic()
        assert c.io_begin("io") is None
        second = time.monotonic() - t0
    assert 1.0 <= first < 3.0 and second < 1.0  # bounded; once down, one try only
    assert c.untokened == 2 and "without a token" in caplog.text
    assert c.io_end() is None
    c.close()
    r = subprocess.run([PY, "-m", "iez", "access", "run", "--server", dead, "--down-wait", "0.5", "--",
                        "sh", "-c", "echo ran"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ran\n" and "without a token" in r.stderr


def test_estimate_from_a_live_controller(controllers):
    c = controllers()
    a = AccessClient(c.zmq, "1:a")
    b = AccessClient(c.zmq, "2:b")
    a.io_begin("io", expect=5.0)
    e = b.estimate("io", expect=1.0)
    assert (e.state, e.position, e.holders, e.waiting) == ("idle", 1, 1, 0)
    assert 4.0 < e.eta <= 5.0
    assert a.estimate().state == "holding"
    a.io_end()
    a.close()
    b.close()


def test_levels_follow_the_mode(controllers, tmp_path):
    c = controllers()
    counts = {}
    for mode in ("off", "coarse", "file", "phase", "fine"):
        cl = AccessClient(c.zmq, f"{mode}:levels", mode=mode)
        cl.timeline = []
        with cl.job():
            for _ in range(2):
                with cl.phase("ckpt"):
                    for _ in range(2):
                        cl.file_open()
                        for _ in range(3):
                            with cl.call():
                                pass
                        cl.file_close()
        counts[mode] = sum(1 for e in cl.timeline if e["ev"] == "grant")
        cl.close()
    assert counts == {"off": 0, "coarse": 1, "file": 4, "phase": 2, "fine": 12}


# -- the command line -----------------------------------------------------------------------------
def test_cli_status_tbf_and_refusals(controllers, iez_cmd, tmp_path, site_token):
    c = controllers()
    a = AccessClient(c.zmq, "4242:hold")
    b = AccessClient(c.zmq, "4343:wait")
    a.io_begin("io")
    b._registered()
    r = subprocess.run(iez_cmd + ["access", "status", "--server", c.zmq], capture_output=True, text=True)
    assert r.returncode == 0 and "4242:hold" in r.stdout and "holds" in r.stdout
    r = subprocess.run(iez_cmd + ["access", "tbf", "--server", c.zmq, "--rate", "7"], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["# if TBF by JobID is not active yet: lctl set_param "
                                     "'ost.OSS.ost_io.nrs_policies=tbf jobid'",
                                     "lctl set_param 'ost.OSS.ost_io.nrs_tbf_rule=start iocop_"
                                     f"{__import__('iez.access.tbf', fromlist=['x']).rule_name('4343')[6:]} "
                                     "jobid={4343} rate=7'"]
    r = subprocess.run(iez_cmd + ["access", "tbf", "--server", c.zmq, "--apply"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("iez: error: --apply") and len(r.stderr.splitlines()) == 1
    a.close()
    b.close()
    for bad, msg in ((["--policy", "lottery"], "unknown access policy"), (["--heartbeat", "0"], "--heartbeat"),
                     (["--priority", "alice=3"], "expected app:GLOB=N"), (["--bind", "tcp://nowhere:x"], "cannot bind")):
        r = subprocess.run(iez_cmd + ["access", "serve", "--state", str(tmp_path / "other.db"), *bad],
                           capture_output=True, text=True, timeout=30, env=dict(os.environ, IEZ_SITE_TOKEN=site_token))
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    r = subprocess.run(iez_cmd + ["access", "serve", "--state", str(tmp_path / "state.db"), "--bind",
                                  "tcp://127.0.0.1:*", "--line", "none"], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, IEZ_SITE_TOKEN=site_token))
    assert r.returncode == 2 and "another access controller" in r.stderr
    r = subprocess.run(iez_cmd + ["access", "status", "--server", "tcp://127.0.0.1:9", "--timeout", "0.3"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "did not answer" in r.stderr


def test_ost_aware_takes_ost_sets_from_the_planned_placements(controllers, tmp_path):
    from iez.cluster import Snapshot, make_cluster
    from iez.db import Database
    from iez.layout.layout import FileLayout, Layout
    from iez.request import Placement, Request

    url = f"sqlite:///{tmp_path / 'iez.db'}"
    with Database(url) as db, db.begin() as tx:
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        for app, osts in (("ckpt", (0, 1, 2, 3)), ("viz", (8, 9))):
            path = f"/lustre/{app}/out"
            tx.add_trace(app, [Request(path=path, write_bytes=1 << 30, stripe_count=len(osts))])
            placed = [Placement(path=path, layout=FileLayout(plain=Layout(stripe_size=1 << 20, osts=osts)),
                                write_bytes=1 << 30, app=app, policy="balanced")]
            tx.set_placements(app, 2, "balanced", placed, sid, {})
            tx.mark_planned(app, 2, "balanced")
    c = controllers("--policy", "ost-aware", "--db", url)
    ckpt, viz, other = (AccessClient(c.zmq, a) for a in ("11:ckpt", "12:viz", "13:other"))
    assert ckpt.io_begin("io") and viz.io_begin("io")  # planned on disjoint OSTs: both hold
    st = fetch_status(c.zmq, 5)
    assert {h["app"]: h["osts"] for h in st["holders"]} == {"11:ckpt": "0-3", "12:viz": "8,9"}
    assert other.estimate().position == 1  # no placements known: it would wait for everybody
    for cl in (ckpt, viz, other):
        cl.close()


def test_malformed_input_on_both_transports_gets_one_line_errors(controllers, site_token):
    import socket

    import zmq

    from iez.access.auth import Signer
    from iez.zmqauth import curve_client

    c = controllers()
    host, port = c.line_addr.rsplit(":", 1)
    signer = Signer(site_token)  # correctly signed garbage: the parser behind the signature answers
    with socket.create_connection((host, int(port))) as s:
        f = s.makefile("rb")
        s.sendall(signer.sign_bytes(b"\xff\xfe", time.time()) + b"\n")
        assert f.readline().startswith(b"ERR\tEPROTO\tthe request is not UTF-8")
        s.sendall(signer.sign_bytes(b"ACQUIRE\tonly-one-field", time.time()) + b"\r\n")
        assert f.readline().startswith(b"ERR\tEPROTO\tACQUIRE takes 3 fields")
        s.sendall(b"X" * 5000)  # no newline in sight: refused, and the connection closed
        assert f.readline().startswith(b"ERR\tEPROTO\tline longer than 4214")
        assert f.readline() == b""
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    curve_client(sock, site_token)
    sock.connect(c.zmq)
    for bad in (b"", b"\x00\x01", "STATUS\textra".encode(), "RELEASE\ta:b\t" .encode() + b"0" * 32 + b"\tNaN"):
        for line in (bad, signer.sign_bytes(bad, time.time())):
            sock.send(line)
            assert sock.poll(5000)
            reply = sock.recv().decode()
            assert reply.startswith("ERR\t") and "\n" not in reply
    sock.send(signer.sign_bytes(b"HELLO", time.time()))
    assert sock.recv().startswith(b"OK\tiocop/1")
    sock.close()
