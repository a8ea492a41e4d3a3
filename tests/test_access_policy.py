"""IO-Cop's pure parts: the wire protocol, the policies, the wait estimate, the controller's
state machine driven with explicit times, the SQLite store, and TBF rule rendering."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from iez.access import protocol as P
from iez.access import tbf
from iez.access.queue import AccessQueue, Settings
from iez.access.admission import (Claim, Lanes, SlotSchedule, Usage, decide, estimate, make_policy, parse_rule, schedule,
                                  simulate)
from iez.access.lane import ns
from iez.access.protocol import AccessError
from iez.access.statefile import StateFile
from iez.errors import ConfigError


# -- protocol ------------------------------------------------------------------------------------
def test_request_parse_and_format_round_trip():
    line = P.format_request("ACQUIRE", "123:ior", "a" * 32, "ckpt", osts="0-3", wait_ms=500)
    assert line == "ACQUIRE\t123:ior\t" + "a" * 32 + "\tckpt\tosts=0-3\twait_ms=500"
    req = P.parse_request(line)
    assert (req.verb, req.args["phase"], req.opts) == ("ACQUIRE", "ckpt", {"osts": "0-3", "wait_ms": "500"})


@pytest.mark.parametrize("line, errno", [
    ("", "EPROTO"), ("NOPE", "EPROTO"), ("ACQUIRE\tx:y", "EPROTO"),
    ("REGISTER\tbad id", "EINVAL"), ("REGISTER\t" + "x" * 129, "EINVAL"),
    ("RELEASE\ta:b\tnothex\t1", "EACCES"), ("REGISTER\ta:b\tcolour=red", "EPROTO"),
    ("REGISTER\ta:b\tuser=x\tuser=y", "EPROTO"), ("HELLO\x00", "EPROTO"), ("H" * 5000, "EPROTO"),
])
def test_bad_requests_are_one_errno(line, errno):
    with pytest.raises(AccessError) as e:
        P.parse_request(line)
    assert e.value.errno == errno and "\n" not in str(e.value)


def test_reply_parsing():
    r = P.parse_reply("GRANT\t7\tlease_ms=2000\twaited_ms=1.5")
    assert r.status == "GRANT" and r.fields == ("7",) and r.opt("lease_ms") == "2000"
    with pytest.raises(AccessError) as e:
        P.parse_reply("ERR\tEPERM\tnot yours")
    assert (e.value.errno, str(e.value)) == ("EPERM", "not yours")
    with pytest.raises(AccessError):
        P.parse_reply("MAYBE")


def test_ost_sets():
    assert P.parse_osts("0,3,8-11") == frozenset({0, 3, 8, 9, 10, 11})
    assert P.parse_osts("") == frozenset()
    assert P.format_osts({0, 1, 3, 4, 5, 9}) == "0,1,3-5,9"
    for bad in ("a", "3-1", "-1", "70000"):
        with pytest.raises(AccessError):
            P.parse_osts(bad)


@given(st.sets(st.integers(0, 300), max_size=40))
def test_ost_set_format_round_trips(s):
    assert P.parse_osts(P.format_osts(s)) == frozenset(s)


# -- policies ------------------------------------------------------------------------------------
def claim(appid, seq, osts=None, user="u", project="p", priority=0, token=0, granted=0.0, expect=0.0):
    return Claim(appid=appid, phase="io", seq=seq, since=float(seq), osts=None if osts is None else frozenset(osts),
                 user=user, project=project, priority=priority, token=token, granted=granted, expect=expect)


def test_exclusive_grants_head_only_when_free():
    pol = make_policy("exclusive")
    w = [claim("b", 2), claim("a", 1), claim("c", 3)]
    assert [c.appid for c in decide(pol, w, [], Usage(), 0)] == ["a"]
    assert decide(pol, w, [claim("h", 0, token=1)], Usage(), 0) == []


def test_k_concurrent_fills_k_slots_in_fifo_order():
    pol = make_policy("k-concurrent", k=3)
    w = [claim(x, i) for i, x in enumerate("abcde")]
    assert [c.appid for c in decide(pol, w, [claim("h", 9, token=1)], Usage(), 0)] == ["a", "b"]


def test_priority_orders_by_priority_then_fifo():
    pol = make_policy("priority")
    w = [claim("lo", 1), claim("hi", 2, priority=5), claim("hi2", 3, priority=5)]
    assert [c.appid for c in pol.order(w, [], Usage(), 0)] == ["hi", "hi2", "lo"]


def test_fair_share_serves_the_group_with_least_usage():
    pol = make_policy("fair-share", fair_by="user")
    u = Usage(half_life=100.0)
    u.add("user:alice", 50.0, now=0.0)
    w = [claim("a1", 1, user="alice"), claim("b1", 2, user="bob")]
    assert [c.appid for c in decide(pol, w, [], u, 0.0)] == ["b1"]
    # A running hold counts: bob holding for 80 s outweighs alice's 50 s.
    assert pol.order(w, [claim("b0", 0, user="bob", token=1, granted=0.0)], u, 80.0)[0].appid == "a1"
    # Decay: after 5 half-lives alice's 50 s weighs ~1.6 s, still more than bob's nothing.
    assert u.value("user:alice", 500.0) == pytest.approx(50 / 32)


def test_fair_share_weights():
    pol = make_policy("fair-share", fair_by="project", shares=[parse_rule("project:big=10", "--share")])
    u = Usage()
    u.add("project:big", 50.0, 0.0)
    u.add("project:small", 10.0, 0.0)
    w = [claim("s", 1, project="small"), claim("b", 2, project="big")]
    assert decide(pol, w, [], u, 0.0)[0].appid == "b"  # 50/10 < 10/1


def test_ost_aware_lets_disjoint_claims_overtake_but_never_starves():
    pol = make_policy("ost-aware")
    holders = [claim("h", 0, osts={0, 1, 2, 3}, token=1)]
    w = [claim("w1", 1, osts={2, 5}), claim("w2", 2, osts={8, 9}), claim("w3", 3, osts={5, 6}),
         claim("w4", 4, osts={10})]
    # w1 conflicts with h; w2 is disjoint from h and w1; w3 is disjoint from h but not from w1,
    # which came first, so it waits behind it; w4 is disjoint from everything.
    assert [c.appid for c in decide(pol, w, holders, Usage(), 0)] == ["w2", "w4"]


def test_ost_aware_unknown_set_is_every_ost():
    pol = make_policy("ost-aware")
    assert decide(pol, [claim("a", 1)], [claim("h", 0, osts={7}, token=1)], Usage(), 0) == []
    assert decide(pol, [claim("a", 1, osts={1})], [claim("h", 0, token=1)], Usage(), 0) == []


def test_unknown_policy_and_bad_rules():
    with pytest.raises(ConfigError):
        make_policy("random")
    with pytest.raises(ConfigError):
        make_policy("k-concurrent", k=0)
    for bad in ("alice=3", "user:alice", "host:x=1", "user:x=lots"):
        with pytest.raises(ConfigError):
            parse_rule(bad, "--priority")


def test_estimate_runs_the_policy_forward():
    pol = make_policy("exclusive")
    holders = [claim("h", 0, token=1, granted=0.0)]
    w = [claim("a", 1, expect=5.0), claim("b", 2, expect=2.0), claim("c", 3)]
    starts = estimate(pol, w, holders, Usage(), 1.0, lambda c: c.expect or 10.0)
    assert starts == {"a": 10.0, "b": 15.0, "c": 17.0}
    two = estimate(make_policy("k-concurrent", k=2), w, holders, Usage(), 1.0, lambda c: c.expect or 10.0)
    assert two == {"a": 1.0, "b": 6.0, "c": 8.0}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.frozensets(st.integers(0, 7), min_size=1, max_size=4), st.integers(0, 3)),
                min_size=1, max_size=12),
       st.sampled_from(["exclusive", "k-concurrent", "priority", "fair-share", "ost-aware"]))
def test_decide_never_breaks_the_policy_invariant(spec, name):
    pol = make_policy(name, k=2)
    w = [claim(f"a{i}", i, osts=o, priority=p, user=f"u{p}") for i, (o, p) in enumerate(spec)]
    held: list[Claim] = []
    # Grant, release the oldest holder, grant again, until everyone has been served.
    served = []
    for _ in range(3 * len(w) + 1):
        for c in decide(pol, w, held, Usage(), 0):
            w.remove(c)
            held.append(c)
            served.append(c.appid)
        if name == "ost-aware":
            assert all(a.osts.isdisjoint(b.osts) for a, b in itertools.combinations(held, 2))
        else:
            assert len(held) <= (1 if name == "exclusive" else 2)
        if held:
            held.pop(0)
    assert not w and len(served) == len(spec)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.frozensets(st.integers(0, 5), max_size=3)), st.integers(0, 2),
                          st.sampled_from([0.0, 1.0, 2.5, 4.0]), st.booleans()), min_size=1, max_size=12),
       st.sampled_from(["exclusive", "k-concurrent", "priority", "fair-share", "ost-aware"]), st.integers(1, 3))
def test_one_pass_schedule_equals_running_the_policy_forward(spec, name, k):
    pol = make_policy(name, k=k)
    claims = [claim(f"a{i}", i, osts=o, priority=p, user=f"u{p}", expect=e) for i, (o, p, e, _) in enumerate(spec)]
    holding = [replace(c, token=i + 1, granted=0.5 * i) for i, c in enumerate(claims) if spec[i][3]][:k]
    waiting = [c for c in claims if c.appid not in {h.appid for h in holding}]
    dur = lambda c: c.expect or 3.0  # noqa: E731 (a zero-length hold is allowed: expect 0 means unknown)
    usage = Usage(values={"user:u1": (5.0, 0.0)})
    assert schedule(pol, waiting, holding, usage, 2.0, dur).starts == simulate(pol, waiting, holding, usage, 2.0, dur)
    # A claim not queued is placed as if it had joined: same position and time as a full run.
    if waiting:
        probe, rest = waiting[-1], waiting[:-1]
        eta = schedule(pol, rest, holding, usage, 2.0, dur).probe(probe)
        assert eta == simulate(pol, waiting, holding, usage, 2.0, dur).get(probe.appid)


def test_schedule_adds_a_claim_at_the_back_without_rescheduling():
    pol = make_policy("k-concurrent", k=2)
    holders = [claim("h", 0, token=1, granted=0.0)]
    w = [claim(x, i + 1, expect=float(i + 1)) for i, x in enumerate("abcd")]
    dur = lambda c: c.expect or 10.0  # noqa: E731
    lanes = Lanes(pol, lambda c: ns(dur(c)))  # the queue's lanes: it adds a claim, then tells the schedule
    for c in w[:3]:
        lanes.add(c)
    s = SlotSchedule(pol, lanes.order, holders, 1.0, dur)
    lanes.add(w[3])
    assert s.add(w[3])
    assert s.starts == estimate(pol, w, holders, Usage(), 1.0, dur) == simulate(pol, w, holders, Usage(), 1.0, dur)
    early = claim("early", 0)
    lanes.add(early)
    assert not s.add(early)


# -- the controller, with explicit times ------------------------------------------------------
def make(policy="exclusive", **kw):
    secrets = (f"{i:032x}" for i in itertools.count(1))
    return AccessQueue(make_policy(policy), Settings(heartbeat=1.0, **kw), now=0.0, new_secret=lambda: next(secrets))


def reg(c, appid, t=0.0, **opts):
    r = c.handle(P.format_request("REGISTER", appid, **opts), t).reply
    assert r.startswith("OK\t"), r
    return r.split("\t")[1]


def acq(c, appid, secret, t, phase="io", **opts):
    return c.handle(P.format_request("ACQUIRE", appid, secret, phase, **opts), t)


def test_controller_fifo_release_and_only_holder_releases():
    c = make()
    sa, sb = reg(c, "1:a"), reg(c, "2:b")
    assert acq(c, "1:a", sa, 1.0).reply.startswith("GRANT\t1")
    r = acq(c, "2:b", sb, 1.1, wait_ms=500)
    assert r.reply.startswith("QUEUED") and "position=1" in r.reply and r.park_ms == 500
    # b cannot release a's token, nor can a wrong secret, nor an unknown app.
    assert c.handle(f"RELEASE\t2:b\t{sb}\t1", 1.2).reply.startswith("ERR\tEPERM")
    assert c.handle(f"RELEASE\t1:a\t{'f' * 32}\t1", 1.2).reply.startswith("ERR\tEACCES")
    assert c.handle(f"RELEASE\t9:z\t{sa}\t1", 1.2).reply.startswith("ERR\tENOENT")
    assert c.handle(f"RELEASE\t1:a\t{sa}\t2", 1.2).reply.startswith("ERR\tEPERM")
    assert c.take_grants() == ["1:a"]
    assert c.handle(f"RELEASE\t1:a\t{sa}\t1", 1.5).reply == "OK\theld_ms=500.0"
    assert c.take_grants() == ["2:b"]
    assert c.grant_reply("2:b", 1.5).startswith("GRANT\t2\t")
    assert acq(c, "2:b", sb, 1.6).reply.startswith("GRANT\t2")  # a repeated ACQUIRE is answered again
    assert acq(c, "2:b", sb, 1.6, phase="other").reply.startswith("ERR\tEBUSY")


def test_silent_holder_loses_token_after_two_heartbeats():
    c = make()
    sa, sb = reg(c, "1:a"), reg(c, "2:b")
    acq(c, "1:a", sa, 0.0)
    acq(c, "2:b", sb, 0.1)
    c.handle(f"HEARTBEAT\t1:a\t{sa}\ttoken=1", 0.9)
    c.handle(f"ACQUIRE\t2:b\t{sb}\tio", 1.0)  # b's long poll keeps it alive
    c.tick(2.8)
    assert c.holding()[0].appid == "1:a"  # 1.9 s since a's last heartbeat
    c.handle(f"ACQUIRE\t2:b\t{sb}\tio", 2.5)
    c.tick(2.9)
    assert [h.appid for h in c.holding()] == ["2:b"]
    ev = [e for e in c.take_events() if e["ev"] in ("expire", "grant")]
    assert ev[-2]["ev"] == "expire" and ev[-2]["app"] == "1:a" and ev[-2]["silent"] == pytest.approx(2.0)
    assert c.next_deadline() is not None
    # a comes back: its token is gone, and says so.
    assert c.handle(f"HEARTBEAT\t1:a\t{sa}\ttoken=1", 3.0).reply.startswith("ERR\tESTALE")
    assert c.handle(f"RELEASE\t1:a\t{sa}\t1", 3.0).reply.startswith("ERR\tESTALE")


def test_silent_waiter_is_dropped_and_idle_registration_ends():
    c = make(idle_timeout=10.0)
    sa, sb = reg(c, "1:a"), reg(c, "2:b")
    acq(c, "1:a", sa, 0.0)
    acq(c, "2:b", sb, 0.0)
    c.handle(f"HEARTBEAT\t1:a\t{sa}", 1.5)
    c.tick(2.0)
    assert [w.appid for w in c.waiting()] == []
    assert c.handle(f"RELEASE\t1:a\t{sa}\t1", 2.5).reply.startswith("OK")
    c.tick(11.0)
    assert set(c.state.apps) == {"1:a"}  # b has been silent since 0.0, a since 2.5
    c.tick(12.6)
    assert set(c.state.apps) == set()
    assert [e["ev"] for e in c.take_events()][-2:] == ["idle", "idle"]


def test_max_hold_revokes_a_live_holder():
    c = make(max_hold=3.0)
    sa = reg(c, "1:a")
    acq(c, "1:a", sa, 0.0)
    for t in (0.9, 1.8, 2.7):
        c.handle(f"HEARTBEAT\t1:a\t{sa}", t)
        c.tick(t)
    assert c.holding()
    c.tick(3.0)
    assert not c.holding() and c.take_events()[-1]["ev"] == "max_hold"


def test_register_conflicts_and_replacement():
    c = make()
    reg(c, "1:a")
    assert c.handle("REGISTER\t1:a", 1.0).reply.startswith("ERR\tEEXIST")
    assert c.handle("REGISTER\t1:a", 2.5).reply.startswith("OK")  # the old one fell silent
    assert c.handle("REGISTER\tx:y\tuser=a b", 0).reply.startswith("ERR\tEINVAL")
    assert c.handle("REGISTER\tx:y\tjobid={1}", 0).reply.startswith("ERR\tEINVAL")


def test_estimate_and_status_views():
    c = make(default_hold=30.0)
    sa, sb, sc = reg(c, "1:a"), reg(c, "2:b"), reg(c, "3:c")
    acq(c, "1:a", sa, 0.0, expect=10)
    acq(c, "2:b", sb, 0.0, expect=4)
    r = P.parse_reply(c.handle(f"ESTIMATE\t2:b\t{sb}", 2.0).reply)
    assert (r.fields[0], r.opt("position"), float(r.opt("eta_s"))) == ("waiting", "1", 8.0)
    r = P.parse_reply(c.handle(f"ESTIMATE\t3:c\t{sc}\texpect=1", 2.0).reply)
    assert (r.fields[0], r.opt("position"), float(r.opt("eta_s"))) == ("idle", "2", 12.0)
    assert not c.state.claims.get("3:c")  # asking does not queue
    st_ = c.status(2.0)
    assert [h["app"] for h in st_["holders"]] == ["1:a"] and st_["waiting"][0]["eta_s"] == 8.0
    assert "secret" not in str(st_) and sa not in str(st_)
    # History: a 10 s hold of a/io is what the next estimate for a/io assumes.
    c.handle(f"RELEASE\t1:a\t{sa}\t1", 10.0)
    assert c.duration(claim("1:a", 9)) == pytest.approx(10.0)


def test_ost_aware_controller_uses_declared_then_known_sets():
    c = AccessQueue(make_policy("ost-aware"), Settings(), now=0.0, known_osts={"b": frozenset({5})})
    sa, sb, sc = reg(c, "1:a", osts="0-3"), reg(c, "2:b"), reg(c, "3:c")
    assert acq(c, "1:a", sa, 0).reply.startswith("GRANT")
    assert acq(c, "2:b", sb, 0).reply.startswith("GRANT")  # from the placements: {5}
    assert acq(c, "3:c", sc, 0, osts="3").reply.startswith("QUEUED")
    assert acq(c, "3:c", sc, 0).reply.startswith("QUEUED")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=20))
def test_controller_answers_any_line_with_one_line(lines):
    c = make()
    for i, line in enumerate(lines):
        r = c.handle(line, float(i)).reply
        assert "\n" not in r and r.split("\t")[0] in ("OK", "GRANT", "QUEUED", "ERR")


# -- the store -----------------------------------------------------------------------------------
def test_store_round_trip_and_lock(tmp_path):
    path = tmp_path / "s.db"
    store = StateFile(path)
    c = AccessQueue(make_policy("fair-share"), Settings(), store.load(), now=0.0)
    sa = reg(c, "1:a", user="alice", osts="1-3")
    sb = reg(c, "2:b", user="bob")
    acq(c, "1:a", sa, 1.0, expect=7)
    acq(c, "2:b", sb, 1.5)
    store.save(c.state, c.take_changes())
    with pytest.raises(ConfigError, match="another access controller"):
        StateFile(path)
    store.close()
    store = StateFile(path)
    st_ = store.load()
    assert list(st_.claims) == ["1:a", "2:b"]
    assert st_.claims["1:a"].token == 1 and st_.claims["1:a"].expect == 7 and st_.claims["1:a"].osts == {1, 2, 3}
    assert st_.apps["2:b"].user == "bob" and (st_.next_seq, st_.next_token) == (3, 2)
    c2 = AccessQueue(make_policy("fair-share"), Settings(), st_, now=100.0)
    assert c2.handle(f"RELEASE\t1:a\t{sa}\t1", 100.5).reply.startswith("OK")  # the secret survived
    assert c2.take_grants() == ["2:b"]
    store.save(c2.state, c2.take_changes())
    store.close()
    st2 = StateFile(path).load()
    assert st2.claims["2:b"].token == 2 and st2.usage.value("user:alice", 100.5) == pytest.approx(99.5)


def test_store_refuses_a_foreign_file(tmp_path):
    bad = tmp_path / "x.db"
    bad.write_text("not sqlite at all\n" * 100)
    with pytest.raises(ConfigError, match="not an access-controller state file"):
        StateFile(bad)


# -- TBF -------------------------------------------------------------------------------------------
STATUS = {"apps": [{"app": "11:ior", "jobid": "11", "holding": True},
                   {"app": "12:hacc", "jobid": "12", "holding": False},
                   {"app": "13:x", "jobid": "a job", "holding": False}]}


def test_tbf_rules_throttle_the_apps_without_a_token():
    want, skipped = tbf.desired_rules(STATUS, rate=20)
    assert list(want.values()) == [tbf.Rule(tbf.rule_name("12"), "12", 20)]
    assert len(skipped) == 1 and "a job" in skipped[0]
    name = tbf.rule_name("12")
    assert len(name) < tbf.MAX_TBF_NAME and name.replace("_", "").isalnum()
    cmds = [tbf.shell(c) for c in tbf.render({}, want)]
    assert cmds == [f"lctl set_param 'ost.OSS.ost_io.nrs_tbf_rule=start {name} jobid={{12}} rate=20'"]
    # 11 loses its token, 12 gets it: start a rule for 11, stop 12's.
    after = {**STATUS, "apps": [dict(STATUS["apps"][0], holding=False), dict(STATUS["apps"][1], holding=True)]}
    want2, _ = tbf.desired_rules(after, rate=20)
    cmds = [f"{c.name}={c.value}" for c in tbf.render(want, want2)]
    assert cmds == [f"ost.OSS.ost_io.nrs_tbf_rule=start {tbf.rule_name('11')} jobid={{11}} rate=20",
                    f"ost.OSS.ost_io.nrs_tbf_rule=stop {name}"]
    assert [f"{c.name}={c.value}" for c in tbf.render(want, tbf.desired_rules(STATUS, rate=5)[0])] == \
        [f"ost.OSS.ost_io.nrs_tbf_rule=change {name} rate=5"]
    with pytest.raises(ValueError):
        tbf.desired_rules(STATUS, rate=0)


def test_tbf_rule_dump_parsing():
    name = tbf.rule_name("12")
    text = ("regular_requests:\nCPT 0:\n"
            f"{name} {{12}} 20, ref 0\ndefault {{*}} 10000, ref 3\nCPT 1:\n{name} {{12}} 20, ref 1\n"
            f"{tbf.rule_name('13')} jobid={{13}} 7, ref 0\nhigh_priority_requests:\nCPT 0:\n")
    assert tbf.parse_rules(text) == {name: tbf.Rule(name, "12", 20),
                                     tbf.rule_name("13"): tbf.Rule(tbf.rule_name("13"), "13", 7)}


def test_a_fair_share_probe_runs_on_from_its_group_or_once_per_schedule(monkeypatch):
    from iez.access import admission
    pol = make_policy("fair-share", k=1)
    waiting = [claim(f"a{i}", i, user=f"u{i % 3}", expect=1.0 + i) for i in range(6)]
    dur = lambda c: c.expect or 3.0  # noqa: E731
    sched = schedule(pol, waiting, [], Usage(), 2.0, dur)
    runs = []
    real = admission.FairShareRun._run
    monkeypatch.setattr(admission.FairShareRun, "_run", lambda self, s, *a: runs.append(s.count) or real(self, s, *a))
    probe = claim("p", 6, user="u1", expect=2.0)
    first = sched.probe(probe)
    assert runs and runs[0] > 0  # run on from where u1's last claim was granted, not from the start
    assert sched.probe(probe) == first and len(runs) == 1  # asked again: answered, not run again
    assert first == simulate(pol, waiting + [probe], [], Usage(), 2.0, dur)["p"]
    other = claim("q", 6, user="u9", expect=2.0)  # a new group: read from the kept run's grants, nothing run
    assert sched.probe(other) == sched.probe(other) == schedule(pol, waiting, [], Usage(), 2.0, dur).probe(other) \
        == simulate(pol, waiting + [other], [], Usage(), 2.0, dur)["q"]
    assert runs[1:] == [0]  # the fresh schedule's build only
    # Asked again with another expected hold, phase or OST set: the answer depends on none of them.
    assert sched.probe(replace(other, expect=50.0, phase="ckpt", osts=frozenset({3}))) == sched.probe(other)
    assert len(runs) == 2
    # With two slots a new group still runs the queue, once per schedule.
    two = schedule(make_policy("fair-share", k=2), waiting, [], Usage(), 2.0, dur)
    del runs[:]
    assert two.probe(other) == two.probe(other) == simulate(two.policy, waiting + [other], [], Usage(), 2.0, dur)["q"]
    assert runs == [0]
