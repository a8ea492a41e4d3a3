"""The collective create of docs/references.md#s001-table2 and the reads of
docs/references.md#s001-fig6 on the simulator (the real iez-sim engine): each test runs the scenario in scenarios/ and asserts the trend the paper reports, not its
numbers (docs/simulator.md, "Reproductions", has both side by side)."""

from __future__ import annotations

import pytest

from conftest import ROOT
from iez.sim.scenario import load_scenario, variants
from iez.sim.study import simulate, workloads


def runs_of(name: str, tmp_path) -> dict[tuple[str, int], object]:
    doc, base = load_scenario(ROOT / "scenarios" / name)
    return {(v.values["variant"], v.values["job.ranks"]): simulate(v, tmp_path / v.label.replace(",", "_"))
            for v in variants(doc, base)}


def test_table2_collective_create_grows_with_the_processes_but_not_under_split_writing(tmp_path):
    """docs/references.md#s001-table2: the original create time rises with the process count (every
    rank opens the new file on the MDS); split writing's single create does not."""
    runs = runs_of("seed001-table2.toml", tmp_path)
    t = {k: r.results.jobs[0].makespan for k, r in runs.items()}
    ranks = (4, 8, 16, 32)
    original = [t[("original", n)] for n in ranks]
    split = [t[("split", n)] for n in ranks]
    assert all(a < b for a, b in zip(original, original[1:]))
    # about linear: each doubling of the processes adds about twice the previous step
    steps = [b - a for a, b in zip(original, original[1:])]
    assert all(s2 == pytest.approx(2 * s1, rel=0.05) for s1, s2 in zip(steps, steps[1:]))
    assert max(split) == pytest.approx(min(split), rel=1e-6)
    assert all(s < o for s, o in zip(split, original)) and original[-1] > 4 * split[-1]
    # split writing: the other ranks open nothing at open time
    (wl,) = workloads(runs[("split", 32)].variant.scenario)
    assert wl.phases[0].opens == () and wl.phases[0].creates == ((0, 1),)


def test_fig6_reads_hierarchical_striping_gains_at_16_processes_and_rises_with_them(tmp_path):
    """docs/references.md#s001-fig6: hierarchical striping reads faster than flat striping, and its
    read bandwidth rises with the processes, once disks pay for seeking between streams."""
    runs = runs_of("seed001-fig6-reads.toml", tmp_path)
    bw = {k: r.results.jobs[0].read_bw for k, r in runs.items()}
    assert bw[("hierarchical", 16)] > 1.1 * bw[("flat", 16)]
    assert bw[("hierarchical", 4)] < bw[("hierarchical", 8)] < bw[("hierarchical", 16)]
    for r in runs.values():
        assert r.results.jobs[0].write_bytes == 0 and r.results.makespan >= r.bound * (1 - 1e-9)
