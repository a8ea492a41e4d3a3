"""CURVE at the ZeroMQ handshake, keys from the site token (iez.zmqauth; docs/security.md, "ZeroMQ:
CURVE at the handshake").

The probe: ZMQ_MAXMSGSIZE bounds one frame, not the frames of a multipart message, and libzmq
buffers a whole message before the application checks its HMAC, so anyone who could connect to
IO-Cop's ROUTER or the controller's statistics SUB made it allocate ~1 GB with 75,000 frames of
4 KiB. Here a peer without CURVE (a raw ZMTP writer that sends everything at once, waiting for
nothing) and CURVE peers with the wrong keys send exactly that to real `iez access serve`,
`iez controller` and `iez collect` processes; each must grow by less than 32 MiB (VmHWM) and
keep serving the site's own clients and collectors.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
import zmq
from hypothesis import given, strategies as st
from zmq.utils import z85

from conftest import fuzz_settings
from iez.access.token_client import AccessClient
from iez.access.token_client import fetch_status
from iez.collect.message import TOPIC, decode
from iez.tokens import new_token
from iez.controller.local import free_port
from iez.zmqauth import curve_keys, zap_reply
from plugins.controller_process import collector_seq, fresh_stats, oss_msg
from plugins.controller_stack import SITE

MiB = 1 << 20
FRAMES, FRAME = 75_000, 4096  # ~300 MB as one message: what a plain ZeroMQ server buffered whole
LIMIT = 32 * MiB


def hwm(pid: int) -> int:
    """A process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


def grew(pid: int, base: int, wait: float) -> int:
    """How much the peak grew over `base` within `wait` seconds (returns early once over LIMIT)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and hwm(pid) - base < LIMIT:
        time.sleep(0.2)
    return hwm(pid) - base


# -- the hostile peers ----------------------------------------------------------------------------
def zmtp_flood(conn: socket.socket, socket_type: bytes, first: bytes, frames: int = FRAMES,
               size: int = FRAME) -> bool:
    """Speak ZMTP 3.0 with the NULL mechanism (no CURVE) on a connected TCP socket and send one
    message of `frames` frames of `size` bytes (the first is `first`), reading nothing but the
    server's greeting. True if every byte went out (the peer took them), False if it hung up."""
    greeting = b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + bytes(32)
    ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", len(socket_type)) + socket_type
    long = size > 255
    frame = (b"\x03" + struct.pack(">Q", size) if long else b"\x01" + bytes([size])) + bytes(size)  # MORE
    last = (b"\x02" + struct.pack(">Q", size) if long else b"\x00" + bytes([size])) + bytes(size)
    conn.settimeout(30)
    try:
        conn.sendall(greeting)
        got = b""
        while len(got) < 64:  # libzmq takes the READY only once it has read our greeting alone
            more = conn.recv(64 - len(got))
            if not more:
                return False
            got += more
        conn.sendall(b"\x04" + bytes([len(ready)]) + ready + b"\x01" + bytes([len(first)]) + first)
        per = max(1, (1 << 20) // len(frame))  # about 1 MiB a send
        left = frames - 2
        while left > 0:
            conn.sendall(frame * min(per, left))
            left -= per
        conn.sendall(last)
        return True
    except OSError:
        return False


def plain_flood(endpoint: str, socket_type: bytes, first: bytes) -> socket.socket:
    """A raw ZMTP peer without CURVE connecting to `endpoint` and flooding it; returns the
    connection (kept open while the server is measured)."""
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    conn = socket.create_connection((host, int(port)))
    zmtp_flood(conn, socket_type, first)
    return conn


def foreign_keys(token: str) -> dict[str, tuple[bytes, bytes, bytes]]:
    """CURVE identities of peers that do not hold `token`: (server key, public, secret)."""
    other = curve_keys(new_token())
    own_public, own_secret = zmq.curve_keypair()
    return {
        "CURVE, another site's keys": (other.server_public, other.client_public, other.client_secret),
        # the server's public key is public: an outsider may know it, and still has no client key
        "CURVE, the right server key, its own client key": (curve_keys(token).server_public, own_public, own_secret),
    }


def curve_peer(kind: int, endpoint: str, keys: tuple[bytes, bytes, bytes]) -> zmq.Socket:
    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    for opt, key in zip((zmq.CURVE_SERVERKEY, zmq.CURVE_PUBLICKEY, zmq.CURVE_SECRETKEY), keys):
        sock.setsockopt(opt, key)
    sock.connect(endpoint)
    return sock


def big_message(first: bytes) -> list:
    frame = zmq.Frame(bytes(FRAME))  # one buffer, referenced by every frame: no 300 MB here
    return [first] + [frame] * (FRAMES - 1)


# -- keys: pure -----------------------------------------------------------------------------------
def test_the_keys_are_derived_deterministically_and_differ_per_token():
    a, b = new_token(), new_token()
    ka, kb = curve_keys(a), curve_keys(b)
    assert ka == curve_keys(a)  # every holder derives the same, no distribution needed
    assert ka != kb and not {ka.server_secret, ka.client_secret} & {kb.server_secret, kb.client_secret}
    assert ka.server_secret != ka.client_secret
    for public, secret in ((ka.server_public, ka.server_secret), (ka.client_public, ka.client_secret)):
        assert len(public) == len(secret) == 40 and public == zmq.curve_public(secret)


def test_the_zap_check_admits_the_site_client_key_only():
    allowed = z85.decode(curve_keys(SITE).client_public)
    req = [b"1.0", b"7", b"iez", b"127.0.0.1", b"", b"CURVE"]
    assert zap_reply(req + [allowed], allowed)[:3] == [b"1.0", b"7", b"200"]
    assert zap_reply(req + [z85.decode(curve_keys(new_token()).client_public)], allowed)[2] == b"400"
    assert zap_reply(req[:5] + [b"NULL"], allowed)[2] == b"400"
    assert zap_reply(req[:5] + [b"PLAIN", b"user", b"pass"], allowed)[2] == b"400"
    assert zap_reply([b"2.0", b"7"], allowed)[:3] == [b"1.0", b"7", b"500"]


@pytest.mark.fuzz
@fuzz_settings(2000)
@given(st.lists(st.binary(max_size=40), max_size=9))
def test_fuzz_zap_requests(frames):
    allowed = z85.decode(curve_keys(SITE).client_public)
    for req in (frames, [b"1.0", b"1", b"iez", b"a", b"", b"CURVE"] + frames):
        reply = zap_reply(req, allowed)
        assert len(reply) == 6 and reply[2] in (b"200", b"400", b"500")
        assert (reply[2] == b"200") == (req[5:] == [b"CURVE", allowed] and req[0] == b"1.0")


# -- IO-Cop's ROUTER -------------------------------------------------------------------------------
def serves_iocop(endpoint: str, token: str, app: str) -> None:
    c = AccessClient(endpoint, app, token=token, down_wait=10)
    try:
        assert c.io_begin("io") is not None and c.io_end() is not None
    finally:
        c.close()
    assert fetch_status(endpoint, 5, token)["holders"] == []


def test_iocop_buffers_nothing_for_peers_without_the_site_token(controllers, site_token):
    c = controllers()
    pid = c.proc.pid
    serves_iocop(c.zmq, site_token, "0:warm")
    base = hwm(pid)
    conn = plain_flood(c.zmq, b"DEALER", b"REGISTER")
    try:
        assert (g := grew(pid, base, 5)) < LIMIT, f"no CURVE: the controller's peak grew {g / MiB:.0f} MiB"
        serves_iocop(c.zmq, site_token, "1:plain")
    finally:
        conn.close()
    for n, (what, keys) in enumerate(foreign_keys(site_token).items()):
        peer = curve_peer(zmq.DEALER, c.zmq, keys)
        try:
            time.sleep(0.5)  # the handshake's outcome: a refused peer has no pipe left to queue on
            try:
                peer.send_multipart(big_message(b"REGISTER"), zmq.NOBLOCK, copy=False)
            except zmq.Again:
                pass  # nothing to send it on: the controller never sees it either
            assert (g := grew(pid, base, 4)) < LIMIT, f"{what}: the controller's peak grew {g / MiB:.0f} MiB"
            assert not peer.poll(100), f"{what}: the controller answered"
            serves_iocop(c.zmq, site_token, f"{n + 2}:curve")  # while the peer keeps retrying its handshake
        finally:
            peer.close(0)
    assert c.proc.poll() is None


# -- the controller's statistics SUB ---------------------------------------------------------------
def test_the_controller_buffers_nothing_for_publishers_without_the_site_token(controller):
    c = controller()
    pid = c.proc.pid
    fresh_stats(c)
    base = hwm(pid)
    conn = plain_flood(c.stats, b"PUB", TOPIC)
    try:
        assert (g := grew(pid, base, 5)) < LIMIT, f"no CURVE: the controller's peak grew {g / MiB:.0f} MiB"
    finally:
        conn.close()
    for what, keys in foreign_keys(SITE).items():
        peer = curve_peer(zmq.XPUB, c.stats, keys)
        try:
            if peer.poll(3000):  # only a peer past the handshake sees the controller's subscription
                peer.recv()
                peer.send_multipart(big_message(TOPIC), copy=False)
            assert (g := grew(pid, base, 3)) < LIMIT, f"{what}: the controller's peak grew {g / MiB:.0f} MiB"
        finally:
            peer.close(0)
    # the site's collectors still get through (the same CURVE client as `iez collect`)
    c.publish(oss_msg("oss0", (0, 1), time.time(), seq=5))
    assert collector_seq(c, "oss0") == 5 and "Traceback" not in c.log()
    assert c.proc.poll() is None


# -- a collector's XPUB, against whoever answers on the controller's address -------------------------
def test_a_collector_buffers_nothing_from_an_impostor_controller(tmp_path, iez_cmd, subenv):
    params = tmp_path / "params"
    (params / "proc").mkdir(parents=True)
    (tmp_path / "site").write_text(SITE)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        p = subprocess.Popen(iez_cmd + ["collect", "oss", "--oss-id", "oss0", "--params", str(params),
                                        "--proc", str(params / "proc"), "--publish", f"tcp://127.0.0.1:{port}",
                                        "--interval", "0.5", "--token-file", str(tmp_path / "site")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=subenv, start_new_session=True)
        try:
            listener.settimeout(20)
            conn, _ = listener.accept()
            time.sleep(0.5)
            base = hwm(p.pid)
            # its XPUB takes frames of 256 bytes at most (ZMQ_MAXMSGSIZE): so a million of 200
            zmtp_flood(conn, b"XSUB", b"\x01" + TOPIC, frames=1_000_000, size=200)
            assert (g := grew(p.pid, base, 5)) < LIMIT, f"the collector's peak grew {g / MiB:.0f} MiB"
            conn.close()
            assert p.poll() is None
        finally:
            p.send_signal(signal.SIGTERM)
            out = p.communicate(timeout=30)[0].decode()
    assert p.returncode == 0 and "Traceback" not in out, out


def test_a_collector_publishes_to_a_curve_server_of_its_site_only(tmp_path, iez_cmd, subenv):
    """The real `iez collect` process completes the handshake with a server holding the token."""
    from iez.controller.server import StatsSocket

    (tmp_path / "site").write_text(SITE)
    (tmp_path / "params" / "proc").mkdir(parents=True)
    got = {}
    for token in (new_token(), SITE):  # another site's controller first: it never hears from us
        port = free_port()
        sub = StatsSocket(f"tcp://127.0.0.1:{port}", token)
        p = subprocess.Popen(iez_cmd + ["collect", "oss", "--oss-id", "oss0", "--params", str(tmp_path / "params"),
                                        "--proc", str(tmp_path / "params" / "proc"),
                                        "--publish", f"tcp://127.0.0.1:{port}", "--interval", "0.3",
                                        "--token-file", str(tmp_path / "site")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=subenv, start_new_session=True)
        try:
            frames = sub.recv(4000)
            got[token] = None if frames is None else decode(frames, SITE).id
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
            sub.close()
    assert list(got.values()) == [None, "oss0"]
