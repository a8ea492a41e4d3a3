"""Statistics collectors: the message format, each collector on real Lustre fixtures and on
emulated trees, failures reported and skipped, and `iez collect` as a real process publishing
over ZeroMQ on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iez.alloc.gate import HostLoad as Load
from iez.cluster import make_cluster
from iez.collect import collectors as collectors_module
from iez.collect import message as message_module
from iez.collect.collectors import (COLLECTORS, HostLoad, OstRates, OstSpace, OstStates, collectors_for,
                                   run_round)
from iez.collect.message import TOPIC, MessageError, OstReading, StatsMessage, decode, encode, from_json
from iez.collect.publisher import Publisher, next_slot
from iez.controller.local import free_port
from iez.controller.server import StatsSocket
from iez.emulated.paramtree import OSTCounters, OSTSpace, render_oss, write_tree
from iez.errors import IezError
from iez.lustre.params import ParamTree

TOKEN = "s" * 32
MiB = 1 << 20


def message(**kw) -> StatsMessage:
    base = dict(role="oss", id="oss0", seq=1, time=1000.0, interval=60.0, hostname="n1",
                osts={"iez-OST0000": OstReading(100, 50, 60, None, 2.5)}, load=Load(0.25, 0.5),
                errors=("x: not an integer",))
    return StatsMessage(**{**base, **kw})


# -- the message ---------------------------------------------------------------------------------

def test_message_round_trip_keeps_every_field():
    m = message(role="mds", id="mds0", osts={}, ost_states={"iez-OST0003": "inactive"})
    assert decode(encode(m, TOKEN), TOKEN) == m
    m = message()
    frames = encode(m, TOKEN)
    assert frames[0] == TOPIC
    body = json.loads(frames[1])
    assert body["schema"] == "iez.stats" and body["version"] == 2
    assert body["osts"]["iez-OST0000"] == {"kbytestotal": 100, "kbytesavail": 50, "kbytesfree": 60,
                                          "read_bps": None, "write_bps": 2.5}
    assert decode(frames, TOKEN) == m


def test_message_signature_refuses_other_tokens_and_tampering():
    frames = encode(message(), TOKEN)
    with pytest.raises(MessageError, match="bad signature"):
        decode(frames, "t" * 32)
    tampered = [frames[0], frames[1].replace(b'"kbytesavail":50', b'"kbytesavail":99'), frames[2]]
    with pytest.raises(MessageError, match="bad signature"):
        decode(tampered, TOKEN)
    with pytest.raises(MessageError, match="frames"):
        decode(frames[:2], TOKEN)
    with pytest.raises(MessageError, match="frames"):
        decode([b"other", *frames[1:]], TOKEN)


@pytest.mark.parametrize("change, error", [
    ({"version": 3}, r"version 3 is not supported \(this iez reads 1, 2\)"),
    ({"schema": "x"}, "schema"),
    ({"role": "client"}, "role"),
    ({"id": "../etc"}, "bad host id"),
    ({"seq": -1}, "seq"),
    ({"time": float("nan")}, "time"),
    ({"interval": 0}, "interval"),
    ({"osts": {"iez-OST000": {"kbytestotal": 1, "kbytesavail": 1}}}, "bad OST name"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 11}}}, "kbytesavail"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "extra": 1}}}, "unknown fields"),
    ({"osts": {"iez-OST0000": {"kbytestotal": True, "kbytesavail": 1}}}, "kbytestotal"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "write_bps": -1}}}, "write_bps"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "read_bytes": 1.5}}}, "read_bytes"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "write_bytes": 1 << 64}}}, "write_bytes"),
    # every field the one-expression check of an OST covers, refused with the field's name
    ({"osts": {"iez-OST0000": {"kbytestotal": 10}}}, "kbytesavail"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "kbytesfree": 11}}}, "kbytesfree"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "kbytesfree": False}}}, "kbytesfree"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "read_bps": float("nan")}}}, "read_bps"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "read_bps": True}}}, "read_bps"),
    ({"osts": {"iez-OST0000": {"kbytestotal": 10, "kbytesavail": 1, "read_bytes": -1}}}, "read_bytes"),
    ({"ost_states": {"iez-OST0000": "broken"}}, "state"),
    ({"load": {"cpu": 1}}, "load"),
    ({"errors": [1]}, "errors"),
    ({"osts": []}, "must be objects"),
])
def test_malformed_messages_are_refused_in_one_line(change, error):
    doc = {**message().to_json(), **change}
    with pytest.raises(MessageError, match=error) as e:
        from_json(doc)
    assert "\n" not in str(e.value)


def test_not_json_is_refused():
    body = b"{not json"
    frames = encode(message(), TOKEN)
    import hashlib
    import hmac
    mac = hmac.new(TOKEN.encode(), TOPIC + b"\0" + body, hashlib.sha256).hexdigest().encode()
    with pytest.raises(MessageError, match="not JSON"):
        decode([frames[0], body, mac], TOKEN)


# -- collectors on real Lustre outputs ------------------------------------------------------------

def test_ost_space_from_a_real_2_10_oss_tree(fixtures):
    root = fixtures / "lustre_exporter"
    got = OstSpace().collect(ParamTree(root))
    d = root / "proc/fs/lustre/obdfilter/lustrefs-OST0000"
    want = {f: int((d / f).read_text()) for f in ("kbytestotal", "kbytesavail", "kbytesfree")}
    assert got.osts["lustrefs-OST0000"] == want
    # The osd-zfs view of the same OST is there too; the OFD's (obdfilter) is preferred.
    assert (root / "proc/fs/lustre/osd-zfs/lustrefs-OST0000/kbytesavail").read_text().strip() != str(want["kbytesavail"])


def test_ost_space_falls_back_to_osd_in_a_getparam_dump(fixtures):
    text = (fixtures / "lustrefs-exporter/lustre-collector/src/fixtures/valid/valid.txt").read_text()
    got = OstSpace().collect(ParamTree.from_getparam_text(text))
    assert got.osts["ai400-OST0000"] == {"kbytestotal": 3978095168, "kbytesavail": 3835411664, "kbytesfree": 3875693364}
    assert set(got.osts) == {"ai400-OST0000", "ai400-OST0001"}  # the MDT is not an OST
    assert not got.errors


def test_ost_states_from_a_real_mds(fixtures):
    text = (fixtures / "lustrefs-exporter/lustre-collector/src/fixtures/osp.txt").read_text()
    got = OstStates().collect(ParamTree.from_getparam_text(text))
    assert got.ost_states["tesfs-OST0001"] == "inactive"  # active=0 (and max_create_count=0)
    assert {s for t, s in got.ost_states.items() if t != "tesfs-OST0001"} == {"active"}
    assert len(got.ost_states) == 8  # the MDT OSPs (tesfs-MDT0001-osp-...) are not OSTs


def test_two_file_systems_on_one_host_stay_apart():
    text = ("obdfilter.fsa-OST0001.kbytestotal=100\nobdfilter.fsa-OST0001.kbytesavail=40\n"
            "obdfilter.fsb-OST0001.kbytestotal=200\nobdfilter.fsb-OST0001.kbytesavail=150\n")
    got = OstSpace().collect(ParamTree.from_getparam_text(text))
    assert got.osts == {"fsa-OST0001": {"kbytestotal": 100, "kbytesavail": 40, "kbytesfree": None},
                        "fsb-OST0001": {"kbytestotal": 200, "kbytesavail": 150, "kbytesfree": None}}


# -- rates between rounds ---------------------------------------------------------------------------

def oss_tree(root: Path, written: int, now: float, space: int = 1 << 20) -> ParamTree:
    c = make_cluster(n_oss=1, osts_per_oss=2)
    counters = {0: OSTCounters(), 1: OSTCounters()}
    counters[0].write_bytes.add_bytes(written)
    counters[1].read_bytes.add_bytes(written // 2)
    sp = {i: OSTSpace(space, space // 2, space // 2, 100, 50) for i in (0, 1)}
    write_tree(root, render_oss(c, "oss0", sp, counters, now, 0.0))
    return ParamTree(root)


def test_rates_between_rounds(tmp_path):
    r = OstRates()
    first = r.collect(oss_tree(tmp_path, 10 * MiB, 100.0))
    # one sample: no rate yet, but the OST's own sums (read_bytes printed only once non-zero: 0)
    assert first.osts["iez-OST0000"] == {"read_bps": None, "write_bps": None, "read_bytes": 0,
                                         "write_bytes": 10 * MiB}
    second = r.collect(oss_tree(tmp_path, 30 * MiB, 104.0))
    assert second.osts["iez-OST0000"] == {"read_bps": 0.0, "write_bps": 20 * MiB / 4, "read_bytes": 0,
                                          "write_bytes": 30 * MiB}
    assert second.osts["iez-OST0001"] == {"read_bps": 10 * MiB / 4, "write_bps": 0.0, "read_bytes": 15 * MiB,
                                          "write_bytes": 0}
    same = r.collect(oss_tree(tmp_path, 30 * MiB, 104.0))  # read again before the kernel updated it
    assert same.osts == second.osts
    back = r.collect(oss_tree(tmp_path, 1 * MiB, 50.0))  # the OST restarted: start over
    assert back.osts["iez-OST0000"] == {"read_bps": None, "write_bps": None, "read_bytes": 0, "write_bytes": MiB}
    assert r.collect(oss_tree(tmp_path, 3 * MiB, 52.0)).osts["iez-OST0000"]["write_bps"] == MiB


# -- failures are reported and skipped --------------------------------------------------------------

def test_unreadable_and_malformed_parameters_are_reported_and_skipped(tmp_path):
    tree = oss_tree(tmp_path, MiB, 10.0)
    d = tmp_path / "sys/fs/lustre/obdfilter"
    (d / "iez-OST0000/kbytesavail").write_text("lots\n")
    (d / "iez-OST0001/kbytestotal").unlink()
    os.symlink(tmp_path / "nowhere", d / "iez-OST0001/kbytestotal")  # dangling, as 2.15's brw_stats links
    osts, states, load, errors = run_round([OstSpace(), OstRates(), HostLoad(tmp_path / "noproc")], tree)
    assert osts == {}  # neither OST has usable space figures
    text = "\n".join(errors)
    assert "iez-OST0000.kbytesavail=lots: not an integer" in text
    assert "iez-OST0001.kbytestotal: dangling symlink" in text
    assert "host_load: cannot read" in text and "noproc/loadavg" in text
    assert "I/O statistics but no space figures" in text
    assert load is None and states == {}


def test_a_failing_collector_does_not_stop_the_others(tmp_path):
    class Broken:
        name = "broken"

        def collect(self, tree):
            raise OSError("disk on fire")

    osts, _, _, errors = run_round([Broken(), OstSpace()], oss_tree(tmp_path, MiB, 10.0))
    assert errors == ["broken: disk on fire"]
    assert set(osts) == {"iez-OST0000", "iez-OST0001"}


def test_host_load_from_a_proc_directory(tmp_path):
    (tmp_path / "loadavg").write_text("3.00 2.00 1.00 2/300 4000\n")
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 750 kB\n")
    cores = len(os.sched_getaffinity(0))
    got = HostLoad(tmp_path).collect(ParamTree(tmp_path))
    assert got.load == Load(cpu=3.0 / cores, mem=0.25) and not got.errors


def test_roles_choose_their_collectors():
    assert [c.name for c in collectors_for("oss")] == ["ost_space", "ost_rates", "host_load"]
    assert [c.name for c in collectors_for("mds")] == ["ost_states", "host_load"]
    assert [c.name for c in collectors_for("oss", enable=["ost_states"], disable=["ost_rates"])] == \
        ["ost_space", "ost_states", "host_load"]


# -- the registry -------------------------------------------------------------------------------------

def test_the_registry_lists_every_collector():
    classes = {obj.name: obj for obj in vars(collectors_module).values()
               if isinstance(obj, type) and isinstance(getattr(obj, "name", None), str)
               and callable(getattr(obj, "collect", None))}
    assert set(COLLECTORS) == set(classes)
    for name, reg in COLLECTORS.items():
        made = reg.factory(Path("/proc"))
        assert made.name == name and isinstance(made, classes[name])
        assert reg.roles and set(reg.roles) <= {"oss", "mds"} and reg.about
    every_role = {role for reg in COLLECTORS.values() for role in reg.roles}
    assert every_role == {"oss", "mds"}


@pytest.mark.parametrize("name", list(COLLECTORS))
def test_every_registered_collector_reads_a_real_node(name, fixtures, tmp_path):
    (tmp_path / "loadavg").write_text("1.00 1.00 1.00 1/100 100\n")
    (tmp_path / "meminfo").write_text("MemTotal: 1000 kB\nMemAvailable: 500 kB\n")
    reg = COLLECTORS[name]
    if "oss" in reg.roles:  # a real 2.10 OSS: obdfilter space and stats
        tree = ParamTree(fixtures / "lustre_exporter")
    else:  # a real MDS's OSP parameters
        tree = ParamTree.from_getparam_text((fixtures / "lustrefs-exporter/lustre-collector/src/fixtures/osp.txt")
                                            .read_text())
    got = reg.factory(tmp_path).collect(tree)
    assert not got.errors
    assert got.osts or got.ost_states or got.load is not None


@pytest.mark.parametrize("role, enable, disable", [("oss", ["ost_speed"], []), ("mds", [], ["load"]),
                                                   ("client", [], [])])
def test_an_unknown_collector_or_role_is_one_line(role, enable, disable):
    with pytest.raises(IezError, match="unknown collector") as e:
        collectors_for(role, enable=enable, disable=disable)
    assert "\n" not in str(e.value)
    if enable or disable:
        assert "known: ost_space, ost_rates, ost_states, host_load" in str(e.value)


# -- when rounds are published ------------------------------------------------------------------

def test_rounds_keep_their_phase_and_spread_after_publishing_together():
    import random

    rng = random.Random(7)
    for _ in range(500):
        interval = rng.choice([1.0, 60.0, 3600.0])
        phase = rng.uniform(0, interval)
        slot = phase + rng.randrange(1, 10_000) * interval
        # on its slot, or late by less than half an interval: the next slot, one interval on
        for late in (0.0, rng.uniform(0, 0.49 * interval)):
            assert next_slot(slot + late, phase, interval) == pytest.approx(slot + interval)
        # an extra round (a subscriber joined) at any time: back on the phase within 0.5-1.5 intervals
        sent = slot + rng.uniform(-interval, interval)
        nxt = next_slot(sent, phase, interval)
        assert 0.5 * interval <= nxt - sent <= 1.5 * interval + 1e-9 * slot
        assert ((nxt - phase) / interval) == pytest.approx(round((nxt - phase) / interval))
    # 145 collectors publishing together (a controller subscribed) are spread over the interval next
    phases = sorted(next_slot(100.0, Publisher("oss", f"oss{i}", [], ParamTree, TOKEN, 1.0).phase, 1.0) % 1.0
                    for i in range(145))
    assert max(b - a for a, b in zip(phases, phases[1:])) < 0.2 and phases[-1] - phases[0] > 0.8


# -- the real process ---------------------------------------------------------------------------------

def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture
def emulated(tmp_path, iez_cmd, subenv):
    d = tmp_path / "emu"
    assert run(iez_cmd + ["emulate", "init", str(d), "--oss", "2", "--osts-per-oss", "2", "--ost-size", "1GiB"],
               env=subenv).returncode == 0
    r = run(iez_cmd + ["emulate", "up", str(d)], env=subenv)
    assert r.returncode == 0, r.stderr
    yield d
    run(iez_cmd + ["emulate", "down", str(d)], env=subenv)


def subscriber() -> tuple[StatsSocket, int]:
    """The controller's statistics socket (CURVE, the test's token), bound on a free loopback port."""
    port = free_port()
    return StatsSocket(f"tcp://127.0.0.1:{port}", TOKEN), port


def start_collector(iez_cmd, env, tmp_path: Path, params: Path, port: int, interval: float) -> subprocess.Popen:
    token = tmp_path / "site.token"
    token.write_text(TOKEN + "\n")
    return subprocess.Popen(iez_cmd + ["collect", "oss", "--oss-id", "oss0", "--params", str(params),
                                       "--publish", f"tcp://127.0.0.1:{port}", "--interval", str(interval),
                                       "--token-file", str(token)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def recv(sock: StatsSocket, timeout: float = 20.0) -> StatsMessage:
    frames = sock.recv(int(timeout * 1000))
    if frames is None:
        pytest.fail("no message from the collector")
    return decode(frames, TOKEN)


def test_collector_process_publishes_signed_rounds_and_survives_bad_parameters(emulated, tmp_path, iez_cmd, subenv):
    from iez.backend.emulated import EmulatedBackend
    from iez.layout import Layout

    sub, port = subscriber()
    proc = start_collector(iez_cmd, subenv, tmp_path, emulated / "params/oss0", port, 0.3)
    try:
        first = recv(sub)
        assert (first.role, first.id) == ("oss", "oss0")
        assert set(first.osts) == {"iez-OST0000", "iez-OST0001"}
        assert first.osts["iez-OST0000"].kbytestotal == 1 << 20
        assert first.load is not None and not first.errors
        # Write 8 MiB on OST 0: its write rate shows it within a few rounds.
        be = EmulatedBackend(emulated)
        path = emulated / "fs/data"
        be.create(path, Layout(stripe_size=MiB, osts=(0,)))
        with open(path, "r+b") as f:
            f.write(b"x" * (8 * MiB))
        deadline = time.monotonic() + 20
        seen = 0.0
        while time.monotonic() < deadline and seen == 0.0:
            m = recv(sub)
            seen = m.osts["iez-OST0000"].write_bps or 0.0
            assert (m.osts["iez-OST0001"].write_bps or 0.0) == 0.0
        assert seen > 0
        assert m.osts["iez-OST0000"].kbytesavail < first.osts["iez-OST0000"].kbytesavail
        assert m.seq > first.seq
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        sub.close()
    assert proc.returncode == 0, err


def test_collector_keeps_running_when_parameters_go_bad(tmp_path, iez_cmd, subenv):
    oss_tree(tmp_path / "node", MiB, 10.0)
    sub, port = subscriber()
    proc = start_collector(iez_cmd, subenv, tmp_path, tmp_path / "node", port, 0.2)
    try:
        assert set(recv(sub).osts) == {"iez-OST0000", "iez-OST0001"}
        avail = tmp_path / "node/sys/fs/lustre/obdfilter/iez-OST0001/kbytesavail"
        avail.write_text("garbage\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = recv(sub)
            if "iez-OST0001" not in m.osts:
                break
        assert set(m.osts) == {"iez-OST0000"}
        assert any("iez-OST0001.kbytesavail=garbage" in e for e in m.errors)
        avail.write_text("1000\n")  # fixed: reported again
        while time.monotonic() < deadline:
            m = recv(sub)
            if "iez-OST0001" in m.osts:
                break
        assert m.osts["iez-OST0001"].kbytesavail == 1000 and not m.errors
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        sub.close()
    assert proc.returncode == 0
    assert err.count("not an integer") == 1  # logged when it appeared, not every round
    assert "all parameters readable again" in err


def test_collect_print_and_errors(fixtures, tmp_path, iez_cmd, subenv):
    dump = fixtures / "lustrefs-exporter/lustre-collector/src/fixtures/osp.txt"
    r = run(iez_cmd + ["collect", "mds", "--mds-id", "mds0", "--getparam", str(dump), "--print"], env=subenv)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ost_states"]["tesfs-OST0001"] == "inactive" and doc["role"] == "mds"
    env = {k: v for k, v in subenv.items() if k != "IEZ_SITE_TOKEN"}
    token = tmp_path / "site.token"
    token.write_text(TOKEN)
    for argv, msg in [
        (["oss", "--oss-id", "oss0", "--params", str(tmp_path / "missing"), "--print"], "no such directory"),
        (["oss", "--oss-id", "oss0", "--getparam", str(tmp_path / "missing"), "--print"], "cannot read"),
        (["oss", "--oss-id", "bad id", "--print"], "bad host id"),
        (["oss", "--oss-id", "oss0", "--publish", "tcp://127.0.0.1:1"], "no site token"),
        (["oss", "--oss-id", "oss0", "--interval", "0", "--print"], "--interval"),
        (["oss", "--oss-id", "oss0", "--lctl", "/nonexistent/lctl", "--print"], "not found"),
        (["oss", "--oss-id", "oss0", "--publish", "bogus", "--token-file", str(token)], "cannot publish to bogus"),
        (["oss", "--oss-id", "oss0", "--no-collector", "ost_speed", "--print"], "unknown collector 'ost_speed'"),
    ]:
        r = run(iez_cmd + ["collect", *argv], env=env)
        code = 1 if msg == "not found" else 2  # lctl missing: a failure (BackendError), not bad input
        assert r.returncode == code and r.stderr.startswith("iez: error: ") and msg in r.stderr, (argv, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1


# The one-expression check of an OST's fields (the message's hot path) against the field-by-field
# one that names the bad field: the same reading or both refusing, for any values, so that the fast
# path can never take what the checked one refuses.
_EDGES = [0, 1, -1, message_module._KB_MAX, message_module._KB_MAX + 1, message_module._BYTES_MAX,
          message_module._BYTES_MAX + 1]
_ost_value = (st.none() | st.booleans() | st.sampled_from(_EDGES) | st.integers(-5, 200)
              | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=3))


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(message_module._OST_FIELDS)), _ost_value))
def test_an_osts_fast_check_takes_exactly_what_the_checked_one_takes(r):
    def outcome(f):
        try:
            return f()
        except MessageError as e:
            return ("refused", str(e))
    fast = outcome(lambda: message_module._ost("iez-OST0000", r))
    checked = outcome(lambda: message_module._checked_ost("iez-OST0000", r.get))
    assert fast == checked
