"""`lctl get_param` output: the dumps in the fixtures, -H and -n styles, NID-aware names."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iez.lustre.parse import LustreFormatError, require_clean
from iez.lustre.getparam import (
    format_getparam,
    param_matches,
    parse_getparam,
    parse_raw,
    parse_raw_values,
    split_param_name,
)

COL = "lustrefs-exporter/lustre-collector/src/fixtures"


def dump(fixtures, rel):
    return parse_getparam((fixtures / COL / rel).read_text())


def test_valid_dump_values(fixtures):
    d = dump(fixtures, "valid/valid.txt")
    assert d.skipped == [] and d.repeated == []  # its uuid lists appear twice, with the same values
    v = d.values
    assert v["health_check"] == "healthy"
    assert v["memused"] == "5969573401"
    assert v["osd-ldiskfs.ai400-OST0000.kbytestotal"] == "3978095168"
    assert v["osd-ldiskfs.ai400-OST0000.kbytesavail"] == "3835411664"
    assert v["obdfilter.ai400-OST0000.num_exports"] == "5"
    # multi-line values: everything up to the next "name=" line, inner blank lines kept
    brw = v["osd-ldiskfs.ai400-OST0000.brw_stats"]
    assert brw.startswith("snapshot_time:            1688603042.553884916 secs.nsecs\n")
    assert "\n\n                           read      |     write\n" in brw
    assert brw.endswith("2M:\t\t         0   0   0   | 50000  99 100")
    assert v["mdt.ai400-MDT0000.exports.172.16.0.85@o2ib.uuid"].split("\n") == [
        "cf8d4a32-132f-48ea-9159-044a7823ca67", "ai400-MDT0000-lwp-OST0005_UUID",
        "ai400-MDT0000-lwp-OST0004_UUID", "ai400-MDT0000-lwp-MDT0002_UUID", "ai400-MDT0002-mdtlov_UUID"]
    assert v["mdd.ai400x2-MDT0001.changelog_users"] == "current_index: 0\nID                            index (idle) mask"


def test_one_line_stats_and_values_with_spaces(fixtures):
    d = dump(fixtures, "valid/ex8761-lctl.txt")
    assert d.skipped == []
    assert d.values["health_check"] == "NOT HEALTHY"
    assert d.values["ost.OSS.ost_io.stats"] == "snapshot_time             1701885337.508503457 secs.nsecs"
    d = dump(fixtures, "valid/params-6.2.0-r9.txt")
    assert d.values["mdt.fs-MDT0000.exports.10.73.20.2@tcp.uuid"] == "80fe6b5a-68b9-4dfb-9967-948902c1a2a3"


def test_nid_names_in_export_stats(fixtures):
    d = dump(fixtures, "valid/lustre-2.14.0_ddn145/2.14.0_ddn145_stats.txt")
    # the collector read brw_stats twice: the later read is kept
    assert d.repeated == [f"osd-ldiskfs.{t}.brw_stats" for t in ("MGS", "fs-MDT0000", "fs-OST0000", "fs-OST0001")]
    assert d.values["osd-ldiskfs.MGS.brw_stats"].startswith("snapshot_time:            1716295737.286635994")
    exports = [n for n in d.values if param_matches("obdfilter.*.exports.*.stats", n)]
    assert exports == ["obdfilter.fs-OST0000.exports.0@lo.stats", "obdfilter.fs-OST0000.exports.10.73.20.12@tcp.stats",
                       "obdfilter.fs-OST0001.exports.0@lo.stats", "obdfilter.fs-OST0001.exports.10.73.20.12@tcp.stats"]
    assert split_param_name(exports[1]) == ["obdfilter", "fs-OST0000", "exports", "10.73.20.12@tcp", "stats"]


def test_split_param_name():
    assert split_param_name("obdfilter.fs-OST0000.exports.10.1.2.3@tcp.stats") == [
        "obdfilter", "fs-OST0000", "exports", "10.1.2.3@tcp", "stats"]
    assert split_param_name("mdt.fs-MDT0000.exports.0@lo.uuid") == ["mdt", "fs-MDT0000", "exports", "0@lo", "uuid"]
    assert split_param_name("mgc.MGC192.168.1.1@o2ib.import") == ["mgc", "MGC192.168.1.1@o2ib", "import"]
    assert split_param_name("osd-ldiskfs.ai400-OST0000.brw_stats") == ["osd-ldiskfs", "ai400-OST0000", "brw_stats"]
    assert split_param_name("version") == ["version"]
    assert param_matches("obdfilter.*.exports.*.stats", "obdfilter.a.exports.10.1.2.3@tcp.stats")
    assert not param_matches("obdfilter.*.stats", "obdfilter.a.exports.10.1.2.3@tcp.stats")
    assert param_matches("osd-*.*.kbytes*", "osd-zfs.fs-OST0000.kbytesavail")


def test_header_style_every_line_prefixed():
    text = ("ost.OSS.ost_io.stats=snapshot_time             1.000000002 secs.nsecs\n"
            "ost.OSS.ost_io.stats=ost_write                 3 samples [usecs] 1 2 4 6\n"
            "version=2.15.5\n")
    d = parse_getparam(text)
    assert d.skipped == []
    assert d.values == {"ost.OSS.ost_io.stats": "snapshot_time             1.000000002 secs.nsecs\n"
                                                "ost_write                 3 samples [usecs] 1 2 4 6",
                        "version": "2.15.5"}
    assert format_getparam(d.values, header=True) == text


def test_raw_values():
    assert parse_raw("47168367616\n") == "47168367616"
    assert parse_raw_values("91%\n17%\n", ["lod.a.qos_prio_free", "lod.a.qos_threshold_rr"]) == {
        "lod.a.qos_prio_free": "91%", "lod.a.qos_threshold_rr": "17%"}
    with pytest.raises(LustreFormatError, match="2 line"):
        parse_raw_values("1\n2\n", ["only.one"])


def test_garbage_and_conflicting_repeats_are_reported_not_fatal():
    text = "lctl: some warning\nkbytes=1\nversion=2.10.1\nkbytes=3\n"
    d = parse_getparam(text)
    assert d.values == {"kbytes": "3", "version": "2.10.1"}  # the later value is kept
    assert d.repeated == ["kbytes"]
    assert [(s.lineno, s.reason) for s in d.skipped] == [(1, "text before any parameter name")]
    with pytest.raises(LustreFormatError, match="line 1: text before any parameter name"):
        require_clean(d.skipped, "dump")


_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}(\.[a-z0-9_@-]{1,8}){0,3}", fullmatch=True)
# value lines must not look like "name=..." (lctl itself could not tell them apart)
_LINE = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                max_size=30).filter(lambda s: "=" not in s)
_VALUE = st.lists(_LINE, min_size=1, max_size=5).map("\n".join).filter(
    lambda v: not v.startswith("\n") and (v.strip() or "\n" not in v) and not v.endswith("\n")
    and (len(v.split("\n")) == 1 or v.split("\n")[-1].strip()))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_NAME, _VALUE, max_size=6), st.booleans())
def test_format_parse_roundtrip(values, header):
    d = parse_getparam(format_getparam(values, header=header))
    assert d.values == values and d.skipped == []

