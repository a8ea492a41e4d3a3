"""libiez end to end: real, unmodified programs under LD_PRELOAD=libiez.so on an emulated cluster
started with the real CLI. Files in the plan must get exactly the planned layout, files outside it
the emulated MDS's own (RR/QoS) layout, and the traces must list every file with its true byte
count. Then every failure mode libiez meets (no plan, a bad plan, the MDS down, ...): libiez must
never break the application."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import BUILD, need_tool
from iez.layout import lum
from iez.layout.layout import FileLayout
from iez.plan import format_layout, parse_layout
from iez.trace.shard import read_trace

LIB = BUILD / "libiez" / "libiez.so"
MiB = 1 << 20
FULL_OST, INACTIVE_OST = 13, 14

CLUSTER_TOML = f"""
fsname = "emu"
[mds]
name = "mds0"
[defaults]
stripe_count = 1
stripe_size = "1M"
[[oss]]
name = "oss0"
osts = [0, 1, 2, 3, 4]
[[oss]]
name = "oss1"
osts = [5, 6, 7, 8, 9]
[[oss]]
name = "oss2"
osts = [10, 11, 12, 13, 14]
[ost_defaults]
size = "1GiB"
[[ost]]
index = {FULL_OST}
size = "1GiB"
used = "1GiB"
[[ost]]
index = {INACTIVE_OST}
state = "inactive"
"""


def iez_exe() -> str:
    exe = Path(sys.executable).with_name("iez")
    if not exe.exists():
        pytest.fail("the iez console script is missing: run `make test` (it installs the package)")
    return str(exe)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def start_cluster(d: Path) -> Path:
    toml = d.parent / f"{d.name}.toml"
    toml.write_text(CLUSTER_TOML)
    r = run([iez_exe(), "emulate", "init", str(d), "--cluster", str(toml)])
    assert r.returncode == 0, r.stderr
    r = run([iez_exe(), "emulate", "up", str(d), "--seed", "7"])
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not LIB.exists():
        pytest.fail(f"{LIB} is missing: build libiez (cmake -S . -B build && cmake --build build)")
    d = start_cluster(tmp_path_factory.mktemp("emu") / "c")
    yield d
    run([iez_exe(), "emulate", "down", str(d)])


class Job:
    """One test's corner of the cluster: a directory under fs/, a plan, a trace directory."""

    def __init__(self, cluster: Path, tmp: Path, name: str):
        self.cluster = cluster
        self.dir = cluster / "fs" / name
        self.dir.mkdir()
        self.tmp = tmp
        self.traces = tmp / "traces"
        self.plan_file = tmp / "plan"
        self.log = tmp / "libiez.log"

    def path(self, name: str) -> Path:
        return self.dir / name

    def plan(self, entries: dict[str, str], text: str | None = None) -> None:
        self.plan_file.write_text(text if text is not None else
                                  "#iez-plan 1\n#app=test\n" + "".join(f"{self.path(n)}\t{spec}\n" for n, spec in entries.items()))

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
        env.update(LD_PRELOAD=str(LIB), IEZ_EMULATED=str(self.cluster), IEZ_TRACE_DIR=str(self.traces),
                   IEZ_LOG=str(self.log), IEZ_APP="test", IEZ_RUN="1")
        if self.plan_file.exists():
            env["IEZ_PLAN"] = str(self.plan_file)
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def run(self, cmd: list[str], ok: bool = True, **extra: str) -> subprocess.CompletedProcess:
        r = run(cmd, env=self.env(**extra), cwd=self.dir)
        if ok:
            assert r.returncode == 0, f"{cmd} failed ({r.returncode}): {r.stderr}"
        return r

    def layout(self, name: str) -> FileLayout:
        return lum.decode(os.getxattr(self.path(name), "user.lustre.lov"))

    def trace(self):
        return read_trace(self.traces)

    def written(self) -> dict[str, int]:
        """Bytes each file got, summed over the processes and layers that wrote it."""
        out: dict[str, int] = {}
        for r in self.trace().records:
            out[r.path] = out.get(r.path, 0) + r.bytes_written
        return out

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def job(cluster, tmp_path, request):
    return Job(cluster, tmp_path, request.node.name.replace("[", "_").replace("]", ""))


def assert_planned(job: Job, name: str, spec: str) -> None:
    """The file has exactly the planned layout: what was asked, the OSTs the MDS chose where
    the plan left them open."""
    got, want = job.layout(name), parse_layout(spec)
    assert len(got.parts()) == len(want.parts()), format_layout(got)
    for g, w in zip(got.parts(), want.parts()):
        assert (g.start, g.end) == (w.start, w.end)
        assert g.layout.stripe_size == (w.layout.stripe_size or MiB)  # 0: the cluster's default
        if w.layout.osts:
            assert g.layout.osts == w.layout.osts
        if w.layout.stripe_count > 0:
            assert g.layout.stripe_count == w.layout.stripe_count == len(g.layout.osts)


def assert_default(job: Job, name: str) -> int:
    """The file has the emulated MDS's default layout (1 stripe of 1 MiB) on a usable OST."""
    got = job.layout(name)
    assert got.plain is not None and got.plain.stripe_count == 1 and got.plain.stripe_size == MiB, format_layout(got)
    (ost,) = got.plain.osts
    assert ost not in (FULL_OST, INACTIVE_OST)
    return ost


def sizes(job: Job, *names: str) -> dict[str, int]:
    return {str(job.path(n)): job.path(n).stat().st_size for n in names}


# -- real programs ------------------------------------------------------------------------------

def test_dd_planned_pfl_and_unplanned(job):
    job.plan({"a": "S=4194304,c=4,o=3:7:1:12", "b": "0-4194304/S=1048576,c=1;4194304-EOF/S=1048576,c=2,o=9:2"})
    for name, count in (("a", 9), ("b", 6), ("c", 3)):
        job.run(["dd", "if=/dev/zero", f"of={job.path(name)}", "bs=1M", f"count={count}", "status=none"])
    assert_planned(job, "a", "S=4194304,c=4,o=3:7:1:12")
    assert_planned(job, "b", "0-4194304/S=1048576,c=1;4194304-EOF/S=1048576,c=2,o=9:2")
    assert_default(job, "c")
    recs = {r.path: r for r in job.trace().records if r.path.startswith(str(job.dir))}
    for name, count in (("a", 9), ("b", 6), ("c", 3)):
        r = recs[str(job.path(name))]
        assert (r.bytes_written, r.max_offset, r.created, r.api) == (count * MiB, count * MiB, True, "posix")
        assert r.plan_hit is (name != "c")
        # the trace's plan-grammar layout carries no component ids (the stored one numbers them 1..n)
        stored = job.layout(name)
        assert [c.id for c in stored.components] == list(range(1, len(stored.components) + 1))
        assert parse_layout(r.layout) == replace(stored, components=tuple(replace(c, id=0) for c in stored.components))
        assert r.open_time <= r.close_time and r.close_time > 0
        assert (r.app, r.run, r.rank) == ("test", "1", 0)
    assert recs[str(job.path("a"))].osts == (3, 7, 1, 12) and recs[str(job.path("a"))].stripe_count == 4
    (run,) = job.trace().runs()
    assert (run.plan_hits, run.plan_misses, run.needs_retrace) == (2, 1, False)


def test_unplanned_files_spread_by_the_mds(job):
    """Without a plan every create still goes to the MDS, whose RR/QoS allocator spreads the
    files over the usable OSTs."""
    for i in range(12):
        job.run(["dd", "if=/dev/zero", f"of={job.path(f'u{i}')}", "bs=4k", "count=1", "status=none"])
    osts = {assert_default(job, f"u{i}") for i in range(12)}
    assert len(osts) >= 4, osts
    assert all(r.plan_hit is None for r in job.trace().records)


def test_cp_tar_python_fio_and_shell_redirects(job, tmp_path):
    need_tool("fio", "apt-get install fio")
    need_tool("bash", "apt-get install bash")
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 * MiB + 123))
    members = tmp_path / "members"
    members.mkdir()
    for n, size in (("m1", 100000), ("m2", 70000), ("m3", 1)):
        (members / n).write_bytes(os.urandom(size))
    with tarfile.open(tmp_path / "a.tar", "w") as t:
        for n in ("m1", "m2", "m3"):
            t.add(members / n, arcname=n)
    planned = {"cp.out": "S=1048576,c=3,o=0:5:10", "m1": "S=65536,c=2", "py.out": "S=2097152,c=2,o=4:8",
               "fio.out": "S=1048576,c=4", "sh.out": "c=2,o=6:11", "bash.out": "S=131072,c=1,o=12",
               "copy.out": "c=1,o=2"}
    job.plan(planned)
    job.run(["cp", str(src), str(job.path("cp.out"))])
    job.run(["tar", "xf", str(tmp_path / "a.tar"), "-C", str(job.dir)])
    job.run([sys.executable, "-B", "-c",
             "import shutil, sys\n"
             "with open('py.out', 'wb') as f:\n"
             "    f.write(b'x' * 5000000)\n"
             "    f.write(b'y' * 17)\n"
             "shutil.copyfile(sys.argv[1], 'copy.out')\n", str(src)])
    job.run(["fio", "--name=w", f"--filename={job.path('fio.out')}", "--rw=write", "--bs=256k", "--size=4m",
             "--ioengine=psync", "--output=/dev/null"])
    job.run(["sh", "-c", f"echo hello > {job.path('sh.out')}; cat {src} >> {job.path('sh.out')}; "
                         f"printf abc > {job.path('unplanned.out')}"])
    job.run(["bash", "-c", f"echo hello from bash > {job.path('bash.out')}; printf '%s' 12345 >> {job.path('bash.out')}"])

    for name, spec in planned.items():
        assert_planned(job, name, spec)
    for name in ("m2", "m3", "unplanned.out"):
        assert_default(job, name)
    assert job.path("cp.out").read_bytes() == src.read_bytes()
    assert job.path("m1").read_bytes() == (members / "m1").read_bytes()
    names = [*planned, "m2", "m3", "unplanned.out"]
    written = job.written()
    assert {p: written.get(p) for p in sizes(job, *names)} == sizes(job, *names)
    created = {r.path for r in job.trace().records if r.created}
    assert {str(job.path(n)) for n in names} <= created
    runs = job.trace().runs()
    assert sum(r.plan_hits for r in runs) == len(planned) and sum(r.plan_misses for r in runs) == 3


def test_threads_fork_and_race(job):
    spec = "S=1048576,c=2,o=1:6"
    job.plan({**{f"t{i}": spec for i in range(8)}, "race": "c=3,o=0:5:10", "shared": "c=1,o=3", "child": "c=1,o=8",
              "stream": "S=65536,c=2,o=2:7"})
    r = job.run([str(BUILD / "libiez" / "iez-test-forkthreads"), str(job.dir), "8", "300000"])
    assert r.stdout.strip() == "race winners 1"
    for i in range(8):
        assert_planned(job, f"t{i}", spec)
    assert_planned(job, "race", "c=3,o=0:5:10")
    assert_planned(job, "child", "c=1,o=8")
    assert_planned(job, "stream", "S=65536,c=2,o=2:7")
    names = [f"t{i}" for i in range(8)] + ["race", "shared", "child", "stream"]
    assert job.written() == sizes(job, *names)
    trace = job.trace()
    pids = {r.pid for r in trace.records}
    assert len(pids) == 2  # the parent, and the forked child, in its own shard
    (child,) = [s for s in trace.shards if any(r.path.endswith("/child") for r in s.records)]
    assert child.clean_exit  # _exit() finished its trace
    shared = sorted((r for r in trace.records if r.path.endswith("/shared")), key=lambda r: r.bytes_written)
    assert [(r.bytes_written, r.created) for r in shared] == [(2000, False), (5000, True)]
    assert max(r.max_offset for r in shared) == 7000
    stream = [r for r in trace.records if r.path.endswith("/stream")]
    assert [(r.api, r.bytes_written) for r in stream] == [("stdio", 5006)]


def test_program_that_closes_every_descriptor(job):
    job.run([str(BUILD / "libiez" / "iez-test-closeall"), str(job.dir)])
    assert job.written() == sizes(job, "a", "b", "c", "d")
    for n in "abcd":
        assert_default(job, n)


def test_vfork_and_posix_spawn(job):
    job.run([str(BUILD / "libiez" / "iez-test-spawn"), str(job.dir)])
    parent = [r for r in job.trace().records if r.path == str(job.path("parent")) and r.created]
    assert [(r.bytes_written, r.max_offset) for r in parent] == [(600, 600)]
    assert job.written()[str(job.path("spawned"))] == 5
    assert_default(job, "parent")
    assert_default(job, "spawned")


# -- failure modes: the application always runs as without libiez -------------------------------

def test_missing_plan(job):
    job.run([sys.executable, "-B", "-c", "for i in range(5): open(f'f{i}', 'w').write('x')"],
            IEZ_PLAN=str(job.tmp / "nonexistent.plan"))
    for i in range(5):
        assert_default(job, f"f{i}")
    rejected = [line for line in job.log_lines() if "plan rejected" in line]
    assert len(rejected) == 1 and "nonexistent.plan" in rejected[0] and "No such file" in rejected[0]
    (shard,) = job.trace().shards
    assert shard.plan == "rejected" and job.trace().runs()[0].needs_retrace


def test_corrupt_plan(job):
    job.plan({}, text=f"#iez-plan 1\n{job.path('a')}\tS=1048576,c=2\n{job.path('b')}\tS=12345\n")
    job.run(["dd", "if=/dev/zero", f"of={job.path('a')}", "bs=1k", "count=1", "status=none"])
    assert_default(job, "a")  # the whole plan is rejected, not just its bad line
    (line,) = [x for x in job.log_lines() if "plan rejected" in x]
    assert f"{job.plan_file}:3:" in line and "64 KiB" in line


def test_plan_errors_on_lustre_side(job):
    """An OST out of range, a full OST, an inactive OST: the MDS refuses the planned layout and
    the file gets the default one, as Lustre does when LL_IOC_LOV_SETSTRIPE fails."""
    job.plan({"range": "c=2,o=1:99", "full": f"c=1,o={FULL_OST}", "inactive": f"c=2,o=0:{INACTIVE_OST}",
              "ok": "c=1,o=4"})
    for n in ("range", "full", "inactive", "ok"):
        job.run(["dd", "if=/dev/zero", f"of={job.path(n)}", "bs=1k", "count=2", "status=none"])
    for n in ("range", "full", "inactive"):
        assert_default(job, n)
    assert_planned(job, "ok", "c=1,o=4")
    assert job.written() == sizes(job, "range", "full", "inactive", "ok")
    refused = [x for x in job.log_lines() if "refused" in x]
    assert len(refused) == 3 and all("default layout" in x for x in refused)  # once per process


def test_mds_down(tmp_path):
    """A cluster whose MDS is not running: files are created plainly (no layout), at once."""
    d = tmp_path / "down"
    (tmp_path / "down.toml").write_text(CLUSTER_TOML)
    assert run([iez_exe(), "emulate", "init", str(d), "--cluster", str(tmp_path / "down.toml")]).returncode == 0
    job = Job(d, tmp_path, "j")
    job.plan({"a": "c=2"})
    t0 = time.monotonic()
    job.run([sys.executable, "-B", "-c", "for n in 'ab': open(n, 'w').write('data')"])
    assert time.monotonic() - t0 < 10
    for n in "ab":
        assert job.path(n).read_text() == "data"
        with pytest.raises(OSError):
            os.getxattr(job.path(n), "user.lustre.lov")
    assert any("cannot reach the emulated MDS" in x for x in job.log_lines())
    assert job.written() == sizes(job, "a", "b")


def test_mds_that_never_answers(tmp_path):
    """An MDS that accepts and hangs costs the first create the 5 s timeout, and the later ones
    0.5 s each until it answers again."""
    d = tmp_path / "hung"
    (tmp_path / "hung.toml").write_text(CLUSTER_TOML)
    assert run([iez_exe(), "emulate", "init", str(d), "--cluster", str(tmp_path / "hung.toml")]).returncode == 0
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(d / "run" / "mds.sock"))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        job = Job(d, tmp_path, "j")
        t0 = time.monotonic()
        job.run([sys.executable, "-B", "-c", "for n in 'abc': open(n, 'w').write('data')"])
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        t.join()
        srv.close()
    assert len(held) == 3 and 5 + 2 * 0.5 - 0.1 < elapsed < 9, elapsed
    assert all(job.path(n).read_text() == "data" for n in "abc")
    assert sum("no answer from the emulated MDS within 5000 ms" in x for x in job.log_lines()) == 1


def test_existing_files_are_never_relaid_out(job):
    job.plan({"keep": "c=4,o=1:2:3:4", "trunc": "c=4,o=1:2:3:4"})
    for n in ("keep", "trunc"):
        job.run(["sh", "-c", f"printf old-content > {job.path(n)}"], IEZ_PLAN=None, IEZ_TRACE_DIR=str(job.tmp / "setup"))
    before = {n: os.getxattr(job.path(n), "user.lustre.lov") for n in ("keep", "trunc")}
    job.run([sys.executable, "-B", "-c", "open('keep', 'a').write('+more')"])
    job.run(["sh", "-c", f"printf new > {job.path('trunc')}"])
    assert job.path("keep").read_text() == "old-content+more"
    assert job.path("trunc").read_text() == "new"
    assert {n: os.getxattr(job.path(n), "user.lustre.lov") for n in before} == before
    recs = [r for r in job.trace().records if r.path.startswith(str(job.dir))]
    assert recs and not any(r.created for r in recs) and all(r.plan_hit is None for r in recs)
    assert job.trace().runs()[0].plan_hits == 0


def test_o_excl_from_several_processes(job):
    """Ranks racing to create one planned file with O_EXCL: one wins and gets the planned
    layout, the others get EEXIST exactly as without libiez."""
    job.plan({"one": "c=2,o=3:9"})
    script = ("import os, sys, time\n"
              "while time.time() < float(sys.argv[1]): pass\n"
              "try:\n"
              "    fd = os.open('one', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
              "    os.write(fd, b'winner'); print('won')\n"
              "except FileExistsError:\n"
              "    print('EEXIST')\n")
    start = str(time.time() + 1.0)
    procs = [subprocess.Popen([sys.executable, "-B", "-c", script, start], env=job.env(), cwd=job.dir,
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert outs == ["EEXIST", "EEXIST", "EEXIST", "won"]
    assert_planned(job, "one", "c=2,o=3:9")
    assert job.path("one").read_text() == "winner"
    assert [r.created for r in job.trace().records if r.path == str(job.path("one"))] == [True]


def test_mode_and_umask_of_placed_files_for_a_normal_user(tmp_path):
    """Placement creates the file owner-writable and then gives it the mode the application
    asked for: a read-only create still returns a writable descriptor, as open(2) does."""
    need_tool("setpriv", "apt-get install util-linux")
    base = Path(tempfile.mkdtemp(prefix="iez-user-"))  # pytest's own tmp is root-only
    try:
        os.chmod(base, 0o755)
        d = start_cluster(base / "c")
        try:
            # the MDS (root's) leaves its socket 0755: a shared cluster must let users connect
            os.chmod(d / "run" / "mds.sock", 0o666)
            job = Job(d, base, "j")
            job.traces.mkdir()
            os.chmod(job.dir, 0o777)
            os.chmod(job.traces, 0o1777)  # shared like /tmp: libiez refuses it without the sticky bit
            job.plan({"ro": "c=2,o=0:5", "private": "c=1,o=7"})
            script = ("import os\n"
                      "os.umask(0o022)\n"
                      "fd = os.open('ro', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444); os.write(fd, b'ro'); os.close(fd)\n"
                      "fd = os.open('private', os.O_RDWR | os.O_CREAT, 0o666); os.write(fd, b'pv'); os.close(fd)\n")
            r = run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-B", "-c",
                     script], env=job.env(IEZ_LOG="stderr"), cwd=job.dir)
            assert r.returncode == 0 and [x for x in r.stderr.splitlines() if "files traced" not in x] == [], r.stderr
            assert oct(job.path("ro").stat().st_mode & 0o7777) == oct(0o444)
            assert oct(job.path("private").stat().st_mode & 0o7777) == oct(0o644)
            assert_planned(job, "ro", "c=2,o=0:5")
            assert_planned(job, "private", "c=1,o=7")
            assert job.path("ro").read_bytes() == b"ro"
            assert job.written() == sizes(job, "ro", "private")
        finally:
            run([iez_exe(), "emulate", "down", str(d)])
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_modes(job):
    job.plan({"off": "c=2", "place": "c=2", "trace": "c=2", "bogus": "c=2"})
    for mode in ("off", "place", "trace", "bogus"):
        job.run(["dd", "if=/dev/zero", f"of={job.path(mode)}", "bs=1k", "count=1", "status=none"], IEZ_MODE=mode,
                IEZ_TRACE_DIR=str(job.tmp / f"traces-{mode}"))
    assert_planned(job, "place", "c=2")
    # trace-only: no plan, but the emulated MDS still lays the file out, as Lustre's would
    assert_default(job, "trace")
    for n in ("off", "bogus"):
        with pytest.raises(OSError):
            os.getxattr(job.path(n), "user.lustre.lov")
    traced = {m: [r.path for r in read_trace(job.tmp / f"traces-{m}").records if r.path.startswith(str(job.dir))]
              if (job.tmp / f"traces-{m}").exists() else [] for m in ("off", "place", "trace", "bogus")}
    assert traced == {"off": [], "place": [], "trace": [str(job.path("trace"))], "bogus": []}
    assert any("IEZ_MODE=bogus" in x for x in job.log_lines())


def test_errno_and_results_are_the_real_calls(job):
    script = ("import errno, os\n"
              "for call, want in ((lambda: os.open('no/such/dir/f', os.O_CREAT | os.O_WRONLY), errno.ENOENT),\n"
              "                   (lambda: os.write(987, b'x'), errno.EBADF),\n"
              "                   (lambda: os.open('.', os.O_WRONLY), errno.EISDIR),\n"
              "                   (lambda: os.open('x', os.O_CREAT | os.O_DIRECTORY), errno.EINVAL)):\n"
              "    try:\n"
              "        call(); raise SystemExit('no error')\n"
              "    except OSError as e:\n"
              "        assert e.errno == want, (e, want)\n"
              "assert not os.path.exists('x')\n")
    job.plan({"x": "c=1"})
    job.run([sys.executable, "-B", "-c", script])


def test_no_trace_directory_is_silent(job, tmp_path):
    """Without IEZ_LOG nothing is ever printed, even when the trace directory cannot be made."""
    r = job.run(["dd", "if=/dev/zero", f"of={job.path('a')}", "bs=1k", "count=1", "status=none"],
                IEZ_TRACE_DIR="/proc/no-trace-here", IEZ_LOG=None)
    assert r.stdout == r.stderr == ""
    assert_default(job, "a")


def test_relative_paths_and_dirfds(job):
    """Plan keys are absolute and lexically normalised: a relative name, '..' and openat on a
    directory descriptor all find their entry."""
    (job.dir / "sub").mkdir()
    job.plan({"sub/rel": "c=1,o=5", "sub/dot": "c=1,o=6", "sub/at": "c=1,o=7"})
    job.run([sys.executable, "-B", "-c",
             "import os\n"
             "os.chdir('sub')\n"
             "open('rel', 'w').write('1')\n"
             "open('../sub/./dot', 'w').write('2')\n"
             "d = os.open('.', os.O_RDONLY)\n"
             "os.close(os.open('at', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d))\n"])
    for n, o in (("rel", 5), ("dot", 6), ("at", 7)):
        assert_planned(job, f"sub/{n}", f"c=1,o={o}")
