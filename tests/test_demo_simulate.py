"""Simulated I/O rates for the demo (iez.demo.simulate): the real engine on small clusters, the
seed-000 scenarios on real allocator layouts, and bad input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT
from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.alloc.scenarios import paper_scenarios
from iez.cluster import Snapshot, load_cluster, make_cluster
from iez.demo.simulate import SEED000_CLIENTS, SEED000_NIC_BW, simulate_rates, seed000_hardware
from iez.errors import IezError
from iez.layout.layout import FileLayout, Layout
from iez.request import Request
from iez.sim.scenario import load_scenario, variants

MIB = 1 << 20
OST_W, OST_R = 120e6, 150e6  # the testbed's OSTs (scenarios/seed000-testbed.toml)


@pytest.fixture
def small():
    """2 OSSs x 2 OSTs with the seed-000 testbed's hardware."""
    return seed000_hardware(make_cluster(n_oss=2, osts_per_oss=2, ost_size=1 << 30))


def fpp(n: int, size: int = 64 * MIB, app: str = "ior") -> list[Request]:
    return [Request(path=f"/l/{app}.{r:08d}", write_bytes=size, rank=r, app=app) for r in range(n)]


def on(reqs, osts_of) -> dict[str, FileLayout]:
    return {r.path: FileLayout(plain=Layout(stripe_size=MIB, osts=osts_of(k))) for k, r in enumerate(reqs)}


def within_bounds(rates) -> None:
    assert rates.makespan >= rates.bound * (1 - 1e-9)
    assert rates.write_bw <= rates.write_bw_limit * (1 + 1e-6)
    assert rates.read_bw <= rates.read_bw_limit * (1 + 1e-6)


def test_balanced_files_run_at_the_osts_aggregate_and_piled_files_at_one_ost(small, tmp_path):
    reqs = fpp(4)
    balanced = simulate_rates(small, reqs, on(reqs, lambda k: ((0, 2, 1, 3)[k],)), workdir=tmp_path / "b")
    piled = simulate_rates(small, reqs, on(reqs, lambda k: (0,)), workdir=tmp_path / "p")
    for r in (balanced, piled):
        within_bounds(r)
        assert r.write_bytes == r.read_bytes == 4 * 64 * MIB
    # Four OSTs at once, less the four creates at the MDS's 20,000/s: within 1 % of 4 x the OST.
    assert balanced.write_bw == pytest.approx(4 * OST_W, rel=0.01)
    assert balanced.read_bw == pytest.approx(4 * OST_R, rel=0.01)
    assert piled.write_bw == pytest.approx(OST_W, rel=0.01) and piled.read_bw == pytest.approx(OST_R, rel=0.01)
    # Piled, the job is OST 0 writing everything, then reading it: the bound, and the simulation.
    assert piled.bound == pytest.approx(4 * 64 * MIB * (1 / OST_W + 1 / OST_R), rel=1e-3)
    assert piled.makespan == pytest.approx(piled.bound, rel=1e-3)
    assert balanced.makespan < piled.makespan / 3.9


def test_ranks_of_a_shared_file_write_their_blocks_from_both_nodes(small, tmp_path):
    (req,) = [Request(path="/l/ssf", write_bytes=64 * MIB, comm_size=4, app="ior", api="mpiio")]
    rates = simulate_rates(small, [req], on([req], lambda k: (0, 1, 2, 3)), workdir=tmp_path)
    within_bounds(rates)
    desc = json.loads((tmp_path / "description.json").read_text())
    assert len(desc["platform"]["clients"]) == SEED000_CLIENTS
    write = desc["jobs"][0]["phases"][0]
    assert write["creates"] == [[0, 1]] and write["opens"] == [[0, 1], [1, 2]]
    # Ranks 0-1 (node 0) write the first 32 MiB, ranks 2-3 (node 1) the rest: with 1 MiB stripes
    # on 4 OSTs each node puts 8 MiB in each of the 4 objects, which are shared (extent locks).
    assert sorted(s[:3] for s in write["streams"]) == [[n, o, 8 * MIB] for n in (0, 1) for o in range(4)]
    assert all(s[3] >= 0 for s in write["streams"])
    assert rates.write_bw == pytest.approx(4 * OST_W, rel=0.01)


def test_two_applications_share_the_two_client_nodes(small, tmp_path):
    reqs = fpp(2, app="a") + fpp(2, app="b")
    rates = simulate_rates(small, reqs, on(reqs, lambda k: (k,)), workdir=tmp_path)
    within_bounds(rates)
    desc = json.loads((tmp_path / "description.json").read_text())
    (job,) = desc["jobs"]
    assert job["name"] == "a+b" and job["nodes"] == [0, 1] and len(desc["platform"]["clients"]) == 2
    nodes_of_ost = {s[1]: s[0] for s in job["phases"][0]["streams"]}
    assert nodes_of_ost == {0: 0, 1: 1, 2: 0, 3: 1}  # each app's rank 0 on node 0, rank 1 on node 1
    assert rates.write_bytes == 4 * 64 * MIB


def test_scale_simulates_the_full_sized_files(small, tmp_path):
    reqs = fpp(4, size=2 * MIB)
    lays = on(reqs, lambda k: (k,))
    small_run = simulate_rates(small, reqs, lays, workdir=tmp_path / "1")
    big = simulate_rates(small, reqs, lays, workdir=tmp_path / "32", scale=32)
    assert big.write_bytes == 32 * small_run.write_bytes
    # The creates cost the same at both sizes, so the bigger files get closer to the OSTs' rate.
    assert small_run.write_bw < big.write_bw <= 4 * OST_W
    assert big.write_bw == pytest.approx(4 * OST_W, rel=0.01)


def test_every_demo_scenario_on_real_layouts_respects_the_bound(tmp_path):
    cluster = seed000_hardware(make_cluster())
    snap = Snapshot.from_cluster(cluster)
    seen = 0
    for sc in paper_scenarios():
        for policy, opts in (("rr", AllocOptions(stripe_method="fixed")), ("balanced", AllocOptions())):
            placed = get_policy(policy).place(list(sc.requests), cluster, snap, opts)
            rates = simulate_rates(cluster, sc.requests, {p.path: p.layout for p in placed},
                                   workdir=tmp_path / f"{seen}")
            within_bounds(rates)
            assert rates.write_bytes == sum(r.write_bytes for r in sc.requests)
            # No placement beats 15 OSTs at once; these keep at least a stripe count's worth busy.
            assert 8 * OST_W * 0.99 <= rates.write_bw <= 15 * OST_W
            seen += 1
    assert seen == 2 * len(paper_scenarios())


def test_seed000_hardware_is_the_reproductions(tmp_path):
    ours = seed000_hardware(make_cluster())
    toml = load_cluster(ROOT / "scenarios" / "seed000-testbed.toml")
    assert [(o.index, o.oss, o.read_bw, o.write_bw) for o in ours.osts] == \
        [(o.index, o.oss, o.read_bw, o.write_bw) for o in toml.osts]
    assert [(s.name, s.nic_bw) for s in ours.osses] == [(s.name, s.nic_bw) for s in toml.osses]
    doc, base = load_scenario(ROOT / "scenarios" / "seed000-fig10.toml")
    sim = variants(doc, base)[0].scenario.sim
    assert (sim.clients, sim.client_nic_bw) == (SEED000_CLIENTS, SEED000_NIC_BW)


@pytest.mark.parametrize("change,needle", [
    (dict(layouts={}), "no layout for /l/ior.00000000"),
    (dict(layouts="ost99"), "OST 99, which the cluster does not have"),
    (dict(layouts="unresolved"), "does not list the OST of every stripe"),
    (dict(requests=[]), "no requests"),
    (dict(requests="twice"), "requested twice"),
    (dict(requests="rank"), "rank 5 of 4"),
    (dict(requests="negative"), "write_bytes must be an integer >= 0"),
    (dict(clients=0), "clients must be an integer >= 1"),
    (dict(scale=0), "scale must be an integer >= 1"),
])
def test_bad_input_is_one_line(small, tmp_path, change, needle):
    reqs = fpp(2)
    lays: dict = on(reqs, lambda k: (k,))
    kw: dict = {"clients": 2}
    if change.get("layouts") == "ost99":
        lays[reqs[0].path] = FileLayout(plain=Layout(stripe_size=MIB, osts=(99,)))
    elif change.get("layouts") == "unresolved":
        lays[reqs[0].path] = FileLayout(plain=Layout(stripe_size=MIB, stripe_count=2))
    elif "layouts" in change:
        lays = change["layouts"]
    if change.get("requests") == "twice":
        reqs = reqs + reqs[:1]
    elif change.get("requests") == "rank":
        reqs = [Request(path=reqs[0].path, write_bytes=MIB, rank=5, comm_size=4)]
    elif change.get("requests") == "negative":
        reqs = [Request(path=reqs[0].path, write_bytes=-1)]
    elif "requests" in change:
        reqs = change["requests"]
    kw.update({k: v for k, v in change.items() if k in ("clients", "scale")})
    with pytest.raises(IezError) as e:
        simulate_rates(small, reqs, lays, workdir=tmp_path, **kw)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not (Path(tmp_path) / "results.json").exists()
