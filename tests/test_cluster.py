import pytest

from iez.cluster import (Cluster, Snapshot, dump_cluster, load_cluster, make_cluster,
                         ost_uuid, parse_cluster)
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
    ("[[oss]]\nname='a'\nosts=[-1]\n", "bad OST index"),
    ("[[oss]]\nname='a'\nosts=[0]\n[ost_defaults]\nsize='ten'\n", "cannot read"),
    ("fsname='waytoolongname'\n[[oss]]\nname='a'\nosts=[0]\n", "bad fsname"),
    ("[[oss]]\nname='a'\nosts=[0]\n[[ost]]\nindex=9\n", "no OSS serves"),
])
def test_bad_cluster_files(text, msg):
    with pytest.raises(ConfigError) as e:
        parse_cluster(text, source="t.toml")
    assert msg in str(e.value) and str(e.value).startswith("t.toml")
    assert "\n" not in str(e.value)


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
