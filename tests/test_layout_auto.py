"""The automatic layout (iez.layout.auto, docs/layouts.md): each rule of the cost model as an
example that a wrong model fails, and its use by every policy through alloc.policy."""

from __future__ import annotations

import numpy as np
import pytest

from iez.alloc.policy import AllocOptions, job_bytes
from iez.alloc.registry import get_policy, names
from iez.cluster import Snapshot, make_cluster
from iez.errors import ConfigError
from iez.layout import auto
from iez.layout.layout import LUSTRE_EOF
from iez.metrics import balance, integer_bound
from iez.request import Request

MIB, GIB = 1 << 20, 1 << 30
TESTBED = auto.Servers(tuple([4e8] * 15), tuple([1.25e9] * 3), 1.25e9)  # the seed-000 testbed's model
POLICIES = names()
BIG = 16 << 40  # OSTs big enough that a terabyte file fits on one


def test_one_writer_small_file_keeps_one_stripe():
    for size in (1, 64 << 10, 512 << 10, MIB + MIB // 2):
        assert auto.choose(auto.FileShape(size, 1), TESTBED).stripe_count == 1


def test_no_object_holds_less_than_the_minimum():
    for size in (2 * MIB, 5 * MIB, 9 * MIB):
        c = auto.choose(auto.FileShape(size, 64), TESTBED).stripe_count
        assert size // c >= auto.MIN_STRIPE_BYTES


def test_a_thousand_writers_spread_a_terabyte_over_every_usable_ost_and_no_more():
    wide = auto.Servers(tuple([4e8] * 48), tuple([1.25e9] * 8), 1.25e9)
    for servers in (TESTBED, wide):
        ch = auto.choose(auto.FileShape(1024 * GIB, 1024, 4 * MIB), servers)
        assert ch.stripe_count == servers.n
        assert ch.unit % (4 * MIB) == 0 and not ch.components


def test_one_writer_gets_as_many_osts_as_its_link_can_keep_busy():
    ch = auto.choose(auto.FileShape(64 * GIB, 1), TESTBED)
    assert ch.stripe_count == 4  # 1.25 GB/s over 400 MB/s OSTs


def test_file_per_process_files_stay_narrow_when_the_run_fills_the_servers():
    # 1,000 files of 1 GiB on 15 OSTs: the run, not the file, is the bottleneck; a few objects each.
    assert auto.choose(auto.FileShape(GIB, 1, job_bytes=1000 * GIB), TESTBED).stripe_count <= 3
    # Eight files of 2 GiB (seed 000's IOR FPP): the OSSs bound the run whatever the count; of the
    # equally fast counts, every file on every OST leaves no OST busier than another.
    assert auto.choose(auto.FileShape(2 * GIB, 1, job_bytes=16 * GIB), TESTBED).stripe_count == 15


def test_the_count_aligns_with_the_writers_when_that_is_no_slower():
    # Client-bound (the job's clients move 1 GB/s): 15 stripes for 15 writers are as fast as 16,
    # and no two writers share an object.
    slow_links = auto.Servers(tuple([4e8] * 16), tuple([1.25e9] * 4), 1.25e9, job_bw=1e9)
    assert auto.choose(auto.FileShape(16 * GIB, 15), slow_links).stripe_count == 15
    assert auto.choose(auto.FileShape(16 * GIB, 13), slow_links).stripe_count == 16
    # Server-bound, one stripe fewer is slower: the count stays.
    assert auto.choose(auto.FileShape(16 * GIB, 14), TESTBED).stripe_count == 15


def test_no_count_within_the_bounds_is_faster_by_the_model():
    rng = np.random.default_rng(1)
    for _ in range(300):
        shape = auto.FileShape(int(rng.integers(1, 1 << 42)), int(rng.integers(1, 2048)),
                               job_bytes=int(rng.integers(0, 1 << 44)))
        ch = auto.choose(shape, TESTBED)
        cap = min(TESTBED.n, max(1, shape.write_bytes // auto.MIN_STRIPE_BYTES))
        t = auto.write_time(shape, TESTBED, np.arange(1, cap + 1))
        assert 1 <= ch.stripe_count <= cap and t[ch.stripe_count - 1] <= t.min() * (1 + 1e-9)


def test_unknown_size_gets_the_manuals_pfl_template():
    ch = auto.choose(auto.FileShape(0, 8), TESTBED)
    assert ch.components == ((4 * MIB, 1), (64 * MIB, 4), (LUSTRE_EOF, 15))
    assert ch.stripe_count == 15 and "PFL" in ch.reason


@pytest.mark.parametrize("transfer,align,unit", [
    (0, 0, MIB), (47008, 0, MIB), (4 * MIB, 0, 4 * MIB), (3 * MIB, 0, MIB), (0, 16 * MIB, 16 * MIB), (1 << 40, 0, 2 * GIB)])
def test_stripe_unit_is_the_writes_alignment_at_least_one_rpc(transfer, align, unit):
    assert auto.stripe_unit(transfer, align) == unit


def test_fit_size_stays_in_lustres_limits():
    for size in (1, 65536, 3 * MIB + 5, (1 << 32) - 1, 1 << 40):
        for unit in (MIB, 4 * MIB, 2 * GIB):
            s = auto.fit_size(size, unit)
            assert s % unit == 0 and s % 65536 == 0 and 0 < s < 1 << 32


# -- through the policies ------------------------------------------------------------------------

def place(requests, layout, policy="balanced", **kw):
    cluster = make_cluster(ost_size=BIG)
    return get_policy(policy).place(requests, cluster, Snapshot.from_cluster(cluster), AllocOptions(layout=layout, **kw))


@pytest.mark.parametrize("policy", POLICIES)
def test_keep_leaves_the_asked_layout_untouched(policy):
    reqs = [Request("/s", 16 * GIB, 1, comm_size=16, app="a", run="1"), Request("/z", 0, 2, app="a", run="1"),
            Request("/w", 100 << 10, 4, app="a", run="1")]
    for p, r in zip(place(reqs, "keep", policy), reqs):
        assert p.layout.plain is not None and p.layout.plain.stripe_count == r.stripe_count and p.note == ""


@pytest.mark.parametrize("policy", POLICIES)
def test_a_shared_file_on_one_ost_is_spread_to_within_ten_percent_of_the_integer_optimum(policy):
    """A shared file the traced run had on one OST (stripe count 1): under auto, the job's OSTCost
    (eq. 7) is within 10% of the best k equal stripes can reach on the cluster's OSTs."""
    cluster = make_cluster(ost_size=BIG)
    for writers, size in ((16, 16 * GIB), (1024, 1024 * GIB), (14, 14 * GIB), (64, 3 * GIB)):
        req = Request("/ssf", size, 1, comm_size=writers, app="ior", run="2")
        before = balance(cluster, job_bytes(place([req], "keep", policy))).ost_cost
        (p,) = place([req], "auto", policy)
        after = balance(cluster, job_bytes([p])).ost_cost
        k = p.layout.plain.stripe_count
        assert after <= 1.1 * integer_bound(len(cluster.osts), len(cluster.osts)) < before
        assert k >= 14 and p.note.startswith("auto:")


@pytest.mark.parametrize("policy", POLICIES)
def test_auto_gives_unknown_sizes_a_pfl_layout_on_distinct_osts_per_component(policy):
    (p,) = place([Request("/grow", 0, 1, app="a", run="1")], "auto", policy)
    comps = p.layout.components
    assert [c.layout.stripe_count for c in comps] == [1, 4, 15] and comps[-1].end == LUSTRE_EOF
    for c in comps:
        assert len(set(c.layout.osts)) == len(c.layout.osts)
    assert not set(comps[0].layout.osts) & set(comps[1].layout.osts)


def test_auto_stripe_size_is_a_multiple_of_the_transfer_size():
    (p,) = place([Request("/ssf", 1024 * GIB, 1, comm_size=1024, transfer_size=8 * MIB, app="a", run="1")], "auto")
    lay = p.layout.plain
    assert lay.stripe_count == 15 and lay.stripe_size % (8 * MIB) == 0


def test_writers_field_wins_over_comm_size():
    (p,) = place([Request("/f", 16 * GIB, 1, comm_size=16, writers=1, app="a", run="1")], "auto")
    assert p.layout.plain.stripe_count == 4  # one writer's link keeps 4 OSTs busy


def test_unknown_layout_mode_is_one_line_error():
    with pytest.raises(ConfigError, match="layout mode"):
        AllocOptions(layout="wide")


# -- the site's choice: the cluster file and `iez allocate --layout` ------------------------------

def test_cluster_file_layout_key():
    from iez.cluster import dump_cluster, parse_cluster

    text = '[defaults]\nlayout = "keep"\n[[oss]]\nname = "oss0"\nosts = [0]\n'
    c = parse_cluster(text)
    assert c.layout == "keep" and parse_cluster(dump_cluster(c)) == c
    assert parse_cluster(text.replace('layout = "keep"\n', "")).layout == ""
    with pytest.raises(ConfigError, match=r"defaults\.layout: expected one of 'auto', 'keep', got 'wide'"):
        parse_cluster(text.replace('"keep"', '"wide"'))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_iez_allocate_takes_the_sites_layout_unless_told(iez_cmd, subenv, db_url, tmp_path):
    """A Darshan log's shared file (asked 24 stripes) on a 32-OST cluster whose file says
    layout = "keep": kept at 24; `--layout auto` spreads it over all 32, and the table of changed
    layouts says what was asked, what was chosen and why."""
    import subprocess

    from darshan.log_utils import get_log_path

    from iez import plan as planfile

    subenv.pop("IEZ_DB", None)
    subenv["HOME"] = str(tmp_path / "home")

    def iez(*args: str) -> str:
        p = subprocess.run([*iez_cmd, *args, "--db", db_url], capture_output=True, text=True, env=subenv,
                           cwd=tmp_path, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout

    toml = tmp_path / "site.toml"
    toml.write_text('fsname = "scratch"\n[defaults]\nlayout = "keep"\n[ost_defaults]\nsize = "2TiB"\n'
                    + "".join(f'[[oss]]\nname = "oss{s}"\nosts = {list(range(s * 8, s * 8 + 8))}\n' for s in range(4)))
    iez("trace", "import", str(get_log_path("sample.darshan")), "--app", "vpic")
    iez("predict", "vpic")
    out = iez("allocate", "vpic", "--cluster", str(toml), "--layout", "auto", "-o", "auto.plan", "--no-gate")
    (fl,) = planfile.load(tmp_path / "auto.plan").entries.values()
    assert fl.plain.stripe_count == 32
    assert "1 of 1" in out and "24 stripes" in out and "32 x 3.9G" in out and "auto: 32 x" in out
    out = iez("allocate", "vpic", "--cluster", str(toml), "-o", "keep.plan", "--no-gate")  # the site keeps
    (fl,) = planfile.load(tmp_path / "keep.plan").entries.values()
    assert fl.plain.stripe_count == 24 and "0 of 1" in out and "auto:" not in out


def test_controller_layout_mode_and_per_application_keep(tmp_path):
    """`iez controller --layout MODE --layout-keep APP`: the mode for every application (else the
    cluster file's), and the asked layouts kept for the applications named."""
    from dataclasses import replace

    from iez.controller.service import Controller, Settings

    def controller(cluster, **kw) -> Controller:
        return Controller(Settings(cluster=cluster, db_url=f"sqlite:///{tmp_path / 'iez.db'}", gate=None, **kw))

    site = replace(make_cluster(), layout="auto")
    c = controller(site, layout_keep=frozenset({"legacy"}))
    assert c.options_for("ior").layout == "auto" and c.options_for("legacy").layout == "keep"
    assert c.options_for("ior", 0.2).capacity_weight == 0.2
    assert controller(site, layout="keep").options_for("ior").layout == "keep"
    assert controller(make_cluster()).options_for("ior").layout == AllocOptions().layout
