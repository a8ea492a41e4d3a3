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
import math
import operator
from dataclasses import dataclass, field, replace
from itertools import chain, compress, count, repeat
from typing import Callable, Iterable, Iterator, cast

from iez.access.lane import NS, Item, Lane, Source, Value, fixed, ns
from iez.errors import ConfigError

POLICIES = ("exclusive", "k-concurrent", "fair-share", "priority", "ost-aware")
LN2 = math.log(2.0)
# fair-share loads compared in logs scaled to one time (`FairShareRun._near`): rounding moves
# them by a few ulps of their size, which grows with the run's length over the half-life
# (~1e-9 at 4e6, 70 days at a half-life of 1 s), so groups this far from the least, relative
# to its size, cannot have the least load.
MARGIN = 1e-9
UNDERFLOW = -600.0  # a load under e^-600 may round to a subnormal: compare every group
PROBED = 4096  # fair-share probe answers a schedule keeps (`FairShareSchedule.probe`)
MARK = 256  # claims a fair-share run grants between the states it keeps for a claim that leaves (`FairShareRun.remove`)


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

    def values_at(self, group: str, times: Iterable[float]) -> Iterator[float]:
        """`value(group, t)` for each t, by the same operations in the same order, in C-level
        iterators (no Python call per time)."""
        v, t = self.values.get(group, (0.0, 0.0))  # no usage: 0.0 whenever
        since = map(max, repeat(0.0), map(operator.sub, times, repeat(t)))
        return map(operator.mul, repeat(v), map(pow, repeat(0.5), map(operator.truediv, since, repeat(self.half_life))))

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
        self._share: dict[tuple[str, str], float] = {}  # (user, project) -> share: rules are globs

    def group(self, c: Claim) -> str:
        return f"{self.by}:{c.user if self.by == 'user' else c.project}"

    def share(self, c: Claim) -> float:
        key = (c.user, c.project)
        if key not in self._share:
            self._share[key] = max(1e-9, rule_value(self.shares, "", c.user, c.project, 1.0))
        return self._share[key]

    def order(self, waiting, holding, usage, now):
        load = self.loads(waiting, holding, usage, now)
        return sorted(waiting, key=lambda c: (load[self.group(c)], c.seq))

    def loads(self, claims: Iterable[Claim], holding: list[Claim], usage: Usage, now: float) -> dict[str, float]:
        """Per group of `claims`: its usage so far, including the holds still running, per unit of
        share (the share of its first claim in `claims`)."""
        running = self.running(((h, h.granted) for h in holding), now)
        load = {}
        for c in claims:
            g = self.group(c)
            if g not in load:
                load[g] = self.load(g, c, running, usage, now)
        return load

    def running(self, holds: Iterable[tuple[Claim, float]], now: float) -> dict[str, float]:
        """Per group: the seconds its holds (claim, grant time) have run by now, summed in their order."""
        running: dict[str, float] = {}
        for h, granted in holds:
            g = self.group(h)
            running[g] = running.get(g, 0.0) + max(0.0, now - granted)
        return running

    def load(self, group: str, first: Claim, running: dict[str, float], usage: Usage, now: float) -> float:
        """A group's usage with its running holds, per unit of the share of `first` (its first claim)."""
        return (usage.value(group, now) + running.get(group, 0.0)) / self.share(first)

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


class Schedule:
    """Expected grant times of the waiting claims, kept so more can be asked: every claim's
    (`starts`), one claim's (`start`), and where a claim not queued would stand (`probe`)."""

    def __init__(self, policy: Policy, holding: list[Claim], now: float, duration: Callable[[Claim], float]):
        self.policy, self.holding, self.now, self.duration = policy, holding, now, duration

    @property
    def starts(self) -> dict[str, float]:
        """appid -> expected grant time, of every waiting claim that would be granted."""
        raise NotImplementedError

    def start(self, c: Claim) -> float | None:
        """The expected grant time of the waiting claim `c` (None: never)."""
        return self.starts.get(c.appid)

    def add(self, c: Claim) -> bool:
        """Schedule a claim that joined the queue behind every scheduled one; False if it does not
        go last, or this schedule cannot be extended: the caller builds a new one."""
        return False

    def remove(self, c: Claim) -> bool:
        """Unschedule a waiting claim that left the queue; False if this schedule cannot: the
        caller builds a new one."""
        return False

    def probe(self, c: Claim) -> float | None:
        """The expected grant time of `c` were it queued now (None: never)."""
        raise NotImplementedError

    def lasts(self, now: float) -> bool:
        """True if this schedule is what one built at `now` (later than its own time) from the same
        queue would be."""
        return False


def busy_until(policy: Slots, holding: list[Claim], duration: Callable[[Claim], float]) -> float:
    """Until when a run forward of k slots from any time before it is the same run: it starts
    with every slot taken (nothing is decided at its start) and no hold past its expected end
    (none is taken to end at the start); -inf if a slot is free."""
    if len(holding) < policy.k:
        return -float("inf")
    return min(h.granted + duration(h) for h in holding)


class OstSchedule(Schedule):
    """ost-aware: a claim starts once every claim it shares an OST with and that holds or is
    ahead of it has ended, so its start is the latest end among those, kept per OST. Built claim
    by claim in the policy's order, so a claim that joins at the back is placed in O(|OSTs|)
    (`add`), and a claim not queued without rescheduling the others (`probe`)."""

    def __init__(self, policy: Policy, ordered: Iterable[Claim], holding: list[Claim], now: float,
                 duration: Callable[[Claim], float]):
        super().__init__(policy, holding, now, duration)
        self._starts: dict[str, float] = {}
        self.keys: list[tuple[int, ...]] = []  # of the scheduled claims, in order
        self.times: list[float] = []  # their starts, in the same order
        self.by_ost: dict[int, float] = {}  # latest end of the claims naming the OST
        self.unknown = now  # latest end of the claims with no OST set (they conflict with all)
        self.latest = now  # latest end of all
        for h in holding:
            self._mark(h, max(now, h.granted + duration(h)))
        for c in ordered:
            self.add(c)

    @property
    def starts(self) -> dict[str, float]:
        return self._starts

    def add(self, c: Claim) -> bool:
        key = self.policy.key(c)
        if self.keys and key < self.keys[-1]:
            return False
        t = self._place(c, True)
        self._starts[c.appid] = t
        self.keys.append(key)
        self.times.append(t)
        return True

    def probe(self, c: Claim) -> float | None:
        i = bisect.bisect_left(self.keys, self.policy.key(c))
        # The claims ahead are scheduled as if c were not there; c takes the place of the claim
        # now at i, whose start depended only on those ahead.
        return self.times[i] if i < len(self.times) else self._place(c, False)

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


def one_ost(c: Claim) -> int | None:
    """The OST of a claim naming exactly one (None: it names none, several or every OST)."""
    return next(iter(c.osts)) if c.osts is not None and len(c.osts) == 1 else None


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
            o = one_ost(c)
            if o is not None:
                self.by_ost.setdefault(o, Lane()).insert(item, src)
            else:
                self.others += 1

    def remove(self, c: Claim) -> None:
        item = (self.policy.key(c), c.appid)
        self.order.remove(item)
        if isinstance(self.policy, OstAware):
            o = one_ost(c)
            if o is not None:
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
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def copy(self) -> "ShareGroups":
        new = ShareGroups(self.policy)
        new.arrived = {g: dict(cs) for g, cs in self.arrived.items()}
        new.by_seq = {g: list(lst) for g, lst in self.by_seq.items()}
        new.n = self.n
        return new

    def add(self, c: Claim) -> None:
        g = self.policy.group(c)
        self.arrived.setdefault(g, {})[c.appid] = c
        bisect.insort(self.by_seq.setdefault(g, []), (c.seq, c.appid))
        self.n += 1

    def remove(self, c: Claim) -> None:
        g = self.policy.group(c)
        del self.arrived[g][c.appid]
        lst = self.by_seq[g]
        del lst[bisect.bisect_left(lst, (c.seq, c.appid))]
        if not lst:
            del self.arrived[g], self.by_seq[g]
        self.n -= 1

    def loads(self, holding: list[Claim], usage: Usage, now: float, *more: Claim) -> dict[str, float]:
        """Per group (and those of `more`, claims not queued): its load."""
        firsts = (next(iter(cs.values())) for cs in self.arrived.values())
        return self.policy.loads(chain(firsts, more), holding, usage, now)

    def ordered(self, holding: list[Claim], usage: Usage, now: float) -> Iterator[Claim]:
        """The waiting claims in the policy's order."""
        loads = self.loads(holding, usage, now)

        def keyed(g: str) -> Iterator[tuple[float, int, Claim]]:
            load, claims = loads[g], self.arrived[g]
            return ((load, seq, claims[appid]) for seq, appid in self.by_seq[g])
        return (c for _, _, c in heapq.merge(*map(keyed, self.by_seq)))  # seqs are unique: claims never compared

    def position(self, c: Claim, holding: list[Claim], usage: Usage, now: float) -> int:
        """1-based place of `c` in the policy's order, waiting or were it queued now."""
        loads = self.loads(holding, usage, now, c)
        mine = loads[self.policy.group(c)]
        return 1 + sum(len(lst) if loads[g] < mine else bisect.bisect_left(lst, (c.seq,)) if loads[g] == mine else 0
                       for g, lst in self.by_seq.items())


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



class _RunState:
    """Where a fair-share run stands before an admission: the time, the holds running (claim, grant
    time) in grant order and their expected ends, usage, how many claims are granted, and per group
    how many of its claims (by seq) are granted and where its first claim left in arrival order is."""

    __slots__ = ("t", "held", "ends", "usage", "heads", "firsts", "count")

    def __init__(self, t: float, held: list, ends: list, usage: Usage, heads: dict[str, int],
                 firsts: dict[str, int], count: int):
        self.t, self.held, self.ends, self.usage = t, held, ends, usage
        self.heads, self.firsts, self.count = heads, firsts, count

    def copy(self) -> "_RunState":
        return _RunState(self.t, list(self.held), list(self.ends), self.usage.copy(), dict(self.heads),
                         dict(self.firsts), self.count)


class FairShareRun:
    """`simulate` under fair-share: the same grants and times from the same arithmetic. At each
    expected end the free slots go to the first claims in the groups' order, the loads computed once
    per group, and what is granted is a count per group (a group's claims go in seq order): a step
    is O(g + k) for g groups, not a sort of the queue.

    For each group it keeps the state just before the admission that granted the group's last claim:
    a claim joining the back of a group changes nothing before that point, so it is placed (`place`)
    by running on from there, not from the start. A claim starting a group, or one that leaves,
    changes the order from the first admission on: the caller runs again."""

    def __init__(self, policy: FairShare, groups: ShareGroups, holding: list[Claim], usage: Usage, now: float,
                 duration: Callable[[Claim], float]):
        self.policy, self.duration, self.start, self.half_life = policy, duration, now, usage.half_life
        self.usage = usage  # as at the start (not changed by the run)
        self.holders = {policy.group(h) for h in holding}
        # Loads are compared scaled to one time (`_near`) unless some usage is dated after now
        # (a clock stepped back: it does not decay until then).
        self.fast = all(as_of <= now for _, as_of in usage.values.values())
        self.queues = {g: [groups.arrived[g][appid] for _, appid in lst] for g, lst in groups.by_seq.items()}
        self.arrivals = {g: list(cs.values()) for g, cs in groups.arrived.items()}
        self.n = len(groups)
        held = [(h, h.granted) for h in holding]
        ends = [(max(now, h.granted + duration(h)), h.seq, hold) for h, hold in zip(holding, held)]
        heapq.heapify(ends)
        state = _RunState(now, held, ends, usage.copy(), dict.fromkeys(self.queues, 0),
                          dict.fromkeys(self.queues, 0), 0)
        self.granted: list[tuple[Claim, float]] = []  # in grant order, with the grant time
        self.dry: dict[str, _RunState] = {}  # group -> the state before the admission of its last claim
        self.marks: list[_RunState] = []  # states before an admission, one every MARK grants or more
        self.least: list[float] = []  # k = 1: the load of the group granted, per grant
        self._run(state, self.queues, self.arrivals, self.n, self.granted, self.dry, self.marks, self.least)
        self.starts = {c.appid: t for c, t in self.granted}  # appid -> grant time

    def remove(self, c: Claim) -> bool:
        """Take the waiting claim `c` out of this run: run on from the last kept state (`marks`) that
        `c` played no part in before (it was not among its group's first k claims left, which the
        admissions look at, nor the first in arrival order, whose share the group has), as a run
        without it would; False if there is none."""
        g = self.policy.group(c)
        queue, order = self.queues.get(g), self.arrivals.get(g)
        if not queue or not order or c not in queue:
            return False
        i, a, k = queue.index(c), order.index(c), self.policy.k
        mark = next((m for m in reversed(self.marks) if m.heads[g] + k <= i and m.firsts[g] < a), None)
        if mark is None:
            return False
        for h, _ in self.granted[mark.count:]:
            del self.starts[h.appid]
        del self.granted[mark.count:], self.least[mark.count:], queue[i], order[a]
        self.dry = {h: s for h, s in self.dry.items() if s.count < mark.count}
        self.marks = [m for m in self.marks if m.count < mark.count]
        self.n -= 1
        self._run(mark.copy(), self.queues, self.arrivals, self.n, self.granted, self.dry, self.marks, self.least)
        self.starts.update((h.appid, t) for h, t in self.granted[mark.count:])
        return True

    def place(self, c: Claim, commit: bool) -> tuple[bool, float | None]:
        """(placed, grant time) of `c` were it queued, kept in this run if `commit` (it has joined
        the queue); (False, None) when it would not join the back of a group that has claims."""
        g = self.policy.group(c)
        queue = self.queues.get(g)
        if not queue or c.seq <= queue[-1].seq or g not in self.dry:
            return False, None
        state = self.dry[g]
        queues, arrivals, n = self.queues, self.arrivals, self.n + 1
        granted, dry, marks, least = self.granted, self.dry, self.marks, self.least
        if commit:
            for a, _ in granted[state.count:]:
                del self.starts[a.appid]
            del granted[state.count:], least[state.count:]
            self.dry = dry = {h: s for h, s in dry.items() if s.count < state.count}
            self.marks = marks = [m for m in marks if m.count < state.count]
            self.n = n
            queue.append(c)
            arrivals[g].append(c)
        else:
            queues, arrivals = {**queues, g: queue + [c]}, {**arrivals, g: arrivals[g] + [c]}
            granted, dry, marks, least = [], {}, [], []  # only the grants from there on
        self._run(state.copy(), queues, arrivals, n, granted, dry, marks, least)
        if commit:
            self.starts.update((a.appid, t) for a, t in granted[state.count:])
        return True, next((t for a, t in reversed(granted) if a is c), None)

    def first(self, c: Claim) -> tuple[bool, float | None]:
        """k = 1: (placed, grant time) of `c` were it queued, when it would start a group with no claim
        and no hold in this run: that group's usage then stays as it is until `c` is granted, so `c`
        goes at the first grant of this run where its load is below the load of the group granted
        (on a tie the claim ahead wins), else when the last hold ends; nothing before changes. Its
        loads at every grant time are computed in C-level iterators, compared there too.
        (False, None) in any other case."""
        g = self.policy.group(c)
        if self.policy.k != 1 or g in self.queues or g in self.holders or len(self.granted) != self.n or not self.n:
            return False, None
        at = map(operator.itemgetter(1), self.granted)
        # FairShare.load with nothing running: (usage + 0.0) / share
        mine = map(operator.truediv, map(operator.add, self.usage.values_at(g, at), repeat(0.0)),
                   repeat(self.policy.share(c)))
        i = next(compress(count(), map(operator.lt, mine, self.least)), None)
        if i is not None:
            return True, self.granted[i][1]
        last, t = self.granted[-1]
        return True, t + self.duration(last)

    def _run(self, s: _RunState, queues: dict[str, list[Claim]], arrivals: dict[str, list[Claim]], n: int,
             granted: list[tuple[Claim, float]], dry: dict[str, _RunState], marks: list[_RunState],
             least: list[float]) -> None:
        """Run on from `s` (changed in place) until n claims are granted or nothing holds, as
        `_forward` does with `decide` admitting (`simulate`)."""
        policy, duration, k = self.policy, self.duration, self.policy.k
        heads, firsts, held, ends, usage = s.heads, s.firsts, s.held, s.ends, s.usage
        left = [g for g in queues if heads.get(g, 0) < len(queues[g])]
        scaled = {g: self._scaled(g, arrivals[g][firsts[g]], usage) for g in left} if self.fast else {}
        while s.count < n:
            t = s.t
            free = k - len(held)
            if free > 0 and left:
                if not marks or s.count >= marks[-1].count + MARK:
                    marks.append(s.copy())
                running = policy.running(held, t)
                near = self._near(scaled, running, t) if free == 1 and self.fast else left
                keyed = [(policy.load(g, arrivals[g][firsts[g]], running, usage, t), queues[g][heads[g]].seq, g)
                         for g in near]
                if free == 1:
                    best = min(keyed)
                    picks = [best[2]]
                    if k == 1:
                        least.append(best[0])
                else:  # the groups' claims by (load, seq): only a group's first `free` can be among the first
                    picks = [g for _, _, g in sorted((load, c.seq, g) for load, _, g in keyed
                                                     for c in queues[g][heads[g]:heads[g] + free])[:free]]
                emptied = {g for g in picks if heads[g] + picks.count(g) == len(queues[g])}
                if emptied:
                    before = s.copy()
                    for g in emptied:
                        dry[g] = before
                    left = [g for g in left if g not in emptied]
                for g in picks:
                    c = queues[g][heads[g]]
                    heads[g] += 1
                    granted.append((c, t))
                    hold = (c, t)
                    held.append(hold)
                    heapq.heappush(ends, (t + duration(c), c.seq, hold))
                    s.count += 1
                    if heads[g] < len(queues[g]):  # the first claim left in arrival order: not granted
                        head, order, f = queues[g][heads[g]].seq, arrivals[g], firsts[g]
                        if order[f].seq < head:
                            while order[f].seq < head:
                                f += 1
                            firsts[g] = f
                            if self.fast:  # its share may have changed
                                scaled[g] = self._scaled(g, order[f], usage)
                for g in emptied:
                    scaled.pop(g, None)
            if s.count == n or not ends:
                break
            t = s.t = ends[0][0]
            while ends and ends[0][0] <= t:
                _, _, hold = heapq.heappop(ends)
                held.remove(hold)
                usage.charge(hold[0], t - hold[1], t)
                g = policy.group(hold[0])
                if g in scaled:
                    scaled[g] = self._scaled(g, arrivals[g][firsts[g]], usage)

    def _scaled(self, g: str, first: Claim, usage: Usage) -> float:
        """log(g's load at t) + (t - start) ln 2 / half-life while no hold of g runs: usage decays
        alike in every group, so between its charges this is the same at every t, and the group
        with the least load at any t is the one with the least of these (-inf: no usage)."""
        v, as_of = usage.values.get(g, (0.0, self.start))
        if v <= 0.0:
            return -math.inf
        return math.log(v / self.policy.share(first)) + (as_of - self.start) * LN2 / usage.half_life

    def _near(self, scaled: dict[str, float], running: dict[str, float], t: float) -> list[str]:
        """The groups that may have the least load at t: those whose `_scaled` is within a rounding
        margin of the least, and those with holds running (their loads are not scaled alike). The
        loads of these are then computed as `FairShare.loads` does, so the choice is the same
        to the last bit; a near tie or loads small enough to underflow fall back to every group."""
        idle = {g: x for g, x in scaled.items() if g not in running} if running else scaled
        busy = [g for g in running if g in scaled]
        if not idle:
            return busy
        least = min(idle.values())
        finite = least if least > -math.inf else min((x for x in idle.values() if x > least), default=math.inf)
        if finite - (t - self.start) * LN2 / self.half_life < UNDERFLOW:
            return list(scaled)
        bound = least + MARGIN * max(1.0, abs(least)) if least > -math.inf else least
        return [g for g, x in idle.items() if x <= bound] + busy


class FairShareSchedule(Schedule):
    """fair-share: the order moves with usage and time (a hold that ends is charged to its group and
    sends it back), so the queue is run forward (`FairShareRun`) from its `ShareGroups` (the
    caller's: the schedule is discarded when they change other than by `add` and `remove`). Claims
    that leave are taken out of the run when an estimate is next asked, not as they leave."""

    def __init__(self, policy: FairShare, groups: ShareGroups, holding: list[Claim], usage: Usage, now: float,
                 duration: Callable[[Claim], float]):
        super().__init__(policy, holding, now, duration)
        self.fair, self.groups, self.usage = policy, groups, usage.copy()
        self.run = FairShareRun(policy, groups, holding, self.usage, now, duration)
        self.until = busy_until(policy, holding, duration)
        # A probe that starts a group runs the whole queue (0.13 s at 10,000 queued): its answer
        # depends only on the claim's user, project and seq, so it is run once per distinct
        # (user, project, seq) the schedule lives for, and repeated ESTIMATEs, whatever else they
        # vary, cannot keep the server busy. The oldest is dropped past PROBED: a schedule can be
        # kept for hours (`lasts`).
        self._probed: dict[tuple[str, str, int], float | None] = {}
        self._left: list[Claim] = []  # claims that left, not yet taken out of the run

    def _settled(self) -> FairShareRun:
        """The run without the claims that left: each taken out (`FairShareRun.remove`), or the run
        built again from the groups (which no longer hold them) where one cannot be."""
        for c in self._left:
            if not self.run.remove(c):
                self.run = FairShareRun(self.fair, self.groups, self.holding, self.usage, self.now, self.duration)
                break
        self._left.clear()
        return self.run

    @property
    def starts(self) -> dict[str, float]:
        return self._settled().starts

    def add(self, c: Claim) -> bool:
        self._probed.clear()
        return self._settled().place(c, True)[0]

    def remove(self, c: Claim) -> bool:
        self._probed.clear()
        self._left.append(c)
        return True

    def lasts(self, now: float) -> bool:
        return now <= self.until

    def probe(self, c: Claim) -> float | None:
        memo = (c.user, c.project, c.seq)  # what the group, the share and the place depend on
        if memo not in self._probed:
            run = self._settled()
            placed, start = run.place(c, False)
            if not placed:
                placed, start = run.first(c)
            if not placed:
                queue = self.groups.copy()
                queue.add(c)
                start = FairShareRun(self.fair, queue, self.holding, self.usage, self.now, self.duration).starts.get(c.appid)
            if len(self._probed) >= PROBED:
                del self._probed[next(iter(self._probed))]
            self._probed[memo] = start
        return self._probed[memo]


class SlotSchedule(Schedule):
    """k slots, claims granted in the policy's order (a `Lane`): each starts when the first of the
    k slots frees and holds it for its duration (list scheduling on k machines: what `decide`
    under `Slots` does run forward). A claim that leaves changes every later start, and not by
    one shift: from then on the slots' free times differ by its hold, spread over the slots as the
    later holds fall, so the sums that make `ChainSchedule` incremental do not exist here. The
    queue is scheduled whole instead, in one pass of C-level iterators (no Python call per claim),
    in integer nanoseconds as the lane sums them; a claim joining at the back extends it (`add`)."""

    def __init__(self, policy: Slots, lane: Lane, holding: list[Claim], now: float,
                 duration: Callable[[Claim], float], value: Value = fixed):
        super().__init__(policy, holding, now, duration)
        self.lane = lane
        ends = sorted(ns(max(now, h.granted + duration(h))) for h in holding)[-policy.k:]
        free = [ns(now)] * (policy.k - len(ends)) + ends  # the slots' free times: sorted, so a heap
        # Each step pops the first free time (the claim's start) and pushes it plus the claim's hold.
        replace_first = heapq.heapreplace
        self.times = [replace_first(free, free[0] + d) for d in lane.durations(value)]
        self.free = free
        self.until = busy_until(policy, holding, duration)

    @property
    def starts(self) -> dict[str, float]:
        return dict(zip(self.lane.appids(), map(operator.truediv, self.times, repeat(NS))))

    def start(self, c: Claim) -> float | None:
        return self.times[self.lane.rank((self.policy.key(c), c.appid))] / NS

    def add(self, c: Claim) -> bool:
        """`c` has joined the lane: scheduled if it went last."""
        if self.lane.rank((self.policy.key(c), c.appid)) != len(self.times):
            return False
        self.times.append(heapq.heapreplace(self.free, self.free[0] + ns(self.duration(c))))
        return True

    def probe(self, c: Claim) -> float | None:
        # c takes the place of the claim now at i, whose start depended only on those ahead.
        i = self.lane.rank((self.policy.key(c), c.appid))
        return (self.times[i] if i < len(self.times) else self.free[0]) / NS

    def lasts(self, now: float) -> bool:
        return now <= self.until


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

    def probe(self, c: Claim) -> float | None:
        item = (self.policy.key(c), c.appid)
        if not isinstance(self.policy, OstAware):
            return self._at(None, self.lanes.order, item)
        # It waits for the holders and the claims ahead that share an OST with it.
        lanes = self.lanes.by_ost
        if c.osts is None:
            return max([self.latest] + [self._at(o, lane, item) for o, lane in lanes.items()])
        return max([self.unknown] + [self._at(o, lanes[o], item) if o in lanes else self._base(o) for o in c.osts])


def schedule(policy: Policy, waiting: list[Claim], holding: list[Claim], usage: Usage, now: float,
             duration: Callable[[Claim], float]) -> Schedule:
    """The expected grant times of `waiting` (see `estimate`), kept so more can be asked."""
    if isinstance(policy, FairShare):
        groups = ShareGroups(policy)
        for c in waiting:
            groups.add(c)
        return FairShareSchedule(policy, groups, holding, usage, now, duration)
    if isinstance(policy, OstAware) and any(one_ost(c) is None for c in waiting):
        return OstSchedule(policy, policy.order(waiting, holding, usage, now), holding, now, duration)
    lanes = Lanes(policy, lambda c: ns(duration(c)))
    for c in waiting:
        lanes.add(c)
    if lanes.chained:
        return ChainSchedule(policy, lanes, holding, now, duration)
    return SlotSchedule(cast(Slots, policy), lanes.order, holding, now, duration)
