"""Target space, target_obd, OSP states and LOD/LOV tunables from trees and dumps."""

from iez.lustre.getparam import parse_getparam
from iez.lustre.params import ParamTree
from iez.lustre.targets import (
    TargetObd,
    format_target_obd,
    osp_states,
    parse_server_uuid,
    parse_target_name,
    parse_target_obd,
    parse_tunable,
    striping_tunables,
    target_space,
)

EXP = "lustre_exporter"
COL = "lustrefs-exporter/lustre-collector/src/fixtures"


def test_space_from_the_2_10_tree(fixtures):
    t = ParamTree(fixtures / EXP)
    values = {**t.get("obdfilter.*.*"), **t.get("osd-*.*.*"), **t.get("osc.*.*")}
    r = target_space(values)
    assert r.skipped == []
    ofd = r.devices["obdfilter.lustrefs-OST0000"]
    assert (ofd.kind, ofd.index) == ("OST", 0)
    assert (ofd.kbytestotal, ofd.kbytesavail, ofd.kbytesfree) == (47168367616, 47025124352, 47029440512)
    assert (ofd.filestotal, ofd.filesfree, ofd.blocksize) == (45927444, 45927188, 1048576)
    osd = r.devices["osd-zfs.lustrefs-OST0000"]
    assert osd.kbytesavail == 47029274624 and osd.blocksize is None
    client = r.devices["osc.lustrefs-OST0000-osc-ffff88105db50000"]
    assert (client.index, client.kbytestotal, client.kbytesavail) == (0, 47168315392, 47151387648)
    assert r.by_index("OST") == {0: ofd}  # the OFD's view wins over the OSD's and the client's
    assert t.errors == []


def test_space_from_dumps(fixtures):
    v = parse_getparam((fixtures / COL / "valid/valid.txt").read_text()).values
    r = target_space(v)
    ost = r.by_index("OST")
    assert sorted(ost) == [0, 1]
    assert (ost[0].kbytestotal, ost[0].kbytesfree, ost[0].kbytesavail) == (3978095168, 3875693364, 3835411664)
    assert (ost[0].filestotal, ost[0].filesfree) == (31457280, 31456558)
    assert r.by_index("MDT")[0].kbytestotal == 110635320
    v = parse_getparam((fixtures / COL / "osd.txt").read_text()).values
    r = target_space(v)
    assert sorted(r.by_index("OST")) == [0, 16]  # fs-OST0010 is hex: index 16
    assert r.devices["osd-ldiskfs.MGS"].kind == "MGS" and r.devices["osd-ldiskfs.MGS"].index is None
    bad = target_space({"osd-zfs.fs-OST0001.kbytesavail": "lots", "osd-zfs.fs-OST0001.kbytestotal": "10"})
    assert bad.devices["osd-zfs.fs-OST0001"].kbytestotal == 10
    assert [s.text for s in bad.skipped] == ["osd-zfs.fs-OST0001.kbytesavail=lots"]


def test_target_names():
    assert parse_target_name("lustrefs-OST000b") == ("lustrefs", "OST", 11)
    assert parse_target_name("ai400x2-MDT0000_UUID") == ("ai400x2", "MDT", 0)
    assert parse_target_name("tesfs-OST0001-osc-MDT0000") == ("tesfs", "OST", 1)
    assert parse_target_name("my-fs-OST0100") == ("my-fs", "OST", 256)
    assert parse_target_name("MGS") is None


def test_target_obd_fixtures(fixtures):
    for rel in ("proc/fs/lustre/lod/lustrefs-MDT0000-mdtlov/target_obd",
                "proc/fs/lustre/lov/lustrefs-clilov-ffff88105db50000/target_obd"):
        text = (fixtures / EXP / rel).read_text()
        targets, skipped = parse_target_obd(text)
        assert skipped == []
        assert targets == [TargetObd(i, f"lustrefs-OST{i:04x}_UUID", True) for i in range(7)]
        assert format_target_obd(targets) == text
    targets, skipped = parse_target_obd("3: fs-OST0003_UUID INACTIVE\nbogus\n")
    assert targets == [TargetObd(3, "fs-OST0003_UUID", False)] and [s.lineno for s in skipped] == [2]
    assert parse_server_uuid((fixtures / EXP / "proc/fs/lustre/osc/lustrefs-OST0000-osc-ffff88105db50000/ost_server_uuid")
                             .read_text()) == ("lustrefs-OST0000_UUID", "FULL")


def test_osp_states(fixtures):
    v = parse_getparam((fixtures / COL / "osp.txt").read_text()).values
    states = osp_states(v)
    assert states == {0: "active", 1: "inactive", 2: "active", 3: "active", 4: "active", 5: "active",
                      6: "active", 7: "active"}
    assert osp_states({"osp.fs-OST0002-osc-MDT0000.max_create_count": "0",
                       "osp.fs-OST0002-osc-MDT0001.active": "1"}) == {2: "nocreate"}


def test_lod_tunables_2_10_text(fixtures):
    t = ParamTree(fixtures / EXP)
    tun, skipped = striping_tunables({**t.get("lod.*.*"), **t.get("lov.*.*")})
    assert skipped == []
    lod = tun["lod.lustrefs-MDT0000-mdtlov"]
    assert (lod.qos_prio_free, lod.qos_threshold_rr, lod.qos_maxage) == (91, 17, 5)
    assert (lod.stripe_count, lod.stripe_size, lod.stripe_offset, lod.stripe_pattern) == (1, 1048576, -1, 1)
    assert (lod.numobd, lod.activeobd) == (7, 7)
    lov = tun["lov.lustrefs-clilov-ffff88105db50000"]
    assert (lov.stripe_count, lov.stripe_size, lov.qos_prio_free) == (1, 1048576, None)


def test_tunable_spellings():
    # 2.10 prints "91%", "5 Sec" and u64 -1; 2.16 prints plain numbers
    assert [parse_tunable(x) for x in ("91%", "90", "5 Sec", "5", "18446744073709551615", "-1", "x")] == \
        [91, 90, 5, 5, -1, -1, None]
    tun, skipped = striping_tunables({"lod.fs-MDT0000-mdtlov.qos_maxage": "soon",
                                      "lod.fs-MDT0000-mdtlov.qos_prio_free": "90"})
    assert tun["lod.fs-MDT0000-mdtlov"].qos_prio_free == 90 and len(skipped) == 1
