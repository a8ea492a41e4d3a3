"""Configuration under hostile input (docs/security.md, "Names"): one validated cluster schema for
every loader, safe host names as paths, and fuzzing of the cluster loader."""

from __future__ import annotations

import json
import math
import subprocess

import pytest
from conftest import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from iez.cluster import SCHEMA, Cluster, parse_cluster
from iez.errors import ConfigError

# -- fuzzing the cluster loader ----------------------------------------------------------------

SIZES = st.from_regex(r"\A ?[0-9]{1,25}(\.[0-9]{1,3})? ?[kKmMgGtTpPx]?(i?[bB])? ?\Z")
SCALARS = st.one_of(st.integers(-(1 << 70), 1 << 70), st.integers(-3, 70), st.floats(), st.booleans(),
                    st.text(max_size=12), SIZES, st.sampled_from(["active", "degraded", "oss0", "mds0", "../x"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)


NAMES = st.sampled_from(["oss0", "oss1", "mds0", "a.b-c_d", "../x", "", "x" * 65, "fast", "iez"])
# Values a key of the schema is likely to get wrong in a plausible way; any other value too.
PLAUSIBLE = {"size": SIZES, "used": SIZES, "stripe_size": SIZES, "index": st.integers(-1, 8),
             "osts": st.lists(st.integers(-1, 8), max_size=4), "name": NAMES, "fsname": NAMES,
             "state": st.sampled_from(["active", "inactive", "degraded", "readonly", "nocreate", "gone"]),
             "stripe_count": st.integers(-2, 2001), "qos_prio_free": st.integers(-1, 101),
             "qos_threshold_rr": st.integers(-1, 101), "nid": st.sampled_from(["10.0.0.1@o2ib", "a b", ""])}


def value(key: str) -> st.SearchStrategy:
    return PLAUSIBLE.get(key, st.floats()) | VALUES


def table(name: str) -> st.SearchStrategy:
    """A table of SCHEMA[name]'s keys, each with a plausible or any value; now and then a stranger."""
    keys = SCHEMA[name]
    return st.fixed_dictionaries({}, optional={k: value(k) for k in keys}) | st.dictionaries(
        st.sampled_from(keys) | st.text(max_size=8), VALUES, max_size=len(keys) + 1)


OSS = st.fixed_dictionaries({"name": st.sampled_from(["oss0", "oss1", "oss2"]),
                             "osts": st.lists(st.integers(0, 8), min_size=1, max_size=4, unique=True)})
DOCS = st.fixed_dictionaries({"oss": st.lists(OSS, min_size=1, max_size=3) | st.lists(table("oss"), max_size=3)},
                             optional={
    "fsname": value("fsname"), "mds": table("mds") | VALUES, "defaults": table("defaults"), "lod": table("lod"),
    "ost_defaults": table("ost_defaults"), "ost": st.lists(table("ost"), max_size=3),
    "pools": st.dictionaries(NAMES | st.text(max_size=16), st.lists(st.integers(-1, 8), max_size=3) | VALUES,
                             max_size=2),
    "sim": st.dictionaries(st.text(max_size=6), VALUES, max_size=2) | VALUES})


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):  # a JSON string is a TOML basic string once DEL is escaped too
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{toml_value(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_doc(doc: dict) -> str:
    """The document as TOML: top-level keys first, inline tables and arrays."""
    return "".join(f"{toml_value(k)} = {toml_value(v)}\n" for k, v in doc.items())


def loads_or_one_line(text: str) -> None:
    try:
        c = parse_cluster(text, source="cluster.toml")
    except ConfigError as e:
        assert str(e).startswith("cluster.toml: ") and "\n" not in str(e) and len(str(e)) < 400, str(e)
        return
    assert isinstance(c, Cluster) and c.osses and c.osts
    assert all(math.isfinite(o.write_bw) and o.write_bw > 0 and 0 <= o.used <= o.capacity for o in c.osts)


@pytest.mark.fuzz
@fuzz_settings(200)
@given(DOCS)
def test_fuzz_cluster_loader_on_documents_of_the_schema(doc):
    loads_or_one_line(toml_doc(doc))


@pytest.mark.fuzz
@fuzz_settings(2000)
@given(st.one_of(st.text(max_size=300), st.text(alphabet="[]{}=\"',.\n abcdefgnosti0123456789", max_size=300)))
def test_fuzz_cluster_loader_on_random_text(text):
    loads_or_one_line(text)


def test_the_fuzz_documents_reach_valid_clusters():
    """The target is only worth running if some documents it builds load."""
    assert isinstance(parse_cluster(toml_doc({"oss": [{"name": "oss0", "osts": [0, 1]}],
                                              "ost_defaults": {"write_bw": 1.5e8, "size": "2G"}})), Cluster)


# -- host names are never paths ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../etc", "a/b", "..", ".hidden", "-rf", "x\ny"])
def test_emulate_init_refuses_a_host_name_that_is_a_path(tmp_path, iez_cmd, subenv, name):
    """An OSS named ../../etc made the emulated MDS write params/../../etc/...: outside
    the cluster directory."""
    toml = tmp_path / "c.toml"
    toml.write_text(f'[[oss]]\nname = {json.dumps(name)}\nosts = [0]\n')
    p = subprocess.run([*iez_cmd, "emulate", "init", str(tmp_path / "emu"), "--cluster", str(toml)],
                       capture_output=True, text=True, env=subenv, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"iez: error: {toml}: oss[0].name: expected 1-64 letters"), p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.toml"]


def test_the_params_paths_go_through_the_checked_helper(tmp_path):
    from iez.emulated.clusterdir import ClusterDir
    from iez.emulated.paramtree import write_tree
    from iez.errors import BackendError

    cd = ClusterDir(tmp_path)
    assert cd.host_params("oss-1.a") == tmp_path / "params" / "oss-1.a"
    for bad in ("../../etc", "/etc", "..", ""):
        with pytest.raises(ConfigError, match="expected 1-64 letters"):
            cd.host_params(bad)
    with pytest.raises(BackendError, match="outside"):
        write_tree(tmp_path / "p", {"sys/../../x": "1\n"})
    assert not (tmp_path / "x").exists()
