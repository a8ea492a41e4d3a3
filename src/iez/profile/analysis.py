"""LIOPProf analysis (pure): who sent which RPCs to which OST, when, and what it cost.

Two sources are joined, and every figure says which it comes from:
- rpctrace (`RpcAggregator`): time, client, opcode and service time of each RPC an OSS
  handled. A line names the service thread and the client, not the OST.
- `obdfilter.<ost>.exports.<nid>.stats` samples (`export_deltas`): per OST x client read and
  write RPCs and bytes in each sampling interval, but no finer timing and no opcodes.
`join` spreads each client's read/write RPCs of a time bin over the OSTs of its OSS in the
proportions the exports stats give for the interval holding that bin (exact when a client used
one OST of that OSS in the interval, or when bins equal the interval). Without rpctrace, the
exports deltas alone give the per-OST series at interval resolution.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from iez.lustre.getparam import split_param_name
from iez.lustre.stats import parse_stats
from iez.lustre.targets import parse_target_name
from iez.metrics import ost_cost
from iez.profile import opcodes
from iez.profile.rpctrace import HANDLED, HANDLING

_BIN_OFFSET = 1 << 20  # bins may start before the origin (records before the profile start)
MAX_BINS = 2000


def client_of(nid: str) -> str:
    """The client NID of an rpctrace "lnetpid-nid" (12345-10.0.0.1@tcp -> 10.0.0.1@tcp)."""
    head, sep, rest = nid.partition("-")
    return rest if sep and head.isdigit() else nid


def ost_label(index: int) -> str:
    return f"OST{index:04x}"


@dataclass(frozen=True)
class Bins:
    origin: float  # epoch seconds of the start of bin 0
    width: float  # seconds

    def of(self, t: float) -> int:
        return math.floor((t - self.origin) / self.width)

    def center(self, b: int) -> float:
        return self.origin + (b + 0.5) * self.width


def choose_bins(start: float | None, stop: float | None, interval: float | None, width: float | None,
                first_time: float | None) -> Bins:
    """Bins from an explicit width, else the exports sampling interval (per-OST figures are
    exact per bin), else 1/100 of the run, else 1 s; at most MAX_BINS over the run."""
    origin = start if start is not None else (first_time if first_time is not None else 0.0)
    span = (stop - origin) if (stop is not None and stop > origin) else None
    w = width or interval or (span / 100 if span else 1.0)
    if span and span / w > MAX_BINS:
        w = span / MAX_BINS
    return Bins(origin, w)


# -- rpctrace -----------------------------------------------------------------------------------

@dataclass
class HostRpcs:
    """One OSS's rpctrace, aggregated. Keys use client NIDs (without the LNet pid)."""

    host: str
    counts: dict[tuple[int, str, int], int] = field(default_factory=dict)  # (bin, client, class) -> RPCs
    service: dict[tuple[str, int], list[float]] = field(default_factory=dict)  # (client, class) -> [n, proc us, total us]
    jobs: dict[str, int] = field(default_factory=dict)  # job id -> RPCs
    threads: set[str] = field(default_factory=set)
    first: float | None = None
    last: float | None = None
    handled_only: bool = False  # no Handling lines: RPCs counted from Handled lines

    def per_client_class(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = defaultdict(int)
        for (_b, c, k), n in self.counts.items():
            out[(c, k)] += n
        return dict(out)


class RpcAggregator:
    """Folds record chunks of one host's log into a `HostRpcs`, in bounded memory."""

    def __init__(self, host: str, bins: Bins) -> None:
        self.host, self.bins = host, bins
        self._counts: dict[int, dict[int, int]] = {HANDLING: defaultdict(int), HANDLED: defaultdict(int)}
        self._service: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(3))
        self._jobs: dict[int, int] = defaultdict(int)
        self._threads: set[int] = set()
        self._first: int | None = None
        self._last: int | None = None

    def add(self, recs: np.ndarray) -> None:
        if not len(recs):
            return
        t = recs["t_us"]
        self._first = int(t.min()) if self._first is None else min(self._first, int(t.min()))
        self._last = int(t.max()) if self._last is None else max(self._last, int(t.max()))
        cls = opcodes.classify(recs["opc"]).astype(np.int64)
        b = np.floor((t / 1e6 - self.bins.origin) / self.bins.width).astype(np.int64)
        b = np.clip(b + _BIN_OFFSET, 0, 2 * _BIN_OFFSET - 1)
        keys = (b * (1 << 32) + recs["nid"].astype(np.int64)) * 16 + cls
        for kind in (HANDLING, HANDLED):
            sel = recs["kind"] == kind
            u, n = np.unique(keys[sel], return_counts=True)
            acc = self._counts[kind]
            for key, cnt in zip(u.tolist(), n.tolist()):
                acc[key] += cnt
        done = recs["kind"] == HANDLED
        if done.any():
            sk = recs["nid"][done].astype(np.int64) * 16 + cls[done]
            u, inv = np.unique(sk, return_inverse=True)
            proc = np.maximum(recs["proc_us"][done], 0).astype(float)
            total = np.maximum(recs["total_us"][done], 0).astype(float)
            n = np.bincount(inv, minlength=len(u))
            ps = np.bincount(inv, proc, minlength=len(u))
            ts = np.bincount(inv, total, minlength=len(u))
            for i, key in enumerate(u.tolist()):
                self._service[(key // 16, key % 16)] += (n[i], ps[i], ts[i])
        start = recs["kind"] == HANDLING
        u, n = np.unique(recs["job"][start], return_counts=True)
        for j, cnt in zip(u.tolist(), n.tolist()):
            self._jobs[j] += cnt
        self._threads.update(np.unique(recs["pname"]).tolist())

    def result(self, strings: list[str]) -> HostRpcs:
        kind = HANDLING if self._counts[HANDLING] else HANDLED
        out = HostRpcs(self.host, handled_only=kind == HANDLED and bool(self._counts[HANDLED]))
        counts: dict[tuple[int, str, int], int] = defaultdict(int)
        for key, n in self._counts[kind].items():
            cls, rest = key % 16, key // 16
            sid, b = rest % (1 << 32), rest // (1 << 32) - _BIN_OFFSET
            counts[(b, client_of(strings[sid]), cls)] += n
        out.counts = dict(counts)
        service: dict[tuple[str, int], list[float]] = {}
        for (sid, cls), v in self._service.items():
            k = (client_of(strings[sid]), cls)
            service[k] = [a + b for a, b in zip(service.get(k, [0.0, 0.0, 0.0]), v.tolist())]
        out.service = service
        out.jobs = {strings[j] or "(none)": n for j, n in self._jobs.items()}
        out.threads = {strings[i] for i in self._threads}
        out.first = None if self._first is None else self._first / 1e6
        out.last = None if self._last is None else self._last / 1e6
        return out


# -- exports stats --------------------------------------------------------------------------------

RN, RB, WN, WB = range(4)  # read RPCs, read bytes, write RPCs, write bytes


@dataclass(frozen=True)
class Interval:
    t0: float
    t1: float
    delta: dict[tuple[int, str], np.ndarray]  # (ost, client) -> [RN, RB, WN, WB] in the interval


def export_counters(values: dict[str, str]) -> dict[tuple[int, str], np.ndarray]:
    """Cumulative [RN, RB, WN, WB] of every `obdfilter.<ost>.exports.<nid>.stats` in a dump."""
    out = {}
    for name, text in values.items():
        comps = split_param_name(name)
        if len(comps) != 5 or comps[0] != "obdfilter" or comps[2] != "exports" or comps[4] != "stats":
            continue
        target = parse_target_name(comps[1])
        if target is None or target[1] != "OST":
            continue
        st = parse_stats(text)
        v = np.zeros(4)
        for col, cname in ((RN, "read_bytes"), (WN, "write_bytes")):
            c = st.counter(cname)
            if c is not None:
                v[col], v[col + 1] = c.count, c.sum or 0
        out[(target[2], comps[3])] = v
    return out


def export_deltas(samples: list[tuple[float, dict[str, str]]]) -> list[Interval]:
    """Intervals between consecutive samples; a counter that went back was cleared and counts
    from zero; a pair absent from the earlier sample starts at zero."""
    out = []
    prev: dict[tuple[int, str], np.ndarray] | None = None
    t_prev = 0.0
    for t, values in sorted(samples, key=lambda s: s[0]):
        cur = export_counters(values)
        if prev is not None and t > t_prev:
            delta = {}
            for k, v in cur.items():
                d = v - prev.get(k, 0)
                if (d < 0).any():
                    d = v.copy()
                if d.any():
                    delta[k] = d
            out.append(Interval(t_prev, t, delta))
        prev, t_prev = cur, t
    return out


# -- the join ---------------------------------------------------------------------------------------

@dataclass
class OstView:
    """Per OST x client figures of the whole profile, after the join."""

    bins: Bins
    series: dict[tuple[int, str], dict[int, np.ndarray]] = field(default_factory=dict)  # (ost, client) -> {bin: [reads, writes]}
    bytes: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)  # (ost, client) -> [RN, RB, WN, WB] (exports)
    unattributed: dict[tuple[str, str], float] = field(default_factory=dict)  # (host, client) -> data RPCs without OST
    source: dict[str, str] = field(default_factory=dict)  # host -> how its per-OST series was made
    ost_host: dict[int, str] = field(default_factory=dict)

    def osts(self) -> list[int]:
        return sorted({o for o, _ in self.series} | {o for o, _ in self.bytes})

    def clients(self) -> list[str]:
        return sorted({c for _, c in self.series} | {c for _, c in self.bytes})

    def bin_range(self) -> tuple[int, int]:
        bs = [b for d in self.series.values() for b in d]
        return (min(bs), max(bs) + 1) if bs else (0, 0)

    def matrix(self, ost: int) -> tuple[list[str], np.ndarray]:
        """Clients of an OST and their data RPCs per bin: (clients, array clients x bins)."""
        lo, hi = self.bin_range()
        clients = sorted(c for o, c in self.series if o == ost)
        m = np.zeros((len(clients), hi - lo))
        for i, c in enumerate(clients):
            for b, v in self.series[(ost, c)].items():
                m[i, b - lo] += v.sum()
        return clients, m

    def per_client(self, ost: int) -> dict[str, float]:
        clients, m = self.matrix(ost)
        return {c: float(m[i].sum()) for i, c in enumerate(clients)}


def _add(series: dict, key: tuple[int, str], b: int, cls_col: int, n: float) -> None:
    d = series.setdefault(key, {})
    v = d.get(b)
    if v is None:
        v = d[b] = np.zeros(2)
    v[cls_col] += n


def join(bins: Bins, hosts: dict[str, HostRpcs | None], exports: dict[str, list[Interval]]) -> OstView:
    view = OstView(bins)
    for host in sorted(set(hosts) | set(exports)):
        ivals = exports.get(host, [])
        for iv in ivals:
            for k, v in iv.delta.items():
                view.bytes[k] = view.bytes.get(k, np.zeros(4)) + v
                view.ost_host[k[0]] = host
        rpcs = hosts.get(host)
        if rpcs is None or not any(cls in opcodes.DATA_CLASSES for _b, _c, cls in rpcs.counts):
            for iv in ivals:
                b = bins.of((iv.t0 + iv.t1) / 2)
                for (ost, client), v in iv.delta.items():
                    _add(view.series, (ost, client), b, 0, v[RN])
                    _add(view.series, (ost, client), b, 1, v[WN])
            if ivals:
                view.source[host] = "exports stats deltas only (interval resolution)"
            continue
        starts = np.array([iv.t0 for iv in ivals])
        whole: dict[tuple[str, int], dict[int, float]] = defaultdict(lambda: defaultdict(float))
        for iv in ivals:
            for (ost, client), v in iv.delta.items():
                whole[(client, 0)][ost] += v[RN]
                whole[(client, 1)][ost] += v[WN]
        for (b, client, cls), n in rpcs.counts.items():
            if cls not in opcodes.DATA_CLASSES:
                continue
            col = 0 if cls == opcodes.READ else 1
            share: dict[int, float] = {}
            if ivals:
                at = int(np.searchsorted(starts, bins.center(b), side="right")) - 1
                iv = ivals[min(max(at, 0), len(ivals) - 1)]
                share = {ost: v[RN if col == 0 else WN] for (ost, c), v in iv.delta.items() if c == client}
            if not sum(share.values()):
                share = whole.get((client, col), {})
            total = sum(share.values())
            if not total:
                view.unattributed[(host, client)] = view.unattributed.get((host, client), 0) + n
                continue
            for ost, w in share.items():
                if w:
                    _add(view.series, (ost, client), b, col, n * w / total)
                    view.ost_host[ost] = host
        view.source[host] = ("rpctrace timing, OSTs from exports stats per interval" if ivals
                             else "rpctrace only: no exports stats, so no OST")
    return view


# -- figures of merit ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class OstConcurrency:
    ost: int
    active_bins: int
    max_clients: int
    shared_fraction: float  # active bins with >= 2 clients / active bins
    typical_clients: int  # the most frequent client count in active bins
    seek_risk: float  # RPC-weighted mean of 1 - sum(p_c^2) over bins (0: one client at a time)
    clients_per_bin: np.ndarray


def concurrency(view: OstView, ost: int, eps: float = 1e-9) -> OstConcurrency:
    """How many clients an OST served at once, bin by bin, and the seek-risk score: the chance
    that two consecutive RPCs on the OST come from different clients (different file regions)
    if a bin's RPCs were interleaved at random."""
    _clients, m = view.matrix(ost)
    if m.size == 0:
        return OstConcurrency(ost, 0, 0, 0.0, 0, 0.0, np.zeros(0, dtype=int))
    k = (m > eps).sum(axis=0)
    tot = m.sum(axis=0)
    active = tot > eps
    nact = int(active.sum())
    if not nact:
        return OstConcurrency(ost, 0, 0, 0.0, 0, 0.0, k)
    p = m[:, active] / tot[active]
    simpson = 1 - (p * p).sum(axis=0)
    risk = float((simpson * tot[active]).sum() / tot[active].sum())
    counts = np.bincount(k[active])
    return OstConcurrency(ost, nact, int(k.max()), float((k[active] >= 2).sum() / nact), int(counts.argmax()),
                          risk, k)


@dataclass(frozen=True)
class LockStats:
    client: str
    enqueues: int
    cancels: int
    callbacks: int
    enqueue_us: float | None  # mean time an enqueue spent in the server (queueing included)

    @property
    def contention(self) -> float:
        """Cancels per enqueue: near 0 when each lock is kept, near 1 when locks ping-pong."""
        return self.cancels / self.enqueues if self.enqueues else 0.0


def lock_stats(hosts: dict[str, HostRpcs | None]) -> list[LockStats]:
    """Lock traffic per client over all OSSs (rpctrace), most contended first."""
    per: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0])
    for h in hosts.values():
        if h is None:
            continue
        for (client, cls), n in h.per_client_class().items():
            slot = {opcodes.ENQUEUE: 0, opcodes.CANCEL: 1, opcodes.CALLBACK: 2}.get(cls)
            if slot is not None:
                per[client][slot] += n
        for (client, cls), (served, _p, total) in h.service.items():
            if cls == opcodes.ENQUEUE:
                per[client][3] += total
                per[client][4] += served
    out = [LockStats(c, int(v[0]), int(v[1]), int(v[2]), v[3] / v[4] if v[4] else None)
           for c, v in per.items() if v[0] or v[1] or v[2]]
    return sorted(out, key=lambda s: (-s.cancels, -s.enqueues, s.client))


def ost_bytes(view: OstView) -> dict[int, float]:
    """Bytes read and written per OST (exports stats)."""
    out: dict[int, float] = defaultdict(float)
    for (ost, _c), v in view.bytes.items():
        out[ost] += v[RB] + v[WB]
    return dict(out)


def imbalance(view: OstView, osts: list[int]) -> float:
    """OSTCost (max/mean, docs/references.md#s000-eq7) of the RPC bytes over the given OSTs."""
    b = ost_bytes(view)
    return ost_cost({o: b.get(o, 0.0) for o in osts})


def class_series(hosts: dict[str, HostRpcs | None]) -> dict[str, dict[int, dict[int, int]]]:
    """Per host: {class: {bin: RPCs}} (rpctrace)."""
    out: dict[str, dict[int, dict[int, int]]] = {}
    for name, h in hosts.items():
        if h is None:
            continue
        d: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for (b, _c, cls), n in h.counts.items():
            d[cls][b] += n
        out[name] = {k: dict(v) for k, v in d.items()}
    return out


def file_ost_map(events, layouts) -> dict[str, dict[int, list[int]]]:
    """Bytes each OST served for each file: {path: {ost: [read bytes, write bytes]}}, from I/O
    events and the files' layouts (RAID-0 mapping)."""
    from iez.layout.raid0 import pieces

    out: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for e in events:
        fl = layouts.get(e.path)
        if fl is None or e.length <= 0:
            continue
        for p in pieces(fl, e.offset, e.length):
            out[e.path][p.ost][0 if e.op == "read" else 1] += p.length
    return {p: dict(d) for p, d in out.items()}


def records_ost_map(records) -> dict[str, dict[int, list[int]]]:
    """The same map from a libiez trace (`FileRecord`s): each file's read and written bytes are
    spread over the OSTs of its layout in proportion to the bytes of [0, max_offset) each holds
    (a trace has totals per file, not each call's offset). Files without a layout are left out."""
    from iez.errors import IezError
    from iez.layout.raid0 import bytes_per_ost
    from iez.plan import parse_layout

    out: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in records:
        if not r.layout or r.max_offset <= 0:
            continue
        try:
            per = bytes_per_ost(parse_layout(r.layout), r.max_offset)
        except IezError:
            continue
        for ost, n in per.items():
            out[r.path][ost][0] += round(r.bytes_read * n / r.max_offset)
            out[r.path][ost][1] += round(r.bytes_written * n / r.max_offset)
    return {p: dict(d) for p, d in out.items()}
