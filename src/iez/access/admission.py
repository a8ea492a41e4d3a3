"""Who may hold an access token now: the IO-Cop policies, and the wait estimate. Pure.

A claim is one application's request for access for one I/O phase; it waits until the policy
admits it, then holds a token until it is released or revoked. Every policy is two rules:
an order over the waiting claims, and an admission test given the holders and the claims
ahead that were not admitted ("passed"):

| policy | order | admits a claim when |
|---|---|---|
| exclusive | FIFO | nobody holds (one application at a time: docs/references.md#s004-controller) |
| k-concurrent | FIFO | fewer than k hold |
| fair-share | least decayed usage of its user or project per share, then FIFO | fewer than k hold |
| priority | highest priority, then FIFO | fewer than k hold |
| ost-aware | FIFO | its OST set is disjoint from every holder's and every passed claim's |

Count-based policies never let a claim overtake one they passed. ost-aware lets a claim
overtake only claims it shares no OST with, so a claim is delayed only by the holders and the
claims ahead of it that it conflicts with: nobody starves. An unknown OST set (None) is all
OSTs, so an application iez knows nothing about is served as under exclusive.
"""

from __future__ import annotations

import fnmatch
import heapq
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from iez.errors import ConfigError

POLICIES = ("exclusive", "k-concurrent", "fair-share", "priority", "ost-aware")


@dataclass
class Claim:
    """A request for access (waiting: token == 0) or a held token (token > 0)."""

    appid: str
    phase: str
    seq: int  # arrival order, unique and increasing across restarts
    since: float  # when the claim was made (wall clock, seconds)
    osts: frozenset[int] | None = None  # None: unknown, i.e. every OST
    user: str = ""
    project: str = ""
    priority: int = 0
    expect: float = 0.0  # seconds the application says it will hold (0: unknown)
    token: int = 0
    granted: float = 0.0

    @property
    def holding(self) -> bool:
        return self.token > 0


@dataclass
class Usage:
    """Held seconds per group ("user:NAME", "project:NAME"), decaying with a half-life, as
    Slurm's fair-share decays past usage."""

    half_life: float = 3600.0
    values: dict[str, tuple[float, float]] = field(default_factory=dict)  # group -> (value, as_of)

    def value(self, group: str, now: float) -> float:
        v, t = self.values.get(group, (0.0, now))
        return v * 0.5 ** (max(0.0, now - t) / self.half_life)

    def add(self, group: str, seconds: float, now: float) -> None:
        self.values[group] = (self.value(group, now) + max(0.0, seconds), now)

    def charge(self, c: Claim, seconds: float, now: float) -> list[str]:
        """Add a finished hold to its user's and its project's usage; the groups changed."""
        groups = [f"user:{c.user}", f"project:{c.project}"]
        for g in groups:
            self.add(g, seconds, now)
        return groups

    def copy(self) -> "Usage":
        return Usage(self.half_life, dict(self.values))


@dataclass(frozen=True)
class Rule:
    """`user:alice=5`, `project:cms=2`, `app:ckpt*=3` (glob on the application's name)."""

    kind: str
    pattern: str
    value: float

    def matches(self, app: str, user: str, project: str) -> bool:
        subject = {"app": app, "user": user, "project": project}[self.kind]
        return fnmatch.fnmatchcase(subject, self.pattern)


def parse_rule(text: str, what: str) -> Rule:
    kind, _, rest = text.partition(":")
    pattern, eq, value = rest.rpartition("=")
    if kind not in ("app", "user", "project") or not eq or not pattern:
        raise ConfigError(f"{what} {text!r}: expected app:GLOB=N, user:NAME=N or project:NAME=N")
    try:
        v = float(value)
    except ValueError:
        raise ConfigError(f"{what} {text!r}: {value!r} is not a number") from None
    return Rule(kind, pattern, v)


def rule_value(rules: Iterable[Rule], app: str, user: str, project: str, default: float) -> float:
    """The largest value of the rules that match, else the default."""
    hits = [r.value for r in rules if r.matches(app, user, project)]
    return max(hits) if hits else default


class Policy:
    name = ""
    stops_at_refusal = True  # True: a refused claim blocks every claim behind it

    def order(self, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float) -> list[Claim]:
        return sorted(waiting, key=lambda c: c.seq)

    def admit(self, c: Claim, holding: list[Claim], passed: list[Claim]) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


class Slots(Policy):
    """At most k holders; claims are admitted in the policy's order only."""

    def __init__(self, k: int = 1):
        if k < 1:
            raise ConfigError(f"{self.name}: k must be >= 1, got {k}")
        self.k = k

    def admit(self, c: Claim, holding: list[Claim], passed: list[Claim]) -> bool:
        return not passed and len(holding) < self.k

    def describe(self) -> str:
        return f"{self.name} (k={self.k})"


class Exclusive(Slots):
    name = "exclusive"

    def __init__(self) -> None:
        super().__init__(1)

    def describe(self) -> str:
        return self.name


class KConcurrent(Slots):
    name = "k-concurrent"


class Priority(Slots):
    name = "priority"

    def order(self, waiting, holding, usage, now):
        return sorted(waiting, key=lambda c: (-c.priority, c.seq))


class FairShare(Slots):
    name = "fair-share"

    def __init__(self, k: int = 1, by: str = "user", shares: Iterable[Rule] = ()):
        super().__init__(k)
        if by not in ("user", "project"):
            raise ConfigError(f"fair-share: share by 'user' or 'project', not {by!r}")
        self.by = by
        self.shares = tuple(shares)

    def group(self, c: Claim) -> str:
        return f"{self.by}:{c.user if self.by == 'user' else c.project}"

    def share(self, c: Claim) -> float:
        return max(1e-9, rule_value(self.shares, "", c.user, c.project, 1.0))

    def order(self, waiting, holding, usage, now):
        # Usage so far, including the holds still running, per unit of share.
        running: dict[str, float] = {}
        for h in holding:
            running[self.group(h)] = running.get(self.group(h), 0.0) + max(0.0, now - h.granted)
        load = {}
        for c in waiting:
            g = self.group(c)
            if g not in load:
                load[g] = (usage.value(g, now) + running.get(g, 0.0)) / self.share(c)
        return sorted(waiting, key=lambda c: (load[self.group(c)], c.seq))

    def describe(self) -> str:
        return f"{self.name} (by {self.by}, k={self.k})"


class OstAware(Policy):
    name = "ost-aware"
    stops_at_refusal = False

    def admit(self, c: Claim, holding: list[Claim], passed: list[Claim]) -> bool:
        return all(disjoint(c.osts, o.osts) for o in holding) and all(disjoint(c.osts, o.osts) for o in passed)


def disjoint(a: frozenset[int] | None, b: frozenset[int] | None) -> bool:
    if a is None or b is None:
        return False
    return a.isdisjoint(b)


def make_policy(name: str, k: int = 1, fair_by: str = "user", shares: Iterable[Rule] = ()) -> Policy:
    if name == "exclusive":
        return Exclusive()
    if name == "k-concurrent":
        return KConcurrent(k)
    if name == "fair-share":
        return FairShare(k, fair_by, shares)
    if name == "priority":
        return Priority(k)
    if name == "ost-aware":
        return OstAware()
    raise ConfigError(f"unknown access policy {name!r} (one of {', '.join(POLICIES)})")


def decide(policy: Policy, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float) -> list[Claim]:
    """The waiting claims to grant now, in grant order."""
    held = list(holding)
    passed: list[Claim] = []
    out = []
    for c in policy.order(waiting, holding, usage, now):
        if policy.admit(c, held, passed):
            out.append(c)
            held.append(c)
        elif policy.stops_at_refusal:
            break
        else:
            passed.append(c)
    return out


def estimate(policy: Policy, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float,
             duration: Callable[[Claim], float]) -> dict[str, float]:
    """When each waiting claim should be granted (absolute time), by running the policy forward:
    each hold lasts `duration(claim)` from its grant (a hold past its expected end is taken to
    end now), and nothing new arrives. Claims that would never be granted are left out."""
    usage = usage.copy()
    held = list(holding)
    ends = [(max(now, h.granted + duration(h)), h.seq, h) for h in holding]
    heapq.heapify(ends)
    left = list(waiting)
    t = now
    starts: dict[str, float] = {}
    while left:
        for c in decide(policy, left, held, usage, t):
            starts[c.appid] = t
            left.remove(c)
            g = replace(c, token=-1, granted=t)
            held.append(g)
            heapq.heappush(ends, (t + duration(c), c.seq, g))
        if not left or not ends:
            break
        t = ends[0][0]
        while ends and ends[0][0] <= t:
            _, _, h = heapq.heappop(ends)
            held.remove(h)
            usage.charge(h, t - h.granted, t)
    return starts
