"""The controller's global view: the latest statistics of every OST and OSS, with their age.

Statistics older than their staleness limit are marked stale and never trusted: a stale OST is
left out of the snapshot the allocator sees (so nothing is placed on it), a stale OSS load is
not used, and a stale MDS view of OST states falls back to the states of the cluster model.
The limit is `stale_after` seconds, or by default three of the reporting collector's own
intervals (a collector every 60 s is stale after 180 s; intervals are at most an hour, so a
dead OSS is fresh for at most 3 h). Ages are measured on the controller's clock, from when a
message arrived.

Whoever holds the site token can sign a message, so what a message says is bounded before it
is kept: stamped more than `max_clock_skew` seconds ahead of the controller's clock, or older
than its staleness limit, it is refused; and a collector's message must be newer than its last
one, by sequence number or by time (a restarted collector counts from 1 again, at a later time;
a replay has neither). A forged message from the future therefore locks the real collector out
for at most `max_clock_skew` seconds.

Pure: messages and times in, a `Snapshot` out; the caller holds the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

from iez.alloc.gate import HostLoad
from iez.cluster import Cluster, OSSStats, OSTStats, Snapshot, ost_name
from iez.collect.message import OstReading, StatsMessage
from iez.metrics import ost_cost

STALE_INTERVALS = 3.0
MAX_CLOCK_SKEW = 30.0  # seconds a message may be stamped ahead of the controller's clock


@dataclass
class Report:
    """The newest message of one collector."""

    msg: StatsMessage
    received: float
    messages: int = 1


@dataclass(frozen=True)
class ViewSnapshot:
    snapshot: Snapshot  # fresh statistics only: what the allocator may trust
    stale: frozenset[int]  # OSTs without fresh statistics (excluded from allocation)


@dataclass
class GlobalView:
    cluster: Cluster
    stale_after: float = 0.0  # seconds; 0 = STALE_INTERVALS x the collector's interval
    max_clock_skew: float = MAX_CLOCK_SKEW
    collectors: dict[tuple[str, str], Report] = field(default_factory=dict)  # (role, id)
    # The cluster's OSSs' OSTs and its OST indices, looked up once: 144 OSSs publishing every
    # second made rebuilding them per OST of every message a fifth of the controller's CPU.
    _owned: dict[str, frozenset[int]] = field(init=False, repr=False)
    _indices: frozenset[int] = field(init=False, repr=False)
    _named: dict[str, int] = field(init=False, repr=False)  # target name as ost_name() prints it -> index

    def __post_init__(self) -> None:
        self._owned = {s.name: frozenset(s.osts) for s in self.cluster.osses}
        self._indices = frozenset(o.index for o in self.cluster.osts)
        self._named = {ost_name(self.cluster.fsname, i): i for i in self._indices}

    def _limit(self, msg: StatsMessage) -> float:
        return self.stale_after or STALE_INTERVALS * msg.interval

    def fresh(self, report: Report | None, now: float) -> TypeGuard[Report]:
        return report is not None and now - report.received <= self._limit(report.msg)

    # -- updates ---------------------------------------------------------------------------

    def apply(self, msg: StatsMessage, received: float) -> tuple[bool, list[str]]:
        """Take one message: (whether it was kept, why it or parts of it were not used)."""
        c = self.cluster
        if msg.role == "oss" and msg.id not in self._owned:
            return False, [f"message from unknown OSS {msg.id!r} ignored (OSSs: {', '.join(s.name for s in c.osses)})"]
        if msg.role == "mds" and msg.id != c.mds.name:
            return False, [f"message from unknown MDS {msg.id!r} ignored (the MDS is {c.mds.name!r})"]
        who = f"{msg.role} {msg.id}"
        if msg.time - received > self.max_clock_skew:
            return False, [f"{who}: message stamped {msg.time - received:.0f} s ahead of this host's clock, beyond "
                           f"the {self.max_clock_skew:g} s clock skew allowed: ignored (check the clocks)"]
        limit = self._limit(msg)
        if received - msg.time > limit:
            return False, [f"{who}: message read {received - msg.time:.0f} s ago, beyond its {limit:.0f} s "
                           "staleness limit (clock skew or a replay): ignored"]
        old = self.collectors.get((msg.role, msg.id))
        if old is not None and msg.seq <= old.msg.seq and msg.time <= old.msg.time:
            return False, [f"{who}: message no newer than the last one (seq {msg.seq} <= {old.msg.seq}, "
                           "time not later): ignored"]
        issues = []
        owned = self._owned[msg.id] if msg.role == "oss" else frozenset()
        osts, states = {}, {}
        for target, r in msg.osts.items():
            index = self._named.get(target)
            if index is None:
                index = self._index(target)  # another file system, or hex digits in upper case
            if index is None:
                continue  # another file system served by the same host
            if index not in owned:
                issues.append(f"oss {msg.id} reports OST {index}, which the cluster description does not "
                              "put on it: ignored (update it after a failover)")
                continue
            osts[target] = r
        for target, s in msg.ost_states.items():
            if self._index(target) is not None:
                states[target] = s
        kept = msg if len(osts) == len(msg.osts) and len(states) == len(msg.ost_states) else \
            StatsMessage(msg.role, msg.id, msg.seq, msg.time, msg.interval, msg.hostname, osts, states, msg.load,
                         msg.errors)
        self.collectors[(msg.role, msg.id)] = Report(kept, received, (old.messages + 1) if old else 1)
        return True, issues

    def _index(self, target: str) -> int | None:
        fs, _, idx = target.rpartition("-OST")
        if fs != self.cluster.fsname:
            return None
        index = int(idx, 16)
        return index if index in self._indices else None

    # -- reading -------------------------------------------------------------------------------

    def _readings(self) -> dict[int, tuple[OstReading, Report]]:
        out = {}
        for s in self.cluster.osses:
            rep = self.collectors.get(("oss", s.name))
            if rep is None:
                continue
            for target, r in rep.msg.osts.items():
                index = self._index(target)
                if index is not None:
                    out[index] = (r, rep)
        return out

    def _states(self, now: float) -> dict[int, str]:
        rep = self.collectors.get(("mds", self.cluster.mds.name))
        if not self.fresh(rep, now):
            return {}
        indexed = ((self._index(t), s) for t, s in rep.msg.ost_states.items())
        return {i: s for i, s in indexed if i is not None}

    def snapshot(self, now: float) -> ViewSnapshot:
        """What the allocator may trust now: fresh OSTs and OSS loads only."""
        readings = self._readings()
        states = self._states(now)
        osts: dict[int, OSTStats] = {}
        for o in self.cluster.osts:
            got = readings.get(o.index)
            if got is None or not self.fresh(got[1], now):
                continue
            r, ost_rep = got
            osts[o.index] = OSTStats(o.index, r.kbytestotal, r.kbytesavail, r.kbytesfree, r.read_bps or 0.0,
                                     r.write_bps or 0.0, states.get(o.index, o.state), ost_rep.msg.time)
        osses = {}
        for s in self.cluster.osses:
            rep = self.collectors.get(("oss", s.name))
            if self.fresh(rep, now) and rep.msg.load is not None:
                osses[s.name] = OSSStats(s.name, rep.msg.load.cpu, rep.msg.load.mem, rep.msg.time)
        stale = frozenset(o.index for o in self.cluster.osts if o.index not in osts)
        return ViewSnapshot(Snapshot(now, osts, osses), stale)

    def describe(self, now: float) -> dict[str, Any]:
        """The global view as JSON (GET /cluster)."""
        c = self.cluster
        readings = self._readings()
        states = self._states(now)
        view = self.snapshot(now)
        osts = []
        for o in c.osts:
            got = readings.get(o.index)
            row: dict[str, Any] = {"index": o.index, "name": ost_name(c.fsname, o.index), "oss": o.oss,
                                   "state": states.get(o.index, o.state),
                                   "state_from": "mds" if o.index in states else "cluster description",
                                   "stale": o.index in view.stale, "age": None}
            if got is not None:
                r, rep = got
                row.update(age=round(now - rep.received, 3), kbytestotal=r.kbytestotal, kbytesavail=r.kbytesavail,
                           kbytesfree=r.kbytesfree, read_bps=r.read_bps, write_bps=r.write_bps,
                           utilization=_used_fraction(r))
            osts.append(row)
        fresh_util = {i: s.used_fraction for i, s in view.snapshot.osts.items()}
        return {
            "fsname": c.fsname, "time": now, "stale_after": self.stale_after or f"{STALE_INTERVALS:g} intervals",
            "ost_cost": ost_cost(fresh_util) if fresh_util else None,
            "osts": osts,
            "osses": [self._host("oss", s.name, now) | {"osts": list(s.osts)} for s in c.osses],
            "mds": self._host("mds", c.mds.name, now),
        }

    def _host(self, role: str, name: str, now: float) -> dict[str, Any]:
        rep = self.collectors.get((role, name))
        if rep is None:
            return {"name": name, "stale": True, "age": None, "load": None, "collector": None}
        load: HostLoad | None = rep.msg.load
        return {"name": name, "stale": not self.fresh(rep, now), "age": round(now - rep.received, 3),
                "load": None if load is None else {"cpu": load.cpu, "mem": load.mem},
                "collector": {"hostname": rep.msg.hostname, "seq": rep.msg.seq, "interval": rep.msg.interval,
                              "messages": rep.messages, "errors": list(rep.msg.errors)}}


def _used_fraction(r: OstReading) -> float:
    return OSTStats(0, r.kbytestotal, r.kbytesavail, r.kbytesfree).used_fraction
