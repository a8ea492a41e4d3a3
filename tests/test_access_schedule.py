"""The controller's wait estimates, kept up to date as claims come and go, against the full
rebuild (`admission.schedule` from the queue as it stands), and its positions and grants against
the policy's order over the whole queue, over seeded random sequences of arrivals, grants,
releases, cancels, departures and the passing of time, for every policy."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest

from iez.access import protocol as P
from iez.access.admission import (Claim, FairShareRun, Rule, ShareGroups, Usage, decide, disjoint, make_policy, schedule,
                                  simulate)
from iez.access.lane import Lane
from iez.access.queue import AccessQueue, Settings

POLICIES = [("exclusive", 1), ("k-concurrent", 1), ("k-concurrent", 3), ("priority", 1), ("priority", 2),
            ("fair-share", 1), ("fair-share", 2), ("ost-aware", 1)]


def reference(q: AccessQueue, now: float):
    """The schedule built from scratch at the time the controller's answer is valid for."""
    sched = q._schedule_now(now)
    at = now if q._lanes is not None and q._lanes.chained else q._schedule[1]
    return sched, schedule(q.policy, q.waiting(), q.holding(), q.state.usage, at, q.duration), at


def osts(rng: random.Random, name: str):
    if name != "ost-aware":
        return {}
    r = rng.random()
    if r < 0.8:  # mostly one OST each (the lanes); sometimes several, none named, or unknown
        return {"osts": str(rng.randrange(4))}
    if r < 0.9:
        return {"osts": ",".join(map(str, rng.sample(range(4), 2)))}
    return {"osts": ""} if r < 0.93 else {}


@pytest.mark.parametrize("name,k", POLICIES)
@pytest.mark.parametrize("seed", range(4))
def test_kept_estimates_equal_the_full_rebuild(monkeypatch, name, k, seed):
    from iez.access import admission

    if seed % 2:  # fair-share runs keep a state every 4 grants: claims that leave run on from the middle
        monkeypatch.setattr(admission, "MARK", 4)
    rng = random.Random(seed)
    # Shares by user and by project: a user's claims differ in share, the first waiting sets it.
    shares = (Rule("user", "u1", 2.0), Rule("project", "p1", 3.0))
    q = AccessQueue(make_policy(name, k=k, shares=shares), Settings(heartbeat=1e6, default_hold=7.0,
                                                     priorities=(Rule("app", "p*", 5.0),)), now=1000.0)
    secrets: dict[str, str] = {}
    t = 1000.0
    checked = chained = kept_after_leaving = 0
    for step in range(160):
        before = q._schedule[2]
        t += rng.choice([0.0, 0.0, 0.1, 0.37, 1.3, 4.0])
        r = rng.random()
        mine = [a for a in secrets if a in q.state.claims]
        held = [a for a in mine if q.state.claims[a].holding]
        waiting = [a for a in mine if not q.state.claims[a].holding]
        if r < 0.45 or not mine:  # an arrival: a new application, or one that left comes back
            app = f"{step}:{rng.choice('pqrs')}{rng.randrange(3)}"
            secrets[app] = q.handle(P.format_request("REGISTER", app, user=f"u{rng.randrange(3)}", project=f"p{rng.randrange(2)}",
                                                     **osts(rng, name)), t).reply.split("\t")[1]
            expect = {"expect": rng.choice(["1.5", "2", "0.3"])} if rng.random() < 0.6 else {}
            q.handle(P.format_request("ACQUIRE", app, secrets[app], rng.choice(["io", "ckpt"]), **expect), t)
        elif r < 0.75 and held:  # a holder releases: its hold is learnt, the next are granted
            app = rng.choice(held)
            assert q.handle(f"RELEASE\t{app}\t{secrets[app]}\t{q.state.claims[app].token}", t).reply.startswith("OK")
        elif r < 0.9 and waiting:  # a waiter gives up, or leaves altogether
            app = rng.choice(waiting)
            verb = rng.choice(["CANCEL", "UNREGISTER"])
            assert q.handle(f"{verb}\t{app}\t{secrets[app]}", t).reply.startswith("OK")
            if verb == "UNREGISTER":
                del secrets[app]
            kept_after_leaving += q._schedule[2] is before is not None
        q.tick(t)
        kept, full, at = reference(q, t)
        assert kept.starts == full.starts
        if kept.lasts(t):  # kept past its own time: what a schedule built now would be
            assert kept.starts == schedule(q.policy, q.waiting(), q.holding(), q.state.usage, t, q.duration).starts
        if name == "fair-share":  # the same arithmetic as running decide at every expected end
            assert full.starts == simulate(q.policy, q.waiting(), q.holding(), q.state.usage, at, q.duration)
        order = q.policy.order(q.waiting(), q.holding(), q.state.usage, t)
        for i, c in enumerate(order):
            assert kept.start(c) == full.start(c) == full.starts.get(c.appid)
            assert q.position(c.appid, t) == i + 1
        if q._groups is not None:  # the order the grants are read in, merged from the groups
            assert list(q._groups.ordered(q.holding(), q.state.usage, t)) == order
        assert not decide(q.policy, q.waiting(), q.holding(), q.state.usage, t)  # granted all it may
        if name == "ost-aware":  # and nothing it may not
            assert all(disjoint(a.osts, b.osts) for a, b in itertools.combinations(q.holding(), 2))
        # Where a claim not queued would stand, under each kind of OST set.
        for o in (None, frozenset({1}), frozenset({0, 2}), frozenset()):
            probe = Claim(appid=f"{step}:probe", phase="io", seq=q.state.next_seq, since=t, osts=o, user="u1",
                          expect=rng.choice([0.0, 3.0]))
            assert kept.probe(probe) == full.probe(probe)
            placed = q.policy.order(q.waiting() + [probe], q.holding(), q.state.usage, t).index(probe) + 1
            assert q._position(probe, t) == placed  # what ESTIMATE answers beside the probe's time
        chained += q._lanes is not None and q._lanes.chained
        checked += len(q.waiting())
    assert checked > 50  # the queue was seldom empty
    if name == "ost-aware" or (k == 1 and name != "fair-share"):
        assert chained > 50  # mostly read from the kept lanes, not rebuilt
    if name == "fair-share":
        assert kept_after_leaving > 5  # claims that left were taken out of the kept run


def test_lane_sums_and_ranks_against_a_sorted_list():
    rng = random.Random(7)
    lane, plain = Lane(), []
    learnt = {"a": 3, "b": 11}
    for i in range(3000):
        if plain and rng.random() < 0.4:
            item, _ = plain.pop(rng.randrange(len(plain)))
            lane.remove(item)
        else:
            item = ((rng.randrange(50), i), f"x{i}")
            src = rng.choice([rng.randrange(10**9), "a", "b"])
            lane.insert(item, src)
            plain.append((item, src))
            plain.sort()
        if i % 500 == 0:
            learnt["a"] += 1  # a learnt duration changed: every claim using it moves
        version = learnt["a"]
        value = learnt.__getitem__
        probe = ((rng.randrange(50), rng.randrange(3000)), "")
        ahead = [s for it, s in plain if it < probe]
        assert lane.rank(probe) == len(ahead)
        assert lane.ahead(probe, value, version) == sum(s if isinstance(s, int) else learnt[s] for s in ahead)
        assert list(lane) == [it for it, _ in plain] and len(lane) == len(plain)
    with pytest.raises(KeyError):
        lane.remove(((99, 0), "absent"))


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_slot_schedule_equals_running_the_policy_forward_on_long_queues(k, seed):
    """k slots scheduled in one pass over the lane against `decide` run at every expected end, on
    queues long enough for many slots to free at once, holds of length 0, more holders than k and
    holders past their expected ends (durations and times in quarters: exact in both arithmetics)."""
    rng = random.Random(seed)
    pol = make_policy("priority", k=k)
    claims = [Claim(appid=f"a{i}", phase="io", seq=i, since=0.0, priority=rng.randrange(3),
                    expect=rng.choice([0.0, 0.25, 1.0, 2.5, 7.0])) for i in range(150)]
    holding = [replace(c, token=i + 1, granted=rng.randrange(40) / 4) for i, c in enumerate(claims[:k + rng.randrange(3)])]
    waiting = claims[len(holding):]
    dur = lambda c: c.expect or 3.0  # noqa: E731
    full = schedule(pol, waiting, holding, Usage(), 5.0, dur)
    assert full.starts == simulate(pol, waiting, holding, Usage(), 5.0, dur)
    assert [full.start(c) for c in waiting] == [full.starts[c.appid] for c in waiting]


@pytest.mark.parametrize("k,by", [(1, "user"), (1, "project"), (2, "user"), (3, "project")])
@pytest.mark.parametrize("seed", range(3))
def test_fair_share_run_equals_running_the_policy_forward_on_long_queues(k, by, seed):
    """The fair-share run, built whole and kept as claims join the back (each run on from where its
    group's last claim was granted), against `decide` run at every expected end: long queues of a
    few groups with shares, decayed usage, holders past their expected ends, several ends at once;
    and claims not queued, of a group with claims and of a new one."""
    rng = random.Random(seed)
    pol = make_policy("fair-share", k=k, fair_by=by, shares=(Rule("user", "u1", 2.0), Rule("project", "p1", 0.5)))
    # Half-lives from short enough for loads to underflow (every group compared) to an hour; in one
    # seed usage dated after now (a clock stepped back: loads not scaled to one time).
    usage = Usage(half_life=[0.5, 30.0, 3600.0][seed], values={"user:u2": (40.0, -2000.0 if seed == 0 else 1.0),
                                                                          "project:p0": (9.0, 4.0)})
    if seed == 2:
        usage.values["user:u3"] = (5.0, 60.0)
    claims = [Claim(appid=f"a{i}", phase="io", seq=i, since=0.0, user=f"u{rng.randrange(4)}", project=f"p{rng.randrange(3)}",
                    expect=rng.choice([0.0, 0.25, 1.0, 2.5, rng.uniform(0.1, 9.0)])) for i in range(240)]
    holding = [replace(c, token=i + 1, granted=rng.uniform(0.0, 10.0)) for i, c in enumerate(claims[:k + rng.randrange(2)])]
    waiting = claims[len(holding):]
    dur = lambda c: c.expect or 3.0  # noqa: E731
    now = 10.0
    full = schedule(pol, waiting, holding, usage, now, dur)
    assert full.starts == simulate(pol, waiting, holding, usage, now, dur)
    kept = schedule(pol, waiting[:150], holding, usage, now, dur)
    placed = 0
    for c in waiting[150:]:
        kept.groups.add(c)  # the queue's groups take the claim, then the schedule is told
        if kept.add(c):
            placed += 1
        else:  # a claim starting a group: built again, as the controller does
            kept = schedule(pol, waiting[:waiting.index(c) + 1], holding, usage, now, dur)
    assert placed > 60  # mostly run on from the group's last grant, not from the start
    assert kept.starts == full.starts
    for probe in (replace(claims[-1], appid="p", seq=999, user="u1", project="p1"),
                  replace(claims[-1], appid="q", seq=999, user="new", project="new")):
        forward = simulate(pol, waiting + [probe], holding, usage, now, dur)
        assert kept.probe(probe) == forward[probe.appid]


def test_fair_share_runs_compare_near_ties_within_a_margin_relative_to_the_scaled_logs():
    """Over a long run at a half-life of 1 s the scaled logs reach millions and round by ulps of that
    (about 4e-9 at 1.7e7, 280 days on): two groups with the same load, one charged 800 s and one
    400 s a second later, must both be compared directly, not one dropped as if it had more load.
    (A run that long takes ~80,000 claims: too slow to build here; `_near` gets the run's values.)"""
    pol = make_policy("fair-share", k=2)
    run = FairShareRun(pol, ShareGroups(pol), [], Usage(half_life=1.0), 0.0, lambda c: 1.0)
    e = 400.0 * 60512  # an end of a run of 400 s and 800 s holds
    usage = Usage(half_life=1.0, values={"user:a": (800.0, e), "user:b": (400.0, e + 1.0)})
    first = {g: Claim(appid=g, phase="io", seq=i, since=0.0, user=g[5:]) for i, g in enumerate(usage.values)}
    scaled = {g: run._scaled(g, c, usage) for g, c in first.items()}
    assert abs(scaled["user:a"] - scaled["user:b"]) > 1e-9  # rounded apart by more than an absolute margin
    t = e + 1.0
    assert math.isclose(usage.value("user:a", t), usage.value("user:b", t), rel_tol=1e-15)  # yet a tie
    assert sorted(run._near(scaled, {}, t)) == ["user:a", "user:b"]


@pytest.mark.parametrize("name,k", [("fair-share", 1), ("fair-share", 2), ("k-concurrent", 2)])
def test_a_schedule_is_kept_while_every_slot_is_busy(name, k):
    """With every slot taken by holds not yet past their expected ends, a schedule built later is the
    same: it is kept past the second (not run again), and rebuilt once a hold overstays."""
    q = AccessQueue(make_policy(name, k=k), Settings(heartbeat=1e6), now=0.0)
    secrets = {}
    for i in range(12):
        app = f"{i}:a{i % 3}"
        secrets[app] = q.handle(P.format_request("REGISTER", app, user=f"u{i % 3}"), 0.0).reply.split("\t")[1]
        q.handle(P.format_request("ACQUIRE", app, secrets[app], "io", expect=str(10 + i)), 0.0)
    kept = q._schedule_now(0.5)
    for t in (3.0, 9.0, 10.0):  # the first hold is expected to end at 10 s
        assert q._schedule_now(t) is kept
        assert kept.starts == schedule(q.policy, q.waiting(), q.holding(), q.state.usage, t, q.duration).starts
    later = q._schedule_now(10.5)
    assert later is not kept and later.starts != kept.starts  # the first hold is now taken to end at 10.5
    assert later.starts == schedule(q.policy, q.waiting(), q.holding(), q.state.usage, 10.5, q.duration).starts


@pytest.mark.parametrize("k,by", [(1, "user"), (2, "project"), (3, "user")])
@pytest.mark.parametrize("seed", range(3))
def test_fair_share_run_takes_out_claims_that_leave_as_a_run_without_them(monkeypatch, k, by, seed):
    """Claims leaving a long fair-share queue (anywhere: a group's first, its last, the first in
    arrival order; one or two before the next estimate), each taken out by running on from a kept
    state, mixed with claims joining the back: every time the same grants and times as a run built without them, and `decide` run
    forward. States kept every 8 grants, so most removals run on from the middle."""
    from iez.access import admission

    monkeypatch.setattr(admission, "MARK", 8)
    rng = random.Random(seed)
    pol = make_policy("fair-share", k=k, fair_by=by, shares=(Rule("user", "u1", 2.0), Rule("project", "p1", 0.5)))
    usage = Usage(half_life=[0.5, 30.0, 3600.0][seed], values={"user:u2": (40.0, 1.0), "project:p0": (9.0, 4.0)})
    claims = [Claim(appid=f"a{i}", phase="io", seq=i, since=0.0, user=f"u{rng.randrange(4)}", project=f"p{rng.randrange(3)}",
                    expect=rng.choice([0.0, 0.25, 1.0, 2.5, rng.uniform(0.1, 9.0)])) for i in range(200)]
    holding = [replace(c, token=i + 1, granted=rng.uniform(0.0, 10.0)) for i, c in enumerate(claims[:k])]
    waiting = claims[k:160]
    dur = lambda c: c.expect or 3.0  # noqa: E731
    now = 10.0
    kept = schedule(pol, waiting, holding, usage, now, dur)
    removed = 0
    for step in range(60):
        if step % 3 == 2:  # one joins the back
            c = claims[160 + step // 3]
            waiting.append(c)
            kept.groups.add(c)
            if not kept.add(c):
                kept = schedule(pol, waiting, holding, usage, now, dur)
        else:  # one or two leave before the next estimate
            run = kept.run
            for c in [waiting.pop(rng.randrange(len(waiting))) for _ in range(1 + (step % 4 == 0))]:
                kept.groups.remove(c)  # the queue's groups lose the claim, then the schedule is told
                assert kept.remove(c)  # taken out when next asked: run on from a kept state, or built again
            assert kept.starts == schedule(pol, waiting, holding, usage, now, dur).starts
            removed += kept.run is run
        assert kept.starts == schedule(pol, waiting, holding, usage, now, dur).starts
        assert kept.starts == simulate(pol, waiting, holding, usage, now, dur)
    assert removed > 25  # mostly run on from a kept state, not built again


@pytest.mark.parametrize("by", ["user", "project"])
@pytest.mark.parametrize("seed", range(3))
def test_fair_share_probe_of_a_new_group_reads_the_kept_run(by, seed):
    """A claim not queued that would start a group (one slot) is placed from the kept run's grants
    and the loads granted there, not by running the queue again: against `decide` run forward, for
    groups with no usage, a little, a lot (granted late or last), usage dated after now, and a group
    whose claim holds (its usage changes at the hold's end: run again)."""
    rng = random.Random(seed)
    pol = make_policy("fair-share", k=1, fair_by=by, shares=(Rule("user", "u1", 2.0), Rule("project", "p1", 0.5)))
    usage = Usage(half_life=[0.5, 30.0, 3600.0][seed], values={"user:u2": (40.0, 1.0), "project:p0": (9.0, 4.0)})
    for i, (v, at) in enumerate([(0.5, 9.0), (30.0, 8.0), (400.0, 10.0), (5e4, 2.0), (3.0, 15.0), (20.0, 11.0)]):
        usage.values[f"{by}:n{i}"] = (v, at)
    claims = [Claim(appid=f"a{i}", phase="io", seq=i, since=0.0, user=f"u{rng.randrange(4)}", project=f"p{rng.randrange(3)}",
                    expect=rng.choice([0.0, 0.25, 1.0, 2.5, rng.uniform(0.1, 9.0)])) for i in range(200)]
    holding = [replace(claims[0], token=1, granted=8.0, **{by: "n5"})]  # a hold of group n5
    waiting = claims[1:]
    dur = lambda c: c.expect or 3.0  # noqa: E731
    now = 10.0
    kept = schedule(pol, waiting, holding, usage, now, dur)
    read = 0
    for i in range(7):
        probe = replace(claims[-1], appid=f"p{i}", seq=999, **{by: f"n{i}"})  # n6: no usage at all
        forward = simulate(pol, waiting + [probe], holding, usage, now, dur)
        assert kept.probe(probe) == forward[probe.appid]
        placed, start = kept.run.first(probe)
        assert placed == (i != 5) and (not placed or start == forward[probe.appid])
        read += placed and start > min(forward.values())
    assert read >= 3  # some of them go after many grants, read from the run
