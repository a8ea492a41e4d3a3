"""The automatic layout on the simulator (the real iez-sim engine through iez.sim): an auto layout
is never slower to write, nor to read back, than the layout the user had, on IOR-like and
HACC-IO-like shared files from 1 to 1,024 writers, on segmented IOR files (-s 4), and on every run of the scenarios in scenarios/
whose jobs a policy places (today seed000-fig10; the others list their OSTs).

The user's layout is what the benchmarks ask for by default, one stripe of 1 MiB, placed by
Lustre's round-robin (`rr`, layout keep); auto is the same allocator, or iez's `balanced`, with
layout auto. Times are per job: write bandwidth and read bandwidth over the same bytes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from iez.sim import scenario, study

MIB = 1 << 20
SLACK = 1e-6  # SimGrid's max-min solver works to ~1e-5 of a resource; equal layouts give equal times


pytestmark = pytest.mark.usefixtures("eng")  # the engine is built (tests/plugins/sim_engine.py)


def run(doc: dict, tmp_path: Path, name: str) -> study.Run:
    (v,) = scenario.variants(doc, tmp_path)
    return study.simulate(v, tmp_path / name)


def job(kind: str, ranks: int, per_rank: int, placement: str, layout: str, **kw) -> dict:
    return {"name": "app", "kind": kind, "mode": "ssf", "ranks": ranks, "ranks_per_node": 1, "block": per_rank,
            "transfer": min(per_rank, MIB), "read": True, "placement": placement, "layout": layout, **kw}


@pytest.mark.parametrize("kind", ["ior", "hacc-io"])
@pytest.mark.parametrize("ranks,per_rank", [(1, 1024 * MIB), (16, 256 * MIB), (64, 64 * MIB), (256, 16 * MIB),
                                            (1024, 4 * MIB)])
def test_auto_is_never_slower_than_the_users_layout_on_a_shared_file(tmp_path, kind, ranks, per_rank):
    doc = {"title": "shared file", "job": [job(kind, ranks, per_rank, "rr", "keep")]}
    user = run(doc, tmp_path, "user").results.job("app")
    for policy in ("rr", "balanced"):
        doc["job"] = [job(kind, ranks, per_rank, policy, "auto")]
        got = run(doc, tmp_path, f"auto-{policy}").results.job("app")
        assert got.write_bw >= user.write_bw * (1 - SLACK), (policy, got.write_bw, user.write_bw)
        assert got.read_bw >= user.read_bw * (1 - SLACK), (policy, got.read_bw, user.read_bw)
    if ranks >= 16:  # a wide shared file: one OST against all of them
        assert got.write_bw > 2 * user.write_bw


@pytest.mark.parametrize("ranks,per_segment", [(16, 16 * MIB), (64, 4 * MIB), (256, MIB)])
def test_auto_and_hierarchical_are_never_slower_on_a_segmented_shared_file(tmp_path, ranks, per_segment):
    """IOR -s 4: each writer's bytes in 4 blocks. `hierarchical` leaves it the automatic layout."""
    def seg(placement, layout):
        return [job("ior", ranks, per_segment, placement, layout, segments=4)]

    user = run({"title": "segmented", "job": seg("rr", "keep")}, tmp_path, "user").results.job("app")
    for layout in ("auto", "hierarchical"):
        got = run({"title": "segmented", "job": seg("balanced", layout)}, tmp_path, layout).results.job("app")
        assert got.write_bw >= user.write_bw * (1 - SLACK), (layout, got.write_bw, user.write_bw)
        assert got.read_bw >= user.read_bw * (1 - SLACK), (layout, got.read_bw, user.read_bw)
        assert got.write_bw > 2 * user.write_bw


def placed(job: scenario.JobEntry) -> bool:
    """A job whose layouts a policy chooses. Not iez-paper: Algorithm 2 as printed (references: s000-alg2) piles
    stripes on the first OSTs (its costs are not updated within a batch), so more stripes make it
    slower whatever their count; its time is the policy's, not the layout's."""
    return job.placement not in ("list", "observed", "iez-paper")


def policy_placed_runs(path) -> list:
    """Every run of a scenario (each variant and sweep point) with a job a policy places; none for
    a cluster file or a scenario whose jobs all have listed OSTs or observed layouts."""
    doc, base = scenario.load_scenario(path)
    if not isinstance(doc.get("job"), list):
        return []
    return [v for v in scenario.variants(doc, base) if any(placed(j) for j in v.scenario.jobs)]


# Spider II-size scenarios take 20 minutes of simulation each, beyond `make test`'s budget: not
# checked here; the benchmark named beside each runs the scenario in `make bench`.
AT_BENCH = {"seed002-ior": "bench/bench_bpio.py"}
# Only the scenarios with something to compare: listing the others would skip them.
SCENARIOS = [p for p in sorted((ROOT / "scenarios").glob("*.toml"))
             if p.stem not in AT_BENCH and policy_placed_runs(p)]


def test_some_scenarios_have_policy_placed_jobs():
    assert SCENARIOS, "no scenario in scenarios/ has a job a policy places: nothing to check auto on"


def test_the_scenarios_left_to_the_benchmarks_are_run_there():
    for stem, bench in AT_BENCH.items():
        assert (ROOT / "scenarios" / f"{stem}.toml").exists(), stem
        assert f"{stem}.toml" in (ROOT / bench).read_text(), f"{bench} does not run scenarios/{stem}.toml"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_auto_is_never_slower_on_the_scenarios(tmp_path, path):
    """Every policy-placed run of each scenario with every job a policy places switched to
    layout auto. Jobs with listed OSTs or observed layouts are as given."""
    runs = policy_placed_runs(path)
    for k, v in enumerate(runs):
        user = study.simulate(v, tmp_path / f"user{k}")
        jobs = tuple(replace(j, layout="auto") if placed(j) else j for j in v.scenario.jobs)
        auto = study.simulate(replace(v, scenario=replace(v.scenario, jobs=jobs)), tmp_path / f"auto{k}")
        assert auto.results.makespan <= user.results.makespan * (1 + SLACK), v.label
