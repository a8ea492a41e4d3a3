"""`iez access serve`: the access controller behind two ZeroMQ sockets.

- ROUTER (ZMTP) for clients that link ZeroMQ: the Python client, or C with libzmq. A request is
  one frame (REQ's empty delimiter allowed); the reply goes back on the same envelope.
- STREAM for clients that must not link ZeroMQ (libiez inside an LD_PRELOADed job): plain TCP,
  one request per line. Same lines, same handler; the emulated MDS makes the same split.

ZeroMQ rather than HTTP: a request takes 48 us (ROUTER) and 34 us (STREAM) on loopback against
712 us through FastAPI/uvicorn, and the server can answer a waiting client the moment it is
granted, without polling (bench/bench_access.py measures both; docs/iocop.md).

One thread runs everything: read what arrived, hand each line to the AccessQueue, run its clock,
answer parked long polls, save the batch's changes, and only then send the batch's replies.

Untrusted bytes are bounded before anything is read into them. The ROUTER is a CURVE server
with keys derived from the site token (iez.zmqauth): a peer without the token is disconnected in
the handshake, before libzmq buffers any message of it (ZMQ_MAXMSGSIZE bounds a frame, not the
frames of a message); its ZAP check is answered in this loop. A ROUTER frame larger than
MAX_FRAME makes libzmq drop even a token holder (ZMQ_MAXMSGSIZE, checked on the frame's header,
so nothing is allocated); a line client that sends more than MAX_FRAME without a newline gets one ERR line
and is disconnected, its buffer freed and its later bytes ignored; line connections beyond
`max_connections` are refused the same way. Every request's signature (iez.access.auth) is
checked before the request is decoded or parsed.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import zmq

from iez.access import protocol as P
from iez.access.auth import ENVELOPE_MAX, Verifier
from iez.access.queue import AccessQueue, Result
from iez.access.statefile import StateFile
from iez.errors import ConfigError
from iez.zmqauth import HANDSHAKE_MS, Zap

log = logging.getLogger("iez.access")

BATCH = 512  # messages read from one socket before the batch is processed
MAX_WAIT = 0.2  # s, longest poll: how soon a stop request is noticed
MAX_FRAME = P.MAX_LINE + ENVELOPE_MAX  # bytes in one signed request, newline excluded
MAX_CONNECTIONS = 10_000  # line clients at once (each may buffer MAX_FRAME bytes)


@dataclass(frozen=True)
class Route:
    kind: str  # "zmq" | "line"
    envelope: tuple[bytes, ...]  # ROUTER identity frames, or the STREAM connection id


class Server:
    def __init__(self, controller: AccessQueue, store: StateFile, zmq_binds: list[str], line_binds: list[str],
                 verifier: Verifier, events: Path | None = None, clock: Callable[[], float] = time.time,
                 known_osts: tuple[Callable[[], Mapping[str, frozenset[int]]], float] | None = None,
                 max_connections: int = MAX_CONNECTIONS):
        if not zmq_binds and not line_binds:
            raise ConfigError("the access controller needs at least one endpoint (--bind or --line)")
        self.controller, self.store, self.clock, self.verifier = controller, store, clock, verifier
        self.max_connections = max_connections
        self.ctx = zmq.Context()
        # Bound before the ROUTER accepts anyone; none in trusted-network mode (plain ZeroMQ).
        self.zap = Zap(self.ctx, verifier.key.decode()) if verifier.key is not None else None
        self.router = self.ctx.socket(zmq.ROUTER)
        self.stream = self.ctx.socket(zmq.STREAM)
        for s in (self.router, self.stream):
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.BACKLOG, 1024)
        self.router.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
        self.router.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
        if self.zap is not None:
            self.zap.secure(self.router)
        self.events = None
        self.zmq_endpoints = self._bind(self.router, zmq_binds)
        self.line_endpoints = self._bind(self.stream, line_binds)
        self.buffers: dict[bytes, bytearray] = {}  # open line connections and their partial lines
        self.dropped: set[bytes] = set()  # connections closed by us whose disconnect has not come yet
        self.parked: dict[str, tuple[Route, float]] = {}
        self.parked_on: dict[Route, set[str]] = {}  # the same, by route: a disconnect finds its own
        self.park_heap: list[tuple[float, str]] = []
        self.events = open(events, "a", buffering=1) if events else None
        self.known_osts = known_osts
        self.next_refresh = 0.0
        self.stopping = threading.Event()

    def _bind(self, sock: zmq.Socket, endpoints: list[str]) -> list[str]:
        out = []
        for ep in endpoints:
            try:
                sock.bind(ep)
            except zmq.ZMQError as e:
                self.close()
                raise ConfigError(f"cannot bind {ep}: {e}") from None
            out.append(sock.getsockopt_string(zmq.LAST_ENDPOINT))  # tcp://host:* becomes the real port
        return out

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        poller.register(self.stream, zmq.POLLIN)
        if self.zap is not None:
            poller.register(self.zap.sock, zmq.POLLIN)
        while not self.stopping.is_set():
            self._refresh_known()
            ready = dict(poller.poll(round(self._timeout() * 1000)))
            if self.zap is not None and self.zap.sock in ready:
                self.zap.answer()
            now = self.clock()
            out: list[tuple[Route, str]] = []
            if self.router in ready:
                self._read_router(now, out)
            if self.stream in ready:
                self._read_stream(now, out)
            self._settle(self.clock(), out)

    def _timeout(self) -> float:
        now = self.clock()
        marks = [d for d in (self.controller.next_deadline(),
                             self.park_heap[0][0] if self.park_heap else None) if d is not None]
        return max(0.0, min([MAX_WAIT] + [d - now for d in marks]))

    def _refresh_known(self) -> None:
        if self.known_osts is None or self.clock() < self.next_refresh:
            return
        fetch, every = self.known_osts
        try:
            self.controller.known_osts = dict(fetch())
        except Exception as e:  # a database hiccup must not stop the controller
            log.warning("cannot refresh the OST sets from the placements: %s", e)
        self.next_refresh = self.clock() + every

    def _read_router(self, now: float, out: list) -> None:
        for _ in range(BATCH):
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self._handle(Route("zmq", tuple(frames[:-1])), frames[-1], now, out)

    def _read_stream(self, now: float, out: list) -> None:
        for _ in range(BATCH):
            try:
                cid, data = self.stream.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            route = Route("line", (cid,))
            if not data:  # STREAM says connect or disconnect with an empty frame
                if cid in self.buffers or cid in self.dropped:
                    self._forget(cid, route)
                    self.dropped.discard(cid)
                elif len(self.buffers) >= self.max_connections:
                    self._drop(cid, route, out, P.error_reply("EAGAIN", f"{self.max_connections} line clients "
                                                                        "connected: try again later"))
                else:
                    self.buffers[cid] = bytearray()
                continue
            buf = self.buffers.get(cid)
            if buf is None:  # bytes that were under way when we closed the connection
                continue
            # Bound the buffer while filling it: look for the newline in the new bytes only, and
            # never keep more than one line's worth of a line that has not ended.
            start = len(buf)
            buf += data
            while (nl := buf.find(b"\n", start)) >= 0:
                line = bytes(buf[:nl]).rstrip(b"\r")
                del buf[:nl + 1]
                start = 0
                if len(line) > MAX_FRAME:
                    break
                self._handle(route, line, now, out)
            else:
                if len(buf) <= MAX_FRAME:
                    continue
            self._drop(cid, route, out, P.error_reply("EPROTO", f"line longer than {MAX_FRAME} bytes"))

    def _drop(self, cid: bytes, route: Route, out: list, why: str) -> None:
        """Answer one ERR line, then close the connection; its buffer goes now."""
        out.append((route, why))
        out.append((route, ""))
        self._forget(cid, route)
        self.dropped.add(cid)

    def _forget(self, cid: bytes, route: Route) -> None:
        self.buffers.pop(cid, None)
        for appid in self.parked_on.pop(route, ()):
            del self.parked[appid]

    def _handle(self, route: Route, raw: bytes, now: float, out: list) -> None:
        try:
            line = self.verifier.check(raw, now).decode()
        except P.AccessError as e:
            out.append((route, P.error_reply(e.errno, str(e))))
            return
        except UnicodeDecodeError:
            out.append((route, P.error_reply("EPROTO", "the request is not UTF-8")))
            return
        res = self.controller.handle(line, now)
        if res.park_ms > 0:
            old = self._unpark(res.appid)
            if old is not None:  # a newer poll replaces an older one, which gets its answer now
                out.append((old[0], self.controller.queued_reply(res.appid, now)))
            deadline = now + res.park_ms / 1000
            self.parked[res.appid] = (route, deadline)
            self.parked_on.setdefault(route, set()).add(res.appid)
            heapq.heappush(self.park_heap, (deadline, res.appid))
        else:
            out.append((route, res))

    def _settle(self, now: float, out: list) -> None:
        c = self.controller
        c.tick(now)
        for appid in c.take_grants():
            parked = self._unpark(appid)
            if parked is not None:
                out.append((parked[0], c.grant_reply(appid, now)))
        while self.park_heap and self.park_heap[0][0] <= now:
            deadline, appid = heapq.heappop(self.park_heap)
            parked = self.parked.get(appid)
            if parked is not None and parked[1] == deadline:
                self._unpark(appid)
                out.append((parked[0], c.queued_reply(appid, now)))
        # Persist before anything leaves: a reply must never promise what a restart forgets.
        self.store.save(c.state, c.take_changes())
        events = c.take_events()
        if self.events and events:
            self.events.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
        for route, line in out:
            self._send(route, line)

    def _unpark(self, appid: str) -> tuple[Route, float] | None:
        parked = self.parked.pop(appid, None)
        if parked is not None:
            on = self.parked_on[parked[0]]
            on.discard(appid)
            if not on:
                del self.parked_on[parked[0]]
        return parked

    def _send(self, route: Route, reply: str | Result) -> None:
        """One reply: a line, a Result (STATUS: its header and rows, as more frames or lines), or
        "" on the line socket to close the connection."""
        lines = [reply.reply, *reply.rows] if isinstance(reply, Result) else [reply]
        try:
            if route.kind == "zmq":
                self.router.send_multipart([*route.envelope, *(x.encode() for x in lines)], zmq.NOBLOCK)
            else:
                self.stream.send_multipart([route.envelope[0], "".join(x + "\n" for x in lines).encode()
                                            if lines[0] else b""], zmq.NOBLOCK)
        except zmq.ZMQError:
            pass  # the client went away; its lease runs out on its own

    # -- lifetime -------------------------------------------------------------------------------
    def stop(self, *_: object) -> None:
        self.stopping.set()

    def close(self) -> None:
        self.router.close(0)
        self.stream.close(0)
        if self.zap is not None:
            self.zap.close()
        self.ctx.term()
        if self.events:
            self.events.close()


def serve(server: Server) -> None:
    """Run until SIGTERM or SIGINT; state is saved after every batch, so a SIGKILL loses nothing
    a client was told."""
    signal.signal(signal.SIGTERM, server.stop)
    signal.signal(signal.SIGINT, server.stop)
    try:
        server.run()
    finally:
        server.close()
        server.store.close()


@dataclass
class Spawned:
    """A controller started as a background process (tests, the evaluation, benchmarks)."""

    proc: subprocess.Popen
    zmq: str  # the ROUTER endpoint it bound
    line: str  # the line endpoint, tcp://HOST:PORT ("" if none)

    @property
    def line_addr(self) -> str:
        return self.line.removeprefix("tcp://")

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def spawn(state: Path, *options: str, token: str | None = None, zmq_bind: str = "tcp://127.0.0.1:*",
          line_bind: str = "tcp://127.0.0.1:*", events: Path | None = None, log: Path | None = None,
          timeout: float = 20.0) -> Spawned:
    """Start `iez access serve` with these options; return once it listens (its first line).
    `token`: the site token ($IEZ_SITE_TOKEN of the child); without it the child takes the
    token from the environment, or must be given --trusted-network."""
    cmd = [sys.executable, "-m", "iez", "access", "serve", "--state", str(state), "--bind", zmq_bind,
           "--line", line_bind or "none", *options] + (["--events", str(events)] if events else [])
    env = dict(os.environ, IEZ_SITE_TOKEN=token) if token else None
    err = open(log, "ab") if log else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err or subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, env=env)
    if err:
        err.close()
    assert proc.stdout is not None and (log or proc.stderr is not None)  # the pipes asked for above
    ready = select.select([proc.stdout], [], [], timeout)[0]
    first = proc.stdout.readline() if ready else ""
    proc.stdout.close()
    m = re.search(r"zmq (\S+); line ([^\s;]+)", first)
    if not m:
        proc.kill()
        why = proc.communicate()[1] if not log else ""
        raise ConfigError(f"the access controller did not start ({(why or first).strip()[-300:] or 'no output'}"
                          f"{f'; see {log}' if log else ''})")
    if proc.stderr is not None:
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain: a full pipe must not stall it
    return Spawned(proc, m[1], "" if m[2] == "-" else m[2])
