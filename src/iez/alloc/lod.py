"""LOD, the MDS's default OST allocator, as Lustre runs it (docs/references.md, "Lustre: the LOD
allocator"; sections of its note docs/lustre/allocator.md in parentheses).

For each layout component LOD picks the path (§1, l-alloc-paths): an explicit OST list is taken
as given (§4b), a stripe offset walks the OSTs from that index (§4a, l-alloc-specific), otherwise
QoS weighted random (§3, l-alloc-qos) falling back to round-robin (§2, l-alloc-rr). It also fixes
the stripe count (§5, l-alloc-stripe-count) and sees every OST through the OSP's last statfs:
inactive, read-only and no-create OSTs take no objects, full ones (free space below the OSP low
watermark) neither, degraded ones only when nothing else is left.

Pure: the live state comes in as a Snapshot, time as `now`, randomness from a generator seeded
here. All allocator state (RR positions, QoS penalties, the generator) round-trips through
`state()` / `load_state()`, as an MDS keeps it across restarts.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from iez.alloc.lustre_qos import Qos, percent_to_256
from iez.alloc.lustre_rr import RRState, alloc_rr, calc_rr, server_order
from iez.cluster import Cluster, Snapshot
from iez.errors import AllocationError, ConfigError
from iez.layout.layout import (
    LOV_MAX_STRIPE_COUNT,
    LUSTRE_EOF,
    PATTERN_MDT,
    PATTERN_OVERSTRIPING,
    Component,
    FileLayout,
    Layout,
)

QOS_MAXAGE = 5  # LOV_DESC_QOS_MAXAGE_DEFAULT, seconds (lu_object.h)
LOV_ALL_STRIPES = 0xFFFF  # stripe_count -1
PRIO_FREE_BEFORE_2_15 = 232  # hard-coded lq_prio_free in 2.5-2.14 (shows as 91%)
OLDEST = (2, 5)


def parse_version(version: str) -> tuple[int, int]:
    """"2.16" -> (2, 16); releases before 2.5 (no LOD) are refused."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)*\s*", str(version))
    v = (int(m.group(1)), int(m.group(2))) if m else None
    if v is None or v < OLDEST:
        raise ConfigError(f"Lustre version {version!r} not modelled: give 2.5 or later, e.g. '2.14' or '2.16'")
    return v


@dataclass(frozen=True)
class Target:
    """One OST as LOD sees it through its OSP."""

    bavail: int  # free bytes for the MDS (kbytesavail * 1024)
    active: bool  # ltd_active: connected and neither read-only nor no-create
    errno: str = ""  # why the statfs check refuses new objects ("" = it accepts them)
    why: str = ""
    degraded: bool = False


def reserved_mb(kbytestotal: int) -> tuple[int, int]:
    """The OSP's ENOSPC watermarks (low, high) in MiB: ~0.1% and ~0.2% of the OST, low >= 1
    (osp_precreate.c: osp_pre_update_msfs)."""
    low = max(1, kbytestotal >> 20)
    return low, 2 * low + 1


class LodAllocator:
    """Lustre's LOD allocator over one cluster; `version` selects the release's behaviour."""

    def __init__(self, cluster: Cluster, *, seed: int = 0, version: str = "2.16",
                 qos_maxage: int = QOS_MAXAGE, max_stripecount: int = 0):
        self.cluster = cluster
        self.version = parse_version(version)
        if qos_maxage < 1:
            raise ConfigError(f"qos_maxage must be at least 1 second, got {qos_maxage}")
        self.qos_maxage = qos_maxage
        self.max_stripecount = max_stripecount
        self.rng = random.Random(seed)
        self._server_of = {o.index: o.oss for o in cluster.osts}
        self._servers = server_order([(o.index, o.oss) for o in cluster.osts])
        prio_free = percent_to_256(cluster.qos_prio_free)
        if self.version < (2, 15) and "qos_prio_free" not in cluster.raw.get("lod", {}):
            prio_free = PRIO_FREE_BEFORE_2_15
        self.qos = Qos(self._servers, self._server_of, version=self.version, prio_free=prio_free,
                       threshold_rr=percent_to_256(cluster.qos_threshold_rr), maxage=qos_maxage)
        self._rr_arrays: dict[str, list[int | None]] = {}
        self._rr: dict[str, RRState] = {}
        self._enospc: set[int] = set()  # OSP OS_STATFS_ENOSPC flags (with hysteresis)
        self._active: list[int] | None = None
        self._seen_bavail: dict[int, int] = {}  # bavail at the last statfs refresh
        self._osfs_age: float | None = None

    # -- public API -----------------------------------------------------------------------
    def allocate(self, layout: Layout, snapshot: Snapshot, now: float = 0.0) -> Layout:
        """The layout LOD would give a new file asking for `layout` (one RAID-0 layout).

        Raises AllocationError with errno ENOSPC, EINVAL, EREMOTEIO, EROFS, ENOBUFS or EFBIG.
        """
        targets = self._statfs(snapshot, now)
        return self._component(layout, targets, now, set(), None)

    def allocate_file(self, fl: FileLayout, snapshot: Snapshot, now: float = 0.0) -> FileLayout:
        """Every component of `fl`, in order; later components avoid (at first) the OSTs of
        earlier ones, as `lod_comp_is_ost_used` makes them."""
        targets = self._statfs(snapshot, now)
        if fl.plain is not None:
            return FileLayout(plain=self._component(fl.plain, targets, now, set(), None))
        used: set[int] = set()
        comps: list[Component] = []
        for c in fl.components:
            lay = self._component(c.layout, targets, now, used, (c.start, c.end))
            used.update(lay.osts)
            comps.append(replace(c, layout=lay))
        return FileLayout(components=tuple(comps))

    def state(self) -> dict[str, Any]:
        """JSON-able allocator state (RR positions, QoS penalties, generator, OSP flags)."""
        version, internal, gauss = self.rng.getstate()
        return {
            "version": "%d.%d" % self.version,
            "rng": [version, list(internal), gauss],
            "rr": {p: [s.start_idx, s.offset_idx, s.start_count] for p, s in self._rr.items()},
            "qos": self.qos.state(),
            "enospc": sorted(self._enospc),
            "active": self._active,
            "seen_bavail": {str(i): b for i, b in self._seen_bavail.items()},
            "osfs_age": self._osfs_age,
        }

    def load_state(self, d: dict) -> None:
        """Continue from `state()`. A malformed dict raises ConfigError and changes nothing."""
        try:
            if parse_version(d["version"]) != self.version:
                raise ValueError(f"it was saved by a Lustre {d['version']} allocator")
            v, internal, gauss = d["rng"]
            rng = random.Random()
            rng.setstate((int(v), tuple(int(x) for x in internal), gauss))
            rr = {str(p): RRState(*(int(x) for x in s)) for p, s in d["rr"].items()
                  if p == "" or p in self.cluster.pools}
            enospc = {int(i) for i in d["enospc"]}
            active = None if d["active"] is None else [int(i) for i in d["active"]]
            seen = {int(i): int(b) for i, b in d["seen_bavail"].items()}
            age = None if d["osfs_age"] is None else float(d["osfs_age"])
            qos = Qos(self._servers, self._server_of, version=self.version, prio_free=self.qos.prio_free,
                      threshold_rr=self.qos.threshold_rr, maxage=self.qos_maxage)
            qos.load_state(d["qos"])
        except ConfigError as e:
            raise ConfigError(f"allocator state unusable: {e}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise ConfigError(f"allocator state is malformed ({type(e).__name__}: {e})") from None
        self.rng, self._rr, self.qos = rng, rr, qos
        self._enospc, self._active, self._seen_bavail, self._osfs_age = enospc, active, seen, age

    # -- the OSTs as LOD sees them --------------------------------------------------------
    def _statfs(self, snap: Snapshot, now: float) -> dict[int, Target]:
        """Per-OST view from the snapshot; updates the OSP ENOSPC flags and LQ_DIRTY as
        `lod_statfs_and_check` and `lod_qos_statfs_update` do."""
        targets = {o.index: self._target(o.index, snap) for o in self.cluster.osts}
        active = sorted(i for i, t in targets.items() if t.active)
        if active != self._active:  # an OST turned active or inactive
            self.qos.dirty = True
            self._active = active
        # LOD rereads every OST's statfs only every 2*qos_maxage s; a change of free space
        # then makes it recompute penalties and the SAME_SPACE verdict.
        if self._osfs_age is None or self._osfs_age <= now - 2 * self.qos_maxage:
            for i, t in targets.items():
                if not t.errno:
                    if self._seen_bavail.get(i) != t.bavail:
                        self.qos.dirty = True
                    self._seen_bavail[i] = t.bavail
            self._osfs_age = now
        return targets

    def _target(self, index: int, snap: Snapshot) -> Target:
        st = snap.osts.get(index)
        if st is None:
            return Target(0, False, "EREMOTEIO", f"OST {index} is not in the statistics (unreachable)")
        bavail = max(0, st.bavail)
        if st.state == "readonly":  # lod_statfs_and_check marks it inactive too
            return Target(bavail, False, "EROFS", f"OST {index} is read-only")
        if st.state == "nocreate":
            return Target(bavail, False, "ENOBUFS", f"OST {index} takes no new objects (max_create_count=0)")
        if st.state not in ("active", "degraded"):  # inactive, or a state LOD would not trust
            return Target(bavail, False, "EREMOTEIO", f"OST {index} is {st.state}")
        low, high = reserved_mb(st.kbytestotal)
        avail_mb = max(0, st.kbytesavail) >> 10
        if avail_mb < low:
            self._enospc.add(index)
        elif avail_mb > high:
            self._enospc.discard(index)
        degraded = st.state == "degraded"
        if index in self._enospc:
            return Target(bavail, True, "ENOSPC", f"OST {index} is full ({avail_mb} MiB free, "
                          f"reserve {low} MiB until above {high} MiB)", degraded)
        return Target(bavail, True, degraded=degraded)

    # -- one component --------------------------------------------------------------------
    def _component(self, lay: Layout, targets: dict[int, Target], now: float, used: set[int],
                   extent: tuple[int, int] | None) -> Layout:
        if lay.pattern & PATTERN_MDT:
            return lay  # Data-on-MDT: no OST objects
        size = lay.stripe_size or self.cluster.default_stripe_size
        over = bool(lay.pattern & PATTERN_OVERSTRIPING)
        if lay.osts:
            osts = self._alloc_ost_list(lay, targets, over)
        else:
            members = self._members(lay.pool)
            n_active = sum(t.active for t in targets.values())
            count, uses_default = self._stripe_count(lay.stripe_count, size, extent, n_active, over)
            count_min = count - count // 4 if uses_default else count
            spo = (count - 1) // len(members) + 1 if over and members else 1
            if lay.stripe_offset == -1:
                osts = self._alloc_default(lay.pool, members, count, count_min, spo, over, targets, used, now)
            else:
                osts = self._alloc_specific(lay, members, count, spo, over, targets, used)
        pattern = lay.pattern
        if len(set(osts)) == len(osts):
            pattern &= ~PATTERN_OVERSTRIPING  # asked for, but not needed
        return Layout(stripe_size=size, stripe_count=len(osts), stripe_offset=osts[0], pool=lay.pool,
                      osts=tuple(osts), pattern=pattern)

    def _members(self, pool: str) -> list[int]:
        if pool and pool not in self.cluster.pools:
            raise AllocationError(f"EINVAL: no pool {pool!r} in {self.cluster.fsname} "
                                  f"(pools: {', '.join(sorted(self.cluster.pools)) or 'none'})", errno="EINVAL")
        return list(self.cluster.pool(pool))

    def _stripe_count(self, requested: int, size: int, extent: tuple[int, int] | None, n_active: int,
                      over: bool) -> tuple[int, bool]:
        """`lod_get_stripe_count` (§5): the count to allocate and LOD_USES_DEFAULT_STRIPE."""
        count = requested or self.cluster.default_stripe_count or 1
        if count == -1:
            count = LOV_ALL_STRIPES
        uses_default = False
        if count > n_active and not over:
            uses_default = True  # then 3/4 of the stripes will do
            count = self.max_stripecount if count == LOV_ALL_STRIPES and self.max_stripecount else n_active
        count = min(count, LOV_MAX_STRIPE_COUNT)
        if extent is not None and extent[1] != LUSTRE_EOF:
            count = min(count, -(-(extent[1] - extent[0]) // size))
        if count < 1:
            raise AllocationError("ENOSPC: no active OST to place a stripe on", errno="ENOSPC")
        return count, uses_default

    def _alloc_default(self, pool: str, members: list[int], count: int, count_min: int, spo: int, over: bool,
                       targets: dict[int, Target], used: set[int], now: float) -> list[int]:
        """QoS, or round-robin when QoS declines (§1)."""
        bavail = {i: t.bavail for i, t in sorted(targets.items()) if t.active}
        ok = {i for i in members if not targets[i].errno and not targets[i].degraded}
        osts = self.qos.alloc(members, bavail, ok, count, count_min, self.rng, now, pool=pool,
                              stripes_per_ost=spo)
        if osts is None:
            def check(ost: int, speed: int, chosen: list[int]) -> bool:
                t = targets[ost]  # lod_check_and_reserve_ost
                return not (t.errno or (speed < 2 and t.degraded) or (speed == 0 and ost in used)
                            or (ost in chosen and not over))

            osts = alloc_rr(self._rr_array(pool, members), self._rr.setdefault(pool, RRState()), count,
                            count_min, check, self.rng, stripes_per_ost=spo,
                            pre_increment=self.version >= (2, 15))
        if not osts:
            raise AllocationError(f"ENOSPC: no OST {_where(pool)} can take an object "
                                  f"({_summary(targets, members)})", errno="ENOSPC")
        return osts

    def _rr_array(self, pool: str, members: list[int]) -> list[int | None]:
        if pool not in self._rr_arrays:  # built once: LOD rebuilds it only when OSTs or pools change
            self._rr_arrays[pool] = calc_rr(members, self._server_of, self._servers)
        return self._rr_arrays[pool]

    def _alloc_specific(self, lay: Layout, members: list[int], count: int, spo: int, over: bool,
                        targets: dict[int, Target], used: set[int]) -> list[int]:
        """`lod_ost_alloc_specific` (§4a): from OST `stripe_offset` on, in pool/add order."""
        k = lay.stripe_offset
        if k not in members:
            raise AllocationError(f"EINVAL: start OST {k} is not an OST {_where(lay.pool)}", errno="EINVAL")
        n = len(members)
        count = min(count, n * spo)
        pos = members.index(k)
        chosen: list[int] = []
        for speed in range(3):
            for i in range(n * spo):
                ost = members[(pos + i) % n]
                if (ost in chosen and not over) or (speed == 0 and i != 0 and ost in used):
                    continue
                if targets[ost].errno:
                    continue
                chosen.append(ost)
                if len(chosen) == count:
                    return chosen
        # An explicit offset gets all its stripes or nothing.
        if not chosen:
            raise AllocationError(f"ENOSPC: no OST {_where(lay.pool)} can take an object "
                                  f"({_summary(targets, members)})", errno="ENOSPC")
        raise AllocationError(f"EFBIG: only {len(chosen)} of {count} stripes from OST {k} on "
                              f"({_summary(targets, members)})", errno="EFBIG")

    def _alloc_ost_list(self, lay: Layout, targets: dict[int, Target], over: bool) -> list[int]:
        """`lod_alloc_ost_list` (§4b): exactly these OSTs, rotated to start at stripe_offset."""
        lst = list(lay.osts)
        k = lst[0] if lay.stripe_offset == -1 else lay.stripe_offset
        if k not in lst:
            raise AllocationError(f"EINVAL: stripe offset {k} is not in the OST list {lst}", errno="EINVAL")
        start = lst.index(k)
        out: list[int] = []
        for i in range(len(lst)):
            ost = lst[(start + i) % len(lst)]
            if ost not in targets:
                raise AllocationError(f"EINVAL: OST index {ost} is not in {self.cluster.fsname} "
                                      f"(OSTs: {self.cluster.ost_indices()})", errno="EINVAL")
            if ost in out and not over:
                raise AllocationError(f"EINVAL: OST {ost} is listed twice", errno="EINVAL")
            t = targets[ost]
            if t.errno:
                raise AllocationError(f"{t.errno}: {t.why}", errno=t.errno)
            out.append(ost)
        return out


def _where(pool: str) -> str:
    return f"in pool {pool!r}" if pool else "in the file system"


def _summary(targets: Mapping[int, Target], members: Sequence[int]) -> str:
    """'3 inactive, 2 full' style count of why the members refuse objects."""
    why: dict[str, int] = {}
    for i in members:
        e = targets[i].errno
        key = {"": "usable", "EREMOTEIO": "inactive", "ENOSPC": "full", "EROFS": "read-only",
               "ENOBUFS": "no-create"}[e]
        why[key] = why.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in why.items())
