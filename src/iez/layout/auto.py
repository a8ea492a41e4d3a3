"""The automatic layout: a file's stripe count and stripe size chosen by a cost model.

The model (docs/layouts.md, "The cost model"). A file of W bytes written by n writers, striped
over c of the N usable OSTs of its pool, in a run that writes F = W_job / W times its bytes, takes

    T(c) = max( ⌈F c / N⌉ (W / c / b_c + t_obj),  ⌈F c / S⌉ W / (c B),  W / (n β) + ⌈c / n⌉ t_obj,  W_job / β_job )

- The busiest OST. The run's F c stripes of W/c bytes (one round of equal stripes, Method II,
  docs/references.md#s000-method2) go round the N usable OSTs, so the busiest holds ⌈F c / N⌉ of
  them, each costing its bytes at b_c (the c-th fastest usable OST's write bandwidth, what other
  jobs' load leaves this job) plus t_obj, the cost of one object. t_obj = R / b̄: each object
  costs at least one RPC of its own (the first and last RPC of a writer's range in it are partial,
  and it is one more extent lock), R = 1 MiB (docs/references.md#l-rpc-size), b̄ the median OST.
  This term is what keeps a file-per-process run's files narrow (many objects per OST for no
  gain) and what spreads a lone shared file (⌈c / N⌉ = 1: every stripe more takes bytes off it).
- The busiest OSS: stripes go round the S OSSs that serve usable OSTs, as Lustre's round-robin
  deals them (docs/references.md#l-alloc-rr-array); B is the slowest OSS's network bandwidth left
  for the job.
- The writers: each moves at most β, one client link, and talks to ⌈c / n⌉ objects, paying t_obj
  for each (the per-OST client cost seed 001 measured, docs/references.md#s001-fig3). The cluster
  model gives links only for the OSSs (`nic_bw`); the clients are taken to be on the same network
  (β: the median OSS link; the simulator's default client link is the same figure).
- The job's clients, when known (`client_bw`): the run's bytes through them.

The count is then, in this order:

1. The fastest: the count minimising T; among equally fast counts (a bottleneck that does not
   depend on c, such as the OSSs' links), the one whose busiest OST finishes first, which is the
   widest spread: the job's OSTCost (docs/references.md#s000-eq7) is then the best its stripes allow.
2. Bounded by what is worth an object: every object holds at least R_min = 1 MiB ("a file
   smaller than 1 MB, does not need to be striped", docs/references.md#s001-hierarchical); and
   by N and LOV_MAX_STRIPE_COUNT (docs/references.md#l-abi-limits), the counts tried.
3. Writers: with n > 1, a count one stripe fewer that divides n or that n divides replaces it
   if its time is no longer: each object is then written by whole writers' blocks, so no two
   writers share an object, where that costs nothing.

The stripe size is the allocator's (Method II by default: one round of equal stripes) made a
multiple of the writes' unit: the largest power of two dividing every write (`write_align`, else
the transfer size's), and at least the 1 MiB RPC, so no aligned write straddles two OSTs and
every full stripe is whole RPCs; rounded up, or down where that fills the objects more evenly
(`round_size`); within Lustre's limits (a multiple of 64 KiB below 4 GiB,
docs/references.md#l-abi-limits).

A file whose size is not known (0 bytes) gets the progressive file layout of the Lustre manual's
example, `-E 4M -c 1 -E 64M -c 4 -E -1 -c -1` (docs/references.md#l-manual-pfl): it widens as it
grows, from one stripe to every usable OST.

A file that grows (its bytes rose over the traced runs) gets the same idea fitted to it: its
layout for the predicted bytes up to them, then one component to EOF with the count the model
gives the file as its bytes grow without bound (`growth_count`). As W grows, an object's cost
t_obj shrinks against its W/c bytes, so that count is the one minimising T(c) without t_obj; the
1 MiB an object bound falls away too. The run's share F stays, so a file of a file-per-process
run keeps the count its run's OSTs allow. Only a tail wider than the head is worth a component;
its stripe size is the file system's (the allocator's, docs/layouts.md), since its bytes are
not known.

A file whose writers each write several segments (IOR -s, HACC-IO's variable by variable:
`segments` > 1) with a known block (W / writers / segments) gets a stripe size that follows the
blocks (`block_stripe`): the block itself (or the largest power of two dividing it, at 4 GiB and
more), if it is a multiple of the writes' unit, the blocks fill the objects evenly and the count
is a multiple or a divisor of the writers. Every stripe then lies inside one writer's block, and
each object holds the blocks of one writer (or of writers / count), where Method II's one round
of stripes puts the blocks of every writer in every object. Where those conditions fail, the
round of stripes stays: it is even, and uneven objects cost more than shared ones (the simulator
says so with its lock model, docs/simulator.md).

Pure: plain numbers in, a `Choice` out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from iez.layout.layout import LOV_MAX_STRIPE_COUNT, LOV_MIN_STRIPE_SIZE, LUSTRE_EOF, STRIPE_SIZE_LIMIT
from iez.units import format_size

RPC_SIZE = 1 << 20  # osc max_pages_per_rpc: 256 pages of 4 KiB (docs/references.md#l-rpc-size)
MIN_STRIPE_BYTES = 1 << 20  # "a file smaller than 1 MB, does not need to be striped" (references: s001-hierarchical)
# The Lustre manual's PFL example: (extent end, stripe count), -1 = every OST (references: l-manual-pfl).
PFL_TEMPLATE: tuple[tuple[int, int], ...] = ((4 << 20, 1), (64 << 20, 4), (LUSTRE_EOF, -1))
OST_TERM = 0  # the row of `bottlenecks` that is the busiest OST's
TERMS = ("its OSTs", "its OSSs", "its writers", "the job's clients")
EPS = 1e-9  # relative: counts this close in time are equally fast
# The largest power of two a stripe size may be (sizes stay below 4 GiB).
MAX_UNIT = STRIPE_SIZE_LIMIT >> 1


@dataclass(frozen=True)
class Servers:
    """What the model sees of one pool: its usable OSTs and the OSSs that serve them."""

    ost_bw: tuple[float, ...]  # write bandwidth left for the job, per usable OST (bytes/s)
    oss_bw: tuple[float, ...]  # network bandwidth left for the job, per OSS serving one of them
    writer_bw: float  # what one writer's client link moves (bytes/s)
    job_bw: float = math.inf  # what the job's clients move all together (inf = not a limit)

    def __post_init__(self) -> None:
        if not self.ost_bw or not self.oss_bw:
            raise ValueError("a pool needs at least one usable OST and its OSS")

    @property
    def n(self) -> int:
        return len(self.ost_bw)


@dataclass(frozen=True)
class FileShape:
    """A file as the model sees it (0 = not known)."""

    write_bytes: int
    writers: int = 1
    transfer_size: int = 0
    write_align: int = 0
    job_bytes: int = 0  # bytes of the whole run written with it (0 = the file alone)
    segments: int = 0  # contiguous extents each writer wrote (1 = one block each; 0 = not known)
    grows: bool = False  # its bytes rose over the traced runs: widen past them


@dataclass(frozen=True)
class Choice:
    stripe_count: int  # the widest component's for a PFL layout
    unit: int  # the stripe size is a multiple of this
    components: tuple[tuple[int, int], ...] = ()  # PFL: (extent end, stripe count); () = plain
    reason: str = ""


def write_time(shape: FileShape, servers: Servers, counts: np.ndarray) -> np.ndarray:
    """T(c) of the module docstring (seconds), for each count in `counts`."""
    return bottlenecks(shape, servers, counts).max(axis=0)


def bottlenecks(shape: FileShape, servers: Servers, counts: np.ndarray, objects: bool = True) -> np.ndarray:
    """The four terms of T(c), one row each: the busiest OST, the busiest OSS, the writers, the
    clients; `objects=False` drops t_obj, as bytes growing without bound do (`growth_count`)."""
    w = float(max(shape.write_bytes, 1))
    k = np.asarray(counts, dtype=np.int64)
    c = k.astype(float)
    b = np.sort(np.asarray(servers.ost_bw, dtype=float))[::-1]
    oss = np.asarray(servers.oss_bw, dtype=float)
    f = max(shape.job_bytes, shape.write_bytes) / w  # F: the run's bytes in files like this one
    t_obj = object_cost(servers) if objects else 0.0
    with np.errstate(over="ignore"):  # an OST of ~0 bandwidth: its count takes forever (inf)
        t_ost = np.ceil(f * c / len(b) - EPS) * (w / (c * b[k - 1]) + t_obj)
        t_oss = np.ceil(f * c / len(oss) - EPS) * w / (c * oss.min())
    t_writers = w / (max(1, shape.writers) * servers.writer_bw) + np.ceil(c / max(1, shape.writers)) * t_obj
    t_clients = f * w / servers.job_bw
    return np.stack([t_ost, t_oss, t_writers, np.full_like(c, t_clients)])


def object_cost(servers: Servers) -> float:
    """t_obj: one RPC at the median usable OST's rate (seconds)."""
    return RPC_SIZE / float(np.median(servers.ost_bw))


def stripe_unit(transfer_size: int = 0, write_align: int = 0) -> int:
    """What a stripe size must be a multiple of: the writes' power-of-two alignment (write_align,
    else the transfer size's largest power-of-two divisor), at least the RPC size."""
    align = write_align or (transfer_size & -transfer_size if transfer_size > 0 else 0)
    return min(max(RPC_SIZE, align), MAX_UNIT)


def fit_size(size: int, unit: int) -> int:
    """`size` rounded up to a multiple of `unit`, kept a multiple of 64 KiB below 4 GiB."""
    unit = max(LOV_MIN_STRIPE_SIZE, unit)
    out = -(-max(size, 1) // unit) * unit
    limit = (STRIPE_SIZE_LIMIT - 1) // unit * unit
    return min(out, limit)


def busiest_object(write_bytes: int, count: int, size: int) -> int:
    """Bytes on the fullest of `count` objects when `write_bytes` are striped `size` at a time
    (RAID-0: whole rounds, then the rest from the first object on)."""
    rounds, rest = divmod(write_bytes, size * count)
    return rounds * size + min(size, rest)


def round_size(write_bytes: int, count: int, size: int, unit: int) -> int:
    """The allocator's stripe size `size` as a multiple of `unit`: rounded up, unless rounding
    down fills the objects more evenly. Rounded up, a file a little over whole rounds of the unit
    leaves whole objects empty (60 MiB + 2 KiB on 15 stripes: 5 MiB stripes fill 12); rounded
    down, the small rest wraps onto the first object (4 MiB stripes: 15 of 4 MiB, one 2 KiB more)."""
    up = fit_size(size, unit)
    down = up - max(LOV_MIN_STRIPE_SIZE, unit)
    if down < max(LOV_MIN_STRIPE_SIZE, unit) or busiest_object(write_bytes, count, down) >= \
            busiest_object(write_bytes, count, up):
        return up
    return down


def block_stripe(write_bytes: int, writers: int, segments: int, count: int, unit: int) -> int:
    """A stripe size that follows the writers' blocks of a segmented file (`segments` > 1 blocks
    of write_bytes / writers / segments each) on `count` stripes: the block, or at 4 GiB and more
    the largest power of two dividing it. 0 (keep the round of stripes) unless it pays: the block
    is known, whole and a multiple of `unit` (and of 64 KiB), the blocks fill the `count` objects
    evenly, and each object holds whole writers' blocks (`count` a multiple or a divisor of the
    writers: one writer an object, or writers / count, the fewest `count` objects allow)."""
    blocks = writers * segments
    if segments <= 1 or count < 2 or write_bytes % blocks or blocks % count or \
            (count % writers and writers % count):
        return 0
    block = write_bytes // blocks
    size = block if block < STRIPE_SIZE_LIMIT else min(block & -block, MAX_UNIT)
    unit = max(LOV_MIN_STRIPE_SIZE, unit)
    return size if size and size % unit == 0 else 0


def _fastest(rows: np.ndarray, counts: np.ndarray) -> int:
    """The count of `counts` minimising T; among equally fast ones, the one whose busiest OST
    finishes first (the best spread: docs/references.md#s000-eq7)."""
    t = rows.max(axis=0)
    fastest = np.flatnonzero(t <= t.min() * (1 + EPS))
    return int(counts[fastest[int(np.argmin(rows[OST_TERM, fastest]))]])


def growth_count(shape: FileShape, servers: Servers) -> int:
    """The count the model gives the file as its bytes grow without bound: T(c) without t_obj."""
    counts = np.arange(1, min(servers.n, LOV_MAX_STRIPE_COUNT) + 1)
    return _fastest(bottlenecks(shape, servers, counts, objects=False), counts)


def choose(shape: FileShape, servers: Servers) -> Choice:
    """The automatic layout of one file on `servers` (the module docstring's rules, in order),
    with a one-line reason."""
    n_osts = min(servers.n, LOV_MAX_STRIPE_COUNT)
    unit = stripe_unit(shape.transfer_size, shape.write_align)
    writers = max(1, shape.writers)
    if shape.write_bytes <= 0:
        comps = tuple((end, n_osts if c == -1 else min(c, n_osts)) for end, c in PFL_TEMPLATE)
        return Choice(comps[-1][1], unit, comps, "size not known: PFL 1 stripe to 4 MiB, 4 to 64 MiB, "
                      f"then all {n_osts} usable OSTs (Lustre manual template)")
    w = shape.write_bytes
    counts = np.arange(1, n_osts + 1)
    rows = bottlenecks(shape, servers, counts)
    t = rows.max(axis=0)
    c_time = _fastest(rows, counts)
    binding = int(np.argmax(rows[:, c_time - 1]))
    why = f"fastest by the cost model ({_seconds(float(t[c_time - 1]))}, bound by {TERMS[binding]})"
    count, cap = c_time, max(1, w // MIN_STRIPE_BYTES)
    if count > cap:
        count, why = cap, f"each object holds at least {format_size(MIN_STRIPE_BYTES)}"
    if writers > 1 and count > 1:
        flow = bottlenecks(shape, servers, np.array([count, count - 1])).max(axis=0)
        for c, f in ((count, flow[0]), (count - 1, flow[1])):
            if f <= flow[0] and (writers % c == 0 or c % writers == 0):
                if c != count:
                    why += f", {c} to align with {writers} writers"
                count = c
                break
    why = f"{_stripes(count)}: {why} ({format_size(w)} by {_writers(writers)})"
    if shape.grows:
        tail = growth_count(shape, servers)
        if tail > count:
            return Choice(tail, unit, ((w, count), (LUSTRE_EOF, tail)),
                          f"{why}; it grows: past {format_size(w)}, {_stripes(tail)}, the model's count "
                          "as its bytes grow (PFL)")
        why += "; it grows, and the model stripes it no wider as it does"
    return Choice(count, unit, (), why)


def _stripes(n: int) -> str:
    return "1 stripe" if n == 1 else f"{n} stripes"


def _writers(n: int) -> str:
    return "1 writer" if n == 1 else f"{n} writers"


def _seconds(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"
