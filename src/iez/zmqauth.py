"""ZeroMQ CURVE keys from the site token, and the ZAP check that lets only their holders in.

Why at the handshake: ZMQ_MAXMSGSIZE bounds one frame, not the number of frames of a multipart
message, and libzmq buffers a whole message before the application sees it. A signature the
application checks (iez.access.auth, iez.collect.message) therefore comes after the memory is
spent: 75,000 frames of 4 KiB cost about 1 GB, token or not. With CURVE a peer that does not hold
the site token (no CURVE, another key) is disconnected in the ZMTP handshake, before libzmq
accepts any message of it; ZMQ_HANDSHAKE_IVL drops one that never finishes the handshake.

Keys: both ends already hold the site token, so both keypairs are derived from it and sites
distribute nothing new:

    server secret = HMAC-SHA256(token, "iez/curve/server/v1")   (Curve25519, Z85-encoded)
    client secret = HMAC-SHA256(token, "iez/curve/client/v1")   public keys follow from them

Every holder of the token derives the same client key, so CURVE proves a site member (as the
per-message HMAC does), not which one. The server's key is derived too: a client completes the
handshake only with a server that holds the token, and replies travel authenticated and
encrypted.

ZAP (ZeroMQ RFC 27) is libzmq asking the application, over an inproc REP socket of the server
socket's context, whether a handshake's client key may in. `Zap` answers from its owner's own
poll loop (no thread): the derived client key only. A CURVE server whose context has no ZAP
handler would take any client key, so `Zap.secure` also sets ZMQ_ZAP_ENFORCE_DOMAIN, which
refuses every handshake when no handler answers.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import zmq
from zmq.utils import z85

ZAP_ENDPOINT = "inproc://zeromq.zap.01"  # fixed by RFC 27: libzmq asks here
DOMAIN = b"iez"
HANDSHAKE_MS = 10_000  # a peer that has not finished the handshake by then is disconnected
_SERVER, _CLIENT = b"iez/curve/server/v1", b"iez/curve/client/v1"


@dataclass(frozen=True)
class CurveKeys:
    """The site's two keypairs, Z85 (40 characters each), as libzmq's CURVE options take them."""

    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes


def curve_keys(token: str) -> CurveKeys:
    """Both keypairs of a site token. Pure and deterministic: every holder derives the same."""
    server = z85.encode(hmac.new(token.encode(), _SERVER, hashlib.sha256).digest())
    client = z85.encode(hmac.new(token.encode(), _CLIENT, hashlib.sha256).digest())
    return CurveKeys(zmq.curve_public(server), server, zmq.curve_public(client), client)


def zap_reply(request: list[bytes], allowed: bytes) -> list[bytes]:
    """The ZAP reply to one request: 200 for a CURVE handshake whose client key (32 raw bytes)
    is `allowed`, 400 for any other, 500 for a request that is not ZAP 1.0. Pure."""
    rid = request[1] if len(request) > 1 else b""
    if len(request) < 6 or request[0] != b"1.0":
        return [b"1.0", rid, b"500", b"not a ZAP 1.0 request", b"", b""]
    mechanism, credentials = request[5], request[6:]
    if mechanism != b"CURVE" or len(credentials) != 1 or not hmac.compare_digest(credentials[0], allowed):
        return [b"1.0", rid, b"400", b"not a holder of the site token", b"", b""]
    return [b"1.0", rid, b"200", b"OK", b"site", b""]


class Zap:
    """The ZAP handler of one context, answered by whoever owns it: register `sock` in the owner's
    poller and call `answer()` when it is readable, or wait with `wait()`. Bind it before the
    socket it guards accepts connections (libzmq looks for it at each handshake)."""

    def __init__(self, ctx: zmq.Context, token: str) -> None:
        self.keys = curve_keys(token)
        self.allowed = z85.decode(self.keys.client_public)
        self.sock = ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(ZAP_ENDPOINT)

    def secure(self, sock: zmq.Socket) -> None:
        """Make `sock` (before it binds) a CURVE server that admits the site's client key only.
        (Its owner sets ZMQ_HANDSHAKE_IVL with its other limits: plain sockets need it too.)"""
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.keys.server_secret)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.keys.server_public)
        sock.setsockopt(zmq.ZAP_DOMAIN, DOMAIN)
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)  # no handler answering: refuse, not admit

    def answer(self) -> None:
        """Answer every handshake waiting for a verdict."""
        while True:
            try:
                request = self.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self.sock.send_multipart(zap_reply(request, self.allowed))

    def wait(self, sock: zmq.Socket, timeout_ms: int) -> bool:
        """Wait up to `timeout_ms` for `sock` to be readable, answering handshakes meanwhile."""
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self.sock, zmq.POLLIN)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            ready = dict(poller.poll(max(0, round((deadline - time.monotonic()) * 1000))))
            if self.sock in ready:
                self.answer()
            if sock in ready:
                return True
            if time.monotonic() >= deadline:
                return False

    def close(self) -> None:
        self.sock.close(0)


def curve_client(sock: zmq.Socket, token: str) -> None:
    """Prepare a client socket (before it connects): a CURVE client with the site's keys when
    there is a token; plain when there is none (a --trusted-network IO-Cop, which speaks no CURVE).
    Either way a server that never finishes the handshake is given up after HANDSHAKE_MS."""
    sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
    if not token:
        return
    keys = curve_keys(token)
    sock.setsockopt(zmq.CURVE_SERVERKEY, keys.server_public)
    sock.setsockopt(zmq.CURVE_PUBLICKEY, keys.client_public)
    sock.setsockopt(zmq.CURVE_SECRETKEY, keys.client_secret)
