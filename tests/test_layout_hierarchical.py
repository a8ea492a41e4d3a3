"""Hierarchical striping on PFL (iez.layout.hierarchical, docs/references.md#s001-hierarchical):
the rule choosing groups and subset size, the component extents, the checks that turn a layout
Lustre would refuse into one EINVAL line, its lov_comp_md_v1 bytes against the ABI tables
(Python and C encoders), usage by component extent, and `balanced` choosing disjoint subsets
spread over OSSs within its time bound while the LOD baselines stay as they were."""

from __future__ import annotations

import struct
import subprocess

import pytest

from conftest import BUILD, need_built
from iez.alloc.policy import AllocOptions, job_bytes, makespan
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.emulated.usage import file_ost_bytes
from iez.errors import AllocationError
from iez.layout import lum
from iez.layout.hierarchical import (
    LUM_MAX,
    SUBFILE_MIN,
    Grouping,
    choose,
    composite,
    cut,
    extents,
    interleave,
    one_block_each,
    validate,
)
from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.layout.raid0 import bytes_per_ost
from iez.plan import format_layout
from iez.request import Request

MiB = 1 << 20
GiB = 1 << 30
CLUSTER = make_cluster(4, 4)  # 4 OSSs x 4 OSTs: OSTs 0-3 on oss0, 4-7 on oss1, ...


# -- the rule -------------------------------------------------------------------------------------

def test_rule_groups_divide_the_writers_and_cover_the_files_osts():
    assert choose(64 * MiB, 4, 8)[0] == Grouping(4, 2)  # one component per writer, two OSTs each
    assert choose(64 * MiB, 16, 8)[0] == Grouping(4, 2)  # at most c/2 subsets: groups of 4 writers
    assert choose(GiB, 496, 56)[0] == Grouping(8, 7)  # whole groups of ranks on all 56 OSTs (not 16 x 3 = 48)
    assert choose(GiB, 7, 56)[0] == Grouping(7, 8)  # few writers: wide subsets, every OST used
    for b, w, c in ((GiB, 496, 56), (64 * MiB, 12, 30), (3 * GiB, 1024, 160)):
        for g in choose(b, w, c):
            assert w % g.groups == 0 and g.subset >= 2 and g.stripes <= c and b // g.groups >= SUBFILE_MIN


def test_rule_declines_what_it_cannot_group():
    assert choose(GiB, 1, 16) == []  # one writer
    assert choose(GiB, 8, 3) == []  # too few stripes for two subsets of two
    assert choose(3 * MiB // 2, 8, 16) == []  # two subfiles would hold less than 1 MiB each
    assert choose(GiB, 7, 12) == []  # 7 writers cannot make 2..6 whole groups
    # many writers on a wide file: the lov_user_md stays within 64 KiB
    assert all(32 + 96 * g.groups + 24 * g.stripes <= LUM_MAX for g in choose(1 << 40, 1 << 16, 2000))


def test_extents_are_the_groups_blocks_in_whole_stripe_rounds():
    spans = extents(256 * MiB, Grouping(4, 2), 32 * MiB)
    assert spans == [(0, 64 * MiB), (64 * MiB, 128 * MiB), (128 * MiB, 192 * MiB), (192 * MiB, LUSTRE_EOF)]
    # a fixed stripe size smaller than a block: several rounds per component, still on the groups' bounds
    assert extents(256 * MiB, Grouping(4, 2), MiB)[1] == (64 * MiB, 128 * MiB)
    # blocks that are no multiple of the stripe width: the nearest multiples, each bounded one whole rounds
    for a, b in extents(100 * MiB + 12345, Grouping(3, 2), 4 * MiB)[:-1]:
        assert a % (8 * MiB) == 0 and (b - a) % (8 * MiB) == 0 and b > a
    with pytest.raises(AllocationError, match=r"^EINVAL: .* do not make 4 components") as e:
        extents(8 * MiB, Grouping(4, 2), 4 * MiB)
    assert e.value.errno == "EINVAL"


def test_cut_takes_the_stripe_size_for_g_times_k_stripes():
    asked = []
    c = cut(256 * MiB, 8, 16, lambda n: asked.append(n) or 256 * MiB // n)
    assert asked == [16] and c is not None and c.grouping == Grouping(8, 2) and c.stripe_size == 16 * MiB
    assert c.spans[1] == (32 * MiB, 64 * MiB)
    # a fixed stripe size wider than the file's share of every subset: no components, a plain file
    assert cut(64 * MiB, 8, 16, lambda n: 8 * MiB) is None
    assert cut(64 * MiB, 1, 16, lambda n: MiB) is None


def test_interleave_spreads_each_run_over_the_servers():
    oss = {o.index: o.oss for o in CLUSTER.osts}
    order = interleave([0, 1, 2, 3, 4, 5, 8, 9], oss)
    assert order == [0, 4, 8, 1, 5, 9, 2, 3]
    assert [len({oss[i] for i in order[k:k + 2]}) for k in range(0, 6, 2)] == [2, 2, 2]


# -- what Lustre would refuse ---------------------------------------------------------------------

def hier(spans, subsets, size=MiB):
    return composite(spans, size, subsets)


def test_validate_refuses_with_one_einval_line():
    osts = [o.index for o in CLUSTER.osts]
    good = hier([(0, 4 * MiB), (4 * MiB, LUSTRE_EOF)], [(0, 4), (8, 12)])
    validate(good, osts)
    bad = {
        "shares OSTs [4]": hier([(0, 4 * MiB), (4 * MiB, LUSTRE_EOF)], [(0, 4), (4, 12)]),
        "names OSTs [16, 17]": hier([(0, 4 * MiB), (4 * MiB, LUSTRE_EOF)], [(0, 4), (16, 17)]),
        "too short for its 4 stripes": hier([(0, 2 * MiB), (2 * MiB, LUSTRE_EOF)], [(0, 4, 8, 12), (1, 5)]),
        "more than 65536": FileLayout(components=tuple(
            Component(i * MiB, (i + 1) * MiB if i < 699 else LUSTRE_EOF, Layout(MiB, 1, osts=(i % 16,)))
            for i in range(700))),
        "a hierarchical layout is composite": FileLayout(plain=Layout(MiB, 2, osts=(0, 1))),
    }
    for says, fl in bad.items():
        with pytest.raises(AllocationError) as e:
            validate(fl, osts)
        assert e.value.errno == "EINVAL" and str(e.value).startswith("EINVAL: ") and says in str(e.value)
        assert "\n" not in str(e.value)
    # extents that overlap, leave a gap, or end off the stripe size: refused as the layout is built
    for spans, size in (([(0, 4 * MiB), (2 * MiB, LUSTRE_EOF)], MiB), ([(0, 4 * MiB), (5 * MiB, LUSTRE_EOF)], MiB),
                        ([(0, 3 * MiB), (3 * MiB, LUSTRE_EOF)], 2 * MiB), ([(0, 4 * MiB + 4096), (4 * MiB + 4096, LUSTRE_EOF)], MiB)):
        with pytest.raises(AllocationError, match="^EINVAL: ") as e:
            hier(spans, [(0,), (1,)], size)
        assert e.value.errno == "EINVAL"


# -- the bytes Lustre takes -----------------------------------------------------------------------

def abi_bytes(spans, size, subsets) -> bytes:
    """A lov_comp_md_v1 of SPECIFIC components written field by field from the tables of
    docs/lustre/layout-abi.md §2, independent of both encoders."""
    n = len(spans)
    blobs = []
    for osts in subsets:
        blob = bytearray(48 + 24 * len(osts))
        struct.pack_into("<IIQQIHH", blob, 0, 0x0BD50BD0, 1, 0, 0, size, len(osts), 0xFFFF)  # SPECIFIC, RAID0, any
        for i, ost in enumerate(osts):
            struct.pack_into("<I", blob, 48 + 24 * i + 20, ost)  # l_ost_idx
        blobs.append(bytes(blob))
    total = 32 + 48 * n + sum(map(len, blobs))
    out = bytearray(32 + 48 * n)
    struct.pack_into("<IIIH", out, 0, 0x0BD60BD0, total, 0, 0)  # lcm_magic, lcm_size, gen, flags
    struct.pack_into("<H", out, 14, n)  # lcm_entry_count
    at = len(out)
    for i, ((a, b), blob) in enumerate(zip(spans, blobs)):
        struct.pack_into("<IIQQII", out, 32 + 48 * i, 0, 0, a, b, at, len(blob))  # offset from the header's start
        at += len(blob)
    return bytes(out) + b"".join(blobs)


def test_lov_comp_md_v1_bytes_match_the_abi_in_python_and_c():
    spans = extents(256 * MiB, Grouping(4, 2), 32 * MiB)
    subsets = [(0, 4), (8, 12), (1, 5), (9, 13)]
    fl = hier(spans, subsets, 32 * MiB)
    want = abi_bytes(spans, 32 * MiB, subsets)
    assert len(want) == 32 + 4 * 48 + 4 * (48 + 2 * 24) == 608
    assert lum.encode(fl) == want and lum.decode(want) == fl
    probe = BUILD / "libiez" / "iez-probe"
    need_built(probe)
    out = subprocess.run([str(probe), "layout", format_layout(fl)], capture_output=True, text=True, timeout=60)
    layout, hexbytes = out.stdout.strip().split("\t")
    assert layout == format_layout(fl) and bytes.fromhex(hexbytes) == want


# -- usage by component extent --------------------------------------------------------------------

def test_each_components_bytes_land_on_its_own_subset():
    spans = extents(120 * MiB, Grouping(4, 2), 16 * MiB)  # bounds at 32, 64, 96 MiB; the last holds 24 MiB
    assert [a for a, _ in spans] == [0, 32 * MiB, 64 * MiB, 96 * MiB]
    fl = hier(spans, [(0, 4), (8, 12), (1, 5), (9, 13)], 16 * MiB)
    assert bytes_per_ost(fl, 120 * MiB) == {0: 16 * MiB, 4: 16 * MiB, 8: 16 * MiB, 12: 16 * MiB, 1: 16 * MiB,
                                            5: 16 * MiB, 9: 16 * MiB, 13: 8 * MiB}
    assert file_ost_bytes(120 * MiB + 1, fl)[13] == 8 * MiB + 4096  # objects in whole 4 KiB blocks
    assert bytes_per_ost(fl, 40 * MiB) == {0: 16 * MiB, 4: 16 * MiB, 8: 8 * MiB}  # a partly written file


# -- balanced -------------------------------------------------------------------------------------

def job():
    """An MPI-IO shared file whose writers' extents the trace does not give (taken as one block
    each), a file per process, a POSIX shared file traced as one block per writer, a lone writer."""
    return [Request("/m/ssf", 256 * MiB, 8, comm_size=4, api="mpiio"), Request("/m/fpp.0", 64 * MiB, 2),
            Request("/m/wide", 4 * GiB, 16, writers=8, comm_size=8, writer_segments=1), Request("/m/solo", GiB, 16)]


def place(policy, reqs, **opts):
    return get_policy(policy).place(reqs, CLUSTER, Snapshot.from_cluster(CLUSTER), AllocOptions(**opts))


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_balanced_gives_shared_files_disjoint_subsets_over_the_servers(weight):
    oss = {o.index: o.oss for o in CLUSTER.osts}
    got = place("balanced", job(), layout="hierarchical", capacity_weight=weight)
    for p, r in zip(got, job()):
        if (r.writers or r.comm_size) < 2:  # one writer: never cut
            assert p.layout.plain is not None and "hierarchical" not in p.note
        if p.layout.plain is not None:
            continue
        comps = p.layout.components
        k = len(comps[0].layout.osts)
        assert len(comps) >= 2 and k >= 2 and all(len(c.layout.osts) == k for c in comps)
        assert (r.writers or r.comm_size) % len(comps) == 0
        subsets = [set(c.layout.osts) for c in comps]
        assert len(set().union(*subsets)) == k * len(comps)  # disjoint
        assert all(len({oss[i] for i in s}) == min(k, 4) for s in subsets)  # each over as many OSSs as it can
        assert f"hierarchical: {len(comps)} components of {k} OSTs" in p.note
        validate(p.layout, [o.index for o in CLUSTER.osts])
        assert sum(bytes_per_ost(p.layout, p.write_bytes).values()) == p.write_bytes
    assert got[2].layout.is_composite  # 4 GiB by 8 writers: cut
    assert "extents unknown" in got[0].note and "extents unknown" not in got[2].note
    # the time bound: never slower than Lustre's RR on the same files, at any RR start
    snap = Snapshot.from_cluster(CLUSTER)
    t = makespan(CLUSTER, snap, job_bytes(got))
    for seed in range(5):
        assert t <= makespan(CLUSTER, snap, job_bytes(place("rr", job(), seed=seed, layout="hierarchical"))) * (1 + 1e-9)


def test_balanced_cuts_the_users_count_when_the_layout_is_kept_otherwise():
    """With the cut forced on the asked count (the file's plain count 8 = 4 x 2), the placement's
    bytes are those of the plain layout of 8 stripes: the same cost model, the same bound."""
    from iez.alloc.balanced import hierarchical_cuts
    from iez.alloc.policy import tables

    reqs = job()[:2]
    _, table = tables(reqs, CLUSTER, Snapshot.from_cluster(CLUSTER), AllocOptions(layout="keep"))  # the asked count
    cuts = hierarchical_cuts(reqs, table, CLUSTER, AllocOptions(layout="hierarchical"))
    assert cuts[1] is None and cuts[0] is not None and cuts[0].grouping == Grouping(4, 2)
    assert cuts[0].stripe_size == 32 * MiB and cuts[0].spans[3] == (192 * MiB, LUSTRE_EOF)


def test_lod_baselines_and_other_modes_are_unaffected():
    for policy in ("rr", "qos"):  # Lustre's allocator knows no hierarchy
        assert all(p.layout.plain is not None for p in place(policy, job(), layout="hierarchical"))
    for mode in ("keep", "auto"):
        assert all("hierarchical" not in p.note for p in place("balanced", job(), layout=mode))
    assert all(p.layout.plain is not None for p in place("balanced", job(), layout="keep"))


# -- which files: one block per writer (Request.writer_segments) -----------------------------------

def test_one_block_each_follows_the_writers_extents_then_the_io_layer():
    assert one_block_each(1, "posix") == (True, "")
    ok, why = one_block_each(4, "mpiio")  # IOR -s 4, or HACC-IO's variables: segmented
    assert not ok and "4 extents" in why
    ok, why = one_block_each(0, "mpiio")  # not known: collective buffering's file domains
    assert ok and "unknown" in why
    for api in ("posix", "stdio"):
        ok, why = one_block_each(0, api)
        assert not ok and "not hierarchical" in why and "unknown" in why


def ior_segmented(segments: int, api: str = "posix", traced: bool = True) -> Request:
    """IOR -b 16m -s SEGMENTS with 8 writers: segment s of rank r at (s * 8 + r) * 16 MiB;
    `traced=False`: the trace did not give the writers' extents."""
    return Request("/m/ior", 8 * segments * 16 * MiB, 1, writers=8, comm_size=8, transfer_size=MiB,
                   writer_segments=segments if traced else 0, api=api)


@pytest.mark.parametrize("api", ["posix", "mpiio"])
def test_a_segmented_shared_file_gets_the_automatic_layout_not_a_cut(api):
    (seg,) = place("balanced", [ior_segmented(4, api)], layout="hierarchical")
    (auto_only,) = place("balanced", [ior_segmented(4, api)], layout="auto")
    assert seg.layout.plain is not None and seg.layout == auto_only.layout
    assert "not hierarchical: each writer wrote 4 extents" in seg.note and "not hierarchical" not in auto_only.note
    (one,) = place("balanced", [ior_segmented(1, api)], layout="hierarchical")  # the same bytes in one block each
    assert one.layout.is_composite and "components" in one.note


def test_a_posix_shared_file_of_unknown_extents_is_not_cut():
    (p,) = place("balanced", [ior_segmented(4, traced=False)], layout="hierarchical")
    assert p.layout.plain is not None and "not hierarchical: writers' extents unknown" in p.note
