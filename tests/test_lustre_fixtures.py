"""Every file in the Lustre fixtures tree is claimed by a parser and reads cleanly with it.

A new fixture file fails `test_every_fixture_is_claimed` until it gets a claim here (and a
value test in the parser's own test file) or a reason it is not parsed."""

from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from conftest import FIXTURES, need_fixtures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iez.lustre.brw_stats import parse_brw_stats
from iez.lustre.getparam import parse_getparam, parse_raw, split_param_name
from iez.lustre.getstripe import parse_getstripe, parse_lfs_osts
from iez.lustre.jobstats import parse_job_stats
from iez.lustre.lfsdf import parse_lfs_df
from iez.lustre.stats import parse_stats
from iez.lustre.targets import (
    SPACE_FIELDS,
    osp_states,
    parse_server_uuid,
    parse_target_obd,
    parse_tunable,
    striping_tunables,
    target_space,
)

EXP = "lustre_exporter/"
COL = "lustrefs-exporter/lustre-collector/src/fixtures/"

NOT_PARSED = {
    "README.md": "describes the fixtures",
    "lustre_exporter/LICENSE": "license text",
    "lustrefs-exporter/lustre-collector/LICENSE": "license text",
    "lustrefs-exporter/lustrefs-exporter/LICENSE": "license text",
    EXP + "proc/fs/lustre/osc/lustrefs-OST0000-osc-ffff88105db50000/import":
        "client import state (failover NIDs, connect flags); nothing in iez reads it",
}


def _clean(skipped):
    assert not list(skipped), skipped
    return True


def _stats(text):
    s = parse_stats(text)
    return _clean(s.skipped) and s.times.snapshot_ns is not None


def _brw(text):
    b = parse_brw_stats(text)
    return _clean(b.skipped) and bool(b.histograms)


def _jobs(text):
    j = parse_job_stats(text)
    return _clean(j.skipped) and bool(j.jobs)


def _integer(text):
    return parse_raw(text).isdigit()


def _target_obd(text):
    targets, skipped = parse_target_obd(text)
    return _clean(skipped) and bool(targets)


def _tunable(text):
    return parse_tunable(text) is not None


def _scalar(text):
    return bool(parse_raw(text))


def _osp(text):
    d = parse_getparam(text)
    return _clean(d.skipped) and bool(osp_states(d.values))


def _server_uuid(text):
    return parse_server_uuid(text) is not None


# value parsers of `lctl get_param` dumps, by the last component of the parameter name
VALUE_PARSERS = {"stats": _stats, "md_stats": _stats, "brw_stats": _brw, "rpc_stats": _brw, "job_stats": _jobs,
                 "target_obd": _target_obd, **{f: _integer for f in SPACE_FIELDS}}


def _dump(text):
    d = parse_getparam(text)
    _clean(d.skipped)
    parsed = 0
    for name, value in d.values.items():
        check = VALUE_PARSERS.get(split_param_name(name)[-1])
        if check is not None:
            assert check(value), name
            parsed += 1
    return parsed > 0


CLAIMS = [  # (glob over the path relative to the fixtures root, parser)
    (EXP + "proc/fs/lustre/*/*/stats", _stats),
    (EXP + "proc/fs/lustre/ost/OSS/*/stats", _stats),
    (EXP + "proc/fs/lustre/obdfilter/*/exports/*/stats", _stats),
    (EXP + "proc/fs/lustre/mdt/*/md_stats", _stats),
    (EXP + "proc/fs/lustre/*/*/brw_stats", _brw),
    (EXP + "proc/fs/lustre/osc/*/rpc_stats", _brw),
    (EXP + "proc/fs/lustre/obdfilter/*/job_stats", _jobs),
    (EXP + "proc/fs/lustre/*/*/kbytes*", _integer),
    (EXP + "proc/fs/lustre/*/*/files*", _integer),
    (EXP + "proc/fs/lustre/obdfilter/*/blocksize", _integer),
    (EXP + "proc/fs/lustre/*/*/target_obd", _target_obd),
    (EXP + "proc/fs/lustre/lo[dv]/*/qos_*", _tunable),
    (EXP + "proc/fs/lustre/lo[dv]/*/stripe*", _tunable),
    (EXP + "proc/fs/lustre/lod/*/numobd", _tunable),
    (EXP + "proc/fs/lustre/lod/*/activeobd", _tunable),
    (EXP + "proc/fs/lustre/osc/*/ost_server_uuid", _server_uuid),
    (EXP + "sys/fs/lustre/version", _scalar),
    (EXP + "sys/fs/lustre/health_check", _scalar),
    (COL + "brw_stats_*.txt", _brw),
    (COL + "osd*.txt", _dump),
    (COL + "osp.txt", _osp),
    (COL + "valid/*.txt", _dump),
    (COL + "valid/*/*.txt", _dump),
    (COL + "valid/*/*/*.txt", _dump),
]


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _claim(rel):
    return next((parser for pattern, parser in CLAIMS if fnmatchcase(rel, pattern)), None)


def test_every_fixture_is_claimed(fixtures):
    files = _files(fixtures)
    assert len(files) >= 60
    unclaimed = [f for f in files if f not in NOT_PARSED and _claim(f) is None]
    assert unclaimed == [], f"fixture files no parser test reads: {unclaimed}"
    assert set(NOT_PARSED) <= set(files), "a NOT_PARSED entry names no file"
    both = [f for f in files if f in NOT_PARSED and _claim(f) is not None]
    assert both == []
    for pattern, _ in CLAIMS:
        assert any(fnmatchcase(f, pattern) for f in files), f"claim {pattern} matches no fixture"


def test_claimed_fixtures_parse_cleanly(fixtures):
    count = 0
    for rel in _files(fixtures):
        parser = _claim(rel)
        if parser is None:
            continue
        assert parser((fixtures / rel).read_text()), rel
        count += 1
    assert count == len(_files(fixtures)) - len(NOT_PARSED)


@pytest.mark.parametrize("rel", ["valid/valid.txt", "valid/valid_mds.txt", "valid/ex8761-lctl.txt",
                                 "valid/params-6.2.0-r9.txt", "valid/lustre-2.14.0_ddn145/2.14.0_ddn145_stats.txt"])
def test_dumps_hold_many_parsed_values(fixtures, rel):
    d = parse_getparam((fixtures / COL / rel).read_text())
    kinds = {split_param_name(n)[-1] for n in d.values} & set(VALUE_PARSERS)
    assert {"stats", "brw_stats", "kbytestotal", "kbytesavail"} <= kinds


# -- malformed input: every parser reports, none raises --------------------------------------------

_WORDS = ["lmm_stripe_count:", "lcme_id:", "lcme_extent.e_end:", "  ", "\t", "\n", "- ", "{", "}", ",", ":", "0x1",
          "12", "-1", "1K", "4M", "%", "|", "[", "]", "UUID", "1K-blocks", "Inodes", "filesystem_summary:", "samples",
          "[bytes]", "snapshot_time", "job_id:", "EOF", "init", "raid0", "l_ost_idx:", "l_fid:", "=", ".", "@",
          "fs-OST0001", "read", "write", "cum", "obdidx", "has no stripe info", "stripe_count:", "secs.nsecs",
          "(secs.usecs)", "hist:", "unit:", "samples:", "ACTIVE", "OBDS:"]
_CORPUS = sorted(str(p) for p in FIXTURES.rglob("*") if p.is_file()) if FIXTURES.is_dir() else [""]


def _mutated(path, i, j, insert):
    text = Path(path).read_text() if path else ""
    return text[:i] + insert + text[j:]


_TEXT = st.one_of(st.text(max_size=300), st.lists(st.sampled_from(_WORDS), max_size=60).map("".join),
                  st.builds(_mutated, st.sampled_from(_CORPUS), st.integers(0, 4000), st.integers(0, 4000),
                            st.text(max_size=20)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_no_parser_raises_on_any_text(text):
    need_fixtures()
    for parse in (parse_getparam, parse_stats, parse_brw_stats, parse_job_stats, parse_lfs_df, parse_getstripe,
                  parse_lfs_osts, parse_target_obd, parse_server_uuid, parse_tunable):
        parse(text)
    values = {"osp.fs-OST0001-osc-MDT0000.active": text, "lod.fs-MDT0000-mdtlov.qos_maxage": text,
              "obdfilter.fs-OST0000.kbytesavail": text}
    striping_tunables(values)
    target_space(values)
    osp_states(values)
