"""`balanced` and the plan writer made faster place every file on the same OSTs and write the same
plan bytes as before: each instance's OST arrays and plan text are pinned by a digest taken from
the code as it was before the speed work (commit a7d6017), on jobs at Spider II's scale (1,008
OSTs on 144 or 126 OSSs) and smaller ones: single-stripe files of four sizes (the bench's job),
mixed stripe counts and sizes with Method II's short stripes, reads, pools, an uneven and loaded
cluster, `Request` objects and columns, the automatic and hierarchical layouts. The plan text is
also checked against the per-file writer (`Plan.add` + `dumps`). No timing here: bench_alloc."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from functools import partial

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from iez.alloc.balanced import _Caps, search_bound
from iez.alloc.policy import AllocOptions, Placements, snapshot_table, tables
from iez.alloc.registry import get_policy
from iez.alloc.scenarios import uneven_fill
from iez.cluster import OSSStats, Snapshot, make_cluster
from iez.errors import ConfigError
from iez.layout.layout import Layout
from iez.plan import Plan, check_keys, dumps, dumps_arrays
from iez.request import Request, RequestColumns, distinct

MiB, GiB, TiB = 1 << 20, 1 << 30, 1 << 40
META = {"app": "exact", "run": "7"}


def bench_columns(files: int) -> RequestColumns:
    """bench_alloc's job: single-stripe files of four sizes, in create order."""
    sizes = np.array([64 * MiB, 256 * MiB, GiB, 4 * GiB], dtype=np.int64)
    paths = np.array([f"/mnt/iez/bench/f.{i:08d}" for i in range(files)], dtype=object)
    return RequestColumns(paths, sizes[np.arange(files) % 4], np.ones(files, np.int64), np.zeros(files),
                          np.zeros(files, np.int64))


def mixed_columns(files: int, seed: int, pools: tuple[str, ...] = ("",), reads: bool = False,
                  scale: int = 1) -> RequestColumns:
    """Stripe counts 1-16 (and every OST), sizes (over `scale`) that are not whole stripes,
    shuffled create times, names of several lengths, some in a pool, some read back."""
    rng = np.random.default_rng(seed)
    count = rng.choice(np.array([1, 1, 1, 2, 4, 8, 16, 0]), files)
    count[rng.integers(0, files, 2)] = -1
    base = np.array([0, MiB, 5 * MiB + 3, 64 * MiB, GiB + 12345, 6 * GiB]) // scale
    size = rng.choice(base, files)
    size += rng.integers(0, np.maximum(size // 20, 1))
    paths = np.array([f"/lustre/run{seed}/r{i % 37}/out.{i}" + ("{{x}}" if i % 101 == 5 else "")
                      for i in range(files)], dtype=object)
    return RequestColumns(paths, size, count, rng.integers(0, 50, files).astype(float),
                          rng.integers(0, len(pools), files), pools,
                          read_bytes=size * rng.integers(0, 3, files) if reads else None)


def loaded(cluster, seed: int) -> Snapshot:
    """A snapshot where some OSTs are being written and read and some OSSs are busy."""
    rng = np.random.default_rng(seed)
    snap = Snapshot.from_cluster(cluster)
    osts = {i: replace(s, write_bps=float(rng.choice([0, 0, 0, 2e8, 6e8])), read_bps=float(rng.choice([0, 0, 3e8])))
            for i, s in snap.osts.items()}
    osses = {name: OSSStats(name, cpu=float(rng.choice([0, 0, 0.5])), mem=float(rng.choice([0, 0.3])))
             for name in snap.osses}
    return replace(snap, osts=osts, osses=osses)


def objects(cols: RequestColumns, every: int = 1) -> list[Request]:
    """Some of `cols` as `Request`s with their writers' facts (what the automatic layout reads)."""
    return [replace(cols[i], writers=1 + i % 9, comm_size=1 + i % 9, transfer_size=MiB << (i % 3),
                    writer_segments=1 + i % 2, api="mpiio" if i % 3 else "posix", rank=i)
            for i in range(0, len(cols), every)]


SPIDER = make_cluster(144, 7, 64 * TiB)
SPIDER_126 = make_cluster(126, 8, 64 * TiB)
UNEVEN = uneven_fill(SPIDER_126, 0.05, 0.6, seed=3)
POOLED = replace(make_cluster(24, 6, 4 * TiB), pools={"fast": tuple(range(0, 144, 3)), "slow": tuple(range(100, 144))})
TESTBED = make_cluster()


def instances():
    """(name, requests, cluster, snapshot, options) of every pinned instance."""
    yield "bench 100k on 126x8", bench_columns(100_000), SPIDER_126, Snapshot.from_cluster(SPIDER_126), {}
    yield "bench 20k on 144x7", bench_columns(20_000), SPIDER, Snapshot.from_cluster(SPIDER), {}
    yield "bench 20k, uneven, loaded", bench_columns(20_000), UNEVEN, loaded(UNEVEN, 1), {}
    yield "bench 20k, weight 0", bench_columns(20_000), UNEVEN, loaded(UNEVEN, 2), {"capacity_weight": 0.0}
    yield "bench 20k, weight 1", bench_columns(20_000), UNEVEN, loaded(UNEVEN, 2), {"capacity_weight": 1.0}
    yield "mixed 3k on 144x7", mixed_columns(3000, 1), SPIDER, Snapshot.from_cluster(SPIDER), {}
    yield "mixed 3k, reads, uneven, loaded", mixed_columns(3000, 2, reads=True), UNEVEN, loaded(UNEVEN, 4), {}
    yield "mixed 3k, pools", mixed_columns(3000, 3, ("", "fast", "slow")), POOLED, loaded(POOLED, 5), {}
    yield "mixed 300 on the testbed", mixed_columns(300, 4, scale=64), TESTBED, Snapshot.from_cluster(TESTBED), {}
    yield ("objects, auto", objects(mixed_columns(2000, 5), 2), UNEVEN, loaded(UNEVEN, 6), {"layout": "auto"})
    yield ("objects, hierarchical", objects(mixed_columns(600, 6)), SPIDER, loaded(SPIDER, 7),
           {"layout": "hierarchical"})


# sha256 of (OST indices, offsets, plan text) per instance, from commit a7d6017's code.
PINNED = {
    "bench 100k on 126x8": "e0f410ac50c1aa8fcd55fcb441e68b0d7741b4178478311d742c684ac515ff37",
    "bench 20k on 144x7": "17aaac3e0c1bcb0e38a422701c889da4d20261199e586e969d87dc330608e9cd",
    "bench 20k, uneven, loaded": "4bfcdc8d2abe8ea03d98c5d21b2211216bd4c27abf9ee5178e64a256c1c24567",
    "bench 20k, weight 0": "7da67463f6764622d5d76fafecb20c57ab5fa5b14517b4d77c7cd133cadbafc2",
    "bench 20k, weight 1": "090616ccd33956a7a68d8f391e9bb89e5b2076bae23eb31e1be7808d7f6746b0",
    "mixed 3k on 144x7": "500977674253b461cdf3bc744919ef7b2ef6cd2f3c200735e3011a9b95fa491c",
    "mixed 3k, reads, uneven, loaded": "9887be6780ff1166d43672f3b0a3f3934ef427feb34806cc44bf55f324cf2e64",
    "mixed 3k, pools": "170a57003467664768bb7eebb38f3faaba3dd7aa996c33be9758fd189aa15f59",
    "mixed 300 on the testbed": "2d9531e8b83d4a4f596e5ca1ea62f59e9aa47ca3c18a23dc0ec8c0e43c9eb922",
    "objects, auto": "16c963e5fcae6df905b4af2e9cbffee5f08d91fdca1c0967abc62134d49f181b",
    "objects, hierarchical": "cd18dc01b51ad64be6baab12e67d2e26171bb9f325a314c884079f9c3bacc323",
}


def digest(placed: Placements, text: str) -> str:
    h = hashlib.sha256(np.ascontiguousarray(placed.osts, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(placed.offsets, dtype=np.int64).tobytes())
    h.update(text.encode())
    return h.hexdigest()


def place(reqs, cluster, snap, opts) -> tuple[Placements, str]:
    placed = get_policy("balanced").place(reqs, cluster, snap, AllocOptions(**{"layout": "keep", **opts}))
    assert isinstance(placed, Placements)
    t = placed.table
    return placed, dumps_arrays(META, placed.paths(), placed.size, placed.offsets, placed.osts, t.pools, t.pool,
                                placed.non_plain())


@pytest.mark.parametrize("case", list(instances()), ids=lambda c: c[0])
def test_placements_and_plan_bytes_are_as_before(case):
    name, reqs, cluster, snap, opts = case
    placed, text = place(reqs, cluster, snap, opts)
    assert digest(placed, text) == PINNED[name]
    if len(reqs) <= 20_000:
        plan = Plan(meta=dict(META))
        for p in placed:
            plan.add(p.path, p.layout)
        assert text == dumps(plan)


NAMES = st.lists(st.one_of(
    st.sampled_from(["/a", "/b", "/ab", "/a/b", "/x" * 70, "/x" * 70 + "y", "/é", "/\udcff"]),
    st.builds(lambda head, mid, tail: f"/{head}{mid}{tail}", st.text("ab/", max_size=3),
              st.sampled_from(["", "m" * 300, "n" * 300]), st.text("abc.é", max_size=12))), max_size=12) | \
    st.tuples(st.lists(st.integers(0, 20), max_size=12), st.sampled_from([1, 8, 9, 300])).map(
        lambda c: [f"/f.{i:0{c[1]}d}" for i in c[0]])  # names of one length: read as rows


@given(NAMES)
def test_check_keys_finds_the_first_repeat_as_plan_add_does(names):
    """Keys of any length (shorter than a hash word, longer than the words hashed, differing only
    in the middle), anywhere in the joined text, non-ASCII and undecodable names; keys all of
    one length."""
    plan, want = Plan(), None
    for p in names:
        if p in plan.entries:
            want = p
            break
        plan.add(p, Layout(stripe_count=1))
    if want is None:
        assert check_keys(names) is False
    else:
        with pytest.raises(ConfigError, match=re.escape(f"plan: {want} is planned twice")):
            check_keys(names)


@given(st.integers(1, 20_000), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_distinct_is_numpys_unique(n, values, seed):
    """Columns of few distinct values (the sample holds them all) and of many (it does not)."""
    rng = np.random.default_rng(seed)
    column = rng.choice(rng.integers(-2**62, 2**62, values), n)
    if seed % 3 == 0:
        column[rng.integers(0, n)] = 7  # one value the sample may miss
    got, want = distinct(column), np.unique(column, return_inverse=True)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_a_snapshots_ost_table_is_built_once_and_follows_the_options():
    snap = Snapshot.from_cluster(TESTBED)
    first = snapshot_table(TESTBED, snap, AllocOptions())
    assert snapshot_table(TESTBED, snap, AllocOptions(layout="auto")) is first
    assert not first.bw.flags.writeable  # shared by the jobs placed on this snapshot
    with pytest.raises(TypeError):
        first.position[3] = 0  # type: ignore[index]
    # every policy starts from the same table (`tables`)
    assert tables([Request("/t/a", 1 << 20)], TESTBED, snap, AllocOptions())[0] is first
    excluded = snapshot_table(TESTBED, snap, AllocOptions(exclude=frozenset({3})))
    assert excluded is not first and not excluded.ok[first.position[3]] and first.ok[first.position[3]]
    later = snap.debit({0: 1 << 30})
    assert snapshot_table(TESTBED, later, AllocOptions()).used[0] > first.used[0]
    reqs = [Request(f"/t/f.{i}", 1 << 30, 2) for i in range(8)]
    placed = get_policy("balanced").place(reqs, TESTBED, snap, AllocOptions(exclude=frozenset({3})))
    assert all(3 not in p.layout.osts() for p in placed)


def test_a_plan_of_no_files_is_its_header():
    none = np.zeros(0, np.int64)
    assert dumps_arrays(META, [], none, np.zeros(1, np.int64), none, [""], none) == dumps(Plan(meta=dict(META)))


@pytest.mark.parametrize("cluster", [TESTBED, UNEVEN, POOLED], ids=["testbed", "uneven", "pooled"])
def test_the_least_bound_is_the_one_the_search_finds_trying_every_bound(cluster):
    """`_Caps.least_bound` answers from the least bound that fits (`threshold`, the caps' steps
    bisected): the same float as the search trying each of its bounds, on loaded OSTs and OSSs,
    with and without reads, tight and loose room; and it finds that bound nearly always."""
    found = 0
    views = [snapshot_table(cluster, loaded(cluster, seed), AllocOptions()) for seed in range(4)]
    for seed in range(60):
        rng = np.random.default_rng(seed)
        osts = views[seed % len(views)]
        pos = np.flatnonzero(rng.random(osts.n) < rng.uniform(0.3, 1)) if seed % 3 else np.arange(osts.n)
        if not len(pos):
            continue
        servers, grp = np.unique(osts.oss[pos], return_inverse=True)
        m = int(rng.integers(1, 20_000))
        base = np.minimum(rng.integers(0, 3 * m, len(pos)) if seed % 4 == 1 else np.full(len(pos), m), m)
        units = (float(rng.uniform(MiB, 4 * GiB)), float(rng.choice([0, rng.uniform(MiB, GiB)])))
        loads = tuple(rng.choice([0, 1], osts.n) * rng.uniform(0, 50 * GiB, osts.n) for _ in range(2))
        caps = _Caps(pos, base, grp, servers, units, osts, loads)
        k = int(rng.integers(1, int(base.sum()) + 1))
        t = float(rng.choice([0, rng.uniform(0, 10)]))
        lo = max(t, caps.lower_bound(k))
        assert caps.least_bound(k, t) == search_bound(lo, partial(caps.fits, k))
        found += caps.threshold(k, lo) is not None or caps.fits(k, lo)
    assert found >= 50


@pytest.mark.parametrize("width", [8, 9, 16, 17, 40])
def test_keys_of_one_length_in_order_are_checked_without_hashes(width):
    """Names of one length that rise (generated in order) have no repeat; one repeated next to
    itself, or out of order further on, is found as `Plan.add` finds it; a name that differs
    from the one before only in its last byte, or only in a word shared by all before it."""
    names = [f"/d/{i:0{width}d}" for i in range(3000)]
    assert check_keys(names) is False
    for at, again in ((1234, 1233), (2999, 5), (1, 0)):
        with pytest.raises(ConfigError, match=re.escape(f"plan: {names[again]} is planned twice")):
            check_keys(names[:at] + [names[again]] + names[at:])
    tail = [f"/{c * (width + 2)}" for c in "abc"]
    assert check_keys(tail) is False and check_keys(tail[::-1]) is False
    with pytest.raises(ConfigError, match="planned twice"):
        check_keys(tail + tail[-1:])
