"""ParamTree: reading a parameter tree as lctl get_param does, a get_param dump, and lctl itself."""

import os
import shutil
import stat

import pytest

from iez.errors import BackendError
from iez.lustre.params import ParamTree

EXP = "lustre_exporter"
COL = "lustrefs-exporter/lustre-collector/src/fixtures"
OST0 = "proc/fs/lustre/obdfilter/lustrefs-OST0000"


def test_fixture_tree(fixtures):
    t = ParamTree(fixtures / EXP)
    assert t.get("obdfilter.*.kbytestotal") == {"obdfilter.lustrefs-OST0000.kbytestotal": "47168367616"}
    assert t.get("version") == {"version": "2.10.1"}  # 2.10 keeps it in /sys/fs/lustre
    assert t.get_one("lod.lustrefs-MDT0000-mdtlov.qos_maxage") == "5 Sec"
    assert sorted(t.get("ost.OSS.*.stats")) == ["ost.OSS.ost.stats", "ost.OSS.ost_create.stats", "ost.OSS.ost_io.stats"]
    exports = t.get("obdfilter.*.exports.*.stats")
    assert list(exports) == ["obdfilter.lustrefs-OST0000.exports.172.20.20.2@o2ib.stats"]
    assert exports["obdfilter.lustrefs-OST0000.exports.172.20.20.2@o2ib.stats"].splitlines()[2] == \
        "statfs                    35359 samples [reqs]"
    # a literal name with a NID in it maps to one directory, not four
    assert t.get_one("obdfilter.lustrefs-OST0000.exports.172.20.20.2@o2ib.stats").startswith("snapshot_time")
    assert t.get("osd-*.*.brw_stats").keys() == {"osd-zfs.lustrefs-OST0000.brw_stats"}
    assert t.get("nothing.*.here") == {}
    assert t.errors == []


@pytest.fixture
def tree(fixtures, tmp_path):
    """A copy of the 2.10.1 tree with what its source had and the copy lost (symlinks), plus the
    2.15 layout (brw_stats in debugfs, the obdfilter link left dangling)."""
    root = tmp_path / "node"
    shutil.copytree(fixtures / EXP, root)
    os.symlink("../../osd-zfs/lustrefs-OST0000/brw_stats", root / OST0 / "brw_stats")
    dbg = root / "sys/kernel/debug/lustre/osd-zfs/lustrefs-OST0001"
    dbg.mkdir(parents=True)
    shutil.copy(fixtures / COL / "brw_stats_with_start_and_elapsed_time.txt", dbg / "brw_stats")
    ost1 = root / "proc/fs/lustre/obdfilter/lustrefs-OST0001"
    ost1.mkdir()
    os.symlink("../../osd-zfs/lustrefs-OST0001/brw_stats", ost1 / "brw_stats")  # dangling in 2.15
    return root


def test_symlinks_and_dangling_links(tree):
    t = ParamTree(tree)
    got = t.get("obdfilter.*.brw_stats")
    assert list(got) == ["obdfilter.lustrefs-OST0000.brw_stats"]
    assert "1K:\t\t         0   0 100   | 4059303  94 100" in got["obdfilter.lustrefs-OST0000.brw_stats"]
    assert len(t.errors) == 1
    e = t.errors[0]
    assert e.name == "obdfilter.lustrefs-OST0001.brw_stats"
    assert e.reason == "dangling symlink to ../../osd-zfs/lustrefs-OST0001/brw_stats"
    # the debugfs copy is found under its osd name, next to the 2.10 one in /proc
    assert sorted(t.get("osd-zfs.*.brw_stats")) == ["osd-zfs.lustrefs-OST0000.brw_stats",
                                                    "osd-zfs.lustrefs-OST0001.brw_stats"]
    with pytest.raises(BackendError, match="not found: obdfilter.lustrefs-OST0001.brw_stats: dangling symlink"):
        t.get_one("obdfilter.lustrefs-OST0001.brw_stats")


def test_root_order_unreadable_and_hidden(tree):
    # 2.11+ moved kbytes* to sysfs; a stale /proc copy must not win over it
    sysdir = tree / "sys/fs/lustre/obdfilter/lustrefs-OST0000"
    sysdir.mkdir(parents=True)
    (sysdir / "kbytestotal").write_text("123\n")
    (tree / OST0 / "clear").write_text("")
    os.chmod(tree / OST0 / "clear", stat.S_IWUSR)  # write-only, like exports/clear
    (tree / OST0 / ".hidden").write_text("x\n")
    t = ParamTree(tree)
    assert t.get("obdfilter.*.kbytestotal") == {"obdfilter.lustrefs-OST0000.kbytestotal": "123"}
    got = t.get("obdfilter.lustrefs-OST0000.*")
    assert "obdfilter.lustrefs-OST0000.kbytesavail" in got
    assert not any(n.endswith(".hidden") for n in got)
    assert [(e.name, e.reason) for e in t.errors] == [("obdfilter.lustrefs-OST0000.clear", "write-only")]


def test_a_tree_lists_once_and_reads_every_time(tree):
    t = ParamTree(tree)
    assert t.get("obdfilter.*.kbytestotal") == {"obdfilter.lustrefs-OST0000.kbytestotal": "47168367616"}
    (tree / OST0 / "kbytestotal").write_text("5\n")  # a value changed: the same tree reads it
    assert t.get("obdfilter.*.kbytestotal") == {"obdfilter.lustrefs-OST0000.kbytestotal": "5"}
    # the patterns share the listings: a literal name is looked up in its listed directory
    assert t.get_one("obdfilter.lustrefs-OST0000.kbytestotal") == "5"
    assert t.get("obdfilter.lustrefs-OST0000.nothing") == {}
    new = tree / "proc/fs/lustre/obdfilter/lustrefs-OST0009"
    new.mkdir()
    (new / "kbytestotal").write_text("7\n")
    (tree / OST0 / "kbytestotal").unlink()
    # an OST that appeared (or went) since: a new tree (a collector's next round) sees it
    assert ParamTree(tree).get("obdfilter.*.kbytestotal") == {"obdfilter.lustrefs-OST0009.kbytestotal": "7"}
    assert t.get("obdfilter.*.kbytestotal") == {}  # a file gone is gone from this tree too


def test_bad_pattern_is_one_line_error(fixtures):
    t = ParamTree(fixtures / EXP)
    for bad in ("", "obdfilter/*/stats", "a b", "x=1"):
        with pytest.raises(BackendError, match="bad parameter pattern"):
            t.get(bad)
    with pytest.raises(BackendError, match="matches 2 parameters"):
        t.get_one("obdfilter.*.stats")


def test_getparam_dump_through_the_same_api(fixtures):
    t = ParamTree.from_getparam_text((fixtures / COL / "valid/lustre-2.14.0_ddn145/2.14.0_ddn145_stats.txt").read_text())
    assert t.get("osd-ldiskfs.*.kbytestotal") == {
        "osd-ldiskfs.MGS.kbytestotal": "491092", "osd-ldiskfs.fs-MDT0000.kbytestotal": "2602832",
        "osd-ldiskfs.fs-OST0000.kbytestotal": "4108388", "osd-ldiskfs.fs-OST0001.kbytestotal": "4108388"}
    assert len(t.get("obdfilter.*.exports.*.stats")) == 4
    assert t.get_one("obdfilter.fs-OST0000.exports.10.73.20.12@tcp.stats").splitlines()[4] == \
        "statfs                    113927 samples [usecs] 1 991 741434 6767452"
    assert t.errors == []
    bad = ParamTree.from_getparam_text("garbage first\nversion=2.15.4\n")
    assert bad.get("version") == {"version": "2.15.4"}
    assert [str(e) for e in bad.errors] == ["?: text before any parameter name (line 1)"]


def test_lctl_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendError, match="lctl not found: install the Lustre utilities"):
        ParamTree.from_lctl()


def test_lctl_subprocess(fixtures, tmp_path):
    # This machine has no Lustre: a stand-in lctl program prints a real get_param dump, and
    # an error line on stderr as lctl does for a pattern that matches nothing.
    dump = fixtures / COL / "valid/valid.txt"
    lctl = tmp_path / "lctl"
    lctl.write_text(
        "#!/bin/sh\n"
        '[ "$1" = get_param ] || exit 3\n'
        'case "$2" in\n'
        f"  osd-ldiskfs.*) grep '^osd-ldiskfs.*kbytes' {dump} ;;\n"
        "  *) echo \"error: get_param: param_path '$2': No such file or directory\" >&2; exit 2 ;;\n"
        "esac\n")
    lctl.chmod(0o755)
    t = ParamTree.from_lctl(str(lctl))
    got = t.get("osd-ldiskfs.*.kbytes*")
    assert got["osd-ldiskfs.ai400-OST0001.kbytesfree"] == "3978093456"
    assert len(got) == 9
    assert t.errors == []
    assert t.get("nope.*") == {}
    assert [e.reason for e in t.errors] == ["error: get_param: param_path 'nope.*': No such file or directory"]
