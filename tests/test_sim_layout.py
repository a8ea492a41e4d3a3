"""Composite (PFL) layouts in the simulator: seed 001's hierarchical striping built from a
scenario (docs/references.md#s001-hierarchical), each component's bytes on its own OSTs, a lone
job at its analytic bound, split writing free of extent-lock switches, the layout options of a
job, and the seed 001 scenarios (docs/references.md#s001-fig6) run small with the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from iez.errors import ConfigError
from iez.layout.layout import LUSTRE_EOF
from iez.layout.raid0 import bytes_per_ost
from iez.sim import description
from iez.sim.bounds import lower_bound
from iez.sim.placement import hierarchical, place
from iez.sim.scenario import load_scenario, variants
from iez.sim.study import compare, simulate, workloads

MIB = 1 << 20
GIB = 1 << 30


def test_hierarchical_layout_cuts_the_file_into_components_on_disjoint_subsets():
    lay = hierarchical((10, 11, 12, 13), 2 * GIB, subfiles=2, subset_size=2, stripe_size=MIB)
    a, b = lay.components
    assert (a.start, a.end, a.layout.osts) == (0, GIB, (10, 11))
    assert (b.start, b.end, b.layout.osts) == (GIB, LUSTRE_EOF, (12, 13))
    assert bytes_per_ost(lay, 2 * GIB) == {10: GIB // 2, 11: GIB // 2, 12: GIB // 2, 13: GIB // 2}
    # More subfiles than subsets: subsets are reused in turn; extents end on the multiples of the
    # stripe width (2 MiB) nearest to the equal cuts (3.3 and 6.7 MiB), as iez.layout.hierarchical cuts.
    lay = hierarchical((0, 1, 2, 3, 4), 10 * MIB + 1, subfiles=3, subset_size=2, stripe_size=MIB)
    assert [c.layout.osts for c in lay.components] == [(0, 1), (2, 3), (0, 1)]
    assert [c.start for c in lay.components] == [0, 4 * MIB, 6 * MIB]
    with pytest.raises(ConfigError, match="subset size 6 exceeds the 5 listed OSTs"):
        hierarchical((0, 1, 2, 3, 4), GIB, subfiles=2, subset_size=6, stripe_size=MIB)


def _scenario(tmp_path: Path, layout: str, **sim) -> dict:
    job = {"name": "ssf", "kind": "ior", "mode": "ssf", "ranks": 2, "block": "1GiB", "transfer": "4MiB",
           "placement": "list", "osts": [0, 5, 10, 1], "stripe_count": 4}
    if layout == "hierarchical":
        job.update(layout="hierarchical", subset_size=2)
    (v,) = variants({"sim": {"client_nic_bw": "10Gbit/s", **sim}, "job": [job]}, tmp_path)
    return v


def test_each_half_of_a_two_component_file_lands_on_its_own_osts(tmp_path):
    v = _scenario(tmp_path, "hierarchical")
    wls = workloads(v.scenario)
    layouts = place(v.scenario.cluster, list(zip(v.scenario.jobs, wls)))
    (lay,) = layouts.values()
    assert [c.layout.osts for c in lay.components] == [(0, 5), (10, 1)]
    desc = description.build(v.scenario, wls, layouts)
    (ph,) = desc["jobs"][0]["phases"]
    by_node: dict[int, dict[int, int]] = {}
    objects: dict[int, set[int]] = {}
    for node, ost, n, obj in ph["streams"]:
        by_node.setdefault(node, {})[ost] = by_node.get(node, {}).get(ost, 0) + n
        objects.setdefault(obj, set()).add(node)
    # Rank 0 (node 0) wrote the first GiB, rank 1 the second: each on its component's two OSTs.
    assert by_node == {0: {0: GIB // 2, 5: GIB // 2}, 1: {10: GIB // 2, 1: GIB // 2}}
    assert len(objects) == 4 and all(len(nodes) == 1 for nodes in objects.values())


def test_a_lone_hierarchical_job_runs_at_its_analytic_bound_and_pays_no_lock_switch(tmp_path):
    # Two writers, each on its own component of 2 OSTs (400 MB/s each, the library's default; no
    # OSS carries more than 1 GiB at 1.25 GB/s): 512 MiB per OST, after one create and one open.
    v = _scenario(tmp_path, "hierarchical", lock_switch="50ms")
    r = simulate(v, tmp_path / "hier")
    expect = GIB / 2 / 4e8
    assert r.results.makespan == pytest.approx(expect, rel=1e-3)
    assert r.results.makespan >= lower_bound(r.description).seconds * (1 - 1e-9)
    assert r.bound == pytest.approx(expect, rel=1e-3)
    # The same bytes striped flat over the 4 OSTs: both writers share every object and pay a
    # 50 ms switch per 1 MiB grant, far below the OSTs' speed.
    flat = simulate(_scenario(tmp_path, "keep", lock_switch="50ms"), tmp_path / "flat")
    assert flat.results.makespan > 3 * r.results.makespan


def test_layout_options_of_a_job(tmp_path):
    def job(**kw):
        return {"job": [{"name": "j", "mode": "ssf", "ranks": 2, **kw}]}
    with pytest.raises(ConfigError, match="job j.layout: 'wide' is not one of keep, auto, hierarchical"):
        variants(job(layout="wide"), tmp_path)
    with pytest.raises(ConfigError, match="layout \"auto\" is a policy's choice"):
        variants(job(layout="auto", placement="list", osts=[0, 1]), tmp_path)
    with pytest.raises(ConfigError, match="subset_size and subfiles are for placement = \"list\""):
        variants(job(layout="hierarchical", placement="balanced", subset_size=2), tmp_path)
    with pytest.raises(ConfigError, match="job j: subset size 3 exceeds the 2 listed OSTs"):
        (v,) = variants(job(layout="hierarchical", placement="list", osts=[0, 1], subset_size=3), tmp_path)
        place(v.scenario.cluster, list(zip(v.scenario.jobs, workloads(v.scenario))))
    # Through a policy, the option reaches AllocOptions.layout and every file gets a layout.
    for layout in ("keep", "auto", "hierarchical"):
        (v,) = variants(job(layout=layout, placement="balanced", block="64MiB"), tmp_path)
        wls = workloads(v.scenario)
        layouts = place(v.scenario.cluster, list(zip(v.scenario.jobs, wls)))
        assert set(layouts) == {f.path for f in wls[0].files}


def test_seed001_fig6_at_16_processes_matches_the_calibration(tmp_path):
    """docs/references.md#s001-fig6: +220 % write at 16 processes, the one point the scenario's
    lock_switch is calibrated on; reads are not helped in the simulator (its documented difference)."""
    doc, base = load_scenario(ROOT / "scenarios" / "seed001-fig6.toml")
    doc["sweep"] = {"job.ranks": [16]}
    runs = [simulate(v, tmp_path / v.label) for v in variants(doc, base)]
    assert [r.variant.values["variant"] for r in runs] == ["flat", "hierarchical"]
    write, read = (compare(c, runs) for c in runs[0].variant.scenario.compares)
    (pair,) = write["pairs"]
    assert pair["change"] == pytest.approx(2.20, abs=0.05)
    assert read["max"] < 0
    for r in runs:
        assert r.results.makespan >= r.bound * (1 - 1e-9)


def test_seed001_split_writing_is_what_frees_the_locks(tmp_path):
    """Hierarchical striping whose components do not follow the writers' blocks (23 subfiles, the
    paper's BT-IO cut) keeps shared objects, so most of the gain of split writing is lost."""
    doc, base = load_scenario(ROOT / "scenarios" / "seed001-subset.toml")
    doc["variant"] = [v for v in doc["variant"] if v["name"] in ("flat", "subset 2", "no split, subset 2")]
    runs = {v.label: simulate(v, tmp_path / v.label.replace(" ", "_")) for v in variants(doc, base)}
    bw = {k: r.results.jobs[0].write_bw for k, r in runs.items()}
    assert bw["subset 2"] > 3 * bw["flat"]
    assert bw["no split, subset 2"] == pytest.approx(bw["flat"], rel=0.1)


def test_seed001_fig7_bt_io_is_slower_hierarchically_at_40_dumps(tmp_path):
    """docs/references.md#s001-fig7: with 23 subfiles of 2 OSTs, each of BT-IO's 40 dumps falls on
    one or two components, so hierarchical striping takes longer than flat; `dumps` sets the count."""
    doc, base = load_scenario(ROOT / "scenarios" / "seed001-fig7.toml")
    doc["sweep"] = {"job.ranks": [16]}
    runs = {v.values["variant"]: simulate(v, tmp_path / v.label) for v in variants(doc, base)}
    assert runs["hierarchical"].results.makespan > 5 * runs["flat"].results.makespan
    assert len(runs["flat"].description["jobs"][0]["phases"]) == 40
    doc["sweep"] = {"job.dumps": [8]}
    (v, _) = variants(doc, base)
    assert len(workloads(v.scenario)[0].phases) == 8


def test_a_segmented_shared_file_is_not_cut_and_its_stripes_follow_the_writers_blocks(tmp_path):
    """IOR -b 16m -s 4 with 8 writers on 16 OSTs (seed-000 disks, a lock switch a shared object):
    `hierarchical` leaves it the automatic layout (a cut per writer's block would put each
    segment's writes on one component), whose 16 MiB stripes give each object one writer's
    blocks: written faster than Method II's round of 32 MiB stripes, where every object has
    every writer, and read as fast (reads take no locks)."""
    cluster = tmp_path / "c16.toml"
    cluster.write_text("fsname = 'c16'\n[ost_defaults]\nsize = '1TiB'\nwrite_bw = 120e6\nread_bw = 150e6\n" + "".join(
        f"[[oss]]\nname = 'oss{s}'\nosts = {list(range(4 * s, 4 * s + 4))}\nnic_bw = 1.25e9\n" for s in range(4)))
    base = {"name": "ssf", "kind": "ior", "mode": "ssf", "ranks": 8, "block": "16MiB", "segments": 4,
            "transfer": "1MiB", "read": True}
    runs = {"auto": dict(placement="balanced", layout="auto"), "hierarchical": dict(placement="balanced", layout="hierarchical"),
            "round": dict(placement="list", osts=list(range(16)), stripe_count=16, stripe_size="32MiB")}
    got = {}
    for name, opts in runs.items():
        (v,) = variants({"cluster": str(cluster), "sim": {"client_nic_bw": "10Gbit/s", "lock_switch": "20ms"},
                         "job": [{**base, **opts}]}, tmp_path)
        wls = workloads(v.scenario)
        (lay,) = place(v.scenario.cluster, list(zip(v.scenario.jobs, wls))).values()
        got[name] = (lay, simulate(v, tmp_path / name).results.job("ssf"))
    assert got["hierarchical"][0] == got["auto"][0] and got["auto"][0].plain.stripe_size == 16 * MIB
    auto, rnd = got["auto"][1], got["round"][1]
    assert auto.write_bw > 1.5 * rnd.write_bw and auto.read_bw == pytest.approx(rnd.read_bw, rel=1e-6)


def test_a_job_planned_for_fewer_bytes_than_it_writes_and_growing_gets_a_wider_tail(tmp_path):
    """`planned` and `grows` tell the policy what a prediction would: a lone writer's 2 GiB file
    planned at 1 GiB. Told it grows, its layout widens past the 1 GiB (a PFL tail on every OST)
    and the 2 GiB are written faster than on the layout planned for 1 GiB alone."""
    job = {"name": "ckpt", "kind": "ior", "mode": "ssf", "ranks": 1, "block": "2GiB", "transfer": "1MiB",
           "placement": "balanced", "layout": "auto", "planned": 0.5}
    got = {}
    for grows in (False, True):
        (v,) = variants({"cluster": str(ROOT / "scenarios" / "seed000-testbed.toml"),
                         "sim": {"client_nic_bw": "10Gbit/s"}, "job": [{**job, "grows": grows}]}, tmp_path)
        (lay,) = place(v.scenario.cluster, list(zip(v.scenario.jobs, workloads(v.scenario)))).values()
        got[grows] = (lay, simulate(v, tmp_path / str(grows)).results.job("ckpt"))
    plain, grown = got[False][0], got[True][0]
    assert plain.plain is not None and len(grown.components) == 2
    assert grown.components[0].end == GIB + (-GIB) % grown.components[0].layout.stripe_size
    head = grown.components[0].layout
    assert (head.stripe_count, head.stripe_size) == (plain.plain.stripe_count, plain.plain.stripe_size)
    assert grown.components[1].layout.stripe_count == 15 > head.stripe_count
    assert got[True][1].write_bw > got[False][1].write_bw
    for bad, msg in (({"planned": 0}, "planned: expected a share"),
                     ({"grows": True, "placement": "list", "osts": [0], "layout": "keep"}, "what a policy is told")):
        with pytest.raises(ConfigError, match=msg):
            variants({"job": [{**job, **bad}]}, tmp_path)
