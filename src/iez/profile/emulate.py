"""Emulated RPC logs: the RPCs Lustre would send for given I/O, as an OSS would log them.

Pure: I/O events (`iez.profile.ioevents`) and each file's layout in, RPCs out, rendered as
real-format rpctrace debug-log lines per OSS and as `obdfilter.*.exports.<nid>.stats` samples.

The model (docs/liopprof.md, "Emulated RPC logs"):
- A read or write is cut along the stripes of the file's layout (RAID-0, absolute offsets as
  lov_stripe_number does), then into bulk RPCs at most `rpc_size` long that do not cross an
  `rpc_size` boundary of the OST object (osc builds RPCs of max_pages_per_rpc contiguous pages).
  No client cache, readahead or write-back: each call reaches the OSTs when it is made.
- Each process is closed-loop: its next call starts when the previous one's RPCs are done, or
  at its logged time if later.
- Each OST is one disk serving RPCs in arrival order: an RPC takes bytes / bandwidth (the
  cluster's read_bw or write_bw) plus `seek_s` unless it continues where the previous RPC on
  that OST ended in the same object. Data RPCs run on the OSS's `ll_ost_io` threads.
- Extent locks (LDLM_ENQUEUE on `ll_ost` threads): a client node asks for a PR (read) or PW
  (write) lock on an object unless one it holds covers the extent; locks of other nodes that
  conflict are cancelled first (LDLM_CANCEL from each holder, on `ldlm_cn` threads); the grant
  is expanded to the largest extent free of conflicting locks, as LDLM's extent policy does.
"""

from __future__ import annotations

import heapq
import uuid
import zlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from iez.cluster import Cluster, ost_name
from iez.emulated.paramtree import Accumulator, render_stats
from iez.errors import LayoutError
from iez.layout.layout import LUSTRE_EOF, FileLayout, Layout
from iez.layout.raid0 import pieces
from iez.profile import opcodes
from iez.profile.ioevents import IoEvent

LNET_PID = 12345  # LNET_PID_LUSTRE: the "12345-" of every NID in an rpctrace line
XID_BASE = 1529178798258480  # client xids count up from a large base, as in the paper's example (references: s003-fig2)
STYLES = ("2.13", "2.11", "2.5")  # 2.13+: req@ and job; 2.11-2.12: no job; 2.5-2.10: "procesed"


@dataclass(frozen=True)
class ServerModel:
    rpc_size: int = 1 << 20  # max_pages_per_rpc 256 x 4 KiB
    seek_s: float = 0.008  # an HDD seek plus half a rotation
    io_threads: int = 8  # ll_ost_io threads per OSS
    lock_s: float = 50e-6  # an LDLM enqueue or cancel in its handler


@dataclass(frozen=True)
class Rpc:
    host: str
    ost: int
    nid: str
    pid: int
    xid: int
    opc: int
    arrival: float
    start: float
    end: float
    thread: str
    thread_pid: int
    cpu: int
    nbytes: int
    jobid: str = ""


def split_rpcs(obj_offset: int, length: int, rpc_size: int) -> list[tuple[int, int]]:
    """(object offset, bytes) of each bulk RPC: no RPC crosses an rpc_size boundary."""
    out = []
    x, end = obj_offset, obj_offset + length
    while x < end:
        n = min(end, (x // rpc_size + 1) * rpc_size) - x
        out.append((x, n))
        x += n
    return out


def client_uuid(nid: str) -> str:
    """A stable client UUID for an emulated client node (a real one is random per mount)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"iez-client:{nid}"))


class _Locks:
    """Granted extent locks per OST object: {object: {nid: (mode, lo, hi)}}."""

    def __init__(self) -> None:
        self.granted: dict[tuple, dict[str, tuple[str, int, int]]] = defaultdict(dict)

    def request(self, obj: tuple, nid: str, mode: str, lo: int, hi: int) -> tuple[bool, list[str]]:
        """(an enqueue is needed, nids whose locks are cancelled first)."""
        locks = self.granted[obj]
        held = locks.get(nid)
        if held and held[1] <= lo and hi <= held[2] and (held[0] == "PW" or mode == "PR"):
            return False, []
        conflicts = [n for n, (m, a, b) in locks.items()
                     if n != nid and a < hi and lo < b and (mode == "PW" or m == "PW")]
        for n in conflicts:
            del locks[n]
        blockers = [(a, b) for n, (m, a, b) in locks.items() if n != nid and (mode == "PW" or m == "PW")]
        new_lo = max([b for a, b in blockers if b <= lo], default=0)
        new_hi = min([a for a, b in blockers if a >= hi], default=LUSTRE_EOF)
        locks[nid] = (mode, new_lo, new_hi)
        return True, conflicts


class _Oss:
    def __init__(self, name: str, index: int, model: ServerModel) -> None:
        base = 20000 + 1000 * index
        self.io = [(0.0, i) for i in range(model.io_threads)]  # (free at, thread)
        self.io_names = [(f"ll_ost_io{i % 2:02d}_{i // 2:03d}", base + i) for i in range(model.io_threads)]
        self.ost_threads = [(f"ll_ost{i % 2:02d}_{i // 2:03d}", base + 100 + i) for i in range(4)]
        self.cn_threads = [(f"ldlm_cn{i % 2:02d}_{i // 2:03d}", base + 200 + i) for i in range(2)]
        self.rr = 0
        self.name = name


def emulate_rpcs(events: Iterable[IoEvent], layouts: Mapping[str, Layout | FileLayout], cluster: Cluster,
                 model: ServerModel = ServerModel()) -> list[Rpc]:
    """Every RPC the events cause, in issue order. Events on files without a layout raise."""
    procs: dict[tuple[str, int], list[IoEvent]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e.time):
        if e.length > 0:
            procs[(e.nid, e.pid)].append(e)
    osses = {s.name: _Oss(s.name, i, model) for i, s in enumerate(cluster.osses)}
    ost_free: dict[int, float] = defaultdict(float)
    ost_pos: dict[int, tuple] = {}
    locks = _Locks()
    xids: dict[str, int] = defaultdict(lambda: XID_BASE)
    rpcs: list[Rpc] = []

    def rpc(oss: _Oss, ost: int, nid: str, pid: int, opc: int, arrival: float, start: float, end: float,
            thread: tuple[str, int], nbytes: int, jobid: str) -> Rpc:
        xids[nid] += 1
        r = Rpc(oss.name, ost, nid, pid, xids[nid], opc, arrival, start, end, thread[0], thread[1],
                thread[1] % 4, nbytes, jobid)
        rpcs.append(r)
        return r

    def lock_rpc(oss: _Oss, ost: int, nid: str, pid: int, opc: int, t: float, jobid: str) -> float:
        pool = oss.ost_threads if opc == opcodes.LDLM_ENQUEUE else oss.cn_threads
        oss.rr += 1
        return rpc(oss, ost, nid, pid, opc, t, t, t + model.lock_s, pool[oss.rr % len(pool)], 0, jobid).end

    def issue(e: IoEvent, t: float) -> float:
        fl = layouts.get(e.path)
        if fl is None:
            raise LayoutError(f"no layout for {e.path}")
        done = t
        mode = "PW" if e.op == "write" else "PR"
        opc = opcodes.OST_WRITE if e.op == "write" else opcodes.OST_READ
        for p in pieces(fl, e.offset, e.length):
            ost = cluster.ost(p.ost)
            oss = osses[ost.oss]
            obj = (e.path, p.component, p.stripe)
            grant = t
            need, cancelled = locks.request(obj, e.nid, mode, p.obj_offset, p.obj_offset + p.length)
            for holder in cancelled:  # blocking AST to the holder, which cancels
                grant = max(grant, lock_rpc(oss, p.ost, holder, 0, opcodes.LDLM_CANCEL, t, ""))
            if need:
                grant = max(grant, lock_rpc(oss, p.ost, e.nid, e.pid, opcodes.LDLM_ENQUEUE, grant, e.jobid))
            bw = ost.write_bw if e.op == "write" else ost.read_bw
            for off, n in split_rpcs(p.obj_offset, p.length, model.rpc_size):
                free_at, th = oss.io[0]
                start = max(grant, ost_free[p.ost], free_at)
                seek = 0.0 if ost_pos.get(p.ost) == (obj, off) else model.seek_s
                end = start + seek + n / bw
                ost_free[p.ost] = end
                ost_pos[p.ost] = (obj, off + n)
                heapq.heapreplace(oss.io, (end, th))
                rpc(oss, p.ost, e.nid, e.pid, opc, grant, start, end, oss.io_names[th], n, e.jobid)
                done = max(done, end)
        return done

    ready = [(evs[0].time, i, key, 0) for i, (key, evs) in enumerate(procs.items())]
    heapq.heapify(ready)
    while ready:
        t, i, key, k = heapq.heappop(ready)
        evs = procs[key]
        done = issue(evs[k], t)
        if k + 1 < len(evs):
            heapq.heappush(ready, (max(evs[k + 1].time, done), i, key, k + 1))
    return rpcs


def _stamp(t: float) -> str:
    us = int(round(t * 1e6))
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def debug_log_lines(rpcs: Iterable[Rpc], style: str = "2.13") -> Iterator[str]:
    """The rpctrace lines of these RPCs (one host's), Handling at start and Handled at end, in
    time order, in the format of Lustre `style` (docs/references.md#l-fmt-rpctrace)."""
    if style not in STYLES:
        raise ValueError(f"unknown rpctrace style {style!r}")
    new = style == "2.13"
    where = ("service.c:2335", "service.c:2378") if new else ("service.c:2071", "service.c:2115")
    spelled = "procesed" if style == "2.5" else "processed"
    fields = "pname:cluuid+ref:pid:xid:nid:opc" + (":job" if new else "")
    lines = []
    transno = 0
    for seq, r in enumerate(rpcs):
        req = f"req@{zlib.crc32(f'{r.nid}:{r.xid}'.encode()):016x} " if new else ""
        values = (f"{r.thread}:{client_uuid(r.nid)}+6:{r.pid}:x{r.xid}:{LNET_PID}-{r.nid}:{r.opc}"
                  + (f":{r.jobid}" if new else ""))
        head = f"00000100:00100000:{r.cpu}.0:{{}}:0:{r.thread_pid}:0:({{}}:ptlrpc_server_handle_request()) "
        lines.append((r.start, seq, 0, head.format(_stamp(r.start), where[0]) + f"Handling RPC {req}{fields} {values}"))
        if r.opc == opcodes.OST_WRITE:
            transno += 1
        proc = int(round((r.end - r.start) * 1e6))
        total = int(round((r.end - r.arrival) * 1e6))
        lines.append((r.end, seq, 1, head.format(_stamp(r.end), where[1]) + f"Handled RPC {req}{fields} {values} "
                      f"Request {spelled} in {proc}us ({total}us total) trans "
                      f"{transno if r.opc == opcodes.OST_WRITE else 0} rc 0/0"))
    for _t, _s, _k, line in sorted(lines):
        yield line


def exports_samples(rpcs: list[Rpc], cluster: Cluster, times: list[float], start: float,
                    ) -> list[tuple[float, dict[str, str]]]:
    """Per OSS host, `obdfilter.<ost>.exports.<nid>.stats` at each sample time: data RPCs count
    when their handler finishes (ofd counts read_bytes/write_bytes and the [usecs] latency of
    read/write then, 2.14+). Returns [(time, {host: get_param dump text})]."""
    from iez.lustre.getparam import format_getparam

    data = sorted((r for r in rpcs if r.opc in (opcodes.OST_READ, opcodes.OST_WRITE)), key=lambda r: r.end)
    acc: dict[tuple[int, str], dict[str, tuple[Accumulator, str]]] = {}
    out = []
    i = 0
    for t in times:
        while i < len(data) and data[i].end <= t:
            r = data[i]
            c = acc.setdefault((r.ost, r.nid), {"read_bytes": (Accumulator(), "bytes"), "write_bytes": (Accumulator(), "bytes"),
                                                "read": (Accumulator(), "usecs"), "write": (Accumulator(), "usecs")})
            op = "read" if r.opc == opcodes.OST_READ else "write"
            c[f"{op}_bytes"][0].add(r.nbytes)
            c[op][0].add(int(round((r.end - r.start) * 1e6)))
            i += 1
        per_host: dict[str, dict[str, str]] = defaultdict(dict)
        for (ost, nid), counters in sorted(acc.items()):
            name = f"obdfilter.{ost_name(cluster.fsname, ost)}.exports.{nid}.stats"
            per_host[cluster.oss_of(ost)][name] = render_stats(counters, t, start).rstrip("\n")
        out.append((t, {h: format_getparam(v) for h, v in per_host.items()}))
    return out
