"""IO-Cop requests signed with the site token (docs/iocop.md "Authentication").

A signed request is the iocop/1 request behind a fixed envelope:

    MAC TAB TIME TAB SESSION TAB SEQ TAB request

TIME is the client's clock in milliseconds since the epoch; SESSION 16 hex digits a client picks
at random for one connection (or ZeroMQ socket); SEQ counts 1, 2, 3, ... within the session; MAC
is 64 hex digits of HMAC-SHA256, keyed with the site token, over "iocop/1\\n" and everything after
the MAC's TAB. The token never travels (as with the collectors' messages, iez.collect.message).

The controller checks the envelope before it reads the request: a bad MAC, a TIME more than
`skew` seconds from its own clock, or a SEQ not above the last one accepted in that session is
refused. So a captured request cannot be replayed: within the skew window its session has seen
it, and after it its TIME is stale. A session is forgotten 2 x skew after its last request, when
every request of it is stale anyway, which bounds the sessions kept by the request rate.

Without a token (the controller's --trusted-network) requests travel unsigned; a controller in
that mode also takes signed ones, unverified. Pure: no sockets, the time is passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field

from iez.access.protocol import AccessError

CONTEXT = b"iocop/1\n"  # the MAC covers it, so an IO-Cop MAC is never valid for another message
ENVELOPE_MAX = 64 + 1 + 15 + 1 + 16 + 1 + 19 + 1  # bytes in front of the request at most
DEFAULT_SKEW = 30.0  # seconds a request's TIME may differ from the controller's clock
MAX_SESSIONS = 100_000  # sessions remembered at once; beyond that new sessions get EAGAIN
_ENVELOPE = re.compile(rb"^([0-9a-f]{64})\t(([0-9]{1,15})\t([0-9a-f]{16})\t([0-9]{1,19})\t)")


def mac(token: bytes, signed: bytes) -> bytes:
    return hmac.new(token, CONTEXT + signed, hashlib.sha256).hexdigest().encode()


@dataclass
class Signer:
    """Signs the requests of one session (one socket or connection: the controller wants its
    sequence numbers in order, so concurrent senders each need their own Signer)."""

    token: str
    session: str = field(default_factory=lambda: secrets.token_hex(8))
    seq: int = 0

    def sign(self, line: str, now: float) -> str:
        return self.sign_bytes(line.encode(), now).decode()

    def sign_bytes(self, line: bytes, now: float) -> bytes:
        if not self.token:
            return line
        self.seq += 1
        rest = f"{round(now * 1000)}\t{self.session}\t{self.seq}\t".encode() + line
        return mac(self.token.encode(), rest) + b"\t" + rest


class Verifier:
    """The controller's side: `check(line, now)` returns the request inside a signed line, or
    raises AccessError (EACCES: unsigned, forged, stale or replayed; EAGAIN: too many sessions).
    With token None (trusted network) it returns the request, signed or not, unverified."""

    def __init__(self, token: str | None, skew: float = DEFAULT_SKEW, max_sessions: int = MAX_SESSIONS):
        self.key = token.encode() if token else None
        self.skew = skew
        self.max_sessions = max_sessions
        self.sessions: OrderedDict[bytes, tuple[int, float]] = OrderedDict()  # by last use: (seq, at)

    def check(self, line: bytes, now: float) -> bytes:
        m = _ENVELOPE.match(line)
        if self.key is None:
            return line[m.end():] if m else line
        if not m:
            raise AccessError("EACCES", "unsigned request: this controller takes only requests signed with the "
                                        "site token (set IEZ_TOKEN or IEZ_TOKEN_FILE)")
        if not hmac.compare_digest(m[1], mac(self.key, line[m.start(2):])):
            raise AccessError("EACCES", "bad signature (not signed with this site's token)")
        t, session, seq = int(m[3]) / 1000, m[4], int(m[5])
        if abs(t - now) > self.skew:
            raise AccessError("EACCES", f"request stamped {t - now:+.0f} s from the controller's clock (more than "
                                        f"{self.skew:g} s: check the clocks, or a replayed request)")
        self._forget(now)
        last = self.sessions.get(session)
        if last is not None and seq <= last[0]:
            raise AccessError("EACCES", f"replayed request (sequence {seq} of session {session.decode()} "
                                        f"already seen)")
        if last is None and len(self.sessions) >= self.max_sessions:
            raise AccessError("EAGAIN", f"{self.max_sessions} client sessions active: try again later")
        self.sessions[session] = (seq, now)
        self.sessions.move_to_end(session)
        return line[m.end():]

    def _forget(self, now: float) -> None:
        while self.sessions:
            session, (_, at) = next(iter(self.sessions.items()))
            if now - at <= 2 * self.skew:
                return
            del self.sessions[session]
