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

import bisect
import fnmatch
import heapq
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

from iez.access.lane import NS, Item, Lane, Source, Value, fixed, ns
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
    static = True  # the order is by `key` alone: it does not move with usage or time

    def key(self, c: Claim) -> tuple[int, ...]:
        """A claim's place in a static order (smaller first)."""
        return (c.seq,)

    def order(self, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float) -> list[Claim]:
        return sorted(waiting, key=self.key)

    def admit(self, c: Claim, holding: list[Claim], passed: list[Claim]) -> bool:
        raise NotImplementedError

    def full(self, holding: list[Claim]) -> bool:
        """True when no claim can be admitted beside `holding`, whatever the claim (the queue's
        order is then not worth computing)."""
        return False

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

    def full(self, holding: list[Claim]) -> bool:
        return len(holding) >= self.k

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

    def key(self, c: Claim) -> tuple[int, ...]:
        return (-c.priority, c.seq)


class FairShare(Slots):
    name = "fair-share"
    static = False  # usage decays and running holds accrue: the order moves with time

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
        load = self.loads(waiting, holding, usage, now)
        return sorted(waiting, key=lambda c: (load[self.group(c)], c.seq))

    def loads(self, claims: Iterable[Claim], holding: list[Claim], usage: Usage, now: float) -> dict[str, float]:
        """Per group of `claims`: its usage so far, including the holds still running, per unit of
        share (the share of its first claim in `claims`)."""
        running: dict[str, float] = {}
        for h in holding:
            running[self.group(h)] = running.get(self.group(h), 0.0) + max(0.0, now - h.granted)
        load = {}
        for c in claims:
            g = self.group(c)
            if g not in load:
                load[g] = (usage.value(g, now) + running.get(g, 0.0)) / self.share(c)
        return load

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
    return admit_in_order(policy, policy.order(waiting, holding, usage, now), holding)


def admit_in_order(policy: Policy, ordered: Iterable[Claim], holding: list[Claim]) -> list[Claim]:
    """The claims of `ordered` (the waiting claims in the policy's order; an iterator is read only
    as far as the policy looks) to grant now."""
    if policy.full(holding):
        return []
    held = list(holding)
    passed: list[Claim] = []
    out = []
    for c in ordered:
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
    return schedule(policy, waiting, holding, usage, now, duration).starts


def simulate(policy: Policy, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float,
             duration: Callable[[Claim], float]) -> dict[str, float]:
    """`estimate` by running `decide` at every expected end: any policy, O(n^2 log n). The
    schedules below give the same times in one pass where the policy allows it."""
    left = list(waiting)

    def admit(t: float, held: list[Claim], usage: Usage) -> list[Claim]:
        granted = decide(policy, left, held, usage, t)
        for c in granted:
            left.remove(c)
        return granted
    return _forward(len(waiting), holding, usage, now, duration, admit)


def fair_share_run(policy: FairShare, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float,
                   duration: Callable[[Claim], float]) -> dict[str, float]:
    """`simulate` under fair-share, the same times from the same arithmetic in O(n (g + k) + n log n)
    for g groups: at each expected end the loads are computed once per group (as `FairShare.order`
    does) and the free slots go to the claims first in (load, seq) order, read from a heap of the
    groups' oldest claims instead of sorting the queue."""
    listed: dict[str, list[Claim]] = {}  # per group, in the order given (the first left sets the share)
    for c in waiting:
        listed.setdefault(policy.group(c), []).append(c)
    oldest = {g: sorted(cs, key=lambda c: c.seq) for g, cs in listed.items()}  # per group, by seq
    nxt = dict.fromkeys(oldest, 0)
    first = dict.fromkeys(oldest, 0)
    granted: set[str] = set()

    def admit(t: float, held: list[Claim], usage: Usage) -> list[Claim]:
        free = min(policy.k - len(held), len(waiting) - len(granted))
        if free <= 0:
            return []
        for g in oldest:
            while listed[g][first[g]].appid in granted:
                first[g] += 1
        loads = policy.loads((listed[g][first[g]] for g in oldest), held, usage, t)
        heads = [(loads[g], oldest[g][nxt[g]].seq, g) for g in oldest]
        heapq.heapify(heads)
        out = []
        for _ in range(free):
            load, _, g = heapq.heappop(heads)
            out.append(oldest[g][nxt[g]])
            nxt[g] += 1
            if nxt[g] < len(oldest[g]):
                heapq.heappush(heads, (load, oldest[g][nxt[g]].seq, g))
            else:
                del oldest[g]
        granted.update(c.appid for c in out)
        return out
    return _forward(len(waiting), holding, usage, now, duration, admit)


def _forward(n: int, holding: list[Claim], usage: Usage, now: float, duration: Callable[[Claim], float],
             admit: Callable[[float, list[Claim], Usage], list[Claim]]) -> dict[str, float]:
    """Run the holds forward from `now`: `admit(t, holders, usage)` grants at t (and at every
    expected end after it, where the ended holds are charged) until all n claims are granted or
    nothing holds any more. The grant times."""
    usage = usage.copy()
    held = list(holding)
    ends = [(max(now, h.granted + duration(h)), h.seq, h) for h in holding]
    heapq.heapify(ends)
    t = now
    starts: dict[str, float] = {}
    while len(starts) < n:
        for c in admit(t, held, usage):
            starts[c.appid] = t
            g = replace(c, token=-1, granted=t)
            held.append(g)
            heapq.heappush(ends, (t + duration(c), c.seq, g))
        if len(starts) == n or not ends:
            break
        t = ends[0][0]
        while ends and ends[0][0] <= t:
            _, _, h = heapq.heappop(ends)
            held.remove(h)
            usage.charge(h, t - h.granted, t)
    return starts


def run_forward(policy: Policy, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float,
                duration: Callable[[Claim], float]) -> dict[str, float]:
    """`simulate`, by the faster equal run where there is one."""
    if isinstance(policy, FairShare):
        return fair_share_run(policy, waiting, holding, usage, now, duration)
    return simulate(policy, waiting, holding, usage, now, duration)


class Schedule:
    """Expected grant times of the waiting claims (`starts`), built claim by claim in the policy's
    order, so a claim that joins at the back is scheduled in O(log n) (`add`), and a claim not
    queued is placed without rescheduling the others (`probe`). A policy whose order moves with
    time (fair-share) is simulated whole (`simulate`) instead: `add` then says False."""

    def __init__(self, policy: Policy, holding: list[Claim], now: float, duration: Callable[[Claim], float]):
        self.policy, self.now, self.duration = policy, now, duration
        self._starts: dict[str, float] = {}
        self.keys: list[tuple[int, ...]] = []  # of the scheduled claims, in order
        self.times: list[float] = []  # their starts, in the same order
        self.holding = holding
        self.waiting: list[Claim] = []  # for `simulate` when the order is not static
        self.usage = Usage()
        # A probe of a moving order runs the whole queue forward (0.4 s at 10,000 queued): one per
        # distinct claim a schedule lives for, so repeated ESTIMATEs cannot keep the server busy.
        self._probed: dict[tuple, tuple[int, float | None]] = {}

    @property
    def starts(self) -> dict[str, float]:
        """appid -> expected grant time, of every waiting claim that would be granted."""
        return self._starts

    def start(self, c: Claim) -> float | None:
        """The expected grant time of the waiting claim `c` (None: never)."""
        return self._starts.get(c.appid)

    @property
    def incremental(self) -> bool:
        return self.policy.static

    def add(self, c: Claim) -> bool:
        """Schedule a claim behind every scheduled one; False if it does not go last (or the
        policy's order is not static): the caller builds a new schedule."""
        key = self.policy.key(c)
        if not self.incremental or (self.keys and key < self.keys[-1]):
            return False
        t = self._place(c, True)
        self._starts[c.appid] = t
        self.keys.append(key)
        self.times.append(t)
        return True

    def probe(self, c: Claim) -> tuple[int, float | None]:
        """(1-based position, expected grant time) of `c` were it queued now."""
        if not self.incremental:
            memo = (c.appid, c.seq, c.phase, c.osts, c.user, c.project, c.priority, c.expect)
            if memo not in self._probed:
                queue = self.waiting + [c]
                order = self.policy.order(queue, self.holding, self.usage, self.now)
                starts = run_forward(self.policy, queue, self.holding, self.usage, self.now, self.duration)
                self._probed[memo] = ([x.appid for x in order].index(c.appid) + 1, starts.get(c.appid))
            return self._probed[memo]
        i = bisect.bisect_left(self.keys, self.policy.key(c))
        # The claims ahead are scheduled as if c were not there; c takes the place of the claim
        # now at i, whose start depended only on those ahead.
        return i + 1, self.times[i] if i < len(self.times) else self._place(c, False)

    def _place(self, c: Claim, commit: bool) -> float:
        raise NotImplementedError


class SlotSchedule(Schedule):
    """k slots, claims granted in order: each starts when the k-th latest running hold ends
    (list scheduling on k machines, which is what `decide` under `Slots` does run forward)."""

    def __init__(self, policy: Slots, holding: list[Claim], now: float, duration: Callable[[Claim], float]):
        super().__init__(policy, holding, now, duration)
        self.k = policy.k
        self.ends = [max(now, h.granted + duration(h)) for h in holding]
        heapq.heapify(self.ends)
        self.t = now

    def _place(self, c: Claim, commit: bool) -> float:
        ends, t = (self.ends, self.t) if commit else (list(self.ends), self.t)
        while ends and ends[0] <= t:
            heapq.heappop(ends)
        while len(ends) >= self.k:
            t = max(t, heapq.heappop(ends))
            while ends and ends[0] <= t:
                heapq.heappop(ends)
        if commit:
            heapq.heappush(ends, t + self.duration(c))
            self.t = t
        return t


class OstSchedule(Schedule):
    """ost-aware: a claim starts once every claim it shares an OST with and that holds or is
    ahead of it has ended, so its start is the latest end among those, kept per OST."""

    def __init__(self, policy: Policy, holding: list[Claim], now: float, duration: Callable[[Claim], float]):
        super().__init__(policy, holding, now, duration)
        self.by_ost: dict[int, float] = {}  # latest end of the claims naming the OST
        self.unknown = now  # latest end of the claims with no OST set (they conflict with all)
        self.latest = now  # latest end of all
        for h in holding:
            self._mark(h, max(now, h.granted + duration(h)))

    def _place(self, c: Claim, commit: bool) -> float:
        if c.osts is None:
            t = self.latest
        else:
            t = max([self.unknown, *(self.by_ost.get(o, self.now) for o in c.osts)])
        if commit:
            self._mark(c, t + self.duration(c))
        return t

    def _mark(self, c: Claim, end: float) -> None:
        self.latest = max(self.latest, end)
        if c.osts is None:
            self.unknown = max(self.unknown, end)
        else:
            for o in c.osts:
                self.by_ost[o] = max(self.by_ost.get(o, self.now), end)


class Lanes:
    """The waiting claims of a policy with a static order, kept for the wait estimate: all of them
    in the policy's order (`order`, a `Lane`), and under ost-aware those naming exactly one OST
    also per OST (`by_ost`). `source` gives a claim's duration as a `Lane` takes it."""

    def __init__(self, policy: Policy, source: Callable[[Claim], Source]):
        self.policy, self.source = policy, source
        self.order = Lane()
        self.by_ost: dict[int, Lane] = {}
        self.others = 0  # ost-aware claims naming no, several or every OST

    def add(self, c: Claim) -> None:
        item, src = (self.policy.key(c), c.appid), self.source(c)
        self.order.insert(item, src)
        if isinstance(self.policy, OstAware):
            if c.osts is not None and len(c.osts) == 1:
                self.by_ost.setdefault(next(iter(c.osts)), Lane()).insert(item, src)
            else:
                self.others += 1

    def remove(self, c: Claim) -> None:
        item = (self.policy.key(c), c.appid)
        self.order.remove(item)
        if isinstance(self.policy, OstAware):
            if c.osts is not None and len(c.osts) == 1:
                o = next(iter(c.osts))
                self.by_ost[o].remove(item)
                if not self.by_ost[o]:
                    del self.by_ost[o]
            else:
                self.others -= 1

    def candidates(self) -> Iterator[Item]:
        """The waiting claims' items in the policy's order, less those that cannot be admitted
        whoever holds: under ost-aware with every claim on one OST, all but each OST's first
        (each of the others shares its OST with a claim ahead)."""
        if isinstance(self.policy, OstAware) and self.chained:
            return iter(sorted(lane.first() for lane in self.by_ost.values()))
        return iter(self.order)

    @property
    def chained(self) -> bool:
        """Claims start one after another on each lane: one slot, or one OST each."""
        if isinstance(self.policy, OstAware):
            return not self.others
        return isinstance(self.policy, Slots) and self.policy.k == 1


class ShareGroups:
    """fair-share's waiting claims per group, in arrival order (a group's first sets its share, as in
    `FairShare.order` over the queue in arrival order) and by seq: the policy's order is a merge of
    the groups' lists (read as far as needed) and a claim's place g binary searches, for g groups,
    instead of sorting the queue."""

    def __init__(self, policy: FairShare):
        self.policy = policy
        self.arrived: dict[str, dict[str, Claim]] = {}
        self.by_seq: dict[str, list[tuple[int, str]]] = {}

    def add(self, c: Claim) -> None:
        g = self.policy.group(c)
        self.arrived.setdefault(g, {})[c.appid] = c
        bisect.insort(self.by_seq.setdefault(g, []), (c.seq, c.appid))

    def remove(self, c: Claim) -> None:
        g = self.policy.group(c)
        del self.arrived[g][c.appid]
        lst = self.by_seq[g]
        del lst[bisect.bisect_left(lst, (c.seq, c.appid))]
        if not lst:
            del self.arrived[g], self.by_seq[g]

    def loads(self, holding: list[Claim], usage: Usage, now: float) -> dict[str, float]:
        return self.policy.loads((next(iter(cs.values())) for cs in self.arrived.values()), holding, usage, now)

    def ordered(self, holding: list[Claim], usage: Usage, now: float) -> Iterator[str]:
        """The waiting appids in the policy's order."""
        loads = self.loads(holding, usage, now)

        def keyed(load: float, lst: list[tuple[int, str]]) -> Iterator[tuple[float, int, str]]:
            return ((load, seq, appid) for seq, appid in lst)
        return (appid for _, _, appid in heapq.merge(*(keyed(loads[g], lst) for g, lst in self.by_seq.items())))

    def position(self, c: Claim, holding: list[Claim], usage: Usage, now: float) -> int:
        """1-based place of the waiting claim `c` in the policy's order."""
        loads = self.loads(holding, usage, now)
        mine = loads[self.policy.group(c)]
        return 1 + sum(len(lst) if loads[g] < mine else bisect.bisect_left(lst, (c.seq,)) if loads[g] == mine else 0
                       for g, lst in self.by_seq.items())


class ChainSchedule(Schedule):
    """Grant times read from `Lanes` that are `chained`: a claim starts when the holds ahead of it
    on its lane have run, so its start is the lane's base (now, or when the holders it waits for
    are expected to end) plus the durations ahead of it, summed by its `Lane`. Nothing is
    rescheduled: built in O(holders), each start read in O(sqrt n), claims joining and leaving
    only update the lanes. `value` resolves learnt durations; `version` changes when they do."""

    def __init__(self, policy: Policy, lanes: Lanes, holding: list[Claim], now: float,
                 duration: Callable[[Claim], float], value: Value = fixed, version: object = None):
        super().__init__(policy, holding, now, duration)
        self.lanes, self.value, self.version = lanes, value, version
        ends = [(h.osts, max(now, h.granted + duration(h))) for h in holding]
        self.latest = max([now] + [e for _, e in ends])  # one slot: every holder has ended
        self.unknown = max([now] + [e for osts, e in ends if osts is None])
        self.held_on: dict[int, float] = {}  # ost-aware: the latest end of the holders naming an OST
        for osts, e in ends:
            for o in osts or ():
                self.held_on[o] = max(self.held_on.get(o, now), e)

    def _base(self, ost: int | None) -> float:
        return self.latest if ost is None else max(self.unknown, self.held_on.get(ost, self.now))

    def _lane(self, c: Claim) -> tuple[int | None, Lane]:
        if isinstance(self.policy, OstAware):
            o = next(iter(c.osts or ()))
            return o, self.lanes.by_ost[o]
        return None, self.lanes.order

    def _at(self, ost: int | None, lane: Lane, item: tuple) -> float:
        return self._base(ost) + lane.ahead(item, self.value, self.version) / NS

    def start(self, c: Claim) -> float | None:
        ost, lane = self._lane(c)
        return self._at(ost, lane, (self.policy.key(c), c.appid))

    @property
    def starts(self) -> dict[str, float]:
        lanes = self.lanes.by_ost.items() if isinstance(self.policy, OstAware) else [(None, self.lanes.order)]
        return {appid: self._base(o) + ahead / NS for o, lane in lanes for appid, ahead in lane.starts(self.value)}

    def add(self, c: Claim) -> bool:
        return False  # the lanes are the caller's: it adds to them

    def probe(self, c: Claim) -> tuple[int, float | None]:
        item = (self.policy.key(c), c.appid)
        position = self.lanes.order.rank(item) + 1
        if not isinstance(self.policy, OstAware):
            return position, self._at(None, self.lanes.order, item)
        # It waits for the holders and the claims ahead that share an OST with it.
        lanes = self.lanes.by_ost
        if c.osts is None:
            t = max([self.latest] + [self._at(o, lane, item) for o, lane in lanes.items()])
        else:
            t = max([self.unknown] + [self._at(o, lanes[o], item) if o in lanes else self._base(o) for o in c.osts])
        return position, t


def schedule(policy: Policy, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float,
             duration: Callable[[Claim], float]) -> Schedule:
    """The expected grant times of `waiting` (see `estimate`), kept so more can be asked."""
    if policy.static:
        lanes = Lanes(policy, lambda c: ns(duration(c)))
        for c in waiting:
            lanes.add(c)
        if lanes.chained:
            return ChainSchedule(policy, lanes, holding, now, duration)
    if isinstance(policy, Slots) and policy.static:
        sched: Schedule = SlotSchedule(policy, holding, now, duration)
    elif isinstance(policy, OstAware):
        sched = OstSchedule(policy, holding, now, duration)
    else:
        sched = Schedule(policy, holding, now, duration)
        sched.waiting, sched.usage = list(waiting), usage.copy()
        sched._starts = run_forward(policy, waiting, holding, usage, now, duration)
        return sched
    for c in policy.order(waiting, holding, usage, now):
        sched.add(c)
    return sched
