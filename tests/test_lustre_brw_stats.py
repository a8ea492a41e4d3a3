"""brw_stats and rpc_stats histograms: every header style and section in the fixtures."""

from iez.lustre.brw_stats import Bucket, parse_brw_stats
from iez.lustre.parse import Times
from iez.lustre.getparam import parse_getparam

EXP = "lustre_exporter/proc/fs/lustre"
COL = "lustrefs-exporter/lustre-collector/src/fixtures"
SECTIONS_2_10 = ["pages per bulk r/w", "discontiguous pages", "discontiguous blocks", "disk fragmented I/Os",
                 "disk I/Os in flight", "I/O time (1/1000s)", "disk I/O size"]
SECTIONS_2_12 = SECTIONS_2_10 + ["block maps msec"]


def brw(text):
    b = parse_brw_stats(text)
    assert b.skipped == ()
    return b


def test_zfs_2_10(fixtures):
    b = brw((fixtures / EXP / "osd-zfs/lustrefs-OST0000/brw_stats").read_text())
    assert b.times == Times(1510782606797216394)
    # the ZFS OSD has no block sections
    assert [h.name for h in b.histograms] == ["pages per bulk r/w", "discontiguous pages", "disk I/Os in flight",
                                              "I/O time (1/1000s)", "disk I/O size"]
    pages = b.histogram("pages per bulk r/w")
    assert (pages.read_unit, pages.write_unit) == ("rpcs", "rpcs")
    assert pages.bucket("1K") == Bucket("1K", 1024, 0, 0, 100, 4059303, 94, 100)  # 4 MiB RPCs
    assert pages.bucket("1") == Bucket("1", 1, 13, 56, 56, 153, 0, 0)
    assert pages.read_total == 23 and pages.write_total == 4298712
    size = b.histogram("disk I/O size")
    assert size.bucket("4M").value == 4 << 20 and size.bucket("4M").write == 4059303
    assert size.bucket("8K").read == 12 and size.write_total == pages.write_total
    assert b.histogram("I/O time (1/1000s)").buckets == (Bucket("1", 1, 1, 100, 100, 0, 0, 0),)
    assert b.histogram("discontiguous pages").bucket("31").write == 4293275


def test_collector_files(fixtures):
    empty = brw((fixtures / COL / "brw_stats_empty.txt").read_text())
    assert empty.times == Times(1534429278185762481)
    assert [h.name for h in empty.histograms] == SECTIONS_2_12
    assert all(h.buckets == () for h in empty.histograms)
    assert empty.histogram("block maps msec").read_unit == "maps"

    data = brw((fixtures / COL / "brw_stats_with_data.txt").read_text())
    assert data.histogram("pages per bulk r/w").bucket("1K") == Bucket("1K", 1024, 0, 0, 0, 8, 88, 100)
    assert data.histogram("disk I/Os in flight").write_total == 2704 + 3180 + 7370 + 17365 + 40726 + 44513 + 116
    # this row is printed with spaces, not the usual two tabs
    assert data.histogram("block maps msec").buckets == (Bucket("1", 1, 12689, 100, 100, 0, 0, 0),)

    started = brw((fixtures / COL / "brw_stats_with_start_and_elapsed_time.txt").read_text())
    assert started.times == Times(1684867636682465202, 1684865295727058577, 2340955406625)
    assert [h.name for h in started.histograms] == SECTIONS_2_12


def test_brw_in_dumps(fixtures):
    v = parse_getparam((fixtures / COL / "valid/valid.txt").read_text()).values
    b = brw(v["osd-ldiskfs.ai400-OST0000.brw_stats"])
    assert b.times == Times(1688603042553884916, 1688526475260499452, 76567293385464)
    assert b.histogram("disk I/O size").bucket("2M") == Bucket("2M", 2 << 20, 0, 0, 0, 50000, 99, 100)
    assert b.histogram("pages per bulk r/w").write_total == 25001
    assert [h.name for h in b.histograms] == SECTIONS_2_10
    v = parse_getparam((fixtures / COL / "osd.txt").read_text()).values
    new = brw(v["osd-ldiskfs.exa01-OST0013.brw_stats"])  # 2.15.3+ "snapshot_time:" without parentheses
    assert new.times == Times(1698140569773721492) and len(new.histograms) == 8
    old = brw(v["osd-ldiskfs.fs-OST0010.brw_stats"])
    assert old.times == Times(1648754081716778676) and len(old.histograms) == 7
    v = parse_getparam((fixtures / COL / "osd_active.txt").read_text()).values
    act = brw(v["osd-ldiskfs.ai400x2-OST0000.brw_stats"])
    assert act.histogram("pages per bulk r/w").bucket("1K").write == 174
    assert act.histogram("disk I/O size").bucket("1M") == Bucket("1M", 1 << 20, 0, 0, 0, 698, 100, 100)


def test_2_15_0_header_and_2_5_usecs():
    # Header shapes from the format strings (docs/references.md#l-fmt-brw-stats); no capture of them exists here.
    row = "1K:\t\t         0   0   0   |    3 100 100"
    b = brw("snapshot_time            : 8123.000000042 secs.nsecs\n"
            "start_time               : 0.000000000 secs.nsecs\n"
            "elapsed_time             : 8123.000000042 secs.nsecs\n\n"
            "                           read      |     write\n"
            "pages per bulk r/w     rpcs  % cum % |  rpcs        % cum %\n" + row + "\n")
    assert b.times == Times(8123000000042, 0, 8123000000042)
    assert b.histogram("pages per bulk r/w").bucket("1K").write == 3
    b = brw("snapshot_time:         1400000000.12 (secs.usecs)\n")
    assert b.times.snapshot_ns == 1400000000_000012000


def test_rpc_stats(fixtures):
    r = brw((fixtures / EXP / "osc/lustrefs-OST0000-osc-ffff88105db50000/rpc_stats").read_text())
    assert r.times == Times(1510950459787901292)
    assert r.scalars == {"read RPCs in flight": 0, "write RPCs in flight": 6, "pending write pages": 1244,
                         "pending read pages": 0}
    assert [h.name for h in r.histograms] == ["pages per rpc", "rpcs in flight", "offset"]
    pages = r.histogram("pages per rpc")
    assert pages.bucket("1024") == Bucket("1024", 1024, 0, 0, 0, 16389010, 89, 100)
    assert r.histogram("rpcs in flight").bucket("3").write == 4520192
    assert r.histogram("offset").bucket("134217728").write_cum == 100


def test_malformed_rows_are_reported():
    b = parse_brw_stats("1K:\t\t 0 0 0 | 1 1 1\n"
                        "                           read      |     write\n"
                        "no section name here\n"
                        "                           read      |     write\n"
                        "pages per bulk r/w     rpcs  % cum % |  rpcs        % cum %\n"
                        "2:\t\t 1 1 1 | x y z\n"
                        "4:\t\t 1 100 100 | 0 0 0\n")
    assert b.histogram("pages per bulk r/w").buckets == (Bucket("4", 4, 1, 100, 100, 0, 0, 0),)
    assert [s.lineno for s in b.skipped] == [1, 3, 6]

