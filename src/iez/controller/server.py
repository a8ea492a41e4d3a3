"""The controller process: the statistics subscriber, the worker and the HTTP server together.

    collectors ──ZeroMQ PUB──► SUB (bound on --stats) ──► Controller.on_message ──► global view
    clients ──HTTP──► uvicorn ──► api routes ──► Controller (uploads, plans) ──► database
                                              worker thread ──► predict / allocate ──► database

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
from iez.controller.auth import Tokens
from iez.controller.service import Controller
from iez.errors import IezError

log = logging.getLogger("iez.controller")

SHUTDOWN_GRACE = 2.0  # seconds open requests and the worker get after SIGTERM


def bind_stats(endpoint: str) -> zmq.Socket:
    """The SUB socket collectors publish to, bound (a one-line IezError if it cannot be)."""
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_BYTES + 4096)  # a peer sending more is disconnected
    sock.setsockopt(zmq.RCVHWM, 10000)
    sock.setsockopt(zmq.SUBSCRIBE, TOPIC)
    try:
        sock.bind(endpoint)
    except zmq.ZMQError as e:
        sock.close()
        raise IezError(f"cannot bind the statistics socket {endpoint}: {e}") from None
    return sock


def subscribe(controller: Controller, sock: zmq.Socket, stop: threading.Event) -> None:
    """Receive collector messages until `stop` is set (the thread owns `sock` from now on)."""
    try:
        while not stop.is_set():
            if not sock.poll(200):
                continue
            frames = sock.recv_multipart()
            try:
                controller.on_message(frames, time.time())
            except Exception:  # one bad message must never stop the subscriber
                log.exception("collector message failed")
    finally:
        sock.close()


def serve(controller: Controller, tokens: Tokens, host: str, port: int, stats: str, *, uploads: str = "site",
          caps: BodyCaps = BodyCaps(), tls_cert: str | None = None, tls_key: str | None = None) -> None:
    import uvicorn

    from iez.controller.api import create_app

    app = create_app(controller, tokens, uploads, caps)
    stop = threading.Event()
    sub = threading.Thread(target=subscribe, args=(controller, bind_stats(stats), stop), name="iez-sub", daemon=True)
    sub.start()
    controller.start()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
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
        sub.join(timeout=SHUTDOWN_GRACE)
        controller.close(SHUTDOWN_GRACE)
    if not server.started:
        raise IezError(f"the HTTP server could not listen on {host}:{port} (in use, or not an address of this host)")
