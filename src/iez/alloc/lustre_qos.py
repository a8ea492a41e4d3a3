"""LOD QoS: weighted random OST choice by free space, with per-OST and per-OSS penalties
(docs/references.md#l-alloc-qos: `lod_ost_alloc_qos`, `ltd_qos_penalties_calc`, `ltd_qos_update`;
sections of docs/lustre/allocator.md in parentheses below).

Pure: free space comes in as plain numbers, time as a parameter, randomness from the caller's
generator. Integer arithmetic mirrors the C (u64 shifts and divisions) so weights and penalties
are the MDS's own.

Formulas by version (§6, docs/references.md#l-alloc-versions): 2.5-2.12 weigh raw free bytes; 2.16+ weigh `bavail >> 8`. 2.13-2.15
weighed `(bavail >> 16) * (ffree >> 8)`, which needs free inodes that a Snapshot does not carry,
so those versions use the 2.16 weights here (their only other difference, LU-13440's server
penalty scaled by the OST count in 2.13/2.14, is modelled).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from iez.alloc.lustre_rr import Server

QOS_THRESHOLD_MAX = 256  # lu_object.h
U64_MAX = (1 << 64) - 1


def percent_to_256(percent: int) -> int:
    """A qos_prio_free / qos_threshold_rr percentage as LOD stores it (lproc_lod.c)."""
    return (percent << 8) // 100


@dataclass
class TgtQos:
    """`struct lu_tgt_qos` of one OST."""

    penalty: int = 0
    ppo: int = 0  # penalty per object
    used: int = 0  # when last picked (s)
    usable: bool = False
    weight: int = 0


@dataclass
class SvrQos:
    """`struct lu_svr_qos` of one OSS."""

    penalty: int = 0
    ppo: int = 0
    used: int = 0
    bavail: int = 0


class Qos:
    """The QoS state of one OST table (`struct lu_qos` plus its targets' and servers' fields).

    `bavail` arguments map every ACTIVE OST of the file system to its free bytes, in index
    order; `members` is the pool (or all OSTs) in pool order.
    """

    def __init__(self, servers: Sequence[Server], server_of: Mapping[int, str], *,
                 version: tuple[int, int], prio_free: int, threshold_rr: int, maxage: int):
        self.version = version
        self.server_of = dict(server_of)
        self.tgt_count = {s.name: s.tgt_count for s in servers}
        self.prio_free = prio_free  # 0..256
        self.threshold_rr = threshold_rr  # 0..256
        self.maxage = maxage
        self.tgt = {i: TgtQos() for i in self.server_of}
        self.svr = {s.name: SvrQos() for s in servers}
        self.dirty = True  # LQ_DIRTY: set by every OST add, so true from the start
        self.same_space = False  # LQ_SAME_SPACE
        self.reset = False  # LQ_RESET
        self.active_svr_count = 0
        self.pool_same_space: dict[str, tuple[bool, float]] = {}  # 2.16: verdict, expiry

    # -- formulas -------------------------------------------------------------------------
    def _avail(self, bavail: int) -> int:
        return bavail if self.version < (2, 13) else bavail >> 8

    def _same(self, ba_min: int, ba_max: int) -> bool:
        return (ba_max * (QOS_THRESHOLD_MAX - self.threshold_rr)) // QOS_THRESHOLD_MAX < ba_min

    def _decay(self, q: TgtQos | SvrQos, now: int) -> None:
        # Halve the penalty per maxage*8 s idle; forget it after 32*maxage*8 s or on LQ_RESET.
        age = (now - q.used) >> 3
        if self.reset or age > 32 * self.maxage:
            q.penalty = 0
        elif age > self.maxage:
            q.penalty >>= age // self.maxage

    def _weight(self, ost: int, bavail: int) -> None:
        t = self.tgt[ost]
        penalty = t.penalty + self.svr[self.server_of[ost]].penalty
        avail = self._avail(bavail)
        t.weight = avail - penalty if avail > penalty else 0

    def penalties_calc(self, bavail: Mapping[int, int], now: float) -> None:
        """`ltd_qos_penalties_calc` (§3b): per-object penalties and the SAME_SPACE verdict.

        Runs only when LQ_DIRTY; needs at least two active OSTs (the caller checks).
        """
        if not self.dirty:
            return
        now_s = int(now)
        num_active = len(bavail) - 1
        prio_wide = QOS_THRESHOLD_MAX - self.prio_free
        old = self.version < (2, 13)
        for s in self.svr.values():
            s.bavail = 0
        active_svr = 0
        ba_min, ba_max = U64_MAX, 0
        for ost, b in bavail.items():
            ba = self._avail(b)
            if ba == 0:
                continue  # an empty OST keeps its stale ppo, as in Lustre
            ba_min, ba_max = min(ba_min, ba), max(ba_max, ba)
            s = self.svr[self.server_of[ost]]
            if s.bavail == 0:
                active_svr += 1
            s.bavail += ba
            t = self.tgt[ost]
            if old:
                t.ppo = (((ba >> 1) // num_active) * prio_wide) >> 8
            else:
                t.ppo = ((prio_wide * ba) >> 9) // num_active
            self._decay(t, now_s)
        self.active_svr_count = active_svr
        nsv = active_svr - 1
        if nsv < 1:
            nsv = 1  # one OSS cannot be penalised against others: double the OST penalty
            for ost in bavail:
                self.tgt[ost].ppo <<= 1
        for name, s in self.svr.items():
            div = self.tgt_count[name] * nsv
            if old:
                s.ppo = (((s.bavail >> 1) // div) * prio_wide) >> 8
            else:
                s.ppo = (((prio_wide * s.bavail) >> 8) // div) >> 1
            self._decay(s, now_s)
        self.same_space = self.reset = self._same(ba_min, ba_max)
        self.dirty = False

    def pool_same(self, pool: str, members: Sequence[int], bavail: Mapping[int, int], now: float) -> bool:
        """2.16's pool SAME_SPACE test (`lod_pool_qos_penalties_calc`), kept for qos_maxage s."""
        cached = self.pool_same_space.get(pool)
        if cached is not None and now < cached[1]:
            return cached[0]
        ba = [a for a in (self._avail(bavail[m]) for m in members if m in bavail) if a > 0]
        same = self._same(min(ba, default=U64_MAX), max(ba, default=0))
        self.pool_same_space[pool] = (same, now + self.maxage)
        return same

    def update(self, ost: int, members: Sequence[int], bavail: Mapping[int, int], now: float) -> int:
        """`ltd_qos_update` (§3d) after OST `ost` got a stripe; returns the new total weight."""
        t = self.tgt[ost]
        s = self.svr[self.server_of[ost]]
        t.usable = False  # never twice in one allocation
        t.penalty >>= 1
        s.penalty >>= 1
        t.used = s.used = int(now)
        n_active = len(bavail)
        t.penalty += t.ppo * (len(self.tgt) if self.version < (2, 13) else n_active)
        lu13440 = (2, 13) <= self.version < (2, 15)
        s.penalty += s.ppo * (n_active if lu13440 else self.active_svr_count)
        for x in self.svr.values():
            x.penalty = max(0, x.penalty - x.ppo)
        # 2.13+ recomputes every active OST of the file system, so a stale `usable` flag of an
        # OST outside the pool still counts in the total (a Lustre quirk kept on purpose).
        scope = members if self.version < (2, 13) else list(bavail)
        total = 0
        for u in scope:
            q = self.tgt[u]
            q.penalty = max(0, q.penalty - q.ppo)
            self._weight(u, bavail.get(u, 0))
            if q.usable:
                total += q.weight
        return total

    # -- allocation -----------------------------------------------------------------------
    def alloc(self, members: Sequence[int], bavail: Mapping[int, int], ok: set[int], stripe_count: int,
              count_min: int, rng: random.Random, now: float, *, pool: str = "",
              stripes_per_ost: int = 1) -> list[int] | None:
        """`lod_ost_alloc_qos` (§3a, §3d). `ok`: OSTs whose statfs check passes and that are not
        degraded. Returns the OSTs in stripe order, or None for -EAGAIN (use round-robin)."""
        if self.version >= (2, 16) and self.threshold_rr >= QOS_THRESHOLD_MAX:
            return None  # qos_threshold_rr=100%: QoS off (LU-15393)
        pool_local = bool(pool) and self.version >= (2, 16)
        if len(bavail) < 2 or (not pool_local and not self.dirty and self.same_space):
            return None  # !ltd_qos_is_usable()
        self.penalties_calc(bavail, now)
        same = self.pool_same(pool, members, bavail, now) if pool_local else self.same_space
        if same:
            return None
        total = good = 0
        for ost in members:
            t = self.tgt[ost]
            t.usable = ost in ok
            if t.usable:
                self._weight(ost, bavail[ost])
                total += t.weight
                good += 1
        if good < count_min:
            return None
        if stripe_count // stripes_per_ost > good:
            stripe_count = good * stripes_per_ost
        chosen: list[int] = []
        slow = False
        while len(chosen) < stripe_count:
            r = rng.randrange(total) if total > 0 else 0  # lu_prandom_u64_max(total)
            cur = 0
            for ost in members:
                t = self.tgt[ost]
                if not t.usable:
                    continue
                cur += t.weight
                if cur < r:
                    continue  # the first OST whose cumulative weight reaches r
                chosen.append(ost)
                total = self.update(ost, members, bavail, now)
                break
            else:
                if slow:
                    break
                slow = True  # Lustre retries once allowing blocking precreation
        if len(chosen) < count_min:
            self.dirty, self.same_space = True, False  # rebalance next time
            return None
        return chosen

    # -- persistence ----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "dirty": self.dirty,
            "same_space": self.same_space,
            "reset": self.reset,
            "active_svr_count": self.active_svr_count,
            "tgt": {str(i): asdict(t) for i, t in self.tgt.items()},
            "svr": {n: asdict(s) for n, s in self.svr.items()},
            "pool_same_space": {p: [v, e] for p, (v, e) in self.pool_same_space.items()},
        }

    def load_state(self, d: Mapping[str, Any]) -> None:
        """Restore `state()`; entries for OSTs or OSSs this cluster lacks are ignored.
        Raises KeyError/TypeError/ValueError on a malformed dict (the caller reports it)."""
        tgt = {int(i): _record(TgtQos, v) for i, v in d["tgt"].items()}
        svr = {str(n): _record(SvrQos, v) for n, v in d["svr"].items()}
        pools = {str(p): (bool(v), float(e)) for p, (v, e) in d["pool_same_space"].items()}
        flags = [bool(d[k]) for k in ("dirty", "same_space", "reset")]
        active_svr = int(d["active_svr_count"])
        self.tgt.update((i, t) for i, t in tgt.items() if i in self.tgt)
        self.svr.update((n, s) for n, s in svr.items() if n in self.svr)
        self.pool_same_space = pools
        self.dirty, self.same_space, self.reset = flags
        self.active_svr_count = active_svr


def _record(cls: type, v: Mapping[str, Any]) -> Any:
    kw = {}
    for f in fields(cls):
        x = v[f.name]
        if isinstance(x, bool) != (f.type == "bool") or not isinstance(x, int):
            raise TypeError(f"{cls.__name__}.{f.name} must be {f.type}, got {x!r}")
        kw[f.name] = x
    return cls(**kw)
