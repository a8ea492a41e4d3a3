"""The access controller's state machine: registrations, the queue of claims, tokens, leases.

Pure: it reads one request line and the time, and returns the reply line. No sockets, no files;
`server` carries the lines and `statefile` saves what `take_changes()` names after every batch,
before any reply leaves, so a reply never promises what a restart would forget.

Leases: a holder must send a message (HEARTBEAT) at least every `heartbeat` seconds; one that
stays silent for `lease` = 2 x heartbeat loses its token (a crashed or stopped job never blocks
the others for longer). A waiter keeps its place by re-sending ACQUIRE (the long poll of the
protocol) and is dropped after the same silence. A registration with no claim ends after
`idle_timeout` of silence. After a restart every registration gets a fresh lease.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, cast

from iez.access import protocol as P
from iez.access.admission import (ChainSchedule, Claim, FairShare, FairShareSchedule, Lanes, Policy, Rule, Schedule,
                                  ShareGroups, Slots, SlotSchedule, Usage, admit_in_order, rule_value, schedule)
from iez.access.lane import Source, ns
from iez.access.protocol import AccessError, Request

HISTORY_WEIGHT = 0.3  # weight of the newest hold in the moving average of hold durations


@dataclass
class Settings:
    heartbeat: float = 1.0  # seconds between a holder's heartbeats
    max_hold: float = 0.0  # seconds a token may be held at most (0: no limit)
    idle_timeout: float = 86400.0  # seconds a registration without a claim may stay silent
    default_hold: float = 60.0  # seconds a hold is assumed to last when nothing better is known
    priorities: tuple[Rule, ...] = ()

    @property
    def lease(self) -> float:
        return 2 * self.heartbeat


@dataclass
class App:
    appid: str
    secret_hash: str
    user: str = ""
    project: str = ""
    jobid: str = ""  # the Lustre JobID its I/O carries (TBF rules match on it)
    osts: frozenset[int] | None = None
    priority: int = 0
    registered: float = 0.0
    revoked: int = 0  # the last token taken from it (a late RELEASE of it gets ESTALE)
    last_seen: float = 0.0  # not persisted: a restart gives every registration a fresh lease


@dataclass
class State:
    """Everything the store keeps."""

    apps: dict[str, App] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    history: dict[str, float] = field(default_factory=dict)  # "NAME/PHASE" (and "") -> seconds
    next_seq: int = 1
    next_token: int = 1


@dataclass
class Changes:
    """Keys changed since the last take_changes(): each is saved, or deleted if gone."""

    apps: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)
    usage: set[str] = field(default_factory=set)
    history: set[str] = field(default_factory=set)
    meta: bool = False

    def __bool__(self) -> bool:
        return bool(self.apps or self.claims or self.usage or self.history or self.meta)


@dataclass(frozen=True)
class Result:
    reply: str
    park_ms: int = 0  # > 0: a QUEUED ACQUIRE the transport may hold open this long
    appid: str = ""  # whose ACQUIRE it answers
    rows: tuple[str, ...] = ()  # the lines after a STATUS header


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class AccessQueue:
    def __init__(self, policy: Policy, settings: Settings | None = None, state: State | None = None,
                 now: float = 0.0, known_osts: Mapping[str, frozenset[int]] | None = None,
                 new_secret: Callable[[], str] = lambda: secrets.token_hex(16)):
        self.policy = policy
        self.settings = settings or Settings()
        self.state = state or State()
        self.known_osts = dict(known_osts or {})
        self.new_secret = new_secret
        self._changes = Changes()
        self._granted: list[str] = []
        self._events: list[dict] = []
        self._deadlines: list[tuple[float, str]] = []
        self._version = 0
        # The queue in the policy's order, kept sorted as claims come and go with the sums of their
        # expected holds (a static order), or per group (fair-share's order moves with usage and
        # time), and the holders: no request sorts or scans every claim.
        self._lanes = Lanes(policy, self._source) if policy.static else None
        self._groups = None if policy.static else ShareGroups(cast(FairShare, policy))
        self._held: dict[str, Claim] = {}
        self._learnt_version = 0  # changes with the learnt hold durations
        self._schedule: tuple[int, float, Schedule | None] = (-1, 0.0, None)
        for c in self.state.claims.values():
            self._index(c)
        for app in self.state.apps.values():
            self._seen(app, now)
        for c in self.state.claims.values():
            if c.holding and self.settings.max_hold > 0:
                self._watch(c.granted + self.settings.max_hold, c.appid)

    # -- the protocol ---------------------------------------------------------------------------
    def handle(self, line: str, now: float) -> Result:
        try:
            return self.handle_request(P.parse_request(line), now)
        except AccessError as e:
            return Result(P.error_reply(e.errno, str(e)))

    def handle_request(self, req: Request, now: float) -> Result:
        verb = req.verb
        if verb == "HELLO":
            return Result(P.format_reply("OK", P.VERSION, **self._params()))
        if verb == "STATUS":
            header, rows = P.format_status(self.status(now))
            return Result(header, rows=tuple(rows))
        if verb == "REGISTER":
            return Result(self._register(req, now))
        app = self._auth(req, now)
        if verb == "ACQUIRE":
            return self._acquire(app, req, now)
        if verb == "HEARTBEAT":
            return Result(self._heartbeat(app, req, now))
        if verb == "RELEASE":
            return Result(self._release(app, req, now))
        if verb == "CANCEL":
            return Result(self._cancel(app, now))
        if verb == "ESTIMATE":
            return Result(self._estimate(app, req, now))
        if verb == "UNREGISTER":
            return Result(self._unregister(app, now))
        raise AssertionError(verb)

    def _params(self) -> dict[str, object]:
        s = self.settings
        return {"policy": self.policy.name, "heartbeat_ms": round(s.heartbeat * 1000),
                "lease_ms": round(s.lease * 1000)}

    def _register(self, req: Request, now: float) -> str:
        appid = req.args["appid"]
        old = self.state.apps.get(appid)
        if old is not None:
            if appid in self.state.claims or now - old.last_seen <= self.settings.lease:
                raise AccessError("EEXIST", f"{appid} is registered by a live application "
                                            "(an appID is JOBID:NAME; give each process its own)")
            self._event(now, "replace", appid)
        o = req.opts
        user, project = o.get("user", ""), o.get("project", "")
        for what, v in (("user", user), ("project", project), ("jobid", o.get("jobid", ""))):
            if any(ch in v for ch in " {}") or len(v) > 128:
                raise AccessError("EINVAL", f"{what}={v[:40]!r}: no spaces or braces, at most 128 bytes")
        secret = self.new_secret()
        name = P.appid_name(appid)
        app = App(appid=appid, secret_hash=hash_secret(secret), user=user, project=project,
                  jobid=o.get("jobid") or P.appid_job(appid),
                  osts=P.parse_osts(o["osts"]) if "osts" in o else None,
                  priority=int(rule_value(self.settings.priorities, name, user, project, 0)),
                  registered=now)
        self.state.apps[appid] = app
        self._changes.apps.add(appid)
        self._seen(app, now)
        self._event(now, "register", appid, user=user, project=project, priority=app.priority)
        return P.format_reply("OK", secret, **self._params())

    def _auth(self, req: Request, now: float) -> App:
        appid = req.args["appid"]
        app = self.state.apps.get(appid)
        if app is None:
            raise AccessError("ENOENT", f"{appid} is not registered (REGISTER first; a registration "
                                        f"ends after {self.settings.idle_timeout:g} s of silence)")
        if not hmac.compare_digest(app.secret_hash, hash_secret(req.args["secret"])):
            raise AccessError("EACCES", f"wrong secret for {appid}")
        self._seen(app, now)
        return app

    def _acquire(self, app: App, req: Request, now: float) -> Result:
        phase = req.args["phase"]
        o = req.opts
        wait_ms = int(P.parse_seconds(o.get("wait_ms", "0"), "wait_ms"))
        c = self.state.claims.get(app.appid)
        if c is not None and c.phase != phase:
            raise AccessError("EBUSY", f"{app.appid} already {'holds' if c.holding else 'waits for'} "
                                       f"a token for phase {c.phase!r}: RELEASE or CANCEL it first")
        if c is None:
            osts = P.parse_osts(o["osts"]) if "osts" in o else app.osts
            if osts is None:
                osts = self.known_osts.get(P.appid_name(app.appid))
            c = Claim(appid=app.appid, phase=phase, seq=self.state.next_seq, since=now, osts=osts,
                      user=app.user, project=app.project, priority=app.priority,
                      expect=P.parse_seconds(o.get("expect", "0"), "expect"))
            self.state.next_seq += 1
            self.state.claims[app.appid] = c
            self._index(c)
            self._changes.claims.add(app.appid)
            self._changes.meta = True
            self._event(now, "acquire", app.appid, phase=phase, seq=c.seq,
                        osts=None if c.osts is None else P.format_osts(c.osts))
            self._watch(now + self.settings.lease, app.appid)
            version, at, sched = self._schedule
            self._mutated()
            self._decide(now)
            # A claim that joins at the back of an unchanged queue extends the schedule.
            if not c.holding and version == self._version - 1 and sched is not None and sched.add(c):
                self._schedule = (self._version, at, sched)
        if c.holding:
            return Result(self.grant_reply(app.appid, now), appid=app.appid)
        return Result(self.queued_reply(app.appid, now), appid=app.appid,
                      park_ms=min(wait_ms, round(self.settings.heartbeat * 1000)))

    def _heartbeat(self, app: App, req: Request, now: float) -> str:
        c = self.state.claims.get(app.appid)
        if "token" in req.opts:
            token = self._token(req.opts["token"])
            if c is None or c.token != token:
                raise AccessError("ESTALE", f"token {token} of {app.appid} is not held (revoked, or released)")
            return P.format_reply("OK", "holding", token=c.token, lease_ms=round(self.settings.lease * 1000))
        if c is None:
            return P.format_reply("OK", "idle")
        if c.holding:
            return P.format_reply("OK", "holding", token=c.token, lease_ms=round(self.settings.lease * 1000))
        return P.format_reply("OK", "waiting", position=self.position(app.appid, now))

    def _release(self, app: App, req: Request, now: float) -> str:
        token = self._token(req.args["token"])
        c = self.state.claims.get(app.appid)
        if c is None or not c.holding:
            if token and token == app.revoked:
                raise AccessError("ESTALE", f"token {token} of {app.appid} was revoked before this release")
            raise AccessError("EPERM", f"{app.appid} holds no token (only the holder can release)")
        if c.token != token:
            raise AccessError("EPERM", f"{app.appid} holds token {c.token}, not {token}")
        held = now - c.granted
        self._learn(c, held)
        self._end(c, now, "release", held=round(held, 6))
        return P.format_reply("OK", held_ms=round(held * 1000, 3))

    def _cancel(self, app: App, now: float) -> str:
        c = self.state.claims.get(app.appid)
        if c is not None and c.holding:
            raise AccessError("EPERM", f"{app.appid} holds token {c.token}: RELEASE it")
        if c is not None:
            self._end(c, now, "cancel")
        return P.format_reply("OK")

    def _unregister(self, app: App, now: float) -> str:
        c = self.state.claims.get(app.appid)
        if c is not None:
            self._end(c, now, "unregister")
        del self.state.apps[app.appid]
        self._changes.apps.add(app.appid)
        self._event(now, "unregister", app.appid)
        return P.format_reply("OK")

    def _estimate(self, app: App, req: Request, now: float) -> str:
        c = self.state.claims.get(app.appid)
        holders, waiting = self._counts()
        counts = {"holders": holders, "waiting": waiting}
        if c is not None and c.holding:
            return P.format_reply("OK", "holding", position=0, eta_s=0, **counts)
        if c is not None:
            eta = self._schedule_now(now).start(c)
            return P.format_reply("OK", "waiting", position=self.position(app.appid, now),
                                  eta_s="unknown" if eta is None else round(max(eta, now) - now, 3), **counts)
        # Not queued: where would a claim made now stand?
        o = req.opts
        osts = P.parse_osts(o["osts"]) if "osts" in o else app.osts
        if osts is None:
            osts = self.known_osts.get(P.appid_name(app.appid))
        probe = Claim(appid=app.appid, phase=P.check_phase(o.get("phase", "io")), seq=self.state.next_seq,
                      since=now, osts=osts, user=app.user, project=app.project, priority=app.priority,
                      expect=P.parse_seconds(o.get("expect", "0"), "expect"))
        eta = self._schedule_now(now).probe(probe)
        return P.format_reply("OK", "idle", position=self._position(probe, now),  # at now: a kept schedule may be older
                              eta_s="unknown" if eta is None else round(max(eta, now) - now, 3), **counts)

    @staticmethod
    def _token(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise AccessError("EINVAL", f"token {text[:20]!r} is not a number") from None

    # -- replies the transport sends later ------------------------------------------------------
    def grant_reply(self, appid: str, now: float) -> str:
        c = self.state.claims[appid]
        return P.format_reply("GRANT", c.token, lease_ms=round(self.settings.lease * 1000),
                              heartbeat_ms=round(self.settings.heartbeat * 1000),
                              waited_ms=round((c.granted - c.since) * 1000, 3))

    def queued_reply(self, appid: str, now: float) -> str:
        c = self.state.claims.get(appid)
        if c is None:  # dropped while the request was parked
            return P.error_reply("ENOENT", f"{appid} has no claim (it was cancelled or expired)")
        if c.holding:
            return self.grant_reply(appid, now)
        holders, waiting = self._counts()
        return P.format_reply("QUEUED", position=self.position(appid, now), waiting=waiting, holders=holders)

    def take_grants(self) -> list[str]:
        g, self._granted = self._granted, []
        return g

    def take_events(self) -> list[dict]:
        e, self._events = self._events, []
        return e

    def take_changes(self) -> Changes:
        c, self._changes = self._changes, Changes()
        return c

    # -- time -----------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Revoke silent holders, drop silent waiters, end idle registrations."""
        lease = self.settings.lease
        changed = False
        while self._deadlines and self._deadlines[0][0] <= now:
            _, appid = heapq.heappop(self._deadlines)
            app = self.state.apps.get(appid)
            if app is None:
                continue
            c = self.state.claims.get(appid)
            # Deadlines are compared as they were computed (last_seen + x <= now): now - last_seen
            # can round below x at wall-clock magnitudes.
            if c is None:
                if app.last_seen + self.settings.idle_timeout <= now:
                    del self.state.apps[appid]
                    self._changes.apps.add(appid)
                    self._event(now, "idle", appid)
                else:
                    self._watch(app.last_seen + self.settings.idle_timeout, appid)
                continue
            if app.last_seen + lease <= now:
                if c.holding:
                    self._revoke(app, c, now, "expire", silent=round(now - app.last_seen, 6))
                else:
                    self._end(c, now, "abandon", decide=False)
                changed = True
            elif c.holding and self.settings.max_hold > 0 and c.granted + self.settings.max_hold <= now:
                self._revoke(app, c, now, "max_hold", held=round(now - c.granted, 6))
                changed = True
        if changed:
            self._decide(now)

    def next_deadline(self) -> float | None:
        return self._deadlines[0][0] if self._deadlines else None

    def _seen(self, app: App, now: float) -> None:
        app.last_seen = now
        wait = self.settings.lease if app.appid in self.state.claims else self.settings.idle_timeout
        self._watch(now + wait, app.appid)

    def _watch(self, when: float, appid: str) -> None:
        heapq.heappush(self._deadlines, (when, appid))

    # -- queue changes --------------------------------------------------------------------------
    def _decide(self, now: float) -> None:
        holding = self.holding()
        if self.policy.full(holding):
            return
        ordered: Iterator[Claim]
        if self._lanes is not None:  # read the kept order only as far as the policy looks
            ordered = (self.state.claims[appid] for _, appid in self._lanes.candidates())
        else:
            assert self._groups is not None
            ordered = self._groups.ordered(holding, self.state.usage, now)
        for c in admit_in_order(self.policy, ordered, holding):
            self._unindex(c)
            c.token = self.state.next_token
            c.granted = now
            self.state.next_token += 1
            self._changes.claims.add(c.appid)
            self._changes.meta = True
            self._granted.append(c.appid)
            self._index(c)
            app = self.state.apps[c.appid]
            self._seen(app, now)  # the lease runs from the grant
            if self.settings.max_hold > 0:
                self._watch(now + self.settings.max_hold, c.appid)
            self._event(now, "grant", c.appid, phase=c.phase, token=c.token, waited=round(now - c.since, 6))
            self._mutated()

    def _end(self, c: Claim, now: float, why: str, decide: bool = True, **extra: object) -> None:
        version, at, sched = self._schedule
        self._unindex(c)
        del self.state.claims[c.appid]
        self._changes.claims.add(c.appid)
        if c.holding:
            self._changes.usage.update(self.state.usage.charge(c, now - c.granted, now))
        self._event(now, why, c.appid, phase=c.phase, token=c.token or None, **extra)
        self._mutated()
        if decide:
            self._decide(now)
        # A waiter that leaves an otherwise unchanged queue is taken out of the schedule.
        if not c.holding and version == self._version - 1 and sched is not None and sched.remove(c):
            self._schedule = (self._version, at, sched)

    def _revoke(self, app: App, c: Claim, now: float, why: str, **extra: object) -> None:
        app.revoked = c.token
        self._changes.apps.add(app.appid)
        self._end(c, now, why, decide=False, **extra)

    def _learn(self, c: Claim, held: float) -> None:
        for key in (self._history_key(c), ""):
            old = self.state.history.get(key)
            self.state.history[key] = held if old is None else (1 - HISTORY_WEIGHT) * old + HISTORY_WEIGHT * held
            self._changes.history.add(key)
        self._learnt_version += 1

    def _mutated(self) -> None:
        self._version += 1

    def _index(self, c: Claim) -> None:
        if c.holding:
            self._held[c.appid] = c
        elif self._lanes is not None:
            self._lanes.add(c)
        elif self._groups is not None:
            self._groups.add(c)

    def _unindex(self, c: Claim) -> None:
        if c.holding:
            del self._held[c.appid]
        elif self._lanes is not None:
            self._lanes.remove(c)
        elif self._groups is not None:
            self._groups.remove(c)

    def _event(self, now: float, ev: str, appid: str, **fields: object) -> None:
        self._events.append({"t": round(now, 6), "ev": ev, "app": appid,
                             **{k: v for k, v in fields.items() if v is not None}})

    # -- views ----------------------------------------------------------------------------------
    def holding(self) -> list[Claim]:
        return list(self._held.values())

    def waiting(self) -> list[Claim]:
        """The waiting claims (in the policy's order when it is static)."""
        if self._lanes is not None:
            return [self.state.claims[appid] for _, appid in self._lanes.order]
        return [c for c in self.state.claims.values() if not c.holding]

    def _counts(self) -> tuple[int, int]:
        """(holders, waiting)."""
        return len(self._held), len(self.state.claims) - len(self._held)

    def duration(self, c: Claim) -> float:
        """How long a hold is expected to last: declared, else learnt for this application and
        phase, else learnt over all, else the default."""
        return c.expect if c.expect > 0 else self._learnt(self._history_key(c))

    def _learnt(self, key: str) -> float:
        h = self.state.history
        return h.get(key, h.get("", self.settings.default_hold))

    def _learnt_ns(self, key: str) -> int:
        return ns(self._learnt(key))

    def _source(self, c: Claim) -> Source:
        """A claim's duration as its lane keeps it: declared (fixed) or learnt (its key)."""
        return ns(c.expect) if c.expect > 0 else self._history_key(c)

    @staticmethod
    def _history_key(c: Claim) -> str:
        return f"{P.appid_name(c.appid)}/{c.phase}"

    def position(self, appid: str, now: float) -> int:
        """1-based place among the waiting claims in the policy's order (0: holds or absent)."""
        c = self.state.claims.get(appid)
        if c is None or c.holding:
            return 0
        return self._position(c, now)

    def _position(self, c: Claim, now: float) -> int:
        """1-based place of `c` among the waiting claims, queued or were it queued now."""
        if self._lanes is not None:
            return self._lanes.order.rank((self.policy.key(c), c.appid)) + 1
        assert self._groups is not None
        return self._groups.position(c, self.holding(), self.state.usage, now)

    def _schedule_now(self, now: float) -> Schedule:
        """The wait estimates: read from the kept lanes when claims run one after another per
        lane (exact at `now`, nothing rebuilt); otherwise rebuilt when the queue changed other
        than by a claim joining at the back, or after a second unless a schedule built now would be the
        same (every slot taken by holds not yet past their expected ends)."""
        if self._lanes is not None and self._lanes.chained:
            return ChainSchedule(self.policy, self._lanes, self.holding(), now, self.duration,
                                 self._learnt_ns, self._learnt_version)
        version, at, sched = self._schedule
        if sched is None or version != self._version or (now - at > 1.0 and not sched.lasts(now)):
            sched = self._rebuild(now)
            self._schedule = (self._version, now, sched)
        return sched

    def _rebuild(self, now: float) -> Schedule:
        """A schedule from the queue as it stands: from the kept lanes or groups where there is one."""
        holding = self.holding()
        if self._groups is not None:
            return FairShareSchedule(cast(FairShare, self.policy), self._groups, holding, self.state.usage, now,
                                     self.duration)
        if self._lanes is not None and isinstance(self.policy, Slots):
            return SlotSchedule(self.policy, self._lanes.order, holding, now, self.duration, self._learnt_ns)
        return schedule(self.policy, self.waiting(), holding, self.state.usage, now, self.duration)

    def status(self, now: float) -> dict:
        """The admin view (no secrets): policy, settings, holders and waiters in order."""
        etas = self._schedule_now(now).starts

        def row(c: Claim) -> dict:
            app = self.state.apps.get(c.appid)
            d = {"app": c.appid, "phase": c.phase, "seq": c.seq, "since": c.since,
                 "osts": None if c.osts is None else P.format_osts(c.osts),
                 "user": c.user, "project": c.project, "priority": c.priority,
                 "jobid": app.jobid if app else ""}
            if c.holding:
                d.update(token=c.token, granted=c.granted, held_s=round(now - c.granted, 6))
            else:
                eta = etas.get(c.appid)
                d.update(position=self.position(c.appid, now), waited_s=round(now - c.since, 6),
                         eta_s=None if eta is None else round(max(eta, now) - now, 3))
            return d

        waiting = sorted(self.waiting(), key=lambda c: self.position(c.appid, now))
        return {"version": P.VERSION, "policy": self.policy.describe(), "time": now, **self._params(),
                "holders": [row(c) for c in sorted(self.holding(), key=lambda c: c.token)],
                "waiting": [row(c) for c in waiting],
                "apps": [{"app": a.appid, "jobid": a.jobid, "user": a.user, "project": a.project,
                          "holding": bool(self.state.claims.get(a.appid) and self.state.claims[a.appid].holding)}
                         for a in sorted(self.state.apps.values(), key=lambda a: a.appid)]}
