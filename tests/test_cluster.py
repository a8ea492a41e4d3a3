import re
from dataclasses import replace
from pathlib import Path

import pytest

from iez.cluster import (HOST_NAME, Cluster, Snapshot, check_host_name, dump_cluster, load_cluster,
                         make_cluster, ost_uuid, parse_cluster)
from iez.errors import ConfigError

TESTBED = """
fsname = "lustre"
[mds]
name = "mds0"
[[oss]]
name = "oss0"
osts = [0, 1, 2]
[[oss]]
name = "oss1"
osts = [3, 4]
[ost_defaults]
size = "10GiB"
[[ost]]
index = 4
size = "20GiB"
used = "1G"
state = "degraded"
[pools]
fast = [0, 3]
"""


def test_parse_cluster_fields():
    c = parse_cluster(TESTBED)
    assert c.fsname == "lustre"
    assert [o.index for o in c.osts] == [0, 1, 2, 3, 4]
    assert c.ost(4).capacity == 20 << 30 and c.ost(4).used == 1 << 30 and c.ost(4).state == "degraded"
    assert c.ost(0).capacity == 10 << 30
    assert c.oss_of(3) == "oss1"
    assert c.pool("fast") == (0, 3)
    assert c.pool("") == (0, 1, 2, 3, 4)
    assert ost_uuid("lustre", 10) == "lustre-OST000a_UUID"


def test_default_is_seed000_testbed():
    c = make_cluster()
    assert len(c.osses) == 3 and len(c.osts) == 15
    assert all(o.capacity == 10 << 30 for o in c.osts)
    assert c.osses[1].osts == (5, 6, 7, 8, 9)


def test_dump_roundtrip(tmp_path):
    c = parse_cluster(TESTBED)
    p = tmp_path / "c.toml"
    p.write_text(dump_cluster(c))
    assert load_cluster(p) == c


@pytest.mark.parametrize("text, msg", [
    ("fsname = [", "not valid TOML"),
    ("fsname = 'x'\n", "no [[oss]]"),
    ("[[oss]]\nname='a'\nosts=[0,0]\n", "defined twice"),
    ("[[oss]]\nname='a'\nosts=[0]\n[[ost]]\nindex=0\nstate='weird'\n", "state"),
    ("[[oss]]\nname='a'\nosts=[0]\n[[ost]]\nindex=0\nsize='1G'\nused='2G'\n", "exceeds"),
    ("[[oss]]\nname='a'\nosts=[0]\n[pools]\np=[5]\n", "unknown OST index 5"),
    ("[[oss]]\nname='a'\nosts=[-1]\n", "oss[0].osts[0]: expected an integer 0..65534, got -1"),
    ("[[oss]]\nname='a'\nosts=[0]\n[ost_defaults]\nsize='ten'\n", "cannot read"),
    ("fsname='waytoolongname'\n[[oss]]\nname='a'\nosts=[0]\n", "fsname: expected 1-8"),
    ("[[oss]]\nname='a'\nosts=[0]\n[[ost]]\nindex=9\n", "no OSS serves"),
])
def test_bad_cluster_files(text, msg):
    with pytest.raises(ConfigError) as e:
        parse_cluster(text, source="t.toml")
    assert msg in str(e.value) and str(e.value).startswith("t.toml")
    assert "\n" not in str(e.value)


OK = "[[oss]]\nname = 'oss0'\nosts = [0, 1]\n"


@pytest.mark.parametrize("text, msg", [
    # every one of these was once accepted (or died with another exception than ConfigError)
    (OK + "[ost_defaults]\nwrite_bw = nan\n", "ost_defaults.write_bw: expected a finite number > 0, got nan"),
    (OK + "[[ost]]\nindex = 1\nwrite_bw = nan\n", "ost[0].write_bw: expected a finite number > 0, got nan"),
    (OK + "[[ost]]\nindex = 1\nread_bw = inf\n", "ost[0].read_bw: expected a finite number > 0, got inf"),
    (OK + "[ost_defaults]\nread_bw = -5e6\n", "ost_defaults.read_bw: expected a finite number > 0"),
    (OK.replace("osts", "nic_bw = -1\nosts"), "oss[0].nic_bw: expected a finite number > 0, got -1"),
    (OK.replace("osts", "nic_bw = 'fast'\nosts"), "oss[0].nic_bw: expected a finite number > 0, got 'fast'"),
    (OK + "[mds]\ncreate_rate = 0\n", "mds.create_rate: expected a finite number > 0, got 0"),
    (OK + "[defaults]\nstripe_size = 'big'\n", "defaults.stripe_size: cannot read 'big'"),
    (OK + "[defaults]\nstripe_size = [1]\n", "defaults.stripe_size: expected a size"),
    (OK + "[defaults]\nstripe_size = 1000\n", "defaults.stripe_size: expected at least 64.0KB"),
    (OK + "[defaults]\nstripe_size = '100K'\n", "defaults.stripe_size: expected a multiple of 64 KiB"),
    (OK + "[defaults]\nstripe_size = '4G'\n", "below 4 GiB"),
    (OK + "[defaults]\nstripe_count = -5\n", "defaults.stripe_count: expected an integer -1..2000, got -5"),
    (OK + "[defaults]\nstripe_count = '4'\n", "defaults.stripe_count: expected an integer"),
    (OK + "[defaults]\nstripe_count = true\n", "defaults.stripe_count: expected an integer"),
    (OK + "[[oss]]\nname = 'oss0'\nosts = [2]\n", "host name 'oss0' is used twice"),
    (OK + "[mds]\nname = 'oss0'\n", "host name 'oss0' is used twice"),
    (OK + "[[oss]]\nname = 'oss1'\nosts = [1]\n", "OST index 1 is defined twice"),
    (OK + "[[ost]]\nindex = 1\n[[ost]]\nindex = 1\nused = 5\n", "ost[1].index: OST 1 already has an entry (ost[0])"),
    (OK.replace("oss0", "../../etc"), "oss[0].name: expected 1-64 letters"),
    (OK.replace("oss0", "a/b"), "oss[0].name: expected 1-64 letters"),
    (OK.replace("oss0", ".."), "oss[0].name"),
    (OK.replace("oss0", "-x"), "oss[0].name"),
    (OK.replace("oss0", "x" * 65), "oss[0].name"),
    (OK + '[mds]\nname = "a\\nb"\n', "mds.name: expected 1-64 letters"),
    (OK.replace("'oss0'", "5"), "oss[0].name: expected 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                                "or digit, got 5"),
    ("colour = 'blue'\n" + OK, "colour: unknown key (known: fsname, mds"),
    (OK.replace("osts", "speed = 1\nosts"), "oss[0].speed: unknown key (known: name, osts, nid, nic_bw)"),
    (OK + "[mds]\nname = 'mds0'\nrate = 1\n", "mds.rate: unknown key"),
    (OK + "[lod]\nqos_maxage = 5\n", "lod.qos_maxage: unknown key"),
    (OK + "[[ost]]\nindex = 0\ncolor = 'x'\n", "ost[0].color: unknown key"),
    ('"a\\nb" = 1\n' + OK, "'a\\nb': unknown key"),  # a real newline in the key
    ("mds = 5\n" + OK, "mds: expected a table, got 5"),
    ("oss = 5\n", "oss: expected an array of tables ([[oss]]), got 5"),
    ("oss = [5]\n", "oss[0]: expected a table, got 5"),
    (OK.replace("osts = [0, 1]", "osts = 3"), "oss[0].osts: expected a list of OST indices, got 3"),
    (OK.replace("osts = [0, 1]", "osts = []"), "oss[0].osts: expected a non-empty list"),
    (OK.replace("osts = [0, 1]\n", ""), "oss[0].osts: expected a non-empty list"),
    (OK.replace("name = 'oss0'\n", ""), "oss[0].name: missing"),
    (OK + "[[ost]]\nsize = 5\n", "ost[0].index: missing"),
    (OK + "[[ost]]\nindex = 1\nsize = 100\n", "ost[0].size: expected at least 1.0MB, got 100"),
    (OK + "[[ost]]\nindex = 1\nused = -1\n", "ost[0].used: negative size -1"),
    (OK + "[[ost]]\nindex = 1\nstate = 3\n", "ost[0].state: expected one of active, inactive"),
    (OK + "[ost_defaults]\nsize = '99999999999999999999999P'\n", "ost_defaults.size: '99999999999999999999999P' is "
                                                                   "larger than 8 EiB"),
    (OK + "[ost_defaults]\nsize = nan\n", "ost_defaults.size: expected a size, got nan"),
    (OK.replace("osts", "nid = 'x y'\nosts"), "oss[0].nid: expected a Lustre NID"),
    (OK + "[pools]\n'a b' = [0]\n", "pools: expected a pool name of 1-15"),
    (OK + "[pools]\nfast = [0, 0]\n", "pool 'fast' lists an OST twice"),
    (OK + "[pools]\nfast = 0\n", "pools.fast: expected a list of OST indices"),
    (OK + "[lod]\nqos_prio_free = 101\n", "lod.qos_prio_free: expected an integer 0..100, got 101"),
    ("sim = 1\n" + OK, "sim: expected a table"),
    ("fsname = 'é'\n" + OK, "fsname: expected 1-8"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
])
def test_schema_refuses_with_the_key_and_the_file(text, msg):
    with pytest.raises(ConfigError) as e:
        parse_cluster(text, source="cluster.toml")
    assert str(e.value).startswith("cluster.toml: ") and msg in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300


def test_schema_accepts_units_names_and_the_simulator_table():
    c = parse_cluster("fsname = 'fs_1-a'\n[mds]\nname = 'mds-0.example.org'\nnid = '10.0.0.1@o2ib'\n"
                      "create_rate = 5000\n[defaults]\nstripe_count = -1\nstripe_size = '4M'\n"
                      "[ost_defaults]\nsize = '1.5TiB'\nwrite_bw = 4e8\nread_bw = 500000000\n"
                      "[[oss]]\nname = 'OSS_1.a'\nosts = [0, 65534]\nnid = '[fe80::1]@tcp'\n"
                      "[[ost]]\nindex = 65534\nsize = 10737418240\nused = '1.5 GiB'\nstate = 'nocreate'\n"
                      "[pools]\n'ssd.fast' = [65534]\nempty = []\n[sim]\nclients = 2\n")
    assert c.ost(0).capacity == 3 << 39 and c.ost(0).write_bw == 4e8 and c.ost(0).read_bw == 5e8
    assert c.ost(65534).used == 3 << 29 and c.default_stripe_count == -1 and c.default_stripe_size == 4 << 20
    assert c.pools == {"ssd.fast": (65534,), "empty": ()} and c.raw["sim"] == {"clients": 2}
    assert parse_cluster(dump_cluster(c)) == c  # names that need quoting in TOML keys round-trip


def test_every_cluster_file_of_the_repo_loads():
    root = Path(__file__).resolve().parent.parent
    files = [p for p in [*root.glob("scenarios/*.toml"), *root.glob("src/iez/data/*.toml")]
             if "[[oss]]" in p.read_text()]
    assert len(files) >= 3
    for p in files:
        c = load_cluster(p)
        assert parse_cluster(dump_cluster(c)) == c


@pytest.mark.parametrize("args, msg", [
    ((0, 5), "at least one OSS"),
    ((20000, 5), "at most 65535"),
    ((1, 1, 100), "ost_defaults.size: expected at least 1.0MB"),
    ((1, 1, 1 << 30, "../x"), "fsname: expected 1-8"),
])
def test_make_cluster_goes_through_the_schema(args, msg):
    with pytest.raises(ConfigError, match=re.escape(msg)):
        make_cluster(*args)


def test_a_cluster_made_in_code_keeps_its_names_safe():
    c = make_cluster(2, 2)
    with pytest.raises(ConfigError, match="OSS name: expected 1-64"):
        replace(c, osses=(replace(c.osses[0], name="../etc"), c.osses[1]))
    assert HOST_NAME.fullmatch("oss-1.a_b") and not HOST_NAME.fullmatch("../etc")
    assert check_host_name("mds0") == "mds0"


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read cluster file"):
        load_cluster(tmp_path / "nope.toml")


def test_unknown_ost_lookup():
    with pytest.raises(ConfigError, match="unknown OST index 99"):
        make_cluster().ost(99)


def test_snapshot_from_cluster():
    c = parse_cluster(TESTBED)
    s = Snapshot.from_cluster(c)
    assert s.osts[4].kbytestotal == 20 << 20
    assert s.bavail(4) == (19 << 30)
    assert s.osts[4].state == "degraded"
    assert sorted(s.active()) == [0, 1, 2, 3]
    assert isinstance(c, Cluster)


@pytest.mark.parametrize("written", [1, 1023, 1024, 1025, 5 << 20, (5 << 20) + 1])
def test_snapshot_debit_rounds_up_as_the_osts_report_free_space(written):
    """Debiting n bytes leaves what statfs (here the emulated OSSs' scan) reports once n bytes
    are on the OST: free KiB are the floor of the free bytes, so the debit is n KiB rounded up."""
    from iez.emulated.mds import snapshot_from_space, space_from_scan
    from iez.emulated.usage import ScanResult

    c = make_cluster(n_oss=1, osts_per_oss=2)
    empty = snapshot_from_space(c, space_from_scan(c, ScanResult({}, 0, 0)), 0.0)
    scanned = snapshot_from_space(c, space_from_scan(c, ScanResult({0: written}, 1, 0)), 0.0)
    debited = empty.debit({0: written, 7: written})  # OST 7 is not in the snapshot: skipped
    assert debited.osts == scanned.osts
    assert empty.osts[0].debit(written) == scanned.osts[0]
    assert debited.osts[0].kbytesavail == empty.osts[0].kbytesavail - -(-written // 1024)
    assert Snapshot(0.0, {0: replace(empty.osts[0], kbytesfree=None)}).debit({0: written}).osts[0].kbytesfree is None
    assert empty.debit({0: 1 << 62}).osts[0].kbytesavail == 0  # never below empty


# -- topology: LNet routers and client groups (docs/cluster-toml.md, "Topology") -------------------

TOPO = (Path(__file__).parent / "vectors" / "topology" / "small.toml").read_text()


def test_topology_parses_groups_ranges_and_roundtrips(tmp_path):
    c = parse_cluster(TOPO)
    t = c.topology
    assert t is not None and [r.name for r in t.routers] == ["r0", "r1", "r2"]
    a, b = t.clients
    assert a.nodes == ("n1", "n2", "login1") and a.routers == ("r0", "r1")  # the group's routers
    assert b.routers == ("r1", "r2") and t.routers[1].bw == 2e9
    assert t.group_of("n2", 150) is a  # the host decides before the rank
    assert t.group_of("elsewhere", 150) is b and t.group_of("elsewhere", 8) is None
    assert t.router_group(t.routers[2]) == "r2"  # a router without group is its own
    p = tmp_path / "c.toml"
    p.write_text(dump_cluster(c))
    assert load_cluster(p) == c


def test_no_topology_is_none():
    assert parse_cluster(OK).topology is None and make_cluster().topology is None


@pytest.mark.parametrize("text, msg", [
    (TOPO.replace('oss = ["oss1"]', "oss = []"), "router r2: serves no OSS"),
    (TOPO.replace('oss = ["oss1"]', 'oss = ["oss9"]'), "router r2: serves unknown OSS 'oss9'"),
    (TOPO.replace('routers = ["r1", "r2"]', "routers = []"), "client group b: reaches no router"),
    (TOPO.replace('routers = ["r1", "r2"]', 'routers = ["r7"]'), "client group b: unknown router or router group 'r7'"),
    # oss1 is served by r1 and r2 only; nobody reaches them
    (TOPO.replace('routers = ["r1", "r2"]', 'routers = ["r0"]').replace('routers = ["g0"]', 'routers = ["r0"]'),
     "OSS oss1: unreachable"),
    (TOPO.replace('name = "r2"', 'name = "r1"'), "router[2].name: router 'r1' is defined twice"),
    (TOPO.replace('group = "g0"\noss = ["oss0"]', 'group = "r2"\noss = ["oss0"]'), "group 'r2' has the name of a router"),
    (TOPO.replace('nodes = ["n3"]', 'nodes = ["n2"]'), "client group b: node n2 is already in client group a"),
    (TOPO.replace('ranks = [100, 199]', 'ranks = 4'), "client_group[1].ranks: expected [first, last]"),
    (TOPO.replace('"n[1-2]"', '"n[2-1]"'), "client_group[0].nodes[0]: expected a range"),
    (TOPO.replace('"login1"', '"../x"'), "client_group[0].nodes[1]: expected 1-64 letters"),
    (TOPO.replace("bw = 2e9", "bw = -1"), "router[1].bw: expected a finite number > 0"),
    (TOPO.replace("bw = 2e9", "speed = 1"), "router[1].speed: unknown key"),
    (TOPO.split("[[client_group]]")[0], "give both [[router]] and [[client_group]]"),
])
def test_bad_topology_is_one_line_naming_the_element(text, msg):
    with pytest.raises(ConfigError) as e:
        parse_cluster(text, source="t.toml")
    assert msg in str(e.value) and str(e.value).startswith("t.toml") and "\n" not in str(e.value)
