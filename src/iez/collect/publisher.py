"""The collector process: every interval, run the collectors and publish one signed message.

The controller binds one SUB socket; every collector connects its publisher to it (OSSs
publish, the MDS subscribes: docs/references.md#s000-collect, Fig. 5), so adding an OSS never touches the controller's
configuration. The publisher is an XPUB socket: it sees the controller's subscription arrive,
and publishes at once instead of waiting for the next tick, so a controller that (re)starts has
fresh statistics within a second, not an interval later.

The connection is CURVE with keys derived from the site token (iez.zmqauth): the controller
admits only publishers holding the token, and a collector talks only to a controller holding it,
so nothing else answering on the controller's address gets a message through to it.

A parameter that is missing or unreadable is reported in the message's `errors` (and logged
when the set of errors changes), never fatal: the collector keeps running.
"""

from __future__ import annotations

import logging
import math
import random
import socket
import threading
import time
from typing import Callable

import zmq

from iez.collect.collectors import Collector, Round, run_round
from iez.collect.message import StatsMessage, check_interval, encode
from iez.errors import IezError
from iez.lustre.params import ParamTree
from iez.zmqauth import curve_client

log = logging.getLogger("iez.collect")

DEFAULT_INTERVAL = 60.0  # seconds (docs/references.md#s000-collect)
MIN_REPUBLISH = 1.0  # at most one extra round per second when subscribers (re)join
SNDHWM = 16  # messages queued per subscriber; older rounds are worthless once a new one exists
MAX_SUBSCRIPTION = 256  # bytes; a subscription frame is one byte and the topic
# Seconds between looks at `stop` while waiting for the next round: a SIGTERM takes effect within
# it. Each wake-up costs the process CPU (144 collectors on one host in the centre benchmark).
STOP_CHECK = 1.0


class Publisher:
    def __init__(self, role: str, ident: str, collectors: list[Collector], tree: Callable[[], ParamTree],
                 token: str, interval: float = DEFAULT_INTERVAL) -> None:
        check_interval(interval)
        self.role, self.id = role, ident
        self.collectors = collectors
        self.tree = tree  # a fresh tree each round: lctl and dumps are read again, errors start empty
        self.token = token
        self.interval = interval
        self.seq = 0
        self.hostname = socket.gethostname()
        self.phase = random.uniform(0.0, interval)  # where in each interval this collector's rounds fall
        self._errors: set[str] = set()

    def round(self) -> StatsMessage:
        """Collect once (logs errors when they change)."""
        now = time.time()
        try:
            tree = self.tree()
        except IezError as e:  # a dump that vanished, lctl that failed: report, go on
            osts, states, load, errors = Round({}, {}, None, [f"parameters: {e}"])
        else:
            osts, states, load, errors = run_round(self.collectors, tree)
        self.seq += 1
        new = set(errors)
        for err in sorted(new - self._errors):
            log.warning("%s", err)
        if self._errors and not new:
            log.info("all parameters readable again")
        self._errors = new
        return StatsMessage(role=self.role, id=self.id, seq=self.seq, time=now, interval=self.interval,
                            hostname=self.hostname, osts=osts, ost_states=states, load=load,
                            errors=tuple(errors))

    def run(self, endpoint: str, stop: threading.Event) -> None:
        """Publish to `endpoint` (the controller's SUB address) until `stop` is set."""
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        sock = ctx.socket(zmq.XPUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, SNDHWM)
        sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # every subscriber's subscription, not only the first
        # It receives subscriptions only (a byte and the topic): libzmq drops a peer sending more
        # before it allocates the frame, whoever answers on the endpoint.
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_SUBSCRIPTION)
        curve_client(sock, self.token)  # and ZMQ_HANDSHAKE_IVL
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as e:
            sock.close()
            raise IezError(f"cannot publish to {endpoint}: {e}") from None
        log.info("%s collector %s publishing to %s every %g s", self.role, self.id, endpoint, self.interval)
        next_round = time.monotonic()
        last_sent = -MIN_REPUBLISH
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= next_round:
                    self._send(sock)
                    last_sent = now
                    next_round = next_slot(now, self.phase, self.interval)
                    continue
                # Wait for the next tick, or for a subscriber to join (the controller restarted).
                if sock.poll(int(min(next_round - now, STOP_CHECK) * 1000) + 1, zmq.POLLIN):
                    joined = any(f[:1] == b"\x01" for f in _drain(sock))
                    if joined and time.monotonic() - last_sent >= MIN_REPUBLISH:
                        log.info("a subscriber joined: publishing now")
                        next_round = time.monotonic()
        finally:
            sock.close()

    def _send(self, sock: zmq.Socket) -> None:
        msg = self.round()
        try:
            sock.send_multipart(encode(msg, self.token), zmq.NOBLOCK)
        except zmq.Again:  # the controller is not reading: this round is dropped
            log.warning("controller not keeping up: round %d dropped", msg.seq)


def next_slot(sent: float, phase: float, interval: float) -> float:
    """The round after one sent at `sent`: the first time `phase` into an interval (counted from
    0 on the same clock) at least half an interval after it.

    Why a phase of its own: every collector publishes at once when the controller subscribes, and
    rounds one interval apart would keep them together from then on (only handshakes and stalls
    spread them), so the controller could take all of them in one burst each interval (144 at the
    centre's scale, its subscriber holding the GIL from the fetches meanwhile).
    A phase drawn at random per collector spreads them over the interval again after one round.
    Rounds on their slots stay one interval apart, a late one (a stall) does not move the next,
    and after an extra round the next comes in 0.5-1.5 intervals: within the controller's
    default staleness limit of three intervals (iez.controller.view; a --stale-after below 1.5
    intervals would see the OSS stale for that gap)."""
    k = math.ceil((sent + interval / 2 - phase) / interval)
    return phase + k * interval


def _drain(sock: zmq.Socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(zmq.NOBLOCK))
        except zmq.Again:
            return out
