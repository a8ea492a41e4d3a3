"""`iez getstripe`, `setstripe`, `df` and `find` against lfs, on an emulated cluster: the options
admins type and the bytes lfs prints.

No fixture in ../shared/fixtures/lustre/ holds lfs output (its README says so). The expected
texts here are real lfs outputs quoted in public pages (docs/lustre-formats.md says which), or
built from liblustreapi's printf formats of Lustre 2.15 (docs/references.md#l-fmt-getstripe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_tool

MiB = 1 << 20

CLUSTER = """
fsname = "lfst"
[[oss]]
name = "oss0"
osts = [0, 1, 2]
[[oss]]
name = "oss1"
osts = [3, 4, 5]
[ost_defaults]
size = "1GiB"
[[ost]]
index = 5
state = "inactive"
[pools]
fast = [1, 4]
"""


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    iez_cmd = [str(Path(sys.executable).with_name("iez"))]  # conftest's iez_cmd, for a module fixture
    d = tmp_path_factory.mktemp("lfs") / "emu"
    toml = d.parent / "c.toml"
    toml.write_text(CLUSTER)
    r = run(iez_cmd + ["emulate", "init", str(d), "--cluster", str(toml)])
    assert r.returncode == 0, r.stderr
    r = run(iez_cmd + ["emulate", "up", str(d), "--seed", "3"])
    assert r.returncode == 0, r.stderr
    yield d
    run(iez_cmd + ["emulate", "down", str(d)])


@pytest.fixture
def iez(emu, capsys, monkeypatch):
    """`iez ARGS` (in this process: a subprocess costs a second of imports) in the emulated
    mount, so paths print as lfs prints relative ones; its stdout, or stderr when it fails."""
    from iez.cli import main

    monkeypatch.chdir(emu / "fs")

    def call(*args: str, rc: int = 0) -> str:
        capsys.readouterr()
        try:
            got = main(list(args))
        except SystemExit as e:
            got = e.code
        out = capsys.readouterr()
        assert got == rc, (args, got, out.out, out.err)
        return out.out if rc == 0 else out.err
    return call


def osts_of(text: str) -> list[int]:
    return [int(line.split()[0]) for line in text.splitlines() if line.startswith("\t") and line.split()[0].isdigit()]


# -- getstripe: directories -----------------------------------------------------------------------

# Real lfs getstripe -d outputs of a directory without a default (LUMI's documentation)
NO_DEFAULT = "stripe_count:  1 stripe_size:   1048576 pattern:       0 stripe_offset: -1\n\n"
NO_DEFAULT_RAW = "stripe_count:  0 stripe_size:   0 pattern:       0 stripe_offset: -1\n\n"


def test_root_directory_is_a_directory_without_default(iez, emu):
    """It said the root was a file "created outside iez's emulated MDS"."""
    (emu / "fs" / "nodefault").mkdir()
    assert iez("getstripe", "-d", ".") == NO_DEFAULT
    assert iez("getstripe", "-d", "--raw", ".") == NO_DEFAULT_RAW
    assert iez("getstripe", "-d", str(emu / "fs")) == NO_DEFAULT
    assert iez("getstripe", "nodefault") == "nodefault\n" + NO_DEFAULT
    assert iez("getstripe", "-c", "nodefault") == "1\n\n"


def test_pfl_directory_default_as_a_real_lfs_prints_it(iez, emu):
    """A real `lfs setstripe -E 64k --layout mdt -E eof --stripe-count -1 --stripe-size=1M DIR`
    then `lfs getstripe DIR` (a public Lustre demo transcript)."""
    (emu / "fs" / "testdir1").mkdir()
    iez("setstripe", "-E", "64k", "--layout", "mdt", "-E", "eof", "--stripe-count", "-1", "--stripe-size=1M",
        "testdir1")
    comp = ("    lcme_id:             N/A\n    lcme_mirror_id:      N/A\n    lcme_flags:          0\n"
            "    lcme_extent.e_start: {}\n    lcme_extent.e_end:   {}\n      {}\n\n")
    assert iez("getstripe", "testdir1") == (
        "testdir1\n  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   2\n"
        + comp.format(0, 65536, "stripe_count:  0       stripe_size:   65536       pattern:       mdt       "
                                "stripe_offset: -1")
        + comp.format(65536, "EOF", "stripe_count:  -1       stripe_size:   1048576       pattern:       raid0       "
                                    "stripe_offset: -1"))


def test_directory_default_set_listed_and_deleted(iez, emu):
    (emu / "fs" / "d").mkdir()
    (emu / "fs" / "d" / "sub").mkdir()
    iez("setstripe", "-c", "2", "-S", "2M", "d")
    one_line = "stripe_count:  2 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1\n\n"
    assert iez("getstripe", "-d", "d") == one_line
    iez("setstripe", "d/f")  # inherits the default
    listed = iez("getstripe", "d")
    assert listed.startswith("d\n" + one_line + "d/f\nlmm_stripe_count:  2\nlmm_stripe_size:   2097152\n")
    assert listed.endswith("d/sub\n" + NO_DEFAULT)
    assert iez("getstripe", "-S", "d") == "2097152\n\n"
    iez("setstripe", "-d", "d")
    assert iez("getstripe", "-d", "d") == NO_DEFAULT
    assert "-d deletes a directory's default" in iez("setstripe", "-d", "d/f", rc=2)


# -- getstripe: files -----------------------------------------------------------------------------


def test_plain_file_fields_options_and_yaml(iez):
    iez("setstripe", "-c2", "-o", "3,1", "plain")
    full = iez("getstripe", "plain")
    assert full == ("plain\nlmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\n"
                    "lmm_layout_gen:    0\nlmm_stripe_offset: 3\n\tobdidx\t\t objid\t\t objid\t\t group\n"
                    "\t     3\t             0\t            0\t             0\n"
                    "\t     1\t             0\t            0\t             0\n\n")
    # one field: the value alone, then lfs's empty line
    for opt, value in (("-c", "2"), ("--stripe-count", "2"), ("-S", "1048576"), ("-i", "3"), ("-L", "raid0"),
                       ("-g", "0"), ("--component-count", "0")):
        assert iez("getstripe", opt, "plain") == f"{value}\n\n", opt
    assert iez("getstripe", "-p", "plain") == "\n"  # no pool: nothing but the line end
    assert iez("getstripe", "-c", "-S", "plain") == ("lmm_stripe_count:  2\nlmm_stripe_size:   1048576\n\n")
    assert iez("getstripe", "-y", "plain") == (
        "lmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\nlmm_layout_gen:    0\n"
        "lmm_stripe_offset: 3\nlmm_objects:\n      - l_ost_idx: 3\n        l_fid:     0x100030000:0x0:0x0\n"
        "      - l_ost_idx: 1\n        l_fid:     0x100010000:0x0:0x0\n")
    verbose = iez("getstripe", "-v", "plain").splitlines()
    assert verbose[:2] == ["plain", "lmm_magic:         0x0BD10BD0"]
    assert verbose[2].startswith("lmm_seq:           0x2000004") and verbose[4].startswith("lmm_fid:           [0x")
    assert verbose[5:] == full.splitlines()[1:]
    assert iez("getstripe", "-q", "plain") == "plain\n" + full.split("\n", 6)[6]
    assert iez("getstripe", "-F", "plain").startswith("[0x2000004")


def test_pfl_components_instantiate_as_the_file_grows(iez, emu):
    """Lustre instantiates a PFL component when the file reaches it: before, lcme_flags 0 and
    no objects (it printed `init` and objects for all)."""
    iez("setstripe", "-E", "4M", "-c", "1", "-E", "-1", "-c", "2", "pfl")
    text = iez("getstripe", "pfl")
    first, second = text.split("\n\n")[:2]
    assert "lcme_flags:          init" in first and "lmm_objects:" in first
    assert second == ("    lcme_id:             2\n    lcme_mirror_id:      0\n    lcme_flags:          0\n"
                      "    lcme_extent.e_start: 4194304\n    lcme_extent.e_end:   EOF\n"
                      "      lmm_stripe_count:  2\n      lmm_stripe_size:   1048576\n      lmm_pattern:       raid0\n"
                      "      lmm_layout_gen:    0\n      lmm_stripe_offset: -1")
    # -c and friends: the last instantiated component's value (print_last_init_comp)
    assert iez("getstripe", "-c", "pfl") == "1\n\n"
    assert iez("getstripe", "--component-count", "pfl") == "2\n\n"
    assert iez("getstripe", "-I2", "pfl").count("lcme_id:") == 1
    assert "lcme_id:             1" in iez("getstripe", "--component-flags=init", "pfl")
    assert "lcme_id:             1" not in iez("getstripe", "--component-flags=^init", "pfl")
    with open(emu / "fs" / "pfl", "r+b") as f:
        f.write(b"x" * (5 * MiB))
    grown = iez("getstripe", "pfl").split("\n\n")[1]
    assert "lcme_flags:          init" in grown and grown.count("l_ost_idx:") == 2
    assert iez("getstripe", "-c", "pfl") == "2\n\n"
    yaml = iez("getstripe", "--yaml", "pfl")
    assert yaml.startswith("lcm_layout_gen:    0\nlcm_mirror_count:  1\nlcm_entry_count:   2\ncomponents:\n"
                           "  - lcme_id:             1\n")
    assert yaml.count("    sub_layout:\n") == 2 and "\n\n" not in yaml
    detail = iez("getstripe", "-v", "pfl")
    assert "composite_header:\n  lcm_magic:         0x0BD60BD0\n" in detail
    assert "    lcme_offset:         128\n    lcme_size:           56\n" in detail


def test_json_recursion_and_no_stripe_info(iez, emu):
    (emu / "fs" / "r" / "s").mkdir(parents=True)
    iez("setstripe", "-c", "3", "r/s/deep")
    (emu / "fs" / "r" / "bare").write_text("no layout")
    assert iez("getstripe", "r/bare") == "r/bare has no stripe info\n"
    assert "r/s/deep\n" not in iez("getstripe", "r")  # one level, as lfs
    assert "r/s/deep\nlmm_stripe_count:  3\n" in iez("getstripe", "-r", "r")
    (got,) = json.loads(iez("getstripe", "--json", "r/s/deep"))
    assert got["path"] == "r/s/deep" and got["components"][0]["stripe_count"] == 3
    assert len(got["components"][0]["osts"]) == 3


# -- setstripe -----------------------------------------------------------------------------------


def test_setstripe_option_spellings_and_several_files(iez):
    for i, spelling in enumerate((["-c4"], ["-c", "4"], ["--stripe-count=4"], ["--stripe-count", "4"])):
        assert iez("setstripe", *spelling, "-S", "1M", f"s{i}") == ""  # silent, as lfs setstripe
        assert len(osts_of(iez("getstripe", f"s{i}"))) == 4, spelling
    assert iez("setstripe", "-c", "2", "m1", "m2", "m3") == ""
    assert iez("getstripe", "-c", "m1", "m2", "m3") == "2\n\n" * 3
    assert "usage: iez setstripe" in iez("setstripe", "--help") and "usage:" in iez("setstripe", "-h")
    assert "unknown option -x" in iez("setstripe", "-x", "4", "bad", rc=2)
    assert "needs a value" in iez("setstripe", "bad", "-c", rc=2)
    err = iez("setstripe", "-c", "1", "m1", "m4", rc=1)  # m1 exists: m4 is still made, the status says 1
    assert "File exists" in err
    assert "lmm_stripe_count:  1" in iez("getstripe", "m4")


# -- df ------------------------------------------------------------------------------------------


def test_df_verbose_pool_lazy_and_json(iez, emu):
    plain = iez("df")
    assert "OST0005" not in plain  # inactive: lfs df lists it only with -v
    assert "lfst-OST0005        : inactive device\n" in iez("df", "-v")
    assert iez("df", "-l") == plain
    pool = iez("df", "--pool", "lfst.fast").splitlines()
    assert [ln.split()[0] for ln in pool[1:4]] == ["lfst-MDT0000_UUID", "lfst-OST0001_UUID", "lfst-OST0004_UUID"]
    assert pool[-2].startswith("filesystem_summary:") and pool[-1] == ""
    got = json.loads(iez("df", "--json", "-i"))
    assert got["unit"] == "inodes" and [t["index"] for t in got["targets"]] == [0, 0, 1, 2, 3, 4]
    assert "unknown pool 'slow'" in iez("df", "--pool", "slow", rc=2)


# -- find ----------------------------------------------------------------------------------------


def test_find_by_ost_stripe_count_type_and_name(iez, emu):
    (emu / "fs" / "hot").mkdir()
    iez("setstripe", "-o", "2", "hot/on2")
    iez("setstripe", "-o", "0,3,4", "hot/wide")
    iez("setstripe", "-c", "1", "-o", "1", "hot/cold")
    assert iez("find", "hot", "--ost", "2") == "hot/on2\n"
    assert iez("find", "hot", "-O", "lfst-OST0003_UUID") == "hot/wide\n"
    assert iez("find", "hot", "--ost", "2-3") == "hot/on2\nhot/wide\n"
    assert iez("find", "hot", "--stripe-count", "+1") == "hot/wide\n"
    assert iez("find", "hot", "-c", "1") == "hot/cold\nhot/on2\n"
    assert iez("find", "hot", "--type", "d") == "hot\n"
    assert iez("find", "hot", "--name", "w*", "--type", "f") == "hot/wide\n"
    assert iez("find", "hot", "--ost", "4", "--print0") == "hot/wide\0"


# -- the CLI's habits ----------------------------------------------------------------------------


def subcommands(parser) -> list[list[str]]:
    import argparse

    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append([name])
                out.extend([name, *rest] for rest in subcommands(sub))
    return out


def test_help_on_every_subcommand(capsys):
    from iez.cli import build_parser, main

    cmds = subcommands(build_parser())
    assert ["getstripe"] in cmds and ["find"] in cmds and len(cmds) > 20
    for cmd in cmds:
        try:
            code = main([*cmd, "--help"])  # setstripe parses its own options
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        assert code == 0 and "usage:" in out.out, cmd


def test_exit_codes_usage_2_runtime_1(iez_cmd, tmp_path):
    r = run(iez_cmd + ["getstripe", "--no-such-option", "x"])
    assert r.returncode == 2  # argparse
    r = run(iez_cmd + ["setstripe", "-c", "x", str(tmp_path / "f")])
    assert r.returncode == 2 and r.stderr.startswith("iez: error: bad setstripe option value")
    r = run(iez_cmd + ["getstripe", str(tmp_path)])  # a runtime failure: not Lustre
    assert r.returncode == 1 and "neither Lustre nor an emulated" in r.stderr


def test_version_names_the_libiez_found(iez_cmd, tmp_path):
    from iez.preload import libiez_path

    r = run(iez_cmd + ["--version"])
    assert r.returncode == 0 and r.stdout.startswith("iez ")
    assert f"libiez 0.1.0: {libiez_path()}" in r.stdout
    r = run(iez_cmd + ["--version"], env=dict(os.environ, IEZ_LIBIEZ=str(tmp_path / "nope.so")))
    assert r.returncode == 0 and "libiez: not found" in r.stdout


def test_json_from_predict_allocate_and_report(tmp_path, capsys):
    """What a script reads: the pipeline commands' --json (tables otherwise)."""
    from darshan.log_utils import get_log_path

    from iez.cli import main

    db = ["--db", f"sqlite:///{tmp_path / 'iez.db'}"]
    toml = tmp_path / "c.toml"
    toml.write_text('[[oss]]\nname = "oss0"\nosts = [0, 1, 2, 3]\n[ost_defaults]\nsize = "1TiB"\n')

    def doc(*args: str):
        capsys.readouterr()
        assert main([*args, *db]) == 0
        return json.loads(capsys.readouterr().out)

    assert main(["trace", "import", get_log_path("sample-goodost.darshan"), "--app", "ior", *db]) == 0
    pred = doc("predict", "ior", "--json")
    assert pred["app"] == "ior" and pred["files"] and all(f["write_bytes"] > 0 for f in pred["files"])
    placed = doc("allocate", "ior", "--cluster", str(toml), "--no-gate", "--policy", "balanced,rr", "--json")
    assert set(placed["policies"]) == {"balanced", "rr"} and placed["plan"] is None
    assert placed["policies"]["rr"]["files"] == len(pred["files"])
    report = doc("report", "ior", "--json")
    assert report["policies"].keys() == placed["policies"].keys() and report["run"] == placed["run"]


def test_bash_completion_knows_every_subcommand_and_option(iez_cmd, tmp_path):
    bash = need_tool("bash", "apt-get install bash")
    script = run(iez_cmd + ["completion", "bash"]).stdout
    (tmp_path / "xfile").touch()
    probe = script + (
        'comp() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _iez; echo "${COMPREPLY[*]}"; }\n'
        "comp iez gets; comp iez getstripe --component-c; comp iez trace im; comp iez getstripe -c xf\n")
    r = run([bash, "-c", probe], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["getstripe", "--component-count", "import", "xfile"]


def test_the_host_gate_refusal_names_its_way_out():
    from iez.alloc.gate import GateClosed, GateLimits
    from iez.collect.host import require_open

    with pytest.raises(GateClosed) as e:
        require_open(GateLimits(max_cpu=1000, max_mem=1e-9))  # no host uses under a billionth of its memory
    assert "host busy: memory" in str(e.value) and "--no-gate" in str(e.value) and "--gate-wait" in str(e.value)
    assert e.value.exit_code == 1


def test_mdt_index(iez, emu):
    iez("setstripe", "-c", "1", "onmdt")
    assert iez("getstripe", "-m", "onmdt") == "0\n"
    assert iez("getstripe", "-m", "-v", "onmdt") == "onmdt\nmdt_index:\t0\n"


def test_a_read_back_layout_as_a_lustre_client_returns_it(tmp_path):
    """The lustre backend's path: lustre.lov as a client returns it (objects with their ids, the
    layout generation in the offset slot), here in a user xattr of a local file."""
    import struct

    from iez.backend import stripe_from_xattr
    from iez.lustre.getstripe import format_stripe

    f = tmp_path / "file"
    f.write_text("")
    lmm = struct.pack("<IIQQIHH", 0x0BD10BD0, 1, 0x1, 0x200000401, MiB, 2, 3)  # V1, raid0, oi, 1 MiB, 2, gen 3
    objs = struct.pack("<QQII", 0x12345, 0, 0, 4) + struct.pack("<QQII", 0x240000400, 0x1F, 0, 9)  # IDIF, FID
    os.setxattr(f, "user.lustre.lov", lmm + objs)
    got = stripe_from_xattr(f, "user.lustre.lov", (0x200000401, 0x1, 0))
    assert format_stripe(got) == (
        f"{f}\nlmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\nlmm_layout_gen:    3\n"
        "lmm_stripe_offset: 4\n\tobdidx\t\t objid\t\t objid\t\t group\n"
        "\t     4\t         74565\t      0x12345\t             0\n"
        "\t     9\t            31\t         0x1f\t   0x240000400\n\n")
