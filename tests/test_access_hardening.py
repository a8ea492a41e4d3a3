"""IO-Cop under hostile input (docs/security.md, "IO-Cop"): size limits on both sockets, STATUS with
a thousand applications, `tbf --follow` through an outage, and requests signed with the site token
(unsigned, forged, tampered, stale and replayed requests refused on both transports, by every
client; the trusted-network mode). Real `iez access serve` processes, real sockets, real C clients.
The ROUTER's CURVE handshake against peers without the token: tests/test_zmq_auth.py."""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st

from conftest import BUILD, need_built, fuzz_settings
from iez.access import protocol as P
from iez.access.auth import Signer, Verifier, mac
from iez.tokens import client_token
from iez.access.token_client import AccessClient
from iez.access.protocol import AccessError
from iez.access.server import Spawned, spawn
from iez.access.token_client import fetch_status
from iez.tokens import new_token
from iez.zmqauth import curve_client
from plugins.access_controllers import events, wait_until

LIB = BUILD / "libiez" / "libiez.so"
JOB = BUILD / "libiez" / "iez-test-iocop"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def zmq_request(endpoint: str, line: str | bytes, timeout: float = 5.0) -> list[bytes]:
    """One request on a REQ socket that connects as the clients do (CURVE with $IEZ_TOKEN's keys)."""
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    curve_client(sock, client_token())
    sock.connect(endpoint)
    try:
        sock.send(line.encode() if isinstance(line, str) else line)
        assert sock.poll(round(timeout * 1000)), f"no reply to {line[:60]!r}"
        return sock.recv_multipart()
    finally:
        sock.close(0)


class LineClient:
    """A raw TCP client of the line socket."""

    def __init__(self, c: Spawned):
        host, port = c.line_addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.f = self.s.makefile("rb")

    def ask(self, line: str | bytes) -> str:
        self.s.sendall((line.encode() if isinstance(line, str) else line) + b"\n")
        return self.f.readline().decode().rstrip("\n")

    def close(self) -> None:
        self.f.close()
        self.s.close()


def serves(c: Spawned, token: str) -> bool:
    """The controller still answers a well-behaved client on both sockets."""
    ok = zmq_request(c.zmq, Signer(token).sign("HELLO", time.time()))[0].startswith(b"OK\tiocop/1")
    lc = LineClient(c)
    try:
        return ok and lc.ask(Signer(token).sign("HELLO", time.time())).startswith("OK\tiocop/1")
    finally:
        lc.close()


# -- limits --------------------------------------------------------------------------------------
def test_a_300_mb_frame_is_refused_without_the_memory(controllers, site_token):
    c = controllers()
    base = rss_kib(c.proc.pid)
    big = bytes(300 << 20)
    for frames in ([big], [b"", big]):  # as a DEALER and as a REQ would frame it
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        curve_client(sock, site_token)  # even a holder of the token: ZMQ_MAXMSGSIZE drops it
        sock.connect(c.zmq)
        sock.send_multipart(frames, copy=False)
        time.sleep(2.0)  # libzmq drops the peer at the frame's header: nothing to wait for but the send
        sock.close(0)
        assert c.proc.poll() is None
        assert rss_kib(c.proc.pid) - base < 32 << 10, (base, rss_kib(c.proc.pid))
    del big
    assert serves(c, site_token)


def test_an_endless_line_gets_one_error_and_is_disconnected(controllers, site_token):
    c = controllers()
    base = rss_kib(c.proc.pid)
    lc = LineClient(c)
    chunk = b"A" * (1 << 20)
    sent = 0
    with pytest.raises(OSError):  # the controller closes the connection; our sends then fail
        while sent < 300 << 20:
            lc.s.sendall(chunk)
            sent += len(chunk)
    assert sent < 64 << 20, "the controller read far more than a line's worth before closing"
    rest = lc.f.read()
    assert rest.startswith(b"ERR\tEPROTO\tline longer than") and rest.count(b"\n") == 1, rest[:200]
    lc.close()
    assert rss_kib(c.proc.pid) - base < 32 << 10
    assert serves(c, site_token)
    # a line just under the limit is still read (and refused for what it says, not for its size)
    lc = LineClient(c)
    assert lc.ask(b"X" * P.MAX_LINE).startswith("ERR\tEACCES\tunsigned request")
    lc.close()


def test_line_connections_beyond_the_cap_are_refused(controllers, site_token):
    c = controllers("--max-connections", "4")
    held = [LineClient(c) for _ in range(4)]
    assert all(lc.ask(Signer(site_token).sign("HELLO", time.time())).startswith("OK") for lc in held)
    extra = LineClient(c)
    assert extra.f.readline().startswith(b"ERR\tEAGAIN\t4 line clients connected")
    assert extra.f.readline() == b""
    extra.close()
    held.pop().close()
    wait_until(lambda: serves(c, site_token), what="a free connection slot")
    for lc in held:
        lc.close()


# -- STATUS with a thousand applications ------------------------------------------------------------
def test_status_and_tbf_with_a_thousand_applications_holding_or_waiting(controllers, iocop_client, iez_cmd,
                                                                       site_token):
    n, k = 1000, 10
    c = controllers("--policy", "k-concurrent", "-k", str(k), "--heartbeat", "120")  # waiters stay queued
    sock = zmq.Context.instance().socket(zmq.REQ)
    curve_client(sock, site_token)
    sock.connect(c.zmq)
    signer = Signer(site_token)

    def ask(line: str) -> str:
        sock.send_string(signer.sign(line, time.time()))
        return sock.recv_string()

    for i in range(n):
        appid = f"{i}:app{i:04d}"
        secret = ask(P.format_request("REGISTER", appid, user=f"user{i % 7}", osts=f"{i % 50}")).split("\t")[1]
        assert ask(P.format_request("ACQUIRE", appid, secret, "io")).split("\t")[0] in ("GRANT", "QUEUED")
    sock.close(0)
    st_ = fetch_status(c.zmq, 10)
    assert len(st_["holders"]) == k and len(st_["waiting"]) == n - k and len(st_["apps"]) == n
    assert [w["position"] for w in st_["waiting"]] == list(range(1, n - k + 1))
    r = subprocess.run(iez_cmd + ["access", "status", "--server", c.zmq, "--json"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('"app":') == k + (n - k) + n
    r = subprocess.run(iez_cmd + ["access", "status", "--server", c.zmq], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0 and f"{n} registered" in r.stdout and "999:app0999" in r.stdout, r.stderr
    r = subprocess.run(iez_cmd + ["access", "tbf", "--server", c.zmq], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sum("nrs_tbf_rule=start" in line for line in r.stdout.splitlines()) == n - k
    # the C client over the line socket reads the same rows
    r = subprocess.run([iocop_client, c.line_addr, "--raw"], input="STATUS\n", capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()
    assert rows[0] == f"OK\tstatus\tlines={1 + k + (n - k) + n}" and len(rows) == 2 + k + (n - k) + n
    from_c = P.parse_status([x.encode() for x in rows[1:]])
    assert [w["app"] for w in from_c["waiting"]] == [w["app"] for w in st_["waiting"]]
    assert from_c["apps"] == st_["apps"]


def test_tbf_follow_survives_a_controller_outage(controllers, iez_cmd, site_token, tmp_path):
    c = controllers("--heartbeat", "60")
    follow = subprocess.Popen(iez_cmd + ["access", "tbf", "--server", c.zmq, "--follow", "0.2", "--timeout", "0.5"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines: list[str] = []
    threading.Thread(target=lambda: err_lines.extend(follow.stderr), daemon=True).start()
    out_lines: list[str] = []
    threading.Thread(target=lambda: out_lines.extend(follow.stdout), daemon=True).start()
    try:
        time.sleep(1.0)
        c.proc.kill()
        c.proc.wait()
        wait_until(lambda: any("did not answer" in e for e in err_lines), what="the outage to be logged")
        assert follow.poll() is None, "tbf --follow exited on a transient error"
        c2 = controllers("--heartbeat", "60", zmq_bind=c.zmq, line_bind=c.line, state=tmp_path / "state2.db")
        a = AccessClient(c2.zmq, "4242:hold")
        b = AccessClient(c2.zmq, "4343:wait")
        a.io_begin("io")
        b._registered()
        wait_until(lambda: any("jobid={4343}" in o for o in out_lines), what="tbf to follow the new controller")
        assert not any("jobid={4242}" in o for o in out_lines)
        assert all(e.startswith("iez access tbf: ") for e in err_lines), err_lines
        a.close()
        b.close()
    finally:
        follow.kill()
        follow.wait()


# -- authentication -----------------------------------------------------------------------------------
def replies_on_both(c: Spawned, line: bytes) -> list[str]:
    """One request on the ROUTER and on the line socket: both replies."""
    lc = LineClient(c)
    try:
        return [zmq_request(c.zmq, line)[0].decode(), lc.ask(line)]
    finally:
        lc.close()


def registered(c: Spawned, token: str) -> list[str]:
    return [a["app"] for a in fetch_status(c.zmq, 5, token)["apps"]]


def test_unsigned_forged_tampered_stale_and_replayed_requests_are_refused(controllers, site_token, tmp_path):
    c = controllers()
    now = time.time()
    register = P.format_request("REGISTER", "1:victim", user="alice")
    other = Signer(new_token())
    good = Signer(site_token).sign(register, now).encode()
    cases = {
        "unsigned": register.encode(),
        "forged": other.sign(register, now).encode(),  # signed with another token
        "tampered": good.replace(b"user=alice", b"user=mallo"),
        "stale": Signer(site_token).sign(register, now - 120).encode(),
        "future": Signer(site_token).sign(register, now + 120).encode(),
        "bad envelope": b"0" * 64 + b"\t" + good[65:],
    }
    for what, line in cases.items():
        for reply in replies_on_both(c, line):
            assert reply.startswith("ERR\tEACCES\t"), (what, reply)
    assert registered(c, site_token) == []
    # A good request is taken once; the same bytes again, on either socket, are a replay.
    lc = LineClient(c)
    assert lc.ask(good).startswith("OK\t")
    assert lc.ask(good).startswith("ERR\tEACCES\treplayed request")
    lc.close()
    assert zmq_request(c.zmq, good)[0].startswith(b"ERR\tEACCES\treplayed request")
    # A captured ACQUIRE replayed does not queue the application again after it left.
    s = Signer(site_token)
    secret = zmq_request(c.zmq, s.sign(P.format_request("REGISTER", "2:app"), time.time()))[0].decode().split("\t")[1]
    acquire = s.sign(P.format_request("ACQUIRE", "2:app", secret, "io"), time.time()).encode()
    assert zmq_request(c.zmq, acquire)[0].startswith(b"GRANT")
    assert zmq_request(c.zmq, s.sign(P.format_request("RELEASE", "2:app", secret, "1"), time.time()))[0].startswith(
        b"OK\theld_ms=")
    assert zmq_request(c.zmq, acquire)[0].startswith(b"ERR\tEACCES\treplayed request")
    st_ = fetch_status(c.zmq, 5, site_token)
    assert [a["app"] for a in st_["apps"]] == ["1:victim", "2:app"] and st_["holders"] == st_["waiting"] == []
    evs = events(tmp_path / "events.jsonl")
    assert [(e["ev"], e["app"]) for e in evs] == [("register", "1:victim"), ("register", "2:app"),
                                                  ("acquire", "2:app"), ("grant", "2:app"), ("release", "2:app")]
    assert next(e for e in evs if e["app"] == "1:victim")["user"] == "alice"


def test_clients_without_the_token_are_refused_and_register_nothing(controllers, iocop_client, site_token, tmp_path):
    c = controllers()
    # Python clients (ZeroMQ): without the token, or with another, the CURVE handshake fails; the
    # client runs its phase without a token after down_wait, never blocked for longer.
    for n, token in enumerate(("", new_token())):
        py = AccessClient(c.zmq, f"{n + 1}:py", token=token, down_wait=1, try_timeout=0.5)
        t0 = time.monotonic()
        assert py.io_begin("io") is None and py.untokened == 1 and time.monotonic() - t0 < 5
        py.close()
    for env in ({"IEZ_TOKEN": ""}, {"IEZ_TOKEN": new_token()}):
        r = subprocess.run([iocop_client, c.line_addr, "3:c"], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, **env))
        assert r.returncode == 1 and "register" in r.stderr and "Permission denied" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "iez", "access", "status", "--server", c.zmq, "--timeout", "1"],
                       capture_output=True, text=True, timeout=30, env=dict(os.environ, IEZ_TOKEN=new_token()))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("iez: error: the access controller at") and "did not answer within 1 s" in r.stderr
    assert "refused the handshake" in r.stderr and "same token" in r.stderr
    assert registered(c, site_token) == [] and events(tmp_path / "events.jsonl") == []


def test_libiez_signs_with_a_token_file_and_refuses_a_planted_one(controllers, site_token, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--heartbeat", "0.25s")
    tok = tmp_path / "site.token"
    tok.write_text(site_token + "\n")
    tok.chmod(0o600)
    link = tmp_path / "planted.token"
    link.symlink_to(tok)
    base = dict(os.environ, LD_PRELOAD=str(LIB), IEZ_MODE="off", IEZ_ACCESS="phase", IEZ_LOG="stderr",
                IEZ_ACCESS_LINE=c.line_addr, IEZ_TOKEN="")
    runs = {}
    for name, extra in (("file", {"IEZ_TOKEN_FILE": str(tok)}), ("symlink", {"IEZ_TOKEN_FILE": str(link)}),
                        ("fifo", {"IEZ_TOKEN_FILE": str(tmp_path / "fifo")}), ("wrong", {"IEZ_TOKEN": new_token()}),
                        ("none", {})):
        if name == "fifo":
            os.mkfifo(tmp_path / "fifo")
        env = dict(base, IEZ_ACCESS_APPID=f"1:{name}", IEZ_ACCESS_WAIT="2", **extra)
        t0 = time.monotonic()
        r = subprocess.run([JOB, "phase", "2", "10"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        runs[name] = ([int(v) for e, _, v, _ in (x.split("\t") for x in r.stdout.splitlines()) if e == "begin"],
                      r.stderr, time.monotonic() - t0)
    assert runs["file"][0] == [1, 1] and "without a token" not in runs["file"][1]
    for name in ("symlink", "fifo", "wrong", "none"):
        held, err, took = runs[name]
        assert held == [0, 0] and err.count("runs without a token") == 1 and took < 10, (name, err)
    assert "Too many levels of symbolic links" in runs["symlink"][1]
    assert "not a regular file" in runs["fifo"][1]
    assert "bad signature" in runs["wrong"][1] and "unsigned request" in runs["none"][1]
    assert [e["app"] for e in events(tmp_path / "events.jsonl") if e["ev"] == "register"] == ["1:file"]


def test_trusted_network_mode_takes_unsigned_requests_and_must_be_asked_for(iez_cmd, iocop_client, tmp_path,
                                                                           monkeypatch):
    for var in ("IEZ_TOKEN", "IEZ_TOKEN_FILE", "IEZ_SITE_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    r = subprocess.run(iez_cmd + ["access", "serve", "--state", str(tmp_path / "x.db"), "--bind", "tcp://127.0.0.1:*",
                                  "--line", "none"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no site token" in r.stderr and "--trusted-network" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    r = subprocess.run(iez_cmd + ["access", "serve", "--state", str(tmp_path / "x.db"), "--trusted-network",
                                  "--bind", "tcp://127.0.0.1:*"], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, IEZ_SITE_TOKEN=new_token()))
    assert r.returncode == 2 and "--trusted-network takes no site token" in r.stderr
    c = spawn(tmp_path / "state.db", "--trusted-network", events=tmp_path / "events.jsonl", log=tmp_path / "log")
    try:
        a = AccessClient(c.zmq, "1:py")
        assert a.token == "" and a.io_begin("io") is not None
        a.close()
        r = subprocess.run([iocop_client, c.line_addr, "2:c"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        # a signed request is taken too, unverified, on the line socket; a Python client with a
        # token speaks CURVE, which this controller does not: it runs without a token
        r = subprocess.run([iocop_client, c.line_addr, "3:signed"], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, IEZ_TOKEN=new_token()))
        assert r.returncode == 0, r.stderr
        curve = AccessClient(c.zmq, "4:curve", token=new_token(), down_wait=1, try_timeout=0.5)
        assert curve.io_begin("io") is None
        curve.close()
        assert [a["app"] for a in fetch_status(c.zmq, 5)["apps"]] == []
        assert [e["app"] for e in events(tmp_path / "events.jsonl") if e["ev"] == "grant"] == ["1:py", "2:c",
                                                                                               "3:signed"]
    finally:
        c.stop()


# -- the C client's SHA-256 and HMAC --------------------------------------------------------------------
RFC4231 = [  # (key, data, HMAC-SHA256): test cases 1, 2, 3, 4, 6, 7
    ("0b" * 20, b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe".hex(), b"what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    ("aa" * 20, bytes.fromhex("dd" * 50), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
    ("0102030405060708090a0b0c0d0e0f10111213141516171819", bytes.fromhex("cd" * 50),
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
    ("aa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    ("aa" * 131, b"This is a test using a larger than block-size key and a larger than block-size data. The key "
                 b"needs to be hashed before being used by the HMAC algorithm.",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
]


def c_hmac(exe: str, key: bytes, data: bytes) -> str:
    r = subprocess.run([exe, "--hmac", key.hex()], input=data, capture_output=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode().strip()


def test_the_c_hmac_matches_rfc_4231_and_python(iocop_client):
    for key, data, want in RFC4231:
        assert c_hmac(iocop_client, bytes.fromhex(key), data) == want
    # every padding boundary of SHA-256, short and long keys
    for klen in (0, 1, 32, 63, 64, 65, 200):
        for dlen in (0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000):
            key, data = os.urandom(klen), os.urandom(dlen)
            assert c_hmac(iocop_client, key, data) == hmac.new(key, data, hashlib.sha256).hexdigest(), (klen, dlen)


def test_the_c_client_signs_as_the_python_verifier_checks(controllers, iocop_client, site_token):
    """A C client's request is taken by the controller, and its envelope checks out in Python."""
    c = controllers()
    r = subprocess.run([iocop_client, c.line_addr, "--raw"], input="HELLO\nHELLO\n", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and r.stdout.count("OK\tiocop/1") == 2, r.stderr
    v = Verifier(site_token)
    line = Signer(site_token).sign("HELLO", time.time()).encode()
    assert v.check(line, time.time()) == b"HELLO"
    assert line[:64] == mac(site_token.encode(), line[65:])


# -- fuzz targets -----------------------------------------------------------------------------------
VALID = [b"HELLO", b"STATUS", b"REGISTER\t1:a\tuser=u\tosts=0-3", b"ACQUIRE\t1:a\t" + b"0" * 32 + b"\tio\twait_ms=5",
         b"RELEASE\t1:a\t" + b"f" * 32 + b"\t7", b"ESTIMATE\t1:a\t" + b"a" * 32 + b"\tphase=x\texpect=1.5"]


def mutated(seed: bytes, data: st.DataObject) -> bytes:
    b = bytearray(seed)
    for _ in range(data.draw(st.integers(0, 6))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete", "tab"]))
        at = data.draw(st.integers(0, len(b)))
        if op == "flip" and at < len(b):
            b[at] = data.draw(st.integers(0, 255))
        elif op == "insert":
            b[at:at] = data.draw(st.binary(max_size=8))
        elif op == "delete":
            del b[at:at + data.draw(st.integers(1, 8))]
        else:
            b[at:at] = b"\t"
    return bytes(b)


@pytest.mark.fuzz
@fuzz_settings(400)
@given(st.data())
def test_fuzz_request_line_parser(data):
    """The server's path for one line: envelope, UTF-8, iocop/1 parse. A Request or AccessError."""
    token = "fuzz-site-token-0123456789"
    raw = data.draw(st.one_of(st.binary(max_size=300), st.sampled_from(VALID).flatmap(
        lambda v: st.just(v)).map(lambda v: mutated(v, data))))
    signed = data.draw(st.booleans())
    line = Signer(token).sign_bytes(raw, 1000.0) if signed else raw
    for v in (Verifier(token), Verifier(None)):
        try:
            inner = v.check(line, 1000.0)
            req = P.parse_request(inner.decode())
        except (AccessError, UnicodeDecodeError):
            continue
        assert isinstance(req, P.Request) and req.verb in P.VERBS


@pytest.mark.fuzz
@fuzz_settings(400)
@given(st.data())
def test_fuzz_reply_parsers(data):
    """What the Python clients read: a reply line, a STATUS header and its rows."""
    header = data.draw(st.one_of(st.text(max_size=80), st.sampled_from(
        ["OK\tstatus\tlines=2", "GRANT\t7\tlease_ms=2000", "QUEUED\tposition=1", "ERR\tEACCES\tno"])))
    try:
        r = P.parse_reply(header)
        assert r.status in ("OK", "GRANT", "QUEUED")
    except AccessError:
        pass
    try:
        assert 0 <= P.status_rows(header) <= P.MAX_ROWS
    except AccessError:
        pass
    good = [b'settings\t{"version":"iocop/1","policy":"x","heartbeat_ms":1,"lease_ms":2}',
            b'app\t{"app":"1:a","jobid":"1","holding":false}',
            b'holder\t{"app":"1:a","phase":"io","osts":null,"token":1,"held_s":0.5}']
    rows = data.draw(st.lists(st.one_of(st.binary(max_size=120), st.sampled_from(good).map(
        lambda v: mutated(v, data))), max_size=6))
    try:
        out = P.parse_status(rows)
    except AccessError:
        return
    assert isinstance(out["policy"], str) and all(isinstance(a["holding"], bool) for a in out["apps"])


class ReplyServer:
    """A line server that answers every request with the next of the given reply lines."""

    def __init__(self, replies: list[bytes]):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.replies = replies
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn, conn.makefile("rb") as f:
            for reply in self.replies:
                if not f.readline():
                    return
                conn.sendall(reply)


@pytest.mark.fuzz
@fuzz_settings(40)
@given(st.lists(st.one_of(st.binary(max_size=200), st.sampled_from(
    [b"OK\t" + b"a" * 32 + b"\theartbeat_ms=50\tlease_ms=100\n", b"GRANT\t5\tlease_ms=100\n",
     b"QUEUED\tposition=x\n", b"ERR\tENOPE\n", b"OK\n", b"GRANT\t-99999999999999999999\n"])), max_size=5))
def test_fuzz_the_c_clients_reply_parsing(replies):
    """iocop-client against a server of random replies: a clean exit or a one-line error, never
    a crash or a hang."""
    srv = ReplyServer(replies)
    exe = str(BUILD / "iocop" / "iocop-client")
    r = subprocess.run([exe, srv.addr, "1:fuzz", "--cycles", "1", "--timeout-ms", "300"], capture_output=True,
                       timeout=20, env=dict(os.environ, IEZ_TOKEN=""))
    srv.sock.close()
    assert r.returncode in (0, 1), (replies, r.returncode, r.stderr)
    if r.returncode:
        assert r.stderr.startswith(b"iocop-client: error:") and r.stderr.count(b"\n") == 1, r.stderr
