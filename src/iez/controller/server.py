"""The controller process: the statistics subscriber, the worker and the HTTP server together.

    collectors ──ZeroMQ PUB──► SUB (bound on --stats) ──► Controller.on_message ──► global view
    clients ──HTTP──► uvicorn (PlanProtocol) ──► ServedPlans ──► api routes ──► Controller ──► database
                       └─ a GET of a plan held in memory, answered in the HTTP parser's callback
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

import gc
import logging
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

import zmq

from iez.collect.message import MAX_BYTES, TOPIC
from iez.controller.api import BodyCaps
from iez.tokens import Tokens
from iez.controller.service import Controller
from iez.errors import IezError
from iez.zmqauth import HANDSHAKE_MS, Zap

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from iez.controller.api import ServedPlans

log = logging.getLogger("iez.controller")

SHUTDOWN_GRACE = 2  # seconds open requests and the worker get after SIGTERM
# The subscriber takes the messages waiting in turns, then sleeps TICK s so that the next turn
# finds several: woken for each message, as 144 OSSs publishing every second spread them, it
# spent about twice the CPU a message (a poll, a receive and the message's Python run cold each
# time: docs/controller.md, "Performance"). A message is then taken up to TICK s after it
# arrived, which its staleness limit (3 intervals, at least 0.3 s) does not notice. At most
# BATCH a turn: between turns the HTTP loop has the GIL back.
TICK = 0.05
BATCH = 32
SWITCH_S = 0.0005


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
        got = self.recv_many(timeout_ms, 1)
        return got[0] if got else None

    def recv_many(self, timeout_ms: int, most: int) -> list[list[bytes]]:
        """The messages waiting once one arrives within `timeout_ms`, at most `most` of them
        (none if none came), answering handshakes meanwhile."""
        out: list[list[bytes]] = []
        if self.zap.wait(self.sock, timeout_ms):
            while len(out) < most:
                try:
                    out.append(self.sock.recv_multipart(zmq.NOBLOCK))
                except zmq.Again:
                    break
        return out

    def close(self) -> None:
        self.sock.close(0)
        self.zap.close()
        self.ctx.term()


def subscribe(controller: Controller, stats: StatsSocket, stop: threading.Event) -> None:
    """Receive collector messages until `stop` is set (the thread owns `stats` from now on)."""
    try:
        while not stop.is_set():
            batch = stats.recv_many(200, BATCH)
            for frames in batch:
                try:
                    controller.on_message(frames, time.time())
                except Exception:  # one bad message must never stop the subscriber
                    log.exception("collector message failed")
            if len(batch) < BATCH:  # all taken: let the next ones gather
                stop.wait(TICK)
    finally:
        stats.close()


class _Answered:
    """Stands in for uvicorn's request cycle after PlanProtocol answered a request: complete,
    so a body that follows is dropped and the next request starts at once (uvicorn's own checks)."""

    response_complete = True

    class message_event:  # noqa: N801 - uvicorn's attribute; nothing waits on an answered request
        @staticmethod
        def set() -> None:
            return None


def plan_protocol(served: ServedPlans) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol, answering a GET of a held plan with a known token as soon as
    its headers are parsed (`ServedPlans.answer`, the same check and reply as the ASGI path).

    Why protocol code: on uvicorn's ASGI path every request is a task, an asyncio.Event, a scope,
    a request cycle and two awaited sends; for a plan already in memory that was most of a fetch's
    CPU (docs/controller.md, "Performance"). Everything else takes uvicorn's path unchanged: any
    other method, path or token (Guard refuses those with its limits before a body is read),
    HTTP upgrades, a percent-encoded path, a request pipelined behind one still being answered,
    a connection whose writes are paused (a client not reading: its replies wait for the drain
    there instead of piling up here), and uvicorn's concurrency limit. Headers, keep-alive and
    `connection: close` are written as uvicorn writes them (its STATUS_LINE and default headers)."""
    import httptools
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

    answered = _Answered()

    class PlanProtocol(HttpToolsProtocol):
        def on_headers_complete(self) -> None:
            parser = self.parser
            if (parser.get_method() != b"GET" or parser.should_upgrade() or self.pipeline or self.root_path
                    or self.limit_concurrency is not None or self.flow.write_paused
                    or not (self.cycle is None or self.cycle.response_complete)):
                return super().on_headers_complete()
            try:
                path = httptools.parse_url(self.url).path.decode("ascii")
            except (httptools.HttpParserError, UnicodeDecodeError):  # uvicorn's path says so
                return super().on_headers_complete()
            reply = None if "%" in path else served.answer(path, dict(self.headers))
            if reply is None:
                return super().on_headers_complete()
            status, headers, body = reply
            keep_alive = parser.get_http_version() != "1.0" and parser.should_keep_alive()
            out = [STATUS_LINE[status]]
            for name, value in (*self.server_state.default_headers, *headers):
                out += (name, b": ", value, b"\r\n")
            if not keep_alive:
                out.append(b"connection: close\r\n")
            out.append(b"\r\n")
            self.transport.writelines((b"".join(out), body))  # one send (uvloop: writev), the body not copied
            self.cycle = answered  # type: ignore[assignment]
            if not keep_alive:
                self.transport.close()
            self.on_response_complete()

    return PlanProtocol


def settle_heap() -> None:
    """Leave what start-up built (the imported modules, the app and its routes, the cluster and
    the database layer: about 100,000 objects) out of the cyclic garbage collector's passes.

    A full collection walks every tracked object with the GIL held, so every fetch waits for it:
    66-73 ms of CPU for these on the shared development machine (660-810 ms of wall time under its
    load at start-up; one while serving took 371 ms), and the reports the subscriber keeps (each collector's newest) set one off every
    minute or so while it serves. Frozen, the start-up objects are never walked again: a full
    collection while serving walks about 9,000 (docs/controller.md, "Performance"). What is
    made after start-up is collected as before."""
    gc.collect()
    gc.freeze()


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
    # and asyncio ones it falls back to (PlanProtocol is its httptools protocol); no proxy headers
    # are trusted, so none are parsed.
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, http=plan_protocol(app),
                            loop="uvloop", proxy_headers=False, backlog=4096,
                            ssl_certfile=tls_cert, ssl_keyfile=tls_key, timeout_graceful_shutdown=SHUTDOWN_GRACE)
    server = uvicorn.Server(config)
    log.info("controller of %s: HTTP on %s:%d, statistics on %s, policy %s", controller.cluster.fsname, host, port,
             stats, controller.policy.name)
    # uvicorn shuts down on SIGTERM/SIGINT and then raises the signal again for the handler it
    # found: let that be a no-op, so the worker and the database are closed and the exit is 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    settle_heap()
    # The subscriber thread, once it has the GIL, keeps it until the HTTP loop's request to switch
    # has waited the switch interval: 5 ms by default, a fetch's whole latency budget. A message
    # takes about 0.35 ms, so at 0.5 ms a fetch waits at most about one message.
    sys.setswitchinterval(SWITCH_S)
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
