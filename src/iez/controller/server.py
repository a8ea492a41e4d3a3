"""The controller process: the statistics subscriber, the worker and the HTTP server together.

    collectors ──ZeroMQ PUB──► SUB (bound on --stats) ──► Controller.on_message ──► global view
    clients ──HTTP──► uvicorn ──► ServedPlans ──► api routes ──► Controller (uploads, plans) ──► database
                                   └─ a plan held in memory, answered at once
                                              worker thread ──► predict / allocate ──► database

The SUB socket is a CURVE server with keys derived from the site token (iez.zmqauth): a
publisher without the token is disconnected in the handshake, before libzmq buffers a message of
it, which ZMQ_MAXMSGSIZE alone cannot prevent (it bounds a frame, not the frames of a message).
Its ZAP check is answered by the subscriber thread that reads the socket.

SIGTERM and SIGINT stop it within a few seconds (uvicorn handles them; open requests get
`SHUTDOWN_GRACE` s, the worker as long): a run the worker was still planning is not waited for,
its plan was never committed, and the next start plans it again from the database. SIGKILL loses
nothing that was acknowledged either, since every upload and plan is committed before its reply.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

import zmq

from iez.collect.message import MAX_BYTES, TOPIC
from iez.controller.api import BodyCaps
from iez.tokens import Tokens
from iez.controller.service import Controller
from iez.errors import IezError
from iez.zmqauth import HANDSHAKE_MS, Zap

log = logging.getLogger("iez.controller")

SHUTDOWN_GRACE = 2  # seconds open requests and the worker get after SIGTERM


class StatsSocket:
    """The SUB socket collectors publish to, bound (a one-line IezError if it cannot be): a CURVE
    server admitting holders of `token` only, in a context of its own with its ZAP handler."""

    def __init__(self, endpoint: str, token: str) -> None:
        self.ctx = zmq.Context()
        self.zap = Zap(self.ctx, token)
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_BYTES + 4096)  # a peer sending more is disconnected
        self.sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
        self.sock.setsockopt(zmq.RCVHWM, 10000)
        self.sock.setsockopt(zmq.SUBSCRIBE, TOPIC)
        self.zap.secure(self.sock)
        try:
            self.sock.bind(endpoint)
        except zmq.ZMQError as e:
            self.close()
            raise IezError(f"cannot bind the statistics socket {endpoint}: {e}") from None

    def recv(self, timeout_ms: int) -> list[bytes] | None:
        """The next message within `timeout_ms` (None if none), answering handshakes meanwhile."""
        return self.sock.recv_multipart() if self.zap.wait(self.sock, timeout_ms) else None

    def close(self) -> None:
        self.sock.close(0)
        self.zap.close()
        self.ctx.term()


def subscribe(controller: Controller, stats: StatsSocket, stop: threading.Event) -> None:
    """Receive collector messages until `stop` is set (the thread owns `stats` from now on)."""
    try:
        while not stop.is_set():
            frames = stats.recv(200)
            if frames is None:
                continue
            try:
                controller.on_message(frames, time.time())
            except Exception:  # one bad message must never stop the subscriber
                log.exception("collector message failed")
    finally:
        stats.close()


def serve(controller: Controller, tokens: Tokens, host: str, port: int, stats: str, *, uploads: str = "site",
          caps: BodyCaps = BodyCaps(), tls_cert: str | None = None, tls_key: str | None = None,
          metrics_listen: tuple[str, int] | None = None) -> None:
    import uvicorn
    from prometheus_client import start_http_server

    from iez.controller.api import ServedPlans, create_app

    app = ServedPlans(create_app(controller, tokens, uploads, caps), controller, tokens)
    metrics_server = None
    if metrics_listen is not None:  # read-only, no token: docs/controller.md, "Metrics"
        try:
            metrics_server, _ = start_http_server(metrics_listen[1], metrics_listen[0],
                                                  registry=controller.exposition.registry)
        except OSError as e:
            raise IezError(f"--metrics-listen {metrics_listen[0]}:{metrics_listen[1]}: cannot listen ({e})") from None
        log.info("metrics without a token on %s:%d", *metrics_listen)
    stop = threading.Event()
    sub = threading.Thread(target=subscribe, args=(controller, StatsSocket(stats, tokens.site), stop), name="iez-sub",
                           daemon=True)
    sub.start()
    controller.start()
    # httptools and uvloop (dependencies): uvicorn's fast parser and loop, not the pure-Python h11
    # and asyncio ones it falls back to; no proxy headers are trusted, so none are parsed.
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, http="httptools",
                            loop="uvloop", proxy_headers=False, backlog=4096,
                            ssl_certfile=tls_cert, ssl_keyfile=tls_key, timeout_graceful_shutdown=SHUTDOWN_GRACE)
    server = uvicorn.Server(config)
    log.info("controller of %s: HTTP on %s:%d, statistics on %s, policy %s", controller.cluster.fsname, host, port,
             stats, controller.policy.name)
    # uvicorn shuts down on SIGTERM/SIGINT and then raises the signal again for the handler it
    # found: let that be a no-op, so the worker and the database are closed and the exit is 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        server.run()
    except SystemExit:  # uvicorn exits when it cannot bind; said below, in one line
        pass
    finally:
        stop.set()
        if metrics_server is not None:
            metrics_server.shutdown()
        sub.join(timeout=SHUTDOWN_GRACE)
        controller.close(SHUTDOWN_GRACE)
    if not server.started:
        raise IezError(f"the HTTP server could not listen on {host}:{port} (in use, or not an address of this host)")
