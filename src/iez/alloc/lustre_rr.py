"""LOD round-robin: the OSS-interleaved RR array and RR allocation (docs/references.md#l-alloc-rr-array,
#l-alloc-rr; sections of docs/lustre/allocator.md in parentheses below).

Pure: OSTs are plain indices, the caller decides which OST may take a stripe (statfs state,
degraded, used by another component) through a predicate, and owns the random generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

EMPTY = None  # LOV_QOS_EMPTY: an RR slot no OST was placed in
RESEED_MIN = 2000  # LOV_CREATE_RESEED_MIN (lod_qos.c)
RESEED_MULT = 30  # LOV_CREATE_RESEED_MULT

# (ost, speed, OSTs chosen so far) -> may this OST take the next stripe at this speed?
Check = Callable[[int, int, list[int]], bool]


@dataclass(frozen=True)
class Server:
    """An OSS as LOD's server list holds it: its name and how many OSTs it has ever added."""

    name: str
    tgt_count: int


def server_order(osts: Sequence[tuple[int, str]]) -> list[Server]:
    """LOD's server list after adding `osts` ((index, oss) in add order): `lu_qos_add_tgt` (§2a).

    Sorted by OST count, descending; a server whose count grows is re-inserted before the first
    server with a strictly smaller count, so among equals it goes last.
    """
    order: list[Server] = []
    for _, name in osts:
        old = next((s for s in order if s.name == name), None)
        if old is not None:
            order.remove(old)
        s = Server(name, (old.tgt_count if old else 0) + 1)
        pos = next((i for i, e in enumerate(order) if s.tgt_count > e.tgt_count), len(order))
        order.insert(pos, s)
    return order


def calc_rr(members: Sequence[int], server_of: Mapping[int, str], servers: Sequence[Server]) -> list[int | None]:
    """The RR array of a pool (`lod_qos_calc_rr`, §2b): each server's OSTs evenly spaced.

    `members` in pool order (the global pool: add order). `tgt_count` is the server's count in
    the whole file system, not in the pool, as in Lustre.
    """
    n = len(members)
    rr: list[int | None] = [EMPTY] * n
    for s in servers:
        j = 0
        for ost in members:
            if server_of[ost] != s.name:
                continue
            nxt = j * n // s.tgt_count
            while rr[nxt] is not EMPTY:
                nxt = (nxt + 1) % n
            rr[nxt] = ost
            j += 1
    return rr


def reseed_period(n: int) -> int:
    """Allocations between two random restarts of an RR list of n slots (§2c)."""
    n = max(n, 1)
    return (RESEED_MIN // n + RESEED_MULT) * n


@dataclass
class RRState:
    """`struct lu_qos_rr`'s counters: one per RR list (the global one and each pool's)."""

    start_idx: int = 0
    offset_idx: int = 0
    start_count: int = 0


def alloc_rr(rr: Sequence[int | None], st: RRState, stripe_count: int, count_min: int, check: Check,
             rng: random.Random, *, stripes_per_ost: int = 1, pre_increment: bool = True) -> list[int]:
    """Choose up to `stripe_count` OSTs from the RR array (`lod_ost_alloc_rr`, §2c).

    `pre_increment` selects 2.15+ semantics (atomic pre-increment, start index kept across the
    retry speeds); False gives 2.5-2.14 (`lod_alloc_rr`: post-increment, start restored per
    speed). Speeds 0 and 1 walk the list in start order; if fewer than `count_min` OSTs were
    found the next speed relaxes the checks. Returns the OSTs in stripe order, possibly fewer
    than asked (RR succeeds with one stripe); `st` is advanced in place.
    """
    n = len(rr)
    if n == 0:
        return []
    st.start_count -= 1
    if st.start_count <= 0:
        st.start_idx = rng.randrange(n)  # prandom_u32_max(N)
        st.start_count = reseed_period(n)
    elif pre_increment and st.start_idx >= n:
        st.start_idx -= n
        if stripe_count > 1 and n % stripe_count != 1:
            st.offset_idx += 1  # slowly precess the start OST
    elif not pre_increment and (count_min >= n or st.start_idx > n):
        st.start_idx %= n
        if stripe_count > 1 and n % stripe_count != 1:
            st.offset_idx += 1
    saved = st.start_idx
    chosen: list[int] = []
    for speed in range(3):
        if not pre_increment:
            st.start_idx = saved
        idx = 0
        for i in range(n * stripes_per_ost):
            if len(chosen) >= stripe_count:
                break
            if not pre_increment:
                idx = st.start_idx + st.offset_idx
                st.start_idx += 1
            elif speed < 2 or i == 0:
                st.start_idx += 1
                idx = st.start_idx + st.offset_idx
            else:
                idx += 1  # last speed: walk one slot at a time from where it started
            ost = rr[idx % n]
            if ost is EMPTY or not check(ost, speed, chosen):
                continue
            chosen.append(ost)
        if speed == 2 or len(chosen) >= count_min:
            break
    return chosen
