"""`lfs df`, `lfs getstripe` and `lfs osts`: read, write, and read back what was written.

No fixture holds lfs output (see the fixtures README); the texts here come from the printf
formats in lfs.c / liblustreapi.c (docs/references.md#l-fmt-lfs-df, #l-fmt-getstripe), and the formatters are checked
against the column widths those formats give."""

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iez.errors import LayoutError
from iez.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.layout.layout import PATTERN_MDT, PATTERN_OVERSTRIPING, PATTERN_RAID0
from iez.lustre.getstripe import (
    LCME_FL_INIT,
    StripeObject,
    comp_flags_name,
    format_getstripe,
    parse_comp_flags,
    parse_getstripe,
    parse_lfs_osts,
)
from iez.lustre.lfsdf import DfRow, format_lfs_df, parse_lfs_df, use_percent
from iez.lustre.targets import TargetObd

MiB = 1 << 20

# -- lfs df ---------------------------------------------------------------------------------------

ROWS = [
    DfRow("testfs-MDT0000_UUID", "MDT", 0, 13631488, 1258291, 11534336),
    DfRow("testfs-OST0000_UUID", "OST", 0, 3865470566, 3328599654, 494927872, flags="D"),
    DfRow("OST0003", "OST", 3, None, None, None, status="inactive device"),
    DfRow("testfs-OST0004_UUID", "OST", 4, 3865470566, 1024, 3865000000),
]


def test_df_format_columns():
    text = format_lfs_df(ROWS, "/testfs")
    assert text.splitlines() == [
        "UUID                   1K-blocks        Used   Available Use% Mounted on",
        "testfs-MDT0000_UUID     13631488     1258291    11534336  10% /testfs[MDT:0]",
        "testfs-OST0000_UUID   3865470566  3328599654   494927872  88% /testfs[OST:0] D",
        "OST0003             : inactive device",
        "testfs-OST0004_UUID   3865470566        1024  3865000000   1% /testfs[OST:4]",
        "",
        "filesystem_summary:   7730941132  3328600678  4359927872  44% /testfs",
        "",
    ]


def test_df_human():
    text = format_lfs_df(ROWS, "/testfs", human=True)
    lines = text.splitlines()
    assert lines[0] == "UUID                       bytes        Used   Available Use% Mounted on"
    assert lines[1] == "testfs-MDT0000_UUID        13.0G        1.2G       11.0G  10% /testfs[MDT:0]"
    assert lines[2] == "testfs-OST0000_UUID         3.6T        3.1T      472.0G  88% /testfs[OST:0] D"
    assert lines[4] == "testfs-OST0004_UUID         3.6T        1.0M        3.6T   1% /testfs[OST:4]"
    t = parse_lfs_df(text).tables[0]
    assert t.unit == "bytes"
    assert t.rows[1].used == pytest.approx(3328599654 * 1024, rel=0.05 / 3.1)
    assert t.rows[3].used == 1 << 20 and t.summary.use_pct == 44


def test_df_inodes_summary_is_capped_by_ost_free_objects():
    rows = [DfRow("fs-MDT0000_UUID", "MDT", 0, 1000, 100, 900), DfRow("fs-OST0000_UUID", "OST", 0, 80, 30, 50)]
    text = format_lfs_df(rows, "/mnt/fs", inodes=True)
    assert text.splitlines()[0] == "UUID                      Inodes       IUsed       IFree IUse% Mounted on"
    t = parse_lfs_df(text).tables[0]
    assert t.unit == "inodes"
    s = t.summary
    assert (s.total, s.used, s.avail, s.use_pct) == (150, 100, 50, 67)


def test_df_summary_without_osts_uses_mdts():
    rows = [DfRow("fs-MDT0000_UUID", "MDT", 0, 2000, 500, 1500)]
    s = parse_lfs_df(format_lfs_df(rows, "/mnt/fs")).tables[0].summary
    assert (s.total, s.used, s.avail) == (2000, 500, 1500)


def test_use_percent_rounds_up():
    assert [use_percent(u, a) for u, a in ((0, 10), (1, 999), (999, 1), (1, 1), (0, 0), (10, 0))] == [0, 1, 100, 50, 0, 100]


def test_df_old_summary_errors_flags_and_garbage():
    text = ("junk before the header\n"
            "UUID                   1K-blocks        Used   Available Use% Mounted on\n"
            "lustre-MDT0000_UUID       458140       58168      358560  14% /mnt/lustre[MDT:0]\n"
            "lustre-OST0001_UUID      1828336     1700000      128336  93% /mnt/lustre[OST:1] RSI\n"
            "lustre-OST0002_UUID : Input/output error\n"
            "this is not a row\n\n"
            "filesystem summary:      1828336     1700000      128336  93% /mnt/lustre\n\n"
            "UUID                      Inodes       IUsed       IFree IUse% Mounted on\n"
            "other-MDT0000_UUID           100          10          90  10% /mnt/other[MDT:0]\n")
    r = parse_lfs_df(text)
    assert [s.lineno for s in r.skipped] == [1, 6]
    a, b = r.tables
    assert a.rows[1].flags == "RSI" and a.rows[1].index == 1
    assert a.rows[2] == DfRow("lustre-OST0002_UUID", "OST", 2, None, None, None, status="Input/output error")
    assert not a.rows[2].active
    assert a.summary == DfRow("filesystem_summary:", None, None, 1828336, 1700000, 128336, 93, "/mnt/lustre")
    assert b.unit == "inodes" and b.rows[0].mount == "/mnt/other" and b.summary is None
    assert r.targets == a.rows + b.rows


_DF_ROW = st.builds(
    lambda kind, idx, total, used, avail, flags, fs: DfRow(f"{fs}-{kind}{idx:04x}_UUID", kind, idx, total, used, avail, flags=flags),
    st.sampled_from(["MDT", "OST"]), st.integers(0, 0xFFFF), st.integers(0, 10**15), st.integers(0, 10**15),
    st.integers(0, 10**15), st.sampled_from(["", "D", "R", "DRSI", "N"]), st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True))


@settings(max_examples=150, deadline=None)
@given(st.lists(_DF_ROW, min_size=1, max_size=6), st.booleans(), st.from_regex(r"/[a-z/]{1,20}", fullmatch=True))
def test_df_roundtrip(rows, inodes, mount):
    if inodes:  # inode rows are consistent: IUsed = Inodes - IFree
        rows = [replace(x, total=max(x.total, x.avail), used=max(x.total, x.avail) - x.avail) for x in rows]
    r = parse_lfs_df(format_lfs_df(rows, mount, inodes=inodes))
    assert r.skipped == []
    (t,) = r.tables
    assert t.unit == ("inodes" if inodes else "KiB")
    assert [(x.uuid, x.kind, x.index, x.total, x.used, x.avail, x.flags) for x in t.rows] == \
        [(x.uuid, x.kind, x.index, x.total, x.used, x.avail, x.flags) for x in rows]
    assert [x.use_pct for x in t.rows] == [use_percent(x.used, x.avail) for x in rows]
    assert all(x.mount == mount for x in t.rows) and t.summary.mount == mount


# -- lfs getstripe --------------------------------------------------------------------------------

PLAIN = """/mnt/lustre/file
lmm_stripe_count:  3
lmm_stripe_size:   1048576
lmm_pattern:       raid0
lmm_layout_gen:    0
lmm_stripe_offset: 1
lmm_pool:          flash
\tobdidx\t\t objid\t\t objid\t\t group
\t     1\t             4\t          0x4\t             0
\t     0\t         74565\t      0x12345\t   0x240000400
\t     3\t             0\t            0\t             0

"""


def test_plain_2_11_read_and_written():
    (f,) = parse_getstripe(PLAIN).files
    assert f.path == "/mnt/lustre/file"
    assert f.layout.plain == Layout(stripe_size=MiB, stripe_count=3, stripe_offset=1, pool="flash", osts=(1, 0, 3))
    assert f.objects == ((StripeObject(1, 4), StripeObject(0, 0x12345, 0x240000400), StripeObject(3)),)
    assert format_getstripe(f.path, f.layout, f.objects) == PLAIN


def test_plain_2_10_hex_pattern_and_2_5_spacing():
    v2_10 = PLAIN.replace("lmm_pattern:       raid0", "lmm_pattern:       1").replace("lmm_pool:          flash\n", "")
    (f,) = parse_getstripe(v2_10).files
    assert f.layout.plain.pattern == PATTERN_RAID0 and f.layout.plain.osts == (1, 0, 3)
    v2_5 = ("/mnt/lustre/old\nlmm_stripe_count:   2\nlmm_stripe_size:    4194304\nlmm_pattern:        1\n"
            "lmm_layout_gen:     0\nlmm_stripe_offset:  5\n\tobdidx\t\t objid\t\t objid\t\t group\n"
            "\t     5\t       1234567\t     0x12d687\t             0\n\t     6\t       1234568\t     0x12d688\t             0\n\n")
    (f,) = parse_getstripe(v2_5).files
    assert f.layout.plain == Layout(stripe_size=4 * MiB, stripe_count=2, stripe_offset=5, osts=(5, 6))
    assert f.objects[0][1] == StripeObject(6, 1234568)


COMPOSITE = """/mnt/lustre/pfl
  lcm_layout_gen:    5
  lcm_mirror_count:  1
  lcm_entry_count:   3
    lcme_id:             1
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 0
    lcme_extent.e_end:   1048576
      lmm_stripe_count:  0
      lmm_stripe_size:   1048576
      lmm_pattern:       mdt
      lmm_layout_gen:    0
      lmm_stripe_offset: 0

    lcme_id:             2
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 1048576
    lcme_extent.e_end:   104857600
      lmm_stripe_count:  2
      lmm_stripe_size:   1048576
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: 4
      lmm_objects:
      - 0: { l_ost_idx: 4, l_fid: [0x100040000:0x2:0x0] }
      - 1: { l_ost_idx: 9, l_fid: [0x240000400:0x1f:0x0] }

    lcme_id:             3
    lcme_mirror_id:      0
    lcme_flags:          0
    lcme_extent.e_start: 104857600
    lcme_extent.e_end:   EOF
      lmm_stripe_count:  4
      lmm_stripe_size:   4194304
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: -1
      lmm_pool:          disk

"""


def test_composite_read_and_written():
    (f,) = parse_getstripe(COMPOSITE).files
    assert (f.layout_gen, f.mirror_count) == (5, 1)
    dom, mid, tail = f.layout.components
    assert dom == Component(0, MiB, Layout(stripe_size=MiB, stripe_offset=0, pattern=PATTERN_MDT), id=1, flags=LCME_FL_INIT)
    assert mid.layout.osts == (4, 9) and (mid.start, mid.end, mid.flags) == (MiB, 100 * MiB, LCME_FL_INIT)
    assert tail == Component(100 * MiB, LUSTRE_EOF, Layout(stripe_size=4 * MiB, stripe_count=4, pool="disk"), id=3)
    assert f.objects == ((), (StripeObject(4, 2), StripeObject(9, 0x1F, 0x240000400)), ())
    assert format_getstripe(f.path, f.layout, f.objects, layout_gen=5) == COMPOSITE


def test_verbose_many_files_dir_default_and_garbage():
    text = ("/mnt/fs/d\nstripe_count:  1 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1\n\n"
            "/mnt/fs/empty has no stripe info\n"
            "/mnt/fs/v\n"
            "composite_header:\n  lcm_magic:         0x0BD60BD0\n  lcm_size:          176\n  lcm_flags:         0\n"
            "  lcm_layout_gen:    2\n  lcm_mirror_count:  1\n  lcm_entry_count:   1\ncomponents:\n"
            "  - lcme_id:             65537\n    lcme_mirror_id:      1\n    lcme_flags:          init,stale\n"
            "    lcme_extent.e_start: 0\n    lcme_extent.e_end:   EOF\n    lcme_offset:         80\n"
            "    lcme_size:           80\n    sub_layout:\n      lmm_magic:         0x0BD10BD0\n"
            "      lmm_seq:           0x200000401\n      lmm_object_id:     0x1\n"
            "      lmm_fid:           [0x200000401:0x1:0x0]\n      lmm_stripe_count:  2\n"
            "      lmm_stripe_size:   1048576\n      lmm_pattern:       raid0,overstriped\n"
            "      lmm_layout_gen:    0\n      lmm_stripe_offset: 7\n      lmm_objects:\n"
            "      - 0: { l_ost_idx: 7, l_fid: [0x100070000:0x5:0x0] }\n"
            "      - 1: { l_ost_idx: 7, l_fid: [0x100070000:0x6:0x0] }\n\n"
            "   !! garbage\n"
            "/mnt/fs/broken\nlmm_stripe_count:  2\nlmm_stripe_size:   1000\nlmm_stripe_offset: 0\n\n")
    r = parse_getstripe(text)
    d, empty, v = r.files
    assert d.is_default and d.path == "/mnt/fs/d" and d.layout.plain == Layout(stripe_size=MiB, stripe_count=1)
    assert empty.path == "/mnt/fs/empty" and empty.layout is None
    (c,) = v.layout.components
    assert c.id == 65537 and c.flags == LCME_FL_INIT | 0x1 and c.end == LUSTRE_EOF
    assert c.layout.osts == (7, 7) and c.layout.pattern == PATTERN_RAID0 | PATTERN_OVERSTRIPING
    assert v.layout_gen == 2 and v.objects[0][1] == StripeObject(7, 6)
    assert [(s.lineno, s.reason.split(":")[0]) for s in r.skipped] == [(35, "not an lfs getstripe line"),
                                                                       (36, "unusable layout")]


def test_mirrored_file_is_reported_not_read():
    # FLR mirrors overlap ([0, EOF) twice); FileLayout holds one chain of extents only
    one = COMPOSITE.split("    lcme_id:             3")[0].split("    lcme_id:             2")[1]
    mirror = ("    lcme_id:             2" + one).replace("e_start: 1048576", "e_start: 0")
    text = COMPOSITE.replace("  lcm_mirror_count:  1", "  lcm_mirror_count:  2").replace(
        "    lcme_id:             3", mirror + "    lcme_id:             3")
    r = parse_getstripe(text)
    assert r.files == []
    assert [(s.lineno, s.reason.split(":")[0]) for s in r.skipped] == [(1, "unusable layout")]


def test_comp_flags():
    assert comp_flags_name(0) == "0" and comp_flags_name(0x10) == "init"
    assert comp_flags_name(0x10 | 0x6 | 0x1000) == "init,prefer,0x1000"
    assert parse_comp_flags("init,prefer,0x1000") == 0x1016 and parse_comp_flags("0") == 0


def test_formatter_rejects_mismatched_objects():
    with pytest.raises(LayoutError, match="do not match"):
        format_getstripe("/f", Layout(osts=(1, 2)), [[StripeObject(2), StripeObject(1)]])
    with pytest.raises(LayoutError, match="object lists"):
        format_getstripe("/f", Layout(osts=(1,)), [])


def test_idif_fid_mapping():
    o = StripeObject(3, (5 << 32) | 77)
    assert o.fid() == (0x100030005, 77, 0)
    assert StripeObject.from_fid(3, *o.fid()) == o
    assert StripeObject.from_fid(1, 0x240000400, 9, 0) == StripeObject(1, 9, 0x240000400)


def _layout(size_units, osts, pool, overstripe):
    pattern = PATTERN_RAID0 | (PATTERN_OVERSTRIPING if overstripe else 0)
    if not overstripe:
        osts = list(dict.fromkeys(osts))
    return Layout(stripe_size=size_units * 65536, stripe_offset=osts[0] if osts else -1,
                  stripe_count=len(osts) or 1, pool=pool, osts=tuple(osts), pattern=pattern)


_LAYOUT = st.builds(_layout, st.integers(1, 1024), st.lists(st.integers(0, 300), max_size=6),
                    st.sampled_from(["", "flash", "p15charslongxyz"]), st.booleans())
_OBJID = st.integers(0, (1 << 48) - 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(_LAYOUT, min_size=1, max_size=4), st.data())
def test_getstripe_roundtrip(layouts, data):
    if len(layouts) == 1:
        fl = FileLayout(plain=layouts[0])
        assume(layouts[0].osts)
    else:
        starts, ends = [], []
        for lay in layouts:  # each end a multiple of its component's stripe size
            starts.append(ends[-1] if ends else 0)
            ends.append((starts[-1] // lay.stripe_size + 2) * lay.stripe_size)
        ends[-1] = LUSTRE_EOF
        fl = FileLayout(components=tuple(
            Component(s, e, lay, id=i + 1, flags=LCME_FL_INIT if lay.osts else 0)
            for i, (s, e, lay) in enumerate(zip(starts, ends, layouts))))
    objects = tuple(tuple(StripeObject(i, data.draw(_OBJID), data.draw(st.sampled_from([0, 0x240000400, 5])))
                          for i in part.layout.osts) for part in fl.parts())
    text = format_getstripe("/mnt/fs/x", fl, objects, layout_gen=3)
    (f,) = parse_getstripe(text).files
    assert f.layout == fl
    assert f.objects == (objects if any(objects) else ())


# -- lfs osts -------------------------------------------------------------------------------------


def test_lfs_osts(fixtures):
    body = (fixtures / "lustre_exporter/proc/fs/lustre/lov/lustrefs-clilov-ffff88105db50000/target_obd").read_text()
    targets, skipped = parse_lfs_osts("OBDS:\n" + body + "MDTS:\n0: lustrefs-MDT0000_UUID ACTIVE\n")
    assert skipped == []
    assert targets[:7] == [TargetObd(i, f"lustrefs-OST{i:04x}_UUID", True) for i in range(7)]
    assert targets[7] == TargetObd(0, "lustrefs-MDT0000_UUID", True)
