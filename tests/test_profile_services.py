"""LIOPProf logging services: the commands each step runs on an OSS, the runner's transports,
the analysis join on hand-made data, and the CLI's one-line errors."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from iez.profile import ProfileError, analysis
from iez.profile.remote import Runner, Step
from iez.profile.services import start_steps, stop_steps


def dry(hosts: list[str], transport: str, sudo: bool = False) -> tuple[Runner, list[str]]:
    said: list[str] = []
    return Runner(hosts, transport, dry_run=True, sudo=sudo, say=said.append), said


def test_start_and_stop_scripts_do_what_seed_003_says():
    start = " ; ".join(s.script for s in start_steps("/var/tmp/p", 2.0, survey=True))
    for needed in ("lctl get_param -n debug > debug.saved", "lctl set_param debug=+rpctrace", "debug_mb=1024",
                   "lctl clear", "lctl debug_daemon start /var/tmp/p/rpctrace.bin", "iostat -x -t 1",
                   "obdfilter-survey", "'osd-*.*.brw_stats'", "'obdfilter.*.exports.*.stats'", "sleep 2"):
        assert needed in start, needed
    assert start.index("obdfilter-survey") < start.index("debug=+rpctrace")  # survey runs before tracing
    assert start.index("lctl clear") < start.index("debug_daemon start")
    stop = " ; ".join(s.script for s in stop_steps("/var/tmp/p"))
    for needed in ("debug_daemon stop", "lctl debug_file rpctrace.bin rpctrace.log", 'debug="$(cat debug.saved)"',
                   "kill $(cat sampler.pid) $(cat iostat.pid)", "params-stop.txt"):
        assert needed in stop, needed
    for s in start_steps("/d", 1.0, False) + stop_steps("/d"):
        subprocess.run(["sh", "-n", "-c", s.script], check=True)  # every script is valid sh


def test_dry_run_prints_every_command_per_transport():
    r, said = dry(["oss1", "oss2"], "pdsh")
    r.run(Step("enable rpctrace", "lctl set_param debug=+rpctrace"))
    assert said[0] == "# enable rpctrace (needs root on the OSS)"
    assert shlex.split(said[1])[:4] == ["pdsh", "-S", "-w", "oss1,oss2"]
    r, said = dry(["oss1", "oss2"], "ssh", sudo=True)
    r.run(Step("x", "echo hi"))
    argvs = [shlex.split(s) for s in said[1:]]
    assert [a[3] for a in argvs] == ["oss1", "oss2"] and argvs[0][4].startswith("sudo -n sh -c")
    r.fetch("oss1", "/var/tmp/p", Path("/out/oss1"))
    assert said[-2:] == ["# collect oss1's files", "scp -q -r -o BatchMode=yes 'oss1:/var/tmp/p/*' /out/oss1"]


def test_cli_dry_run(iez_cmd, subenv, tmp_path):
    p = subprocess.run(iez_cmd + ["profile", "start", "--oss", "oss1,oss2", "--out", str(tmp_path / "p"),
                                  "--dry-run", "--transport", "ssh", "--survey"],
                       capture_output=True, text=True, env=subenv, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("(needs root on the OSS)") == 5 and p.stdout.count("ssh -o BatchMode=yes oss2") == 5
    assert not (tmp_path / "p").exists()  # a dry run changes nothing


def test_local_runner_runs_real_steps(tmp_path):
    r = Runner(["local"], "auto")
    assert r.transport == "local"
    res = r.run(Step("count", f"cd {tmp_path} && echo 3 > n && cat n", root=False))
    assert [(x.host, x.rc, x.stdout) for x in res] == [("local", 0, "3\n")]
    with pytest.raises(ProfileError, match=r"^fail failed on local: boom$"):
        r.run(Step("fail", "echo boom >&2; exit 3", root=False))
    r.fetch("local", str(tmp_path), tmp_path / "copy")
    assert (tmp_path / "copy" / "n").read_text() == "3\n"


def test_runner_refuses_what_it_cannot_do(monkeypatch, tmp_path):
    with pytest.raises(ProfileError, match="no OSS given"):
        Runner([], "auto")
    with pytest.raises(ProfileError, match="transport local cannot reach oss9"):
        Runner(["oss9"], "local")
    monkeypatch.setenv("PATH", str(tmp_path))  # neither pdsh nor ssh
    with pytest.raises(ProfileError, match=r"^ssh is not installed: .* copy its directory into OUT/<host>/"):
        Runner(["oss1", "oss2"], "auto")
    with pytest.raises(ProfileError, match="^pdsh is not installed"):
        Runner(["oss1", "oss2"], "pdsh")


@pytest.mark.parametrize("host", ["-oProxyCommand=touch /tmp/owned", "../../etc", "a b", "oss1/x", ""])
def test_hosts_that_are_options_or_paths_are_refused(tmp_path, host):
    """A host is an ssh/pdsh argument and a directory of the profile: `-o...` became an ssh option
    and `../../etc` a directory outside it."""
    from iez.errors import ConfigError
    from iez.profile.profiledir import FORMAT, META, read_meta

    with pytest.raises(ConfigError, match="--oss host: expected 1-64 letters"):
        Runner([host], "ssh", dry_run=True)
    (tmp_path / META).write_text(json.dumps({"format": FORMAT, "hosts": [host]}))
    with pytest.raises(ConfigError, match=f"{META} host: expected"):
        read_meta(tmp_path)


def test_cli_errors_are_one_line(iez_cmd, subenv, tmp_path):
    for argv, msg in ((["profile", "report", str(tmp_path)], "holds no profile"),
                      (["profile", "stop", "--cluster", str(tmp_path), "--out", str(tmp_path)], "holds no profile"),
                      (["profile", "start", "--cluster", str(tmp_path), "--out", str(tmp_path / "o")],
                       "is not an emulated iez cluster")):
        p = subprocess.run(iez_cmd + argv, capture_output=True, text=True, env=subenv, timeout=60)
        assert p.returncode == 2 and p.stderr.startswith("iez: error: ") and msg in p.stderr
        assert p.stderr.count("\n") == 1, p.stderr


# -- the join on hand-made data -----------------------------------------------------------------------

def host(counts: dict[tuple[int, str, int], int]) -> analysis.HostRpcs:
    return analysis.HostRpcs("oss0", counts=counts)


def test_join_spreads_rpcs_by_the_exports_of_their_interval():
    bins = analysis.Bins(100.0, 1.0)
    a, b = "10.0.0.1@tcp", "10.0.0.2@tcp"
    ivals = [analysis.Interval(100.0, 101.0, {(0, a): np.array([3, 3, 0, 0]), (1, a): np.array([1, 1, 0, 0])}),
             analysis.Interval(101.0, 102.0, {(1, a): np.array([2, 2, 0, 0]), (1, b): np.array([0, 0, 5, 5])})]
    rpcs = host({(0, a, 0): 8, (1, a, 0): 2, (1, b, 1): 5, (1, b, 3): 4, (5, "10.0.0.9@tcp", 0): 1})
    view = analysis.join(bins, {"oss0": rpcs}, {"oss0": ivals})
    assert view.series[(0, a)][0].tolist() == [6.0, 0.0]  # 8 reads, 3:1 over OST0 and OST1
    assert view.series[(1, a)][0].tolist() == [2.0, 0.0] and view.series[(1, a)][1].tolist() == [2.0, 0.0]
    assert view.series[(1, b)][1].tolist() == [0.0, 5.0]  # the lock enqueues (class 3) have no OST
    assert view.unattributed == {("oss0", "10.0.0.9@tcp"): 1}
    c1 = analysis.concurrency(view, 1)
    assert c1.clients_per_bin.tolist() == [1, 2] and c1.max_clients == 2
    assert c1.seek_risk == pytest.approx((2 * 0 + 7 * (1 - (2 / 7) ** 2 - (5 / 7) ** 2)) / 9)
    assert analysis.concurrency(view, 0).seek_risk == 0.0
    assert analysis.imbalance(view, [0, 1, 2]) == pytest.approx(8 / (11 / 3))


def test_join_without_rpctrace_uses_exports_alone():
    ivals = [analysis.Interval(0.0, 2.0, {(4, "c@tcp"): np.array([2, 2, 1, 1])})]
    view = analysis.join(analysis.Bins(0.0, 1.0), {"oss1": None}, {"oss1": ivals})
    assert view.series[(4, "c@tcp")][1].tolist() == [2, 1] and "exports stats deltas only" in view.source["oss1"]


def test_lock_contention_per_client():
    h = host({(0, "a", 3): 10, (0, "a", 4): 9, (0, "b", 3): 2})
    h.service = {("a", 3): [10, 500.0, 800.0]}
    stats = analysis.lock_stats({"oss0": h, "oss1": None})
    assert [(s.client, s.enqueues, s.cancels, s.enqueue_us) for s in stats] == [("a", 10, 9, 80.0), ("b", 2, 0, None)]
    assert stats[0].contention == 0.9


def test_files_to_osts_from_a_libiez_trace():
    from iez.layout.layout import Layout
    from iez.plan import format_layout
    from iez.trace.record import FileRecord

    MiB = 1 << 20
    recs = [FileRecord("/fs/a", bytes_read=4 * MiB, bytes_written=MiB, max_offset=4 * MiB,
                       layout=format_layout(Layout(stripe_size=MiB, osts=(3, 5)))),
            FileRecord("/fs/b", bytes_read=MiB, max_offset=MiB)]  # no layout: left out
    assert analysis.records_ost_map(recs) == {"/fs/a": {3: [2 * MiB, MiB // 2], 5: [2 * MiB, MiB // 2]}}


def test_report_on_a_damaged_copied_directory(tmp_path, iez_cmd, subenv):
    import random

    d = tmp_path / "oss9"
    d.mkdir()
    rng = random.Random(5)
    (d / "rpctrace.log").write_bytes(bytes(rng.randrange(256) for _ in range(50_000)))
    (d / "exports.txt").write_text("junk\n### iez-sample x\nobdfilter.a.exports.1@tcp.stats=\nnope\n")
    (d / "params-start.txt").write_text("garbage=\n")
    (d / "iostat.txt").write_text("x\ny\n")
    p = subprocess.run(iez_cmd + ["profile", "report", str(tmp_path), "-o", str(tmp_path / "r.html")],
                       capture_output=True, text=True, env=subenv, timeout=60)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r.html").read_text()
    assert "No data RPCs were found" in html and "malformed line(s)" in html
    assert "unreadable line(s) in exports.txt" in html and "unreadable line(s) in iostat.txt" in html
