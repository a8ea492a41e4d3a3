"""The simulator engine (iez-sim on SimGrid) against physics: single streams run at the bottleneck
bandwidth, no run beats the analytic lower bound, equal jobs share fairly, a balanced placement
reaches the aggregate bandwidth, and each modelled mechanism (OST contention, extent locks, RPC
windows, client overhead, MDS rate, IO-Cop tokens, time windows) has the effect its formula says.
Small platforms, real engine processes."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from iez.sim import engine
from iez.sim.bounds import lower_bound
from iez.sim.results import parse

MIB = 1 << 20
REL = 1e-6  # SimGrid's max-min solver works to 1e-5 of a resource's capacity; our cases land much closer




def platform(n_oss=1, per_oss=1, read_bw=5e8, write_bw=4e8, oss_bw=1.25e9, clients=1, client_bw=1.25e9, **extra):
    p = {
        "osses": [{"name": f"oss{s}", "nic_bw": oss_bw} for s in range(n_oss)],
        "osts": [{"index": i, "oss": i // per_oss, "read_bw": read_bw, "write_bw": write_bw}
                 for i in range(n_oss * per_oss)],
        "clients": [{"name": f"c{k}", "nic_bw": client_bw} for k in range(clients)],
    }
    p.update(extra)
    return p


def desc(plat, jobs, **top):
    return {"format": "iez-sim/1", "platform": plat, "jobs": jobs, **top}


def write_job(name, nodes, streams, **kw):
    return {"name": name, "nodes": nodes, "phases": [{"kind": "write", "streams": streams, **kw}]}


def simulate(d, tmp_path, name="run"):
    return parse(engine.run(d, tmp_path / name))


# -- single stream = bottleneck ------------------------------------------------------------------

@pytest.mark.parametrize("kind,plat,bottleneck", [
    ("write", dict(write_bw=4e8), 4e8),                       # the OST's write bandwidth
    ("read", dict(read_bw=3e8), 3e8),                         # reads use the read bandwidth
    ("write", dict(write_bw=4e9, client_bw=1.1e8), 1.1e8),    # the client NIC
    ("read", dict(read_bw=4e9, oss_bw=2.5e8), 2.5e8),         # the OSS NIC
])
def test_single_stream_runs_at_the_bottleneck(eng, tmp_path, kind, plat, bottleneck):
    n = 1 << 30
    d = desc(platform(**plat), [{"name": "j", "nodes": [0], "phases": [{"kind": kind, "streams": [[0, 0, n, -1]]}]}])
    r = simulate(d, tmp_path)
    assert r.makespan == pytest.approx(n / bottleneck, rel=REL)
    j = r.job("j")
    assert (j.write_bw if kind == "write" else j.read_bw) == pytest.approx(bottleneck, rel=REL)


def test_lnet_router_and_fabric_limit_the_clients_behind_them(eng, tmp_path):
    n = 1 << 30
    plat = platform(n_oss=2, per_oss=2, write_bw=1e9, oss_bw=1e10, clients=2, client_bw=1e10,
                    routers=[{"name": "rtr0", "bw": 6e8}])
    plat["clients"][0]["router"] = 0
    plat["clients"][1]["router"] = 0
    d = desc(plat, [write_job("j", [0, 1], [[0, 0, n, -1], [1, 1, n, -1]])])
    assert simulate(d, tmp_path, "router").makespan == pytest.approx(2 * n / 6e8, rel=REL)
    plat = platform(n_oss=2, per_oss=2, write_bw=1e9, oss_bw=1e10, clients=2, client_bw=1e10, fabric_bw=5e8)
    d = desc(plat, [write_job("j", [0, 1], [[0, 0, n, -1], [1, 3, n, -1]])])
    assert simulate(d, tmp_path, "fabric").makespan == pytest.approx(2 * n / 5e8, rel=REL)


# -- lower bound --------------------------------------------------------------------------------

def random_description(seed: int) -> dict:
    rng = random.Random(seed)
    n_oss, per = rng.randint(1, 3), rng.randint(1, 4)
    plat = platform(n_oss=n_oss, per_oss=per, clients=8)
    for o in plat["osts"]:
        o["read_bw"], o["write_bw"] = rng.choice([3e8, 5e8]), rng.choice([2e8, 4e8, 1e9])
    for c in plat["clients"]:
        c["nic_bw"] = rng.choice([1e8, 1.25e9, 5e9])
    jobs, first = [], 0
    for j in range(rng.randint(1, 3)):
        nodes = list(range(first, first + rng.randint(1, 2)))
        first = nodes[-1] + 1
        phases = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["write", "read", "compute"])
            if kind == "compute":
                phases.append({"kind": "compute", "seconds": rng.random()})
            else:
                phases.append({"kind": kind, "streams": [
                    [rng.randrange(len(nodes)), rng.randrange(n_oss * per), rng.randint(1, 2000) * MIB, -1]
                    for _ in range(rng.randint(1, 8))]})
        jobs.append({"name": f"j{j}", "nodes": nodes, "submit": rng.random(), "phases": phases})
    return desc(plat, jobs)


@pytest.mark.parametrize("seed", range(12))
def test_no_placement_beats_the_lower_bound(eng, tmp_path, seed):
    d = random_description(seed)
    r = simulate(d, tmp_path)
    assert r.makespan >= lower_bound(d).seconds * (1 - REL)


def test_the_bound_is_reached_when_one_resource_is_the_only_limit(eng, tmp_path):
    # 3 streams on OST 0, 1 on OST 1: OST 0 carries 3 GiB at 400 MB/s and nothing else matters.
    n = 1 << 30
    d = desc(platform(per_oss=2, clients=4, client_bw=1e10, oss_bw=1e10),
             [write_job("j", [0, 1, 2, 3], [[0, 0, n, -1], [1, 0, n, -1], [2, 0, n, -1], [3, 1, n, -1]])])
    b = lower_bound(d)
    assert b.resource == "OST0000 write"
    assert simulate(d, tmp_path).makespan == pytest.approx(b.seconds, rel=REL)


# -- sharing ------------------------------------------------------------------------------------

def test_two_equal_jobs_share_fairly(eng, tmp_path):
    n = 1 << 30
    plat = platform(n_oss=1, per_oss=3, clients=4, client_bw=1e10, oss_bw=1e10)
    jobs = [write_job("a", [0, 1], [[0, 0, n, -1], [1, 1, n, -1], [0, 2, n, -1]]),
            write_job("b", [2, 3], [[0, 0, n, -1], [1, 1, n, -1], [1, 2, n, -1]])]
    r = simulate(desc(plat, jobs), tmp_path)
    a, b = r.job("a"), r.job("b")
    assert a.write_bw == pytest.approx(b.write_bw, rel=REL)
    # Each OST is split in two: each job gets half of 3 x 400 MB/s.
    assert a.write_bw == pytest.approx(3 * 4e8 / 2, rel=REL)


def test_a_perfectly_balanced_placement_reaches_the_aggregate_bandwidth(eng, tmp_path):
    # 15 OSTs (3 OSSs x 5), 30 clients, one 1 GiB stream each, two per OST.
    n = 1 << 30
    plat = platform(n_oss=3, per_oss=5, clients=30, client_bw=1.25e9, oss_bw=1e10)
    d = desc(plat, [write_job("j", list(range(30)), [[k, k % 15, n, -1] for k in range(30)])])
    r = simulate(d, tmp_path)
    physical = 30 * n / (15 * 4e8)
    assert physical <= r.makespan <= 1.05 * physical


def test_reads_and_writes_share_one_device(eng, tmp_path):
    n = 1 << 30
    plat = platform(per_oss=1, clients=2, read_bw=5e8, write_bw=5e8, client_bw=1e10, oss_bw=1e10)
    d = desc(plat, [write_job("w", [0], [[0, 0, n, -1]]),
                    {"name": "r", "nodes": [1], "phases": [{"kind": "read", "streams": [[0, 0, n, -1]]}]}])
    # Alone each takes n / 5e8; together they share the device's 5e8.
    assert simulate(d, tmp_path).makespan == pytest.approx(2 * n / 5e8, rel=REL)


# -- mechanisms ---------------------------------------------------------------------------------

def test_ost_contention_follows_the_efficiency_table(eng, tmp_path):
    n = 1 << 28
    plat = platform(clients=4, client_bw=1e10, oss_bw=1e10, contention=[[1, 1.0], [4, 0.5]])
    one = simulate(desc(plat, [write_job("j", [0], [[0, 0, 4 * n, -1]])]), tmp_path, "one")
    four = simulate(desc(plat, [write_job("j", [0, 1, 2, 3], [[k, 0, n, -1] for k in range(4)])]), tmp_path, "four")
    assert one.makespan == pytest.approx(4 * n / 4e8, rel=REL)
    assert four.makespan == pytest.approx(4 * n / (0.5 * 4e8), rel=REL)


def test_writers_sharing_an_object_pay_extent_lock_switches(eng, tmp_path):
    n, grant, switch = 1 << 28, 1 << 20, 2e-3
    plat = platform(clients=2, client_bw=1e10, oss_bw=1e10)
    io = {"lock_switch": switch}
    shared = simulate(desc(plat, [write_job("j", [0, 1], [[0, 0, n, 7], [1, 0, n, 7]], grant=grant)], io=io),
                      tmp_path, "shared")
    private = simulate(desc(plat, [write_job("j", [0, 1], [[0, 0, n, -1], [1, 0, n, -1]], grant=grant)], io=io),
                       tmp_path, "private")
    assert private.makespan == pytest.approx(2 * n / 4e8, rel=REL)
    cap = grant / (switch + grant / 4e8)
    assert shared.makespan == pytest.approx(2 * n / cap, rel=REL)


def test_a_single_writer_of_a_shared_object_pays_no_lock_cost(eng, tmp_path):
    n = 1 << 28
    plat = platform(clients=2, client_bw=1e10, oss_bw=1e10)
    # Object 7 is shared, but in phase 2 only node 0 writes it.
    job = {"name": "j", "nodes": [0, 1], "phases": [
        {"kind": "write", "streams": [[0, 0, n, 7], [1, 0, n, 7]], "grant": MIB},
        {"kind": "write", "streams": [[0, 0, n, 7]], "grant": MIB}]}
    r = simulate(desc(plat, [job], io={"lock_switch": 1e-3}), tmp_path)
    second = r.job("j").phases[1]
    assert second.bandwidth == pytest.approx(4e8, rel=REL)


def test_rpc_window_caps_one_stream(eng, tmp_path):
    n = 1 << 30
    plat = platform(write_bw=4e9, oss_bw=1e10, client_bw=1e10)
    io = {"rpc_size": MIB, "rpcs_in_flight": 8, "rpc_rtt": 0.02}
    r = simulate(desc(plat, [write_job("j", [0], [[0, 0, n, -1]])], io=io), tmp_path)
    # Half a round trip before the first byte, then one 8 MiB window per round trip.
    assert r.makespan == pytest.approx(0.01 + n / (8 * MIB / 0.02), rel=REL)


def test_client_call_overhead_grows_with_the_osts_it_talks_to(eng, tmp_path):
    n, call = 1 << 28, 64 << 10
    plat = platform(per_oss=8, write_bw=4e9, oss_bw=1e11, client_bw=1e11)
    io = {"call_overhead": 20e-6, "osc_overhead": 5e-6}
    rates = []
    for k in (1, 8):
        streams = [[0, i, n // k, -1] for i in range(k)]
        r = simulate(desc(plat, [write_job("j", [0], streams, call_size=call)], io=io), tmp_path, f"k{k}")
        rates.append(r.job("j").write_bw)
        assert rates[-1] == pytest.approx(call / (20e-6 + 5e-6 * k), rel=REL)
    assert rates[1] < rates[0]


def test_mds_create_rate_serialises_a_create_storm(eng, tmp_path):
    plat = platform(clients=4, mds={"create_rate": 1000.0, "open_rate": 2000.0})
    job = {"name": "j", "nodes": [0, 1, 2, 3], "phases": [
        {"kind": "write", "creates": [[k, 250] for k in range(4)], "opens": [[0, 200]], "streams": []}]}
    r = simulate(desc(plat, [job]), tmp_path)
    assert r.makespan == pytest.approx(1000 / 1000.0 + 200 / 2000.0, rel=REL)
    assert r.mds_ops == 1200


def test_job_level_token_serialises_two_jobs(eng, tmp_path):
    n = 1 << 30
    plat = platform(clients=2, client_bw=1e10, oss_bw=1e10)
    jobs = [write_job("a", [0], [[0, 0, n, -1]]), write_job("b", [1], [[0, 0, n, -1]])]
    r = simulate(desc(plat, jobs, access={"granularity": "job", "overhead": 0.01}), tmp_path)
    alone = n / 4e8
    first, second = sorted(r.jobs, key=lambda j: j.end)
    assert first.write_bw == pytest.approx(4e8, rel=REL) and second.write_bw == pytest.approx(4e8, rel=REL)
    assert second.token_wait == pytest.approx(alone + 0.02, rel=REL)
    assert second.end_to_end == pytest.approx(2 * alone + 0.02, rel=REL)
    assert second.makespan == pytest.approx(alone, rel=REL)


def test_call_level_token_interleaves_and_counts_waits_in_the_phase(eng, tmp_path):
    n = 1 << 30
    plat = platform(clients=2, client_bw=1e10, oss_bw=1e10)
    jobs = [write_job(x, [k], [[0, 0, n, -1]], calls=16) for k, x in enumerate("ab")]
    r = simulate(desc(plat, jobs, access={"granularity": "call"}), tmp_path)
    # Exclusive steps: the device is never shared, so the pair ends when all 2 GiB are written,
    # and each job's phase spans nearly all of it (its steps alternate with the other's).
    assert r.makespan == pytest.approx(2 * n / 4e8, rel=REL)
    for j in r.jobs:
        assert j.write_bw < 0.56 * 4e8
        assert j.phases[0].token_wait > 0


def test_time_windows_suspend_and_resume_streams(eng, tmp_path):
    n = int(3e8)
    plat = platform(write_bw=1e8)
    job = write_job("j", [0], [[0, 0, n, -1]])
    job["windows"] = [[0.5, 1.5], [3.0, 4.0]]
    r = simulate(desc(plat, [job]), tmp_path)
    # 1 s of transfer in each window, the last second after the schedule ends.
    assert r.makespan == pytest.approx(5.0, rel=REL)


def test_lazy_update_is_refused_with_time_windows(eng, tmp_path):
    job = write_job("j", [0], [[0, 0, MIB, -1]])
    job["windows"] = [[0.0, 1.0]]
    with pytest.raises(engine.SimError, match="Full"):
        simulate(desc(platform(), [job], engine={"optim": "Lazy"}), tmp_path)


@pytest.mark.parametrize("seed", range(4))
def test_lazy_and_full_agree_without_suspension(eng, tmp_path, seed):
    d = random_description(100 + seed)
    full = simulate({**d, "engine": {"optim": "Full"}}, tmp_path, "full")
    lazy = simulate({**d, "engine": {"optim": "Lazy"}}, tmp_path, "lazy")
    assert lazy.makespan == pytest.approx(full.makespan, rel=REL)


def test_results_report_streams_and_busy_time_per_ost(eng, tmp_path):
    n = 1 << 28
    d = desc(platform(per_oss=2, clients=2, client_bw=1e10, oss_bw=1e10),
             [write_job("j", [0, 1], [[0, 0, n, -1], [1, 0, n, -1], [1, 1, 2 * n, -1]])])
    r = simulate(d, tmp_path)
    ost0, ost1 = r.osts
    assert ost0.bytes_written == 2 * n and ost1.bytes_written == 2 * n
    assert [c for _, c in ost0.streams] == [2, 0]
    assert ost0.busy == pytest.approx(2 * n / 4e8, rel=REL)
    assert r.osses[0].bytes_written == 4 * n


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("doc,needle", [
    ("{", "bad JSON at line 1"),
    ('{"format": "other"}', "format"),
    (json.dumps(desc(platform(), [write_job("j", [0], [[0, 9, 1, -1]])])), "unknown OST index 9"),
    (json.dumps(desc(platform(), [write_job("j", [3], [])])), "no client at position 3"),
    (json.dumps(desc(platform(), [write_job("j", [0], [[0, 0, -5, -1]])])), "must be >= 0"),
    ('{"format": "iez-sim/1"}', 'description: missing "platform"'),
    (json.dumps(desc(platform(client_bw=True), [write_job("j", [0], [])])),
     "platform.clients[0].nic_bw: expected a number, got a boolean"),
    (json.dumps(desc(platform(), [write_job("j", [0], [[0, 0.5, 1, -1]])])), "ost: expected an integer"),
    ('{"format": 1e400}', "bad JSON"),
])
def test_bad_descriptions_are_one_line_errors(eng, tmp_path, doc, needle):
    p = tmp_path / "d.json"
    p.write_text(doc)
    proc = subprocess.run([eng, str(p)], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iez-sim: error:") and needle in lines[0]
