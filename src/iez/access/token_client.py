"""The Python client of the access controller: `io_begin(phase)` / `io_end()` and friends.

    from iez.access.token_client import AccessClient
    ac = AccessClient.from_env()          # IEZ_ACCESS, IEZ_ACCESS_SERVER, IEZ_APP, IEZ_RUN, ...
    with ac.job():                        # coarse: the whole run (MPI_Init .. MPI_Finalize)
        for step in range(4):
            compute()
            with ac.phase("checkpoint"):  # phase: the explicit API, io_begin/io_end
                for chunk in chunks:
                    with ac.call():       # fine: each write call
                        f.write(chunk)

A program marks all four levels once; IEZ_ACCESS picks the one that takes tokens (`coarse`,
`file`, `phase`, `fine`, or `off`), and the others do nothing. `file` counts `file_open()` /
`file_close()`: the token is held from the first open to the last close.

When the controller does not answer, the client keeps trying for `down_wait` seconds, then logs
a warning and proceeds without a token (io_begin returns None); it never blocks an application
for longer. While it holds a token a thread sends a heartbeat every `heartbeat` seconds (the
controller says how often); a holder silent for two heartbeats loses the token.
"""

from __future__ import annotations

import getpass
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ContextManager, Iterator

import zmq

from iez.access import protocol as P
from iez.access.auth import Signer
from iez.tokens import client_token
from iez.access.protocol import AccessError, Reply
from iez.errors import ConfigError, IezError
from iez.zmqauth import curve_client

log = logging.getLogger("iez.access")

MODES = ("off", "coarse", "file", "phase", "fine")
LEVEL_OF_MODE = {"coarse": "job", "file": "file", "phase": "phase", "fine": "call"}
DEFAULT_SERVER = "tcp://127.0.0.1:5580"
TRY_TIMEOUT = 1.0  # s, one request's reply time beyond the long-poll wait
# A handshake refused looks like silence to a ZeroMQ client: say the likely reason with it.
HANDSHAKE_HINT = ("not running, or it refused the handshake: a controller with a site token takes only "
                  "clients with the same token, a --trusted-network one only clients without")


@dataclass(frozen=True)
class Grant:
    token: int
    phase: str
    waited: float  # seconds from io_begin to the grant, as this client saw it
    lease: float


@dataclass(frozen=True)
class Estimate:
    state: str  # holding | waiting | idle
    position: int  # 0 while holding; otherwise the place in the queue (as it would be, if idle)
    eta: float | None  # seconds until the grant, by the controller's forward run; None: unknown
    holders: int
    waiting: int


class ControllerDown(Exception):
    pass


def default_appid() -> str:
    """JOBID:NAME, as libiez names a run: IEZ_RUN or SLURM_JOB_ID (else the pid), IEZ_APP (else the program)."""
    run = os.environ.get("IEZ_RUN") or os.environ.get("SLURM_JOB_ID") or f"pid{os.getpid()}"
    app = os.environ.get("IEZ_APP") or Path(sys.argv[0] or "python").name or "python"
    return f"{run}:{app}"


class AccessClient:
    def __init__(self, server: str = DEFAULT_SERVER, appid: str | None = None, *, mode: str = "phase",
                 user: str | None = None, project: str | None = None, jobid: str | None = None,
                 osts: set[int] | frozenset[int] | None = None, down_wait: float = 10.0,
                 try_timeout: float = TRY_TIMEOUT, token: str | None = None):
        """`token`: the site token requests are signed with, and whose CURVE keys the connection
        uses (default: $IEZ_TOKEN_FILE or $IEZ_TOKEN; "" sends them unsigned over plain ZeroMQ,
        for a --trusted-network controller)."""
        if mode not in MODES:
            raise ConfigError(f"IEZ_ACCESS={mode!r} is not one of {', '.join(MODES)}")
        self.server = server
        self.appid = P.check_appid(appid or default_appid())
        self.mode = mode
        self.user = user if user is not None else getpass.getuser()
        self.project = project if project is not None else os.environ.get("SLURM_JOB_ACCOUNT", "")
        self.jobid = jobid
        self.osts = None if osts is None else frozenset(osts)
        self.down_wait = down_wait
        self.try_timeout = try_timeout
        self.token = client_token() if token is None else token
        self.ctx: zmq.Context = zmq.Context.instance()
        self._sock: zmq.Socket | None = None
        self._signer = Signer(self.token)
        self._lock = threading.Lock()  # one request at a time on the REQ socket
        self._secret = ""
        self.heartbeat = 1.0
        self.grant: Grant | None = None
        self.lost = False  # the controller revoked the current token
        self.untokened = 0  # phases run without a token because the controller was down
        self._down = False  # the last attempt gave up: try once, not for down_wait
        self._depth = 0
        self._hb: tuple[threading.Thread, threading.Event] | None = None
        self.timeline: list[dict] | None = None  # set to a list to record each wait and hold

    @classmethod
    def from_env(cls, **kw) -> "AccessClient":
        env = os.environ
        osts = env.get("IEZ_ACCESS_OSTS")
        try:
            down_wait = float(env.get("IEZ_ACCESS_WAIT", "10"))
        except ValueError:
            raise ConfigError(f"IEZ_ACCESS_WAIT={env['IEZ_ACCESS_WAIT']!r} is not a number of seconds") from None
        return cls(env.get("IEZ_ACCESS_SERVER", DEFAULT_SERVER), env.get("IEZ_ACCESS_APPID"),
                   mode=env.get("IEZ_ACCESS", "off") or "off",
                   osts=None if osts is None else P.parse_osts(osts), down_wait=down_wait, **kw)

    # -- transport ------------------------------------------------------------------------------
    def _call(self, line: str, timeout: float) -> Reply | None:
        """One request; None if no reply in time (the REQ socket is then replaced)."""
        with self._lock:
            return self._call_locked(line, timeout)

    def _call_locked(self, line: str, timeout: float) -> Reply | None:
        if self._sock is None:
            self._sock = self._connect()
        self._sock.send_string(self._signer.sign(line, time.time()))
        if not self._sock.poll(round(timeout * 1000)):
            self._sock.close(0)
            self._sock = None
            return None
        return P.parse_reply(self._sock.recv_string())

    def _connect(self) -> zmq.Socket:
        """A REQ socket to the controller: CURVE with the site token's keys when there is one."""
        sock = self.ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        curve_client(sock, self.token)
        sock.connect(self.server)
        return sock

    def _request(self, line: str, timeout: float | None = None) -> Reply:
        """Retry until a reply, for down_wait seconds at most (once if the controller was down)."""
        start = time.monotonic()
        while True:
            reply = self._call(line, timeout or self.try_timeout)
            if reply is not None:
                self._down = False
                return reply
            if self._down or time.monotonic() - start >= self.down_wait:
                self._down = True
                raise ControllerDown()

    def register(self) -> bool:
        """REGISTER now rather than at the first request that needs it (False: the controller is down)."""
        try:
            self._registered()
        except ControllerDown:
            return False
        return True

    def _registered(self) -> None:
        if self._secret:
            return
        opts = {"user": self.user or None, "project": self.project or None, "jobid": self.jobid,
                "osts": None if self.osts is None else P.format_osts(self.osts)}
        r = self._request(P.format_request("REGISTER", self.appid, **opts))
        self._secret = r.fields[0]
        self.heartbeat = int(r.opt("heartbeat_ms", "1000")) / 1000

    def _authed(self, verb: str, *args: str, timeout: float | None = None, **opts: object) -> Reply:
        """An authenticated request; registers first, and again if the controller forgot us."""
        self._registered()
        try:
            return self._request(P.format_request(verb, self.appid, self._secret, *args, **opts), timeout)
        except AccessError as e:
            if e.errno != "ENOENT":
                raise
            self._secret = ""
            self._registered()
            return self._request(P.format_request(verb, self.appid, self._secret, *args, **opts), timeout)

    # -- the explicit API -----------------------------------------------------------------------
    def io_begin(self, phase: str = "io", osts: set[int] | None = None, expect: float | None = None) -> Grant | None:
        """Wait for a token for this I/O phase. None: the controller is down and the phase runs
        without one (logged)."""
        if self.grant is not None:
            raise AccessError("EBUSY", f"io_begin({phase!r}) while phase {self.grant.phase!r} holds a token")
        P.check_phase(phase)
        t0 = time.monotonic()
        asked = time.time()
        wait_ms = round(self.heartbeat * 1000)
        declared = P.format_osts(osts) if osts is not None else None
        try:
            while True:
                # A grant whose reply is lost (the controller restarted under the long poll) is
                # answered again by the next poll, which must come before the lease (two
                # heartbeats) runs out: so wait a long poll plus half a heartbeat, no more.
                r = self._authed("ACQUIRE", phase, osts=declared, expect=expect, wait_ms=wait_ms,
                                 timeout=wait_ms / 1000 + min(self.try_timeout, self.heartbeat / 2))
                if r.status == "GRANT":
                    break
        except ControllerDown:
            self.untokened += 1
            log.warning("iez access: controller %s did not answer within %.0f s (%s): phase %r of %s runs "
                        "without a token", self.server, self.down_wait, HANDSHAKE_HINT, phase, self.appid)
            return None
        self.heartbeat = int(r.opt("heartbeat_ms", str(wait_ms))) / 1000
        self.grant = Grant(token=int(r.fields[0]), phase=phase, waited=time.monotonic() - t0,
                           lease=int(r.opt("lease_ms", "0")) / 1000)
        self.lost = False
        if self.timeline is not None:
            self.timeline.append({"ev": "grant", "phase": phase, "token": self.grant.token, "asked": asked,
                                  "t": time.time()})
        self._start_heartbeats(self.grant.token)
        return self.grant

    def io_end(self) -> float | None:
        """Give the token back; the seconds held as the controller counted them, or None if
        there was no token (or it had been revoked, which is logged)."""
        g, self.grant = self.grant, None
        self._stop_heartbeats()
        if g is None:
            return None
        if self.timeline is not None:
            self.timeline.append({"ev": "release", "phase": g.phase, "token": g.token, "t": time.time()})
        try:
            r = self._authed("RELEASE", str(g.token))
        except ControllerDown:
            log.warning("iez access: controller %s did not answer the release of token %d of %s; its lease "
                        "will run out", self.server, g.token, self.appid)
            return None
        except AccessError as e:
            if e.errno in ("ESTALE", "EPERM"):
                log.warning("iez access: token %d of %s was revoked during phase %r: %s", g.token, self.appid,
                            g.phase, e)
                self.lost = True
                return None
            raise
        return float(r.opt("held_ms", "0")) / 1000

    def estimate(self, phase: str = "io", expect: float | None = None) -> Estimate:
        """How long until this application would get access (compute meanwhile: docs/references.md#s004-applications)."""
        r = self._authed("ESTIMATE", phase=phase, expect=expect)
        eta = r.opt("eta_s", "unknown")
        return Estimate(state=r.fields[0], position=int(r.opt("position", "0")),
                        eta=None if eta == "unknown" else float(eta),
                        holders=int(r.opt("holders", "0")), waiting=int(r.opt("waiting", "0")))

    def cancel(self) -> None:
        self._authed("CANCEL")

    def close(self) -> None:
        """Release anything held and unregister; quiet if the controller is gone."""
        try:
            if self.grant is not None:
                self.io_end()
            if self._secret and not self._down:
                self._request(P.format_request("UNREGISTER", self.appid, self._secret))
                self._secret = ""
        except (ControllerDown, AccessError) as e:
            log.info("iez access: unregister of %s: %s", self.appid, e or "controller down")
        finally:
            self._stop_heartbeats()
            if self._sock is not None:
                self._sock.close(0)
                self._sock = None

    def __enter__(self) -> "AccessClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the levels IEZ_ACCESS chooses from -----------------------------------------------------
    def _enter(self, level: str, phase: str, **kw) -> None:
        if LEVEL_OF_MODE.get(self.mode) != level:
            return
        self._depth += 1
        if self._depth == 1:
            self.io_begin(phase, **kw)

    def _exit(self, level: str) -> None:
        if LEVEL_OF_MODE.get(self.mode) != level or self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0:
            self.io_end()

    @contextmanager
    def _level(self, level: str, phase: str, **kw) -> Iterator[None]:
        self._enter(level, phase, **kw)
        try:
            yield
        finally:
            self._exit(level)

    def job(self, **kw) -> ContextManager[None]:
        """coarse: the whole run, as MPI_Init .. MPI_Finalize."""
        return self._level("job", "job", **kw)

    def phase(self, name: str = "io", **kw) -> ContextManager[None]:
        """phase: one I/O phase, io_begin(name) .. io_end()."""
        return self._level("phase", name, **kw)

    def call(self, **kw) -> ContextManager[None]:
        """fine: one I/O call (the MPI_File_write_at case, docs/references.md#s004-fig8)."""
        return self._level("call", "call", **kw)

    def file_open(self, **kw) -> None:
        """file: the first open of the job's files takes the token..."""
        self._enter("file", "files", **kw)

    def file_close(self) -> None:
        """...and the last close gives it back."""
        self._exit("file")

    # -- heartbeats -----------------------------------------------------------------------------
    def _start_heartbeats(self, token: int) -> None:
        stop = threading.Event()
        t = threading.Thread(target=self._beat, args=(token, stop), daemon=True,
                             name=f"iez-access-heartbeat-{token}")
        self._hb = (t, stop)
        t.start()

    def _stop_heartbeats(self) -> None:
        if self._hb is not None:
            t, stop = self._hb
            stop.set()
            t.join()
            self._hb = None

    def _beat(self, token: int, stop: threading.Event) -> None:
        sock = None
        signer = Signer(self.token)  # its own session: it sends concurrently with the main socket
        try:
            while not stop.wait(self.heartbeat):
                if sock is None:
                    sock = self._connect()
                sock.send_string(signer.sign(P.format_request("HEARTBEAT", self.appid, self._secret, token=token),
                                             time.time()))
                if not sock.poll(round(self.heartbeat * 1000)):
                    sock.close(0)
                    sock = None
                    continue
                try:
                    P.parse_reply(sock.recv_string())
                except AccessError as e:
                    self.lost = True
                    log.warning("iez access: token %d of %s lost: %s", token, self.appid, e)
                    return
        finally:
            if sock is not None:
                sock.close(0)


def fetch_status(server: str, timeout: float, token: str | None = None) -> dict:
    """The controller's STATUS, signed with `token` (default: the client's, `iez.tokens.client_token`)."""
    token = client_token() if token is None else token
    sock: zmq.Socket = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, P.MAX_ROW)
    curve_client(sock, token)
    try:
        sock.connect(server)
        sock.send_string(Signer(token).sign("STATUS", time.time()))
        if not sock.poll(round(timeout * 1000)):
            raise IezError(f"the access controller at {server} did not answer within {timeout:g} s ({HANDSHAKE_HINT})")
        header, *rows = sock.recv_multipart()
        try:
            n = P.status_rows(header.decode())
        except UnicodeDecodeError:
            raise P.AccessError("EPROTO", "the STATUS header is not UTF-8") from None
        if n != len(rows):
            raise P.AccessError("EPROTO", f"STATUS announced {n} rows and sent {len(rows)}")
        return P.parse_status(rows)
    finally:
        sock.close(0)
