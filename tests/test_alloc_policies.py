"""OST allocation policies (iez.alloc.policy): every policy's correctness, and what makes
`balanced` the default: exact balance, the time/capacity trade-off, never slower than RR."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from iez.alloc.policy import AllocOptions, job_bytes, makespan, ost_table, stripe_size
from iez.alloc.registry import DEFAULT_POLICY, get_policy, names
from iez.alloc.scenarios import GiB, hacc_io, ior, paper_scenarios, uneven_fill
from iez.cluster import OSSStats, Snapshot, make_cluster, parse_cluster
from iez.errors import AllocationError, ConfigError
from iez.layout.raid0 import bytes_per_ost
from iez.metrics import balance, balance_report, integer_bound
from iez.request import Request

MiB = 1 << 20
TESTBED = make_cluster()  # the paper's testbed (docs/references.md#s000-testbed): 3 OSSs x 5 OSTs of 10 GiB
POOLED = parse_cluster("""
fsname = "t"
[defaults]
stripe_count = 2
[[oss]]
name = "oss0"
osts = [0, 1, 2, 3]
[[oss]]
name = "oss1"
osts = [4, 5, 6, 7]
[[oss]]
name = "oss2"
osts = [8, 9, 10, 11]
[ost_defaults]
size = "10GiB"
[pools]
fast = [0, 1, 4, 5, 8, 9]
""")


def place(policy, reqs, cluster=TESTBED, snap=None, **opts):
    # These tests are about where each policy puts the stripes a request asks for (the paper's
    # algorithms place a given count), so the asked layout is kept unless a test says otherwise;
    # the automatic layout has its own tests (test_layout_auto.py).
    opts.setdefault("layout", "keep")
    snap = snap or Snapshot.from_cluster(cluster)
    return get_policy(policy).place(reqs, cluster, snap, AllocOptions(**opts))


def files(n, size, count, pool="", prefix="/mnt/t/f"):
    return [Request(f"{prefix}.{i:04d}", size, count, rank=i, pool=pool) for i in range(n)]


def osts_of(placed):
    return [p.layout.plain.osts for p in placed]


def with_states(cluster, states):
    snap = Snapshot.from_cluster(cluster)
    for i, state in states.items():
        snap = snap.with_ost(replace(snap.osts[i], state=state))
    return snap


def rr_fits(cluster, snap, placed) -> bool:
    """Does a placement fit every OST's room (free space less the OSP watermark)?"""
    t = ost_table(cluster, snap, AllocOptions())
    return all(b <= t.room[t.position[o]] for o, b in job_bytes(placed).items())


# -- the interface -----------------------------------------------------------------------------


POLICIES = names()


def test_policy_names():
    # Display order: Lustre's baselines, the paper's algorithm, iez's own (as the paper's figures,
    # docs/references.md#s000-figs7-9).
    assert POLICIES == ("rr", "qos", "bpio", "iez-paper", "balanced") and DEFAULT_POLICY in POLICIES
    assert names(kind="lustre") == ("rr", "qos") and names(kind="iez") == ("balanced",)
    assert [get_policy(n).name for n in POLICIES] == list(POLICIES)
    assert get_policy("rr") is not get_policy("rr")  # a new instance each time: no state shared
    with pytest.raises(ConfigError, match="unknown allocation policy 'fastest'.*rr, qos, bpio, iez-paper, balanced"):
        get_policy("fastest")


@pytest.mark.parametrize("kw, msg", [
    ({"stripe_method": "method3"}, "unknown stripe method"),
    ({"stripe_size": 100000}, "multiple of 64 KiB"),
    ({"capacity_weight": 1.5}, "outside 0..1"),
    ({"capacity_weight": -0.1}, "outside 0..1"),
    ({"max_slowdown": 0.9}, "at least 1"),
    ({"max_slowdown": float("nan")}, "at least 1"),
    ({"client_bw": 0}, "client bandwidth"),
    ({"reserved": {0: -5}}, "reserved bytes on OST 0"),
    ({"cpu_weight": float("inf")}, "cpu weight"),
])
def test_options_refuse_bad_values_in_one_line(kw, msg):
    with pytest.raises(ConfigError, match=msg) as e:
        AllocOptions(**kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("policy", POLICIES)
def test_bad_requests_and_options_are_refused(policy):
    with pytest.raises(AllocationError, match="pool 'nope'") as e:
        place(policy, files(2, GiB, 2, pool="nope"))
    assert e.value.errno == "EINVAL"
    with pytest.raises(ConfigError, match="negative"):
        place(policy, [Request("/a", -1, 1)])
    with pytest.raises(ConfigError, match="stripe count -3"):
        place(policy, [Request("/a", 1, -3)])
    for bad in (Request("/a", "1G", 1), Request("/a", 1 << 70, 1), Request("/a", 1.5, 1), Request("/a", 1, None)):
        with pytest.raises(ConfigError, match="request /a: .*whole numbers"):
            place(policy, [Request("/ok", 1, 1), bad])
    with pytest.raises(ConfigError, match=r"excluded OSTs \[99\]"):
        place(policy, files(1, GiB, 1), exclude={99})
    with pytest.raises(ConfigError, match=r"reserved OSTs \[42\]"):
        place(policy, files(1, GiB, 1), reserved={42: 1})
    assert place(policy, []) == []


# -- correctness of every policy ---------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_places_each_request_with_its_count_on_distinct_osts(policy):
    reqs = ior(16, GiB, 4) + hacc_io(8) + files(5, 3 * MiB + 17, 3)
    placed = place(policy, reqs)
    assert [p.path for p in placed] == [r.path for r in reqs]
    for p, r in zip(placed, reqs):
        lay = p.layout.plain
        assert len(lay.osts) == r.stripe_count == lay.stripe_count
        assert len(set(lay.osts)) == len(lay.osts)
        assert set(lay.osts) <= set(TESTBED.ost_indices())
        assert lay.stripe_size == stripe_size(r.write_bytes, r.stripe_count)  # Method II
        assert (p.write_bytes, p.app, p.policy) == (r.write_bytes, r.app, policy)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_respects_capacity(policy):
    small = make_cluster(3, 5, 2 * GiB)
    full = {i: int(1.95 * GiB) for i in range(5)}  # 51 MiB left: less than one 128 MiB stripe
    cluster = small.with_used(full)
    snap = Snapshot.from_cluster(cluster)
    placed = place(policy, files(40, 256 * MiB, 2), cluster, snap)
    on = job_bytes(placed)
    t = ost_table(cluster, snap, AllocOptions())
    for o, b in on.items():
        if policy in ("rr", "qos"):
            # LOD checks free space when it creates an object, not the file's size: an OST that
            # still has room takes a stripe and may run over by that one stripe.
            assert b <= t.room[t.position[o]] + 128 * MiB
        else:
            assert b <= t.room[t.position[o]]
    if policy not in ("rr", "qos"):
        assert not set(on) & set(full)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_honours_pools(policy):
    reqs = files(12, GiB, 3, pool="fast") + files(6, GiB, 4, prefix="/mnt/t/g")
    placed = place(policy, reqs, POOLED)
    for p, r in zip(placed, reqs):
        if r.pool:
            assert set(p.layout.plain.osts) <= set(POOLED.pools["fast"])
            assert p.layout.plain.pool == "fast"
    assert set().union(*osts_of(placed[12:])) - set(POOLED.pools["fast"])  # the others go anywhere


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_avoids_inactive_excluded_and_degraded_osts(policy):
    snap = with_states(POOLED, {3: "inactive", 6: "degraded", 7: "readonly"})
    placed = place(policy, files(12, GiB, 4), POOLED, snap, exclude={9})
    used = set().union(*osts_of(placed))
    assert not used & {3, 6, 7, 9}


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_takes_a_degraded_ost_only_when_the_count_needs_it(policy):
    snap = with_states(POOLED, {3: "inactive", 6: "degraded"})
    usable = set(POOLED.ost_indices()) - {3, 9}  # 10 OSTs, one of them degraded
    placed = place(policy, files(3, GiB, 10), POOLED, snap, exclude={9})
    assert all(set(o) == usable for o in osts_of(placed))


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_resolves_default_all_and_too_many_stripes(policy):
    default, every, many = place(policy, [Request("/d", GiB, 0), Request("/a", GiB, -1), Request("/m", GiB, 40)],
                                 POOLED)
    assert default.layout.plain.stripe_count == 2  # [defaults] stripe_count
    assert set(every.layout.plain.osts) == set(POOLED.ost_indices())
    assert set(many.layout.plain.osts) == set(POOLED.ost_indices())  # clamped to the OSTs there are


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_ignores_an_ost_reporting_no_size(policy):
    snap = Snapshot.from_cluster(TESTBED)
    snap = snap.with_ost(replace(snap.osts[4], kbytestotal=0, kbytesavail=0, kbytesfree=0))
    used = set().union(*osts_of(place(policy, files(30, GiB, 4), snap=snap)))
    assert 4 not in used
    assert len(used) == 14 or policy == "iez-paper"  # which does not spread (see below)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_refuses_a_job_that_cannot_fit(policy):
    with pytest.raises(AllocationError) as e:
        place(policy, files(40, 8 * GiB, 2))  # 320 GiB on 150 GiB
    assert e.value.errno == "ENOSPC"
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_is_deterministic(policy):
    cluster = uneven_fill(TESTBED, seed=3)
    reqs = ior(16, GiB, 4) + hacc_io(8)
    assert osts_of(place(policy, reqs, cluster, seed=5)) == osts_of(place(policy, reqs, cluster, seed=5))


def test_qos_draws_depend_on_the_seed():
    cluster = uneven_fill(TESTBED, seed=3)
    reqs = ior(16, GiB, 4)
    assert osts_of(place("qos", reqs, cluster, seed=1)) != osts_of(place("qos", reqs, cluster, seed=2))


# -- balanced: exact balance -------------------------------------------------------------------


@pytest.mark.parametrize("n, count", [(64, 8), (8, 4), (16, 8), (15, 1), (7, 3), (100, 5), (1, 8), (33, 15)])
@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_balanced_reaches_the_integer_bound_for_equal_stripes(n, count, weight):
    placed = place("balanced", files(n, count * 128 * MiB, count), capacity_weight=weight)
    b = balance(TESTBED, job_bytes(placed))
    assert b.ost_cost == pytest.approx(integer_bound(n * count, 15), abs=1e-12)
    assert b.oss_cost == pytest.approx(integer_bound(n * count, 3), abs=1e-12)


def test_balanced_spreads_methods_ii_short_last_stripes():
    """HACC-I/O files do not split into equal stripes: the short last stripes are spread, so
    the job's bytes per OST beat RR's."""
    reqs = hacc_io(32)
    ours = balance(TESTBED, job_bytes(place("balanced", reqs))).ost_cost
    assert ours < balance(TESTBED, job_bytes(place("rr", reqs))).ost_cost
    assert ours < 1.04


# -- balanced: the two terms and the one weight -------------------------------------------------


def busy_emptiest():
    """The three emptiest OSTs (one per OSS) are also the busiest: another job writes to them."""
    cluster = TESTBED.with_used({o.index: (GiB if o.index in (0, 5, 10) else 4 * GiB) for o in TESTBED.osts})
    snap = Snapshot.from_cluster(cluster)
    for i in (0, 5, 10):
        snap = snap.with_ost(replace(snap.osts[i], write_bps=3e8))
    return cluster, snap


def test_weight_zero_is_the_fastest_and_weight_one_the_most_balanced():
    cluster, snap = busy_emptiest()
    reqs = ior(64, GiB, 8)
    rr = job_bytes(place("rr", reqs, cluster, snap))
    runs = {w: job_bytes(place("balanced", reqs, cluster, snap, capacity_weight=w))
            for w in (0.0, 0.25, 0.5, 0.75, 1.0)}
    time = {w: makespan(cluster, snap, on) for w, on in runs.items()}
    total = {w: balance_report(cluster, on).total.ost_cost for w, on in runs.items()}
    # Weight 0: the busy OSTs get fewer bytes and the job is much faster than under RR.
    assert time[0.0] < 0.6 * makespan(cluster, snap, rr)
    assert all(runs[0.0].get(i, 0) < np.mean(list(runs[0.0].values())) for i in (0, 5, 10))
    # Weight 1: as balanced as RR or better, and still no slower.
    assert total[1.0] <= balance_report(cluster, rr).total.ost_cost + 1e-9
    assert time[1.0] <= makespan(cluster, snap, rr) * (1 + 1e-9)
    # In between, time is traded for balance, monotonically.
    ws = sorted(runs)
    assert all(time[a] <= time[b] * (1 + 1e-9) for a, b in zip(ws, ws[1:]))
    assert all(total[a] >= total[b] - 1e-9 for a, b in zip(ws, ws[1:]))
    assert total[0.0] > total[1.0] and time[0.0] < time[1.0]


def test_leveling_that_costs_no_time_is_taken_at_every_weight():
    """An OSS-bound job: moving bytes between OSTs of one OSS changes nothing in its time, so
    even weight 0 levels the OSTs' total usage that way."""
    cluster = uneven_fill(TESTBED, seed=1)
    snap = Snapshot.from_cluster(cluster)
    reqs = ior(64, GiB, 8)
    rr = job_bytes(place("rr", reqs, cluster))
    for w in (0.0, 1.0):
        on = job_bytes(place("balanced", reqs, cluster, capacity_weight=w))
        assert makespan(cluster, snap, on) <= makespan(cluster, snap, rr) * (1 + 1e-9)
        assert balance_report(cluster, on).total.ost_cost < 0.9 * balance_report(cluster, rr).total.ost_cost


def test_a_client_bound_job_leaves_the_servers_slack_for_balance():
    """Seed 000's testbed wrote from 2 client nodes: at 10 GbE each they, not the 3 OSSs, bound
    the job, so balanced may even out the servers further at no cost in time."""
    cluster = uneven_fill(TESTBED, seed=0)
    snap = Snapshot.from_cluster(cluster)
    reqs = ior(64, GiB, 8)
    two = AllocOptions(client_bw=2 * 1.25e9)
    assert makespan(cluster, snap, {0: 64 * GiB}, two) == 64 * GiB / 4e8  # one OST is slower still
    assert makespan(cluster, snap, {i: 4 * GiB for i in range(15)}, two) == 60 * GiB / 2.5e9
    servers = job_bytes(place("balanced", reqs, cluster))
    clients = job_bytes(place("balanced", reqs, cluster, client_bw=two.client_bw))
    rr = job_bytes(place("rr", reqs, cluster))
    assert balance_report(cluster, clients).total.ost_cost < balance_report(cluster, servers).total.ost_cost - 0.05
    assert balance_report(cluster, clients).total.ost_cost < 1.02
    assert makespan(cluster, snap, clients, two) <= makespan(cluster, snap, rr, two) * (1 + 1e-9)


def test_capacity_only_crowds_a_small_job_onto_the_emptiest_osts():
    """The failure the issue describes: without the time bound, capacity balance alone sends a
    small job to the few emptiest OSTs and makes it 2-3x slower than RR. The default does not."""
    empty = {0, 1, 5, 10}
    cluster = TESTBED.with_used({o.index: int((0.05 if o.index in empty else 0.6) * o.capacity) for o in TESTBED.osts})
    snap = Snapshot.from_cluster(cluster)
    reqs = files(64, 64 * MiB, 1)
    rr_time = makespan(cluster, snap, job_bytes(place("rr", reqs, cluster)))
    crowded = place("balanced", reqs, cluster, capacity_weight=1.0, max_slowdown=math.inf)
    assert set().union(*osts_of(crowded)) == empty
    assert makespan(cluster, snap, job_bytes(crowded)) > 2 * rr_time
    default = job_bytes(place("balanced", reqs, cluster))
    assert makespan(cluster, snap, default) <= rr_time * (1 + 1e-9)
    assert balance_report(cluster, default).total.ost_cost < balance_report(
        cluster, job_bytes(place("rr", reqs, cluster))).total.ost_cost


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_balanced_is_never_slower_than_lustre_rr(data):
    """Random clusters (fill, live load, busy OSSs) and jobs: whenever Lustre's RR placement fits
    the OSTs' room, balanced's analytic time is at most RR's, at every weight."""
    seed = data.draw(st.integers(0, 10**6))
    rng = np.random.default_rng(seed)
    cluster = uneven_fill(make_cluster(data.draw(st.integers(1, 4)), data.draw(st.integers(1, 6))),
                          0.0, 0.6, seed=seed)
    snap = Snapshot.from_cluster(cluster)
    for o in cluster.osts:
        if rng.random() < 0.3:
            snap = snap.with_ost(replace(snap.osts[o.index], write_bps=float(rng.uniform(0, 3e8))))
    for s in cluster.osses:
        if rng.random() < 0.3:
            snap = replace(snap, osses={**snap.osses, s.name: OSSStats(s.name, cpu=float(rng.uniform(0, 1)))})
    count = data.draw(st.integers(1, len(cluster.osts)))
    reqs = files(data.draw(st.integers(1, 40)), count * data.draw(st.sampled_from([1, 2, 4, 8])) * 32 * MiB, count)
    clients = data.draw(st.sampled_from([math.inf, 0.5e9, 2.5e9]))
    timing = AllocOptions(client_bw=clients)
    try:
        rr = place("rr", reqs, cluster, snap, seed=seed)
    except AllocationError:
        event("RR: ENOSPC")
        return  # Lustre cannot place the job at all
    if not rr_fits(cluster, snap, rr):
        event("RR overfills")
        return  # RR would run out of space mid-write: no time to compare with
    rr_time = makespan(cluster, snap, job_bytes(rr), timing)
    for w in (0.0, 0.5, 1.0):
        ours = place("balanced", reqs, cluster, snap, capacity_weight=w, client_bw=clients)
        assert makespan(cluster, snap, job_bytes(ours), timing) <= rr_time * (1 + 1e-9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_weight_zero_beats_every_other_placement_of_equal_files(data):
    seed = data.draw(st.integers(0, 10**6))
    cluster = uneven_fill(make_cluster(data.draw(st.integers(1, 3)), data.draw(st.integers(2, 5))), 0, 0.5, seed)
    snap = Snapshot.from_cluster(cluster)
    rng = np.random.default_rng(seed)
    for o in cluster.osts:
        snap = snap.with_ost(replace(snap.osts[o.index], write_bps=float(rng.uniform(0, 3e8))))
    count = data.draw(st.integers(1, len(cluster.osts)))
    reqs = files(data.draw(st.integers(1, 20)), count * 128 * MiB, count)
    fastest = makespan(cluster, snap, job_bytes(place("balanced", reqs, cluster, snap, capacity_weight=0.0)))
    for policy, w in (("rr", 0.5), ("qos", 0.5), ("iez-paper", 0.5), ("balanced", 1.0)):
        other = place(policy, reqs, cluster, snap, capacity_weight=w, seed=seed)
        assert fastest <= makespan(cluster, snap, job_bytes(other)) * (1 + 1e-9)


# -- balanced: what the job and the cluster look like -------------------------------------------


def test_reserved_bytes_of_other_plans_are_kept_free():
    """Global view: OSTs 0 and 1 are promised to another application's plan (8 GiB of 10 each).
    The job moves its bytes to their OSS's other OSTs, which costs it no time."""
    reserved = {0: 8 * GiB, 1: 8 * GiB}
    reqs = ior(64, 512 * MiB, 4)
    free = job_bytes(place("balanced", reqs))
    held = job_bytes(place("balanced", reqs, reserved=reserved))
    on_two = lambda on: on.get(0, 0) + on.get(1, 0)
    assert on_two(held) < 0.5 * on_two(free)
    snap = Snapshot.from_cluster(TESTBED)
    t = ost_table(TESTBED, snap, AllocOptions(reserved=reserved))
    assert all(held.get(i, 0) <= t.room[i] for i in range(2))
    assert makespan(TESTBED, snap, held) <= makespan(TESTBED, snap, free) * (1 + 1e-9)
    # And the global view is the total usage's balance: promised bytes count as used.
    after = {o: held.get(o, 0) + reserved.get(o, 0) for o in TESTBED.ost_indices()}
    before = {o: free.get(o, 0) + reserved.get(o, 0) for o in TESTBED.ost_indices()}
    assert balance(TESTBED, after).ost_cost < balance(TESTBED, before).ost_cost


def test_a_busy_oss_gets_less():
    snap = Snapshot.from_cluster(TESTBED)
    snap = replace(snap, osses={**snap.osses, "oss0": OSSStats("oss0", cpu=0.9, mem=0.9)})
    reqs = ior(64, GiB, 4)
    on = job_bytes(place("balanced", reqs, snap=snap, capacity_weight=0.0))
    per_oss = [sum(on.get(i, 0) for i in range(k * 5, k * 5 + 5)) for k in range(3)]
    assert per_oss[0] < 0.5 * min(per_oss[1:])
    rr = job_bytes(place("rr", reqs, snap=snap))
    assert makespan(TESTBED, snap, on) < 0.7 * makespan(TESTBED, snap, rr)


def test_files_of_different_sizes_are_weighed_by_bytes():
    reqs = [Request("/big", 8 * GiB, 1)] + files(28, 512 * MiB, 1)
    placed = place("balanced", reqs)
    big = placed[0].layout.plain.osts[0]
    assert job_bytes(placed)[big] == 8 * GiB  # no small file joins the big one
    snap = Snapshot.from_cluster(TESTBED)
    assert makespan(TESTBED, snap, job_bytes(placed)) < makespan(TESTBED, snap, job_bytes(place("rr", reqs)))


def test_one_big_shared_file():
    """SSF: 56 GiB over 8 stripes needs stripes below Lustre's 4 GiB limit: the fewest rounds
    that fit (2, of 3.5 GiB stripes), each split evenly; every round of a stripe lands on its
    OST, so only OSTs with room for 7 GiB take one (12 of the 15 here)."""
    cluster = uneven_fill(TESTBED, seed=2)
    (ssf,) = ior(28, 2 * GiB, 8, mode="ssf")
    assert ssf.comm_size == 28 and ssf.write_bytes == 56 * GiB
    (p,) = place("balanced", [ssf], cluster, capacity_weight=1.0)
    lay = p.layout.plain
    assert lay.stripe_size < 4 * GiB and lay.stripe_size % (128 << 10) == 0 and len(set(lay.osts)) == 8
    assert -(-ssf.write_bytes // (8 * lay.stripe_size)) == 2
    assert rr_fits(cluster, Snapshot.from_cluster(cluster), [p])
    per = bytes_per_ost(lay, ssf.write_bytes).values()
    assert max(per) - min(per) < 4 * MiB
    rr = job_bytes(place("rr", [ssf], cluster))
    assert balance_report(cluster, job_bytes([p])).total.ost_cost < balance_report(cluster, rr).total.ost_cost
    snap = Snapshot.from_cluster(cluster)
    assert makespan(cluster, snap, job_bytes([p])) <= makespan(cluster, snap, rr) * (1 + 1e-9)


def test_two_applications_placed_at_once_or_one_after_the_other():
    hacc, io = hacc_io(16), ior(16, 2 * GiB, 4)
    cluster = uneven_fill(TESTBED, seed=4)
    together = job_bytes(place("balanced", hacc + io, cluster))
    first = job_bytes(place("balanced", io, cluster))
    second = job_bytes(place("balanced", hacc, cluster, reserved=first))
    after = {o: first.get(o, 0) + second.get(o, 0) for o in cluster.ost_indices()}
    rr = balance_report(cluster, job_bytes(place("rr", hacc + io, cluster))).total.ost_cost
    assert balance_report(cluster, together).total.ost_cost < rr
    assert balance_report(cluster, after).total.ost_cost < rr


# -- iez-paper ----------------------------------------------------------------------------------


def test_iez_paper_does_not_balance():
    """Linear costs: every request takes the same cheapest OSTs. Here OSTs 0-7 are a little
    emptier, and all 64 files land on exactly those 8."""
    cluster = TESTBED.with_used({o.index: (10 if o.index < 8 else 20) * MiB for o in TESTBED.osts})
    reqs = files(64, GiB, 8)
    paper = place("iez-paper", reqs, cluster)
    assert all(sorted(o) == list(range(8)) for o in osts_of(paper))
    assert balance(cluster, job_bytes(paper)).ost_cost == pytest.approx(15 / 8)
    assert balance(cluster, job_bytes(place("balanced", reqs, cluster))).ost_cost == pytest.approx(
        integer_bound(512, 15))


def test_iez_paper_spills_over_once_the_cheapest_osts_are_full():
    cluster = make_cluster(3, 5, 2 * GiB).with_used({o: (0 if o < 8 else 100 * MiB) for o in range(15)})
    snap = Snapshot.from_cluster(cluster)
    placed = place("iez-paper", files(24, GiB, 4), cluster, snap)  # 96 stripes of 256 MiB
    on = job_bytes(placed)
    t = ost_table(cluster, snap, AllocOptions())
    assert all(b <= t.room[t.position[o]] for o, b in on.items())
    assert sum(on.get(o, 0) for o in range(8)) == 8 * 7 * 256 * MiB  # the cheap ones, full (7 stripes)
    assert set(on) - set(range(8))


def test_iez_paper_stripe_size_is_table_ii():
    (p,) = place("iez-paper", [Request("/lustre/scratch/hacc-io/FPP1-Part00000000-of-00000008.data", 803405824, 8)])
    assert p.layout.plain.stripe_size == 100532224  # docs/references.md#s000-table2


def test_iez_paper_uses_oss_load_as_the_cost_to_reach():
    snap = Snapshot.from_cluster(TESTBED)
    snap = replace(snap, osses={**snap.osses, "oss1": OSSStats("oss1", cpu=0.8, mem=0.2)})
    used = set().union(*osts_of(place("iez-paper", files(4, GiB, 8), snap=snap)))
    assert not used & {5, 6, 7, 8, 9}  # 8 stripes fit on the 10 OSTs of the idle OSSs


# -- Lustre's own baselines ---------------------------------------------------------------------


def test_lustre_rr_on_the_empty_testbed():
    """Lustre's RR on an empty 15-OST cluster spreads stripes as evenly as integers allow: 1.025
    for 64 files x 8 stripes and 1.41 for 8 files x 4 stripes (ceil(k/n) / (k/n))."""
    for n, count, want in ((64, 8, 1.025), (8, 4, 1.41)):
        cost = balance(TESTBED, job_bytes(place("rr", files(n, count * 128 * MiB, count)))).ost_cost
        assert cost == pytest.approx(want, abs=0.005)


def test_qos_prefers_the_emptier_osts():
    cluster = TESTBED.with_used({o.index: (0 if o.index % 3 == 0 else 6 * GiB) for o in TESTBED.osts})
    on = job_bytes(place("qos", files(60, 256 * MiB, 2), cluster))
    emptier = sum(b for o, b in on.items() if o % 3 == 0) / 5
    fuller = sum(b for o, b in on.items() if o % 3) / 10
    assert emptier > 1.3 * fuller


# -- scenarios ----------------------------------------------------------------------------------


def test_paper_scenarios():
    by = {s.name: s for s in paper_scenarios()}
    big = by["IOR FPP 64 procs c=8"]
    assert len(big.requests) == 64 and {r.write_bytes for r in big.requests} == {GiB}
    assert {r.stripe_count for r in big.requests} == {8} and big.paper == (1.47, 1.01)
    hacc = by["HACC-I/O FPP 32 procs c=8"]
    assert {r.write_bytes for r in hacc.requests} == {38 * 10_000_000}  # 10M particles per rank
    (ssf,) = by["IOR SSF 16 procs 32 GiB c=8"].requests
    assert (ssf.write_bytes, ssf.comm_size, ssf.api) == (32 * GiB, 16, "mpiio")
    both = by["HACC-I/O c=8 + IOR c=4, 16 procs each"]
    assert [r.app for r in both.requests] == ["hacc-io"] * 16 + ["ior"] * 16
    assert [s.paper for s in paper_scenarios() if s.paper] == [(1.47, 1.01), (1.22, 1.01), (1.37, 1.00), (1.17, 1.00)]
    assert hacc_io(8, per_rank=True)[0].write_bytes == 38 * 10_000_000
    assert hacc_io(8)[0].write_bytes == -(-38 * 10_000_000 // 8)


def test_uneven_fill():
    a, b = uneven_fill(TESTBED, 0.1, 0.4, seed=9), uneven_fill(TESTBED, 0.1, 0.4, seed=9)
    assert a == b
    assert all(0.1 * o.capacity <= o.used <= 0.4 * o.capacity for o in a.osts)
    assert len({o.used for o in a.osts}) == 15
    with pytest.raises(ConfigError, match="fill range"):
        uneven_fill(TESTBED, 0.5, 0.2)


@pytest.mark.parametrize("policy", ["balanced", "iez-paper"])
def test_room_counts_every_round_of_a_capped_stripe(policy):
    # 20 GiB on one stripe: the stripe size is capped below 4 GiB, so the file is several rounds
    # of one stripe and its OST takes all 20 GiB; no 16 GiB OST can.
    cluster = make_cluster(3, 5, 16 * GiB)
    with pytest.raises(AllocationError) as e:
        place(policy, [Request("/mnt/t/big", 20 * GiB, 1)], cluster)
    assert e.value.errno == "ENOSPC" and str(20 * GiB) in str(e.value)
    (p,) = place(policy, [Request("/mnt/t/big", 40 * GiB, 4)], cluster)  # 10 GiB a stripe fits
    assert p.layout.plain.stripe_size < 4 * GiB and len(set(p.layout.plain.osts)) == 4
    t = ost_table(cluster, Snapshot.from_cluster(cluster), AllocOptions())
    assert all(b <= t.room[t.position[o]] for o, b in job_bytes([p]).items())


@pytest.mark.parametrize("bw", [5e-324, 1e-300])
def test_an_ost_of_almost_no_bandwidth_takes_no_stripe_and_breaks_nothing(bw):
    """An OST whose write bandwidth is positive but ~0 (a dying disk's figure) costs inf or nan
    per stripe: balanced places the pool's files on its other OST (it raised ValueError, then
    ENOSPC, before)."""
    cluster = parse_cluster(f"""
fsname = "t"
[[oss]]
name = "oss0"
osts = [0, 1]
[ost_defaults]
size = "1TiB"
[[ost]]
index = 0
write_bw = {bw}
[pools]
slow = [0, 1]
""")
    placed = place("balanced", files(3, MiB, 1, pool="slow"), cluster, layout="auto")
    assert osts_of(placed) == [(1,)] * 3
