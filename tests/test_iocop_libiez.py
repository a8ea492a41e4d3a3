"""IO-Cop's client side in libiez (docs/references.md#s004-applications): real `iez access serve` controllers, a C job
(libiez/tools/iocop_job.c) under LD_PRELOAD calling iez_io_begin/iez_io_end, MPICH's mpiexec."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path


from conftest import BUILD, need_built, need_tool
from iez.access.server import Spawned
from iez.access.token_client import fetch_status
from plugins.access_controllers import events as read_events, holds, wait_until

HEARTBEAT = ("--heartbeat", "0.25s")

LIB = BUILD / "libiez" / "libiez.so"
MPILIB = BUILD / "libiez" / "libiez-mpi.so"
JOB = BUILD / "libiez" / "iez-test-iocop"
MPIJOB = BUILD / "libiez" / "iez-test-iocop-mpi"




def job_env(c: Spawned | None, mode: str, appid: str, lib: Path = LIB, **extra: str) -> dict[str, str]:
    env = dict(os.environ, LD_PRELOAD=str(lib), IEZ_MODE="off", IEZ_ACCESS=mode, IEZ_ACCESS_APPID=appid,
               IEZ_LOG="stderr", **extra)
    if c is not None:
        env["IEZ_ACCESS_LINE"] = c.line_addr
    return env


def lines(out: str) -> list[tuple[str, int, int, float]]:
    return [(e, int(r), int(v), float(t)) for e, r, v, t in (ln.split("\t") for ln in out.splitlines())]


def finish(p: subprocess.Popen, timeout: float = 60) -> tuple[str, str]:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args}: exit {p.returncode}: {err}"
    return out, err


def test_phase_api_two_jobs_take_turns_under_exclusive(controllers, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    jobs = [subprocess.Popen([JOB, "phase", "3", "150"], env=job_env(c, "phase", f"{i}:ckpt"), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in (1, 2)]
    outs = [finish(p) for p in jobs]
    spans = []
    for out, err in outs:
        ev = lines(out)
        assert [e for e, *_ in ev] == ["begin", "held", "end"] * 3 + ["exit"], out
        assert all(v == 1 for e, _, v, _ in ev if e in ("begin", "end")), f"every phase held a token: {out} {err}"
        spans += [(b[3], e[3]) for b, e in zip(ev[0:-1:3], ev[1:-1:3])]
        assert "without a token" not in err
    # what the jobs saw: no two phases at once
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    # what the controller saw: 3 grants each, never two holders
    h = sorted(holds(read_events(tmp_path / "events.jsonl")))
    assert sorted(x[2] for x in h) == ["1:ckpt"] * 3 + ["2:ckpt"] * 3
    assert all(a[1] <= b[0] for a, b in zip(h, h[1:])), h
    assert {e["app"] for e in read_events(tmp_path / "events.jsonl") if e["ev"] == "unregister"} == {"1:ckpt", "2:ckpt"}


def test_other_modes_leave_the_explicit_api_alone(controllers, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    out, _ = finish(subprocess.Popen([JOB, "phase", "2", "10"], env=job_env(c, "off", "1:ckpt"), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert [v for e, _, v, _ in lines(out) if e == "begin"] == [0, 0]
    evs = read_events(tmp_path / "events.jsonl")
    assert [e for e in evs if e["ev"] in ("register", "grant")] == []


def test_controller_down_the_job_proceeds_within_the_bounded_wait(tmp_path):
    need_built(LIB, JOB)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = job_env(None, "phase", "1:ckpt", IEZ_ACCESS_LINE=f"127.0.0.1:{port}", IEZ_ACCESS_WAIT="1")
    t0 = time.monotonic()
    out, err = finish(subprocess.Popen([JOB, "phase", "3", "10"], env=env, text=True, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE))
    took = time.monotonic() - t0
    assert [v for e, _, v, _ in lines(out) if e == "begin"] == [0, 0, 0]
    # the first phase waits IEZ_ACCESS_WAIT, later ones try once (1 s): bounded, never a hang
    assert 0.9 <= took < 1 + 2 * 1.2 + 1.5, took
    assert err.count("did not answer within") == 1, err
    assert "phase 'ckpt' of 1:ckpt runs without a token" in err


def test_bad_mode_is_one_line_and_the_job_runs(tmp_path):
    need_built(LIB, JOB)
    out, err = finish(subprocess.Popen([JOB, "phase", "1", "1"], env=job_env(None, "sometimes", "1:x"), text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert [v for e, _, v, _ in lines(out) if e == "begin"] == [0]
    assert "IEZ_ACCESS=sometimes is not off, coarse, file, phase or fine" in err


def test_file_mode_holds_from_first_open_to_last_close_on_the_emulated_cluster(controllers, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    emu = tmp_path / "emu"
    (emu / "fs").mkdir(parents=True)
    env = job_env(c, "file", "1:files", IEZ_EMULATED=str(emu))
    out, err = finish(subprocess.Popen([JOB, "files", str(emu / "fs" / "a"), "2", "100"], env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    ev = lines(out)
    h = holds(read_events(tmp_path / "events.jsonl"))
    assert len(h) == 2, (h, err)  # one token per open..close (the file is closed in between)
    for (g, r, app, _), (o, cl) in zip(h, [(ev[i][3], ev[i + 1][3]) for i in (0, 2)]):
        assert app == "1:files" and g <= o + 0.05 and cl <= r + 0.05, (h, ev)
    # a file outside the emulated cluster takes no token
    out, _ = finish(subprocess.Popen([JOB, "files", str(tmp_path / "local"), "1", "1"],
                                     env=job_env(c, "file", "2:files", IEZ_EMULATED=str(emu)), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert len(holds(read_events(tmp_path / "events.jsonl"))) == 2


def test_coarse_posix_process_holds_from_first_open_to_exit(controllers, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    emu = tmp_path / "emu"
    (emu / "fs").mkdir(parents=True)
    out, err = finish(subprocess.Popen([JOB, "files", str(emu / "fs" / "a"), "2", "50"],
                                       env=job_env(c, "coarse", "1:job", IEZ_EMULATED=str(emu)), text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    ev = lines(out)
    (g, r, app, _), = holds(read_events(tmp_path / "events.jsonl"))
    assert app == "1:job" and g <= ev[0][3] + 0.05 and r >= ev[-2][3] - 0.05, (g, r, ev, err)


def test_a_job_holding_through_a_controller_restart_keeps_its_token_and_the_queue(controllers, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    holder = subprocess.Popen([JOB, "phase", "1", "2500"], env=job_env(c, "phase", "1:ckpt"), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: [h["app"] for h in fetch_status(c.zmq, 5)["holders"]] == ["1:ckpt"], what="the holder")
    waiter = subprocess.Popen([JOB, "phase", "1", "10"], env=job_env(c, "phase", "2:ckpt"), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: [w["app"] for w in fetch_status(c.zmq, 5)["waiting"]] == ["2:ckpt"], what="the waiter")
    token = fetch_status(c.zmq, 5)["holders"][0]["token"]
    c.proc.kill()  # kill -9 mid-hold, mid-queue: the jobs' heartbeat thread and long poll lose their connection
    c.proc.wait()
    time.sleep(0.6)  # longer than a lease: the restart, not the clock, decides
    c2 = controllers("--policy", "exclusive", *HEARTBEAT, zmq_bind=c.zmq, line_bind=c.line, events="events2.jsonl")
    (out1, err1), (out2, err2) = finish(holder), finish(waiter)
    assert [v for e, _, v, _ in lines(out1) if e == "begin"] == [1], err1
    assert [v for e, _, v, _ in lines(out2) if e == "begin"] == [1], err2
    assert "lost" not in err1 and "revoked" not in err1 and "without a token" not in err1 + err2, (err1, err2)
    ev = read_events(tmp_path / "events2.jsonl")
    # the holder released the token it had before the restart; the waiter was granted after it
    assert [(e["ev"], e["app"]) for e in ev if e["ev"] in ("grant", "release", "expire")] == [
        ("release", "1:ckpt"), ("grant", "2:ckpt"), ("release", "2:ckpt")], ev
    assert next(e for e in ev if e["ev"] == "release")["token"] == token
    assert c2.proc.poll() is None


def test_a_revoked_token_is_logged_and_the_job_runs_on(controllers, tmp_path):
    need_built(LIB, JOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT, "--max-hold", "0.5s")
    out, err = finish(subprocess.Popen([JOB, "phase", "2", "1200"], env=job_env(c, "phase", "1:long"), text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert [v for e, _, v, _ in lines(out) if e == "begin"] == [1, 1]  # the next phase gets a new token
    assert err.count("of 1:long lost") == 2, err  # the heartbeat thread learns it at once, each time
    evs = read_events(tmp_path / "events.jsonl")
    assert [e["ev"] for e in evs if e["ev"] in ("grant", "max_hold", "release")] == ["grant", "max_hold"] * 2, evs


def mpiexec() -> str:
    return need_tool("mpiexec", "apt-get install mpich")


def test_coarse_under_mpiexec_one_grant_per_job(controllers, tmp_path):
    need_built(MPILIB, MPIJOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    jobs = []
    for i in (1, 2):
        env = job_env(c, "coarse", f"{i}:mpi", lib=MPILIB)
        jobs.append(subprocess.Popen([mpiexec(), "-n", "2", MPIJOB, "run", "300"], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [lines(finish(p, 120)[0]) for p in jobs]
    h = sorted(holds(read_events(tmp_path / "events.jsonl")))
    assert sorted(x[2] for x in h) == ["1:mpi", "2:mpi"], h  # one grant per job, not per rank
    assert h[0][1] <= h[1][0], h
    regs = [e["app"] for e in read_events(tmp_path / "events.jsonl") if e["ev"] == "register"]
    assert sorted(regs) == ["1:mpi", "2:mpi"], regs  # only rank 0 talks to the controller
    # every rank of each job ran its whole run (init..finalize) inside its job's hold
    for ev, (g, r, app) in zip(outs, [next(x[:3] for x in h if x[2] == f"{i}:mpi") for i in (1, 2)]):
        for rank in (0, 1):
            t_init = next(t for e, rk, _, t in ev if e == "init" and rk == rank)
            t_fin = next(t for e, rk, _, t in ev if e == "finalize" and rk == rank)
            assert g <= t_init + 0.05 and t_fin <= r + 0.05, (app, rank, g, t_init, t_fin, r)


def test_fine_under_mpiexec_one_grant_per_write_at_call(controllers, tmp_path):
    need_built(MPILIB, MPIJOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    out, err = finish(subprocess.Popen([mpiexec(), "-n", "2", MPIJOB, "fine", str(tmp_path / "f"), "4"],
                                       env=job_env(c, "fine", "1:fine", lib=MPILIB), text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE), 120)
    h = holds(read_events(tmp_path / "events.jsonl"))
    assert [x[2] for x in h] == ["1:fine"] * 4, (h, err)  # 4 calls on each of 2 ranks: 4 job-wide grants
    assert (tmp_path / "f").stat().st_size == (3 * 64 + 1 + 1) * 4096


def test_file_mode_under_mpiexec_holds_from_each_world_open_to_its_close(controllers, tmp_path):
    need_built(MPILIB, MPIJOB)
    c = controllers("--policy", "exclusive", *HEARTBEAT)
    jobs = [subprocess.Popen([mpiexec(), "-n", "2", MPIJOB, "mpifiles", str(tmp_path / f"j{i}"), "2", "300", "300"],
                             env=job_env(c, "file", f"{i}:files", lib=MPILIB), text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for i in (1, 2)]
    outs = [finish(p, 120) for p in jobs]
    evs = read_events(tmp_path / "events.jsonl")
    h = sorted(holds(evs))
    # one grant per file opened on MPI_COMM_WORLD, not per rank; none for the MPI_COMM_SELF files
    assert sorted(x[2] for x in h) == ["1:files"] * 2 + ["2:files"] * 2, h
    assert all(a[1] <= b[0] for a, b in zip(h, h[1:])), h  # exclusive: never two holders
    assert sorted(e["app"] for e in evs if e["ev"] == "register") == ["1:files", "2:files"]  # rank 0 only
    for i, (out, err) in zip((1, 2), outs):
        mine = [x for x in h if x[2] == f"{i}:files"]
        ev = lines(out)
        for rank in (0, 1):
            opens = [t for e, rk, _, t in ev if e == "open" and rk == rank]
            closes = [t for e, rk, _, t in ev if e == "close" and rk == rank]
            assert len(opens) == len(closes) == 2, out
            # each rank's open..close of file k lies inside the job's k-th hold: the compute between is not held
            for (g, r, *_), o, cl in zip(mine, opens, closes):
                assert g <= o + 0.05 and cl <= r + 0.05, (i, rank, g, o, cl, r)
        assert "is not coordinated: no token for it" in err, err
        for k in (0, 1):
            assert (tmp_path / f"j{i}.{k}").stat().st_size == 2 * 4096
