"""The OST allocation interface: requests + a cluster + its live snapshot -> one placement each.

    policy = iez.alloc.registry.get_policy("balanced")
    placements = policy.place(requests, cluster, snapshot, AllocOptions(capacity_weight=0.5))

Every policy returns, in request order, a `Placement` whose layout is resolved: stripe size,
stripe count and the OST of every stripe. A policy module declares its policies in a
module-level `POLICIES = {name: Registration(factory, kind)}`, which `iez.alloc.registry`
gathers: `balanced` (the default, iez's own), `iez-paper` (seed 000's Algorithm 2 as printed,
docs/references.md#s000-alg2), `rr` and `qos` (Lustre's LOD, the baselines).

This module also holds what the policies share: the per-OST view of a snapshot (`OstTable`:
capacity, used and free bytes, states, the bandwidth left for this job), the per-request view
(`RequestTable`: resolved stripe count and stripe size), the job's bytes per OST, and its
analytic I/O time (`makespan`), the yardstick for "never slower than Lustre's RR".
Pure: plain data in, plain data out.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, field
from types import MappingProxyType
from typing import Hashable, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from iez.alloc.lod import reserved_mb
from iez.cluster import Cluster, Snapshot
from iez.errors import AllocationError, ConfigError
from iez.layout import auto
from iez.layout.hierarchical import premise
from iez.layout.layout import LOV_MAX_STRIPE_COUNT, LUSTRE_EOF, STRIPE_SIZE_LIMIT, Component, FileLayout, Layout
from iez.layout.raid0 import bytes_per_ost
from iez.layout.stripe import AP, UNIT, method1, method2_stripe_size
from iez.request import Placement, Request, RequestColumns, Rows, distinct
from iez.units import format_size

STRIPE_METHODS = ("method2", "method1", "fixed")
LAYOUTS = ("keep", "auto", "hierarchical")  # AllocOptions.layout (docs/layouts.md)

# A job never gets less than this share of an OST's or OSS's bandwidth in the time model, even
# when the live load other jobs put on it reaches (or, by a stale reading, exceeds) its rating.
MIN_SHARE = 0.05

# The largest stripe size Lustre accepts that is still an even multiple of 64 KiB: stripe
# sizes must stay below 4 GiB (docs/references.md#l-abi-limits, LOV_MAX_STRIPE_SIZE).
MAX_STRIPE_SIZE = STRIPE_SIZE_LIMIT - UNIT
MAX_WRITE_BYTES = 1 << 52  # 4 PiB a file, so (bytes, stripe count) pairs pack into one int64

Pfl = tuple[tuple[int, int, int], ...]  # a PFL layout: (extent end, stripe count, stripe size) per component


@dataclass(frozen=True)
class AllocOptions:
    """How to allocate. One trade-off weight (`capacity_weight`) and one safety bound
    (`max_slowdown`); the rest describes the situation (reservations, exclusions)."""

    stripe_method: str = "method2"  # references: s000-method2, "method1" (s000-method1), or "fixed" (stripe_size)
    stripe_size: int = 0  # for "fixed": bytes; 0 = the file system's default stripe size
    # THE trade-off weight of `balanced`, 0..1, between the job's own I/O time (its bytes per
    # OST and per OSS over the bandwidth left to it) and long-term capacity balance (total
    # usage): the share of the time the job could gain over Lustre's round-robin that it gives
    # up for capacity balance. 0 = the fastest placement; 1 = as balanced as possible while no
    # slower than RR. See docs/allocation.md.
    capacity_weight: float = 0.5
    # Safety bound of `balanced`: the job's time may reach this factor of RR's at weight 1.
    # math.inf lifts it: capacity balance alone, and with it the failure the bound exists for (a
    # small job crowded onto the few emptiest OSTs, several times slower).
    max_slowdown: float = 1.0
    # What the job's client nodes can write, all together (bytes/s; inf = unknown, not a limit).
    # A job cannot write faster than its clients, so a client-bound job leaves the servers slack
    # that `balanced` may spend on balance without slowing it.
    client_bw: float = math.inf
    # `balanced` with the LNet router level of the cluster's topology: each OSS's bandwidth
    # capped by its share of the routers serving it (Topology.oss_router_bw), the path model bpio
    # balances on (docs/allocation.md). Off: the OSSs' NICs alone, as without topology.
    routers: bool = False
    # Bytes per OST already promised to other applications' plans but not yet written: the
    # controller's global view. They count as used and are not free for this job.
    reserved: Mapping[int, int] = field(default_factory=dict)
    exclude: frozenset[int] = frozenset()  # OSTs no stripe may go to
    seed: int = 0  # generator seed of the rr / qos baselines
    # Whose stripe count and size a file gets: "keep" the request's (the user's or the file
    # system's default), "auto" iez's choice for its bytes and writers, "hierarchical" auto plus
    # one PFL component per group of writers on disjoint OSTs (docs/layouts.md).
    layout: str = "auto"
    cpu_weight: float = 0.5  # Algorithm 2's ossLoad = cpu_weight*cpu + mem_weight*mem
    mem_weight: float = 0.5
    lustre_version: str = "2.16"  # the LOD release the rr / qos baselines behave as

    def __post_init__(self) -> None:
        if self.stripe_method not in STRIPE_METHODS:
            raise ConfigError(f"unknown stripe method {self.stripe_method!r} (methods: {', '.join(STRIPE_METHODS)})")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"unknown layout mode {self.layout!r} (modes: {', '.join(LAYOUTS)})")
        if self.stripe_size and (self.stripe_size % AP or not 0 < self.stripe_size < STRIPE_SIZE_LIMIT):
            raise ConfigError(f"stripe size {self.stripe_size}: give a multiple of 64 KiB below 4 GiB")
        if not 0.0 <= self.capacity_weight <= 1.0:
            raise ConfigError(f"capacity weight {self.capacity_weight} is outside 0..1")
        if not self.max_slowdown >= 1.0:  # also refuses NaN
            raise ConfigError(f"max slowdown {self.max_slowdown} must be at least 1 (inf = unbounded)")
        if not self.client_bw > 0:
            raise ConfigError(f"client bandwidth {self.client_bw} must be positive (inf = not a limit)")
        for name in ("cpu_weight", "mem_weight"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name.replace('_', ' ')} {v} must be a finite number >= 0")
        for i, b in self.reserved.items():
            if not isinstance(b, (int, np.integer)) or b < 0:
                raise ConfigError(f"reserved bytes on OST {i} must be a whole number >= 0, got {b!r}")
        object.__setattr__(self, "exclude", frozenset(int(i) for i in self.exclude))


class Policy(Protocol):
    name: str

    def place(self, requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
              options: AllocOptions = AllocOptions()) -> Sequence[Placement]: ...


# -- stripe size -------------------------------------------------------------------------------


def stripe_size(write_bytes: int, count: int, method: str = "method2", fixed: int = 0) -> int:
    """The stripe size of a file of `write_bytes` on `count` stripes.

    Method II (docs/references.md#s000-method2) spreads the file over one round of equal stripes;
    Method I (#s000-method1) fills the first count-1 stripes and leaves the remainder to the last.
    Either is capped below Lustre's 4 GiB limit: a file too big for one round gets the fewest
    rounds that fit, each still split evenly (so a 64 GiB file on 8 stripes gets 2 GiB stripes, 4 rounds).
    """
    if method == "fixed":
        return fixed
    if method == "method1" and count > 1:
        size = max(method1(write_bytes, count).first, UNIT)
    else:
        size = method2_stripe_size(write_bytes, count)
    if size > MAX_STRIPE_SIZE:
        rounds = -(-size // MAX_STRIPE_SIZE)
        size = method2_stripe_size(-(-write_bytes // rounds), count)
    return size


def room_bytes(write_bytes: np.ndarray, size: np.ndarray, count: np.ndarray | int) -> np.ndarray:
    """What one stripe of each file needs on its OST: its stripe size, or more when a stripe size
    capped below 4 GiB gives the file several rounds, all on the same OSTs (the first stripe is
    the heaviest)."""
    return np.maximum(size, stripe_bytes(write_bytes, size, count, 0))


def stripe_bytes(write_bytes: np.ndarray, size: np.ndarray, count: np.ndarray | int,
                 k: np.ndarray | int) -> np.ndarray:
    """Bytes of stripe k of each file, vectorised (the RAID-0 map of iez.layout.raid0 from
    offset 0: whole rounds give every stripe `size`, the last partial round fills in order)."""
    width = size * count
    rounds = write_bytes // width
    rest = write_bytes - rounds * width
    return rounds * size + np.clip(rest - k * size, 0, size)


# -- the OSTs as an allocator sees them ---------------------------------------------------------


@dataclass(frozen=True)
class OstTable:
    """Per-OST arrays in cluster order (position p is cluster.osts[p]) and per-OSS arrays in
    cluster.osses order."""

    index: np.ndarray  # OST index
    oss: np.ndarray  # position of the OST's OSS in cluster.osses
    capacity: np.ndarray  # bytes
    used: np.ndarray  # bytes used, plus bytes reserved by other applications' plans
    room: np.ndarray  # bytes this job may still place: free - reserved - OSP low watermark
    ok: np.ndarray  # may take new objects: reported, active or degraded, not excluded, not full
    degraded: np.ndarray  # degraded: Lustre's last resort, and ours
    bw: np.ndarray  # write bandwidth left for this job (bytes/s)
    oss_bw: np.ndarray  # per OSS: NIC bandwidth left for this job (bytes/s)
    oss_load: np.ndarray  # per OSS: Algorithm 2's ossLoad, cpu_weight*cpu + mem_weight*mem
    position: Mapping[int, int]  # OST index -> position (read-only)
    read_bw: np.ndarray  # read bandwidth left for this job (bytes/s)
    oss_read_bw: np.ndarray  # per OSS: NIC bandwidth left for this job's reads (bytes/s)

    @property
    def n(self) -> int:
        return len(self.index)


def ost_table(cluster: Cluster, snap: Snapshot, options: AllocOptions) -> OstTable:
    pos = {o.index: p for p, o in enumerate(cluster.osts)}
    for what, keys in (("excluded", options.exclude), ("reserved", options.reserved)):
        unknown = sorted(set(keys) - pos.keys())
        if unknown:
            raise ConfigError(f"{what} OSTs {unknown} are not in {cluster.fsname} (OSTs: {sorted(pos)})")
    n = len(cluster.osts)
    oss_pos = {s.name: k for k, s in enumerate(cluster.osses)}
    # Per OST a row of plain numbers, made one array at the end: setting numpy elements one by one
    # costs as much as the rest.
    rows = []  # capacity, used, room, ok, degraded, write and read bandwidth, live writes and reads
    for o in cluster.osts:
        st = snap.osts.get(o.index)
        reserved = int(options.reserved.get(o.index, 0))
        if st is None:  # no statistics: unreachable, as LOD sees an OST whose OSP has no statfs
            rows.append((o.capacity, o.used + reserved, 0, False, False, o.write_bw, o.read_bw, 0.0, 0.0))
            continue
        capacity = max(st.kbytestotal * 1024, 1)  # a target reporting no size takes nothing anyway
        low_mb, _ = reserved_mb(st.kbytestotal)  # below it the OSP flags the OST ENOSPC
        room = max(0, st.bavail - reserved - (low_mb << 20))
        rows.append((capacity, capacity - st.kbytes_free * 1024 + reserved, room,
                     st.state in ("active", "degraded") and o.index not in options.exclude and room > 0,
                     st.state == "degraded", o.write_bw, o.read_bw, max(0.0, st.write_bps), max(0.0, st.read_bps)))
    table = np.array(rows, dtype=float).reshape(n, 9).T
    capacity, used, room, bw, read_bw, live, live_read = table[[0, 1, 2, 5, 6, 7, 8]]
    ok, degraded = table[3] > 0, table[4] > 0
    bw = np.maximum(bw - live, MIN_SHARE * bw)
    read_bw = np.maximum(read_bw - live_read, MIN_SHARE * read_bw)
    oss = np.array([oss_pos[o.oss] for o in cluster.osts], dtype=np.int64)
    nic = np.array([s.nic_bw for s in cluster.osses], dtype=float)
    load = np.array([_oss_load(snap, s.name, options) for s in cluster.osses], dtype=float)
    # A busy OSS (load average, memory) serves requests more slowly: Algorithm 2's "cost to
    # reach" its OSTs, here a cut in the bandwidth it gives this job.
    busy = 1.0 - np.clip(load, 0.0, 1.0 - MIN_SHARE)
    oss_bw, oss_read_bw = (np.maximum(nic - np.bincount(oss, weights=x, minlength=len(nic)), MIN_SHARE * nic) * busy
                           for x in (live, live_read))
    return OstTable(np.array([o.index for o in cluster.osts], dtype=np.int64), oss, capacity, used, room,
                    ok, degraded, bw, oss_bw, load, MappingProxyType(pos), read_bw, oss_read_bw)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
RECENT = 4  # entries a cache of the clusters or snapshots placed on lately keeps


def keep_recent(cache: dict[K, V], key: K, value: V, limit: int = RECENT) -> V:
    """`cache[key] = value`, first dropping the oldest entry if the cache holds `limit`."""
    if key not in cache and len(cache) >= limit:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


# The OST tables of the snapshots placed on lately: a snapshot is frozen (statistics are replaced,
# by `with_ost` and `debit`, not changed), so the jobs placed on one share its table; its arrays
# are made read-only and its position map is a read-only view, so nothing can change them under
# the next job.
_OST_CACHE: dict[tuple, tuple[Cluster, Snapshot, OstTable]] = {}


def snapshot_table(cluster: Cluster, snapshot: Snapshot, options: AllocOptions) -> OstTable:
    """`ost_table`, built once per (cluster, snapshot, the options it reads)."""
    key = (id(cluster), id(snapshot), options.exclude, tuple(sorted(options.reserved.items())), options.cpu_weight,
           options.mem_weight)
    held = _OST_CACHE.get(key)
    if held is None or held[0] is not cluster or held[1] is not snapshot:  # ids are reused once objects go
        table = ost_table(cluster, snapshot, options)
        for value in vars(table).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        held = keep_recent(_OST_CACHE, key, (cluster, snapshot, table))
    return held[2]


def _oss_load(snap: Snapshot, name: str, options: AllocOptions) -> float:
    st = snap.osses.get(name)
    if st is None:
        return 0.0
    return options.cpu_weight * max(0.0, st.cpu) + options.mem_weight * max(0.0, st.mem)


# -- the requests as an allocator sees them -----------------------------------------------------


@dataclass(frozen=True)
class RequestTable:
    """Per-request arrays in request order; pools as masks over OstTable positions."""

    write_bytes: np.ndarray  # int64
    count: np.ndarray  # stripe count to allocate (defaults resolved, clamped to usable OSTs)
    size: np.ndarray  # stripe size (int64)
    pool: np.ndarray  # position in `pools`
    pools: list[str]  # pool names ("" = every OST)
    allowed: list[np.ndarray]  # per pool: bool mask of OSTs that may take stripes (ok & member)
    order: np.ndarray  # request positions in create order (create_time, then input order)
    # What Lustre's own allocator is asked for: the request's stripe count, or the automatic one.
    lod_count: np.ndarray
    # Per request: a PFL layout's (extent end, stripe count, stripe size) per component, or () for a plain one.
    components: tuple[Pfl, ...]
    notes: tuple[str, ...]  # per request: why its layout differs from the asked one ("" = it does not)
    read_bytes: np.ndarray  # int64: bytes the job reads back from the file (0 = none known)

    @property
    def n(self) -> int:
        return len(self.write_bytes)


def request_table(requests: Sequence[Request], cluster: Cluster, osts: OstTable,
                  options: AllocOptions) -> RequestTable:
    n = len(requests)
    w, asked = _whole_columns(requests)
    if n and w.min() < 0:
        bad = requests[int(np.argmin(w))]
        raise ConfigError(f"request {bad.path}: write bytes {bad.write_bytes} is negative")
    if n and w.max() > MAX_WRITE_BYTES:
        bad = requests[int(np.argmax(w))]
        raise ConfigError(f"request {bad.path}: write bytes {bad.write_bytes} is more than iez handles (4 PiB a file)")
    if n and asked.min() < -1:
        bad = requests[int(np.argmin(asked))]
        raise ConfigError(f"request {bad.path}: stripe count {bad.stripe_count} (use -1 for every OST)")
    pools, pool = _pool_column(requests)
    for name in pools:
        if name and name not in cluster.pools:
            r = requests[int(np.argmax(pool == pools.index(name)))]
            raise AllocationError(f"EINVAL: request {r.path} names pool {r.pool!r}, which {cluster.fsname} "
                                  f"does not have (pools: {', '.join(sorted(cluster.pools)) or 'none'})",
                                  errno="EINVAL")
    allowed = []
    for name in pools:
        member = np.zeros(osts.n, bool)
        member[[osts.position[i] for i in cluster.pool(name)]] = True
        allowed.append(member & osts.ok)
    per_pool = np.array([m.sum() for m in allowed], dtype=np.int64)
    if n and per_pool.min() == 0:
        i = int(np.argmax(per_pool[pool] == 0))
        name = requests[i].pool
        raise AllocationError(f"ENOSPC: no OST {'in pool ' + repr(name) if name else 'in ' + cluster.fsname} "
                              f"can take a stripe of {requests[i].path} (all inactive, excluded or full)")
    if n and asked.min() > 0 and asked.max() <= min(int(per_pool.min()), LOV_MAX_STRIPE_COUNT):
        count = asked  # every count asked and within reach: as the rule below leaves it
    else:
        usable = per_pool[pool]
        default = cluster.default_stripe_count or 1
        count = np.where(asked == 0, default, asked)
        count = np.where(count == -1, usable, count)
        # As lod_get_stripe_count: more stripes than usable OSTs get one per usable OST.
        count = np.minimum(np.minimum(count, usable), LOV_MAX_STRIPE_COUNT)
    fixed = options.stripe_size or cluster.default_stripe_size
    size = np.empty(n, dtype=np.int64)
    if n:
        # One stripe-size computation per distinct (bytes, count): a job has few.
        pairs, inverse = distinct(w * (LOV_MAX_STRIPE_COUNT + 1) + count)
        per_pair = [stripe_size(int(p // (LOV_MAX_STRIPE_COUNT + 1)), int(p % (LOV_MAX_STRIPE_COUNT + 1)),
                                options.stripe_method, fixed) for p in pairs]
        size[:] = np.asarray(per_pair, dtype=np.int64)[inverse]
    lod_count = asked
    components: tuple[Pfl, ...] = ((),) * n
    notes = ("",) * n
    if n and options.layout != "keep":
        count, size, lod_count, components, notes = auto_layouts(requests, w, count, size, pool, allowed, osts,
                                                                 cluster, options)
    t = requests.create_time if isinstance(requests, RequestColumns) else \
        np.array([r.create_time for r in requests], dtype=float)
    order = np.arange(n) if (t[1:] >= t[:-1]).all() else np.argsort(t, kind="stable")
    return RequestTable(w, count, size, pool, pools, allowed, order, lod_count, components, notes,
                        _read_column(requests))


def _whole_columns(requests: Sequence[Request]) -> tuple[np.ndarray, np.ndarray]:
    """Write bytes and stripe counts as int64 arrays; ConfigError names a request whose are not
    whole numbers (bools are not)."""
    if isinstance(requests, RequestColumns):
        return requests.write_bytes.astype(np.int64, copy=False), requests.stripe_count.astype(np.int64, copy=False)
    try:
        return _ints([r.write_bytes for r in requests]), _ints([r.stripe_count for r in requests])
    except (TypeError, ValueError, OverflowError):
        bad = next(r for r in requests if not _fits_int64(r.write_bytes) or not _fits_int64(r.stripe_count))
        raise ConfigError(f"request {bad.path}: write bytes {bad.write_bytes!r} and stripe count "
                          f"{bad.stripe_count!r} must be whole numbers") from None


def _read_column(requests: Sequence[Request]) -> np.ndarray:
    if isinstance(requests, RequestColumns):
        return np.zeros(len(requests), np.int64) if requests.read_bytes is None else \
            np.maximum(requests.read_bytes.astype(np.int64), 0)
    try:
        return np.maximum(_ints([q.read_bytes for q in requests]), 0)
    except (TypeError, ValueError, OverflowError):
        bad = next(q for q in requests if not _fits_int64(q.read_bytes))
        raise ConfigError(f"request {bad.path}: read bytes {bad.read_bytes!r} must be a whole number") from None


def _ints(values: list) -> np.ndarray:
    """Whole numbers as int64 (TypeError for others, bools included; OverflowError past int64)."""
    if set(map(type, values)) <= {int}:  # the usual case, checked in bulk
        return np.array(values, dtype=np.int64).reshape(-1)
    return np.fromiter(map(_whole, values), dtype=np.int64, count=len(values))


def _pool_column(requests: Sequence[Request]) -> tuple[list[str], np.ndarray]:
    """The pools the requests name, in first-use order, and each request's position among them."""
    if isinstance(requests, RequestColumns):
        if len(requests) and requests.pool.min() == requests.pool.max():  # one pool: no sort
            return [requests.pools[int(requests.pool[0])]], np.zeros(len(requests), dtype=np.int64)
        used, first, pool = np.unique(requests.pool, return_index=True, return_inverse=True)
        rank = np.empty(len(used), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(used))
        return [requests.pools[int(k)] for k in used[np.argsort(first)]], rank[pool.reshape(-1)]
    names = [r.pool for r in requests]
    pool_of = {name: k for k, name in enumerate(dict.fromkeys(names))}
    if len(pool_of) == 1:
        return list(pool_of), np.zeros(len(names), dtype=np.int64)
    return list(pool_of), np.fromiter(map(pool_of.__getitem__, names), dtype=np.int64, count=len(names))


def auto_layouts(requests: Sequence[Request], w: np.ndarray, count: np.ndarray, size: np.ndarray, pool: np.ndarray,
                 allowed: list[np.ndarray], osts: OstTable, cluster: Cluster, options: AllocOptions
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[Pfl, ...], tuple[str, ...]]:
    """The automatic layout of every request (iez.layout.auto; "hierarchical" is auto here): the
    stripe counts and sizes to allocate, the counts to ask Lustre's allocator for, PFL components,
    and a note for each layout that differs from the asked one (`count`, `size`)."""
    # A writer's link: the cluster model's links are the OSSs' (docs/layouts.md, "The cost model").
    writer_bw = float(np.median([s.nic_bw for s in cluster.osses]))
    servers = []
    for mask in allowed:
        pos = np.flatnonzero(mask)
        serving = np.unique(osts.oss[pos])
        servers.append(auto.Servers(tuple(osts.bw[pos].tolist()), tuple(osts.oss_bw[serving].tolist()), writer_bw,
                                    options.client_bw))
    job: dict[tuple[str, str], int] = {}
    for r, b in zip(requests, w.tolist()):
        job[(r.app, r.run)] = job.get((r.app, r.run), 0) + b
    fixed = options.stripe_size or cluster.default_stripe_size
    new_count, new_size, lod_count = count.copy(), size.copy(), np.fromiter(
        (r.stripe_count for r in requests), dtype=np.int64, count=len(requests))
    components: list[Pfl] = []
    notes: list[str] = []
    cache: dict[tuple[int, ...], tuple[int, int, Pfl, str]] = {}
    for i, r in enumerate(requests):
        shape = auto.FileShape(int(w[i]), r.writer_count, r.transfer_size, r.write_align, job[(r.app, r.run)],
                               r.writer_segments, r.grows)
        key = (*astuple(shape), int(pool[i]))
        got = cache.get(key)
        if got is None:
            got = cache[key] = _auto_one(shape, servers[int(pool[i])], options, fixed)
        c, s, comps, reason = got
        components.append(comps)
        if options.layout == "hierarchical" and r.writer_count > 1:
            blocks, why_not = premise(r.writer_segments, r.api, r.grows)
            if not blocks:
                reason = f"{reason}; {why_not}"
        if c == count[i] and s == size[i] and not comps:
            notes.append("")
            continue
        new_count[i], new_size[i], lod_count[i] = c, s, c
        chosen = "PFL " + " / ".join(f"{k} x {format_size(z)}" for _, k, z in comps) if comps else \
            f"{c} x {format_size(s)}"
        notes.append(f"auto: {chosen} instead of {count[i]} x {format_size(int(size[i]))}: {reason}")
    return new_count, new_size, lod_count, tuple(components), tuple(notes)


def _auto_one(shape: auto.FileShape, servers: auto.Servers, options: AllocOptions, fixed: int
              ) -> tuple[int, int, Pfl, str]:
    """One file's automatic (count, stripe size, PFL components, reason). The count of a PFL
    layout is its widest component's, which the policy places (`pfl`)."""
    choice = auto.choose(shape, servers)
    if shape.write_bytes <= 0 and choice.components:  # size not known: the template
        s = auto.fit_size(fixed, choice.unit)
        return choice.stripe_count, s, _on_stripes(choice.components, [s] * len(choice.components)), choice.reason
    # A growing file's head is its layout for the predicted bytes: sized as a plain file's.
    c = choice.components[0][1] if choice.components else choice.stripe_count
    s = stripe_size(shape.write_bytes, c, options.stripe_method, fixed)
    # A fixed size is the user's; with one stripe the size places nothing, so it stays the allocator's.
    why = choice.reason
    if options.stripe_method != "fixed" and c > 1:
        s = auto.round_size(shape.write_bytes, c, s, choice.unit)
        block = auto.block_stripe(shape.write_bytes, shape.writers, shape.segments, c, choice.unit)
        if block and block != s:
            s, why = block, f"{why}; {format_size(block)} stripes, each inside one writer's block of its " \
                            f"{shape.segments} segments"
        # Stripes rounded up to the unit may hold the bytes in fewer objects: an empty object
        # costs a create and an OST for nothing (64 MiB on 9 stripes of 8 MiB fills 8).
        filled = max(1, -(-shape.write_bytes // s))
        if filled < c:
            c, why = filled, f"{why}; {filled} hold it in whole {format_size(s)} stripes"
    if not choice.components:
        return c, s, (), why
    # The tail's bytes are not known: the file system's stripe size (to the writes' unit), as the
    # template's, spreads whatever it grows by over all its OSTs.
    tail = choice.stripe_count
    return tail, s, _on_stripes(((shape.write_bytes, c), (LUSTRE_EOF, tail)), [s, auto.fit_size(fixed, choice.unit)]), why


def _on_stripes(comps: tuple[tuple[int, int], ...], sizes: Sequence[int]) -> Pfl:
    """PFL components (extent end, count) of stripe sizes `sizes`, their extent ends on their
    stripe boundaries, as Lustre wants them (docs/references.md#l-abi-comp-create); a component
    left empty by the rounding is dropped."""
    out: list[tuple[int, int, int]] = []
    for (end, k), size in zip(comps, sizes):
        end = end if end == LUSTRE_EOF else -(-end // size) * size
        if not out or end > out[-1][0]:
            out.append((end, k, size))
    return tuple(out)


def tables(requests: Sequence[Request], cluster: Cluster, snapshot: Snapshot,
           options: AllocOptions) -> tuple[OstTable, RequestTable]:
    """The OST and request views every policy starts from (validating both); the OST view is
    the snapshot's shared, read-only one (`snapshot_table`)."""
    osts = snapshot_table(cluster, snapshot, options)
    return osts, request_table(requests, cluster, osts, options)


# -- placements and what they put where ---------------------------------------------------------


def _whole(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(v)
    return int(v)


def _fits_int64(v: object) -> bool:
    try:
        np.int64(_whole(v))
    except (TypeError, OverflowError):
        return False
    return True


class Placements(Rows[Placement]):
    """A policy's placements, in request order, as arrays: file i's stripe size is `size[i]` and
    its stripes go to OSTs `osts[offsets[i]:offsets[i + 1]]` (OST indices, in stripe order). A
    `Placement` is built only when a caller indexes or iterates (identical layouts shared, as they
    are frozen); `iez.plan.dumps_arrays` writes the plan straight from the arrays. `replaced` holds files
    whose layout is not the plain one of their list (hierarchical striping)."""

    def __init__(self, requests: Sequence[Request], table: RequestTable, osts: np.ndarray, offsets: np.ndarray,
                 policy: str, replaced: Mapping[int, Placement] | None = None):
        self.requests, self.table, self.policy = requests, table, policy
        self.osts, self.offsets, self.size = osts, offsets, table.size
        self.replaced = dict(replaced or {})
        self._layouts: dict[tuple, FileLayout] = {}

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def row(self, i: int) -> Placement:
        got = self.replaced.get(i)
        if got is not None:
            return got
        r, size, comps = self.requests[i], int(self.size[i]), self.table.components[i]
        osts = tuple(self.osts[self.offsets[i]:self.offsets[i + 1]].tolist())
        key = (size, r.pool, osts, comps)
        fl = self._layouts.get(key)
        if fl is None:
            fl = self._layouts[key] = (pfl(r.pool, osts, comps) if comps else FileLayout(
                plain=Layout(stripe_size=size, stripe_count=len(osts), pool=r.pool, osts=osts)))
        return Placement(r.path, fl, r.write_bytes, r.app, r.run, self.policy, self.table.notes[i])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def with_replaced(self, replaced: Mapping[int, Placement]) -> Placements:
        return Placements(self.requests, self.table, self.osts, self.offsets, self.policy, replaced)

    def paths(self) -> Sequence[str]:
        return self.requests.path if isinstance(self.requests, RequestColumns) else [r.path for r in self.requests]

    def non_plain(self) -> dict[int, FileLayout]:
        """The layouts that are not the plain one of a file's list (PFL, hierarchical), by file:
        what a plan writer working from the arrays (`iez.plan.dumps_arrays`) takes from here."""
        out = {i: p.layout for i, p in self.replaced.items()}
        comps = self.table.components
        if comps.count(()) < len(comps):
            out.update((i, self[i].layout) for i, c in enumerate(comps) if c and i not in out)
        return out


def array_placements(requests: Sequence[Request], table: RequestTable, ost_lists: Sequence[tuple[int, ...]],
                     policy: str) -> Placements:
    """Placements in request order from each request's OST indices in stripe order."""
    offsets = np.zeros(len(ost_lists) + 1, dtype=np.int64)
    np.cumsum([len(o) for o in ost_lists], out=offsets[1:])
    flat = np.fromiter((i for o in ost_lists for i in o), dtype=np.int64, count=int(offsets[-1]))
    return Placements(requests, table, flat, offsets, policy)


def make_placements(requests: Sequence[Request], table: RequestTable, ost_lists: Sequence[tuple[int, ...]],
                    policy: str) -> list[Placement]:
    """As `array_placements`, each `Placement` built."""
    return list(array_placements(requests, table, ost_lists, policy))


def pfl(pool: str, osts: tuple[int, ...], comps: Pfl) -> FileLayout:
    """A PFL layout over the OSTs a policy chose for its widest component: each component takes
    the next of them round the list, so consecutive components start on different OSTs."""
    parts, start, at = [], 0, 0
    for end, count, size in comps:
        count = min(count, len(osts))
        mine = tuple(osts[(at + k) % len(osts)] for k in range(count))
        parts.append(Component(start, end, Layout(stripe_size=size, stripe_count=count, pool=pool, osts=mine)))
        start, at = end, (at + count) % len(osts)
    return FileLayout(components=tuple(parts))


def job_bytes(placements: Sequence[Placement]) -> dict[int, int]:
    """Bytes the placed files put on each OST (RAID-0 mapping of each file's layout)."""
    out: dict[int, int] = {}
    for p in placements:
        for ost, b in bytes_per_ost(p.layout, p.write_bytes).items():
            out[ost] = out.get(ost, 0) + b
    return out


def makespan(cluster: Cluster, snapshot: Snapshot, on: Mapping[int, int],
             options: AllocOptions = AllocOptions()) -> float:
    """The job's analytic I/O time (s): its largest bytes/bandwidth over every OST and every OSS,
    with the bandwidth other jobs' live load leaves it, and over its clients (`client_bw`).
    A lower bound on the write time."""
    t = snapshot_table(cluster, snapshot, options)
    x = np.zeros(t.n)
    for ost, b in on.items():
        x[t.position[ost]] = b
    per_oss = np.bincount(t.oss, weights=x, minlength=len(t.oss_bw))
    servers = max((x / t.bw).max(initial=0.0), (per_oss / t.oss_bw).max(initial=0.0))
    return float(max(servers, x.sum() / options.client_bw))
