"""libiez's I/O event log (IEZ_IOLOG, docs/liopprof.md): real programs under libiez on an emulated
cluster log every read and write of its files, in exactly the format LIOPProf reads
(iez.profile.ioevents), and `iez profile` then shows who served whom: independent shared-file
writes of 4 MPI ranks reach every OST from all 4 clients, several at once, while ROMIO's
collective buffering (one aggregator on one node) and a file per process on its own OST show one
client per OST."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, need_built, need_tool
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.profile import analysis
from iez.profile.ioevents import read_event_dir
from iez.profile.report import load_profile

LIB, MPILIB = BUILD / "libiez" / "libiez.so", BUILD / "libiez" / "libiez-mpi.so"
MPIIO = BUILD / "libiez" / "iez-test-mpiio"


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    need_built(LIB, MPILIB, MPIIO)
    with running_cluster(tmp_path_factory.mktemp("iolog") / "emu", make_cluster(), seed=11) as cd:
        yield cd


def env(emu, tmp: Path, lib: Path = LIB, **extra: str | None) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
    e.update(LD_PRELOAD=str(lib), IEZ_EMULATED=str(emu.root), IEZ_TRACE_DIR=str(tmp / "traces"),
             IEZ_IOLOG=str(tmp / "iolog"), IEZ_LOG=str(tmp / "libiez.log"), IEZ_RUN="job7")
    e.update(extra)
    return {k: v for k, v in e.items() if v is not None}


def run(argv: list, environ: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120, env=environ)
    if ok:
        assert r.returncode == 0, f"{argv}: {r.stdout}\n{r.stderr}"
    return r


POSIX_SCRIPT = """
import os, sys
d, outside = sys.argv[1], sys.argv[2]
fd = os.open(d + "/a", os.O_RDWR | os.O_CREAT, 0o644)
for _ in range(3):
    os.write(fd, b"w" * 4096)                 # at the position: 0, 4096, 8192
os.pwrite(fd, b"p" * 100, 1 << 20)
os.lseek(fd, 0, os.SEEK_SET)
os.read(fd, 5000)                             # at 0
os.read(fd, 10)                               # at 5000
os.pread(fd, 7, 4096)
os.close(fd)
ap = os.open(d + "/b", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(ap, b"x" * 300)
os.write(ap, b"y" * 200)                      # appended: at 300
os.close(ap)
with open(outside, "wb") as f:                # not on the emulated cluster: not logged
    f.write(b"z" * 1000)
print(os.getpid())
"""


def test_every_read_and_write_of_a_posix_program(emu, tmp_path):
    d = emu.fs / "posix"
    d.mkdir()
    r = run([sys.executable, "-c", POSIX_SCRIPT, d, tmp_path / "outside"],
            env(emu, tmp_path, IEZ_NID="10.1.0.%r@tcp", PMI_RANK="5"))
    pid = int(r.stdout)
    files = sorted((tmp_path / "iolog").iterdir())
    assert [f.name.split(".")[-1] for f in files] == ["ioev"] and f".{pid}.{pid}.0.ioev" in files[0].name
    text = files[0].read_text()
    assert text.startswith("# iez-ioev 1\n") and "\0" not in text  # cut after the last line at exit
    events, skipped = read_event_dir(tmp_path / "iolog")
    assert not skipped
    a, b = str(d / "a"), str(d / "b")
    assert [(e.op, e.offset, e.length, e.path) for e in events] == [
        ("write", 0, 4096, a), ("write", 4096, 4096, a), ("write", 8192, 4096, a), ("write", 1 << 20, 100, a),
        ("read", 0, 5000, a), ("read", 5000, 10, a), ("read", 4096, 7, a),
        ("write", 0, 300, b), ("write", 300, 200, b)]
    assert {(e.nid, e.pid, e.jobid) for e in events} == {("10.1.0.5@tcp", pid, "job7")}
    times = [e.time for e in events]
    assert times == sorted(times) and 0 < times[-1] - times[0] < 60


THREADS_SCRIPT = """
import os, sys, threading
def work(i):
    fd = os.open(f"{sys.argv[1]}/t{i}", os.O_WRONLY | os.O_CREAT, 0o644)
    for k in range(50):
        os.pwrite(fd, b"t" * 1000, k * 1000)
    os.close(fd)
ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
for t in ts: t.start()
for t in ts: t.join()
"""


def test_each_thread_logs_to_its_own_file(emu, tmp_path):
    d = emu.fs / "threads"
    d.mkdir()
    run([sys.executable, "-c", THREADS_SCRIPT, d], env(emu, tmp_path))
    assert len(list((tmp_path / "iolog").glob("*.ioev"))) == 3
    events, skipped = read_event_dir(tmp_path / "iolog")
    assert not skipped
    for i in range(3):
        mine = [e for e in events if e.path == str(d / f"t{i}")]
        assert sorted(e.offset for e in mine) == [k * 1000 for k in range(50)]


def test_a_killed_process_keeps_its_events(emu, tmp_path):
    d = emu.fs / "killed"
    d.mkdir()
    script = ("import os, signal, sys\n"
              "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "for k in range(20): os.write(fd, b'k' * 512)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = run([sys.executable, "-c", script, d / "k"], env(emu, tmp_path), ok=False)
    assert r.returncode == -signal.SIGKILL
    (f,) = (tmp_path / "iolog").glob("*.ioev")
    assert f.read_bytes().endswith(b"\0")  # the rest of its mapped chunk
    events, skipped = read_event_dir(tmp_path / "iolog")
    assert not skipped and [e.offset for e in events] == [512 * k for k in range(20)]


def test_no_log_without_tracing(emu, tmp_path):
    d = emu.fs / "notrace"
    d.mkdir()
    run(["dd", "if=/dev/zero", f"of={d / 'x'}", "bs=4k", "count=2"], env(emu, tmp_path, IEZ_TRACE_DIR=None))
    assert not (tmp_path / "iolog").exists()
    assert "IEZ_IOLOG needs tracing" in (tmp_path / "libiez.log").read_text()


# -- iez profile on a real MPI program ------------------------------------------------------------

STRIPE = 64 << 10


def profile_writes(emu, tmp: Path, iez: list[str], name: str, extra: list[str], plan: dict[str, str],
                   **environ: str):
    """Profile `mpiexec -n 4 iez-test-mpiio ... fs/<name>` under libiez-mpi with the event log on,
    with `iez profile start/stop` (real processes). Returns, per OST, its concurrency (clients
    at once, to the resolution of the 50 ms exports samples) and the clients whose written
    bytes its exports stats count (exact)."""
    mpiexec = need_tool("mpiexec", "apt-get install mpich")
    d = emu.fs / name
    d.mkdir()
    (tmp / "plan").write_text("#iez-plan 1\n#app=t\n" + "".join(f"{d / n}\t{s}\n" for n, s in plan.items()))
    out = tmp / "prof"
    e = env(emu, tmp, MPILIB, IEZ_IOLOG=str(emu.root / "iolog"), IEZ_NID="192.168.7.%r@tcp", IEZ_PLAN=str(tmp / "plan"),
            **environ)
    run(iez + ["profile", "start", "--cluster", emu.root, "--out", out, "--interval", "0.05"], e)
    run([mpiexec, "-n", "4", MPIIO, "--bytes", 4 * STRIPE, "--xfer", STRIPE, *extra, d / "f"], e)
    run(iez + ["profile", "stop", "--cluster", emu.root, "--out", out], e)
    prof = load_profile(out)
    view = analysis.join(prof.bins, prof.rpcs, prof.exports)
    assert not view.unattributed
    clients: dict[int, set[str]] = {}
    for intervals in prof.exports.values():
        for iv in intervals:
            for (ost, client), c in iv.delta.items():
                if c[3] > 0:  # write bytes
                    clients.setdefault(ost, set()).add(client)
    return {o: analysis.concurrency(view, o) for o in view.osts()}, clients


NIDS = {f"192.168.7.{r}@tcp" for r in range(4)}


def test_profile_independent_shared_file_writes_reach_every_ost_from_every_rank(emu, tmp_path, iez_cmd):
    # each rank writes its 4 stripes of one 4-stripe file, one stripe a call, all at once
    conc, clients = profile_writes(emu, tmp_path, iez_cmd, "ssf", ["--calls", "at"], {"f": f"c=4,S={STRIPE}"})
    assert len(conc) == 4 and clients == {o: NIDS for o in conc}
    assert all(c.max_clients >= 2 and c.shared_fraction > 0 for c in conc.values())


def test_profile_collective_buffering_and_file_per_process_show_one_client_per_ost(emu, tmp_path, iez_cmd):
    # ROMIO's two-phase write (forced: for non-interleaved blocks ROMIO would write independently):
    # one aggregator on one node writes for everyone
    (tmp_path / "hints").write_text("romio_cb_write enable\n")
    conc, clients = profile_writes(emu, tmp_path, iez_cmd, "coll", ["--calls", "at_all"], {"f": f"c=4,S={STRIPE}"},
                                   ROMIO_HINTS=str(tmp_path / "hints"))
    assert len(conc) == 4 and clients == {o: {"192.168.7.0@tcp"} for o in conc}
    assert all(c.max_clients == 1 and c.seek_risk == 0.0 for c in conc.values())
    # a file per process, each on its own OST (placed from the plan)
    (tmp_path / "fpp").mkdir()
    conc, clients = profile_writes(emu, tmp_path / "fpp", iez_cmd, "fpp", ["--fpp", "--calls", "at"],
                                   {f"f.{r:08d}": f"c=1,S={STRIPE},o={3 * r}" for r in range(4)})
    assert clients == {3 * r: {f"192.168.7.{r}@tcp"} for r in range(4)}
    assert all(c.max_clients == 1 for c in conc.values())
