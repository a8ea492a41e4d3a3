"""libiez in a hostile environment (docs/security.md, "What libiez writes"): it writes no file but
its own, and a bad plan, a shared trace directory or a process short of descriptors never changes
what the application does. Real programs under LD_PRELOAD, a real second user (`nobody`, through
setpriv) as the attacker, and an emulated cluster for placement and the I/O event log."""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import BUILD, fuzz_settings, need_tool
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.errors import IezError
from iez.layout import lum
from iez.trace.shard import JOB_HEADER, JOB_MAGIC, read_trace, parse_shard, read_job, read_shard

LIB = BUILD / "libiez" / "libiez.so"
VFORK = BUILD / "libiez" / "iez-test-vforkcreate"
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def env(traces: Path | None, log: Path, **extra: str | None) -> dict[str, str]:
    if not LIB.exists():
        pytest.fail(f"{LIB} is missing: build libiez (cmake -S . -B build && cmake --build build)")
    e = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
    e.update(LD_PRELOAD=str(LIB), IEZ_LOG=str(log), IEZ_APP="hardening", IEZ_RUN="13")
    if traces is not None:
        e["IEZ_TRACE_DIR"] = str(traces)
    e.update({k: v for k, v in extra.items() if v is not None})
    return e


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("hardening") / "emu", make_cluster(), seed=13) as cd:
        yield cd


@pytest.fixture
def shared():
    """A directory every user can reach (pytest's own tmp is root-only)."""
    base = Path(tempfile.mkdtemp(prefix="iez-hardening-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def victim_file(d: Path, name: str) -> tuple[Path, bytes]:
    """A file of root's, 1 MiB, that the traced job (root) could write and the attacker cannot."""
    p = d / name
    data = os.urandom(1 << 20)
    p.write_bytes(data)
    os.chmod(p, 0o644)
    return p, data


# -- the symlink and hard-link attacks on the shard and the I/O event log ----------------------

# Creates N1 files in OUT, says "ready" and waits for GATE, then creates N2 more: records enough
# for the shard's next chunks, and I/O events, after the attacker's swap.
GATED = """
import os, sys, time
out, n1, n2, gate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def make(i):
    with open(f"{out}/f{i:05d}", "w") as f:
        f.write(str(i))
for i in range(n1):
    make(i)
print("ready", flush=True)
while not os.path.exists(gate):
    time.sleep(0.005)
for i in range(n1, n1 + n2):
    make(i)
"""
N1, N2 = 600, 1500  # about 150 bytes a record: chunk 0 (128 KiB) fills after the swap

# The attacker: each shard and event log in the directories is moved aside and its name made a
# symbolic link (or a hard link) to the victim. Prints how many it swapped.
SWAP = """
import os, sys
kind, victim, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
n = 0
for d in dirs:
    for name in sorted(os.listdir(d)):
        if name.endswith((".shard", ".ioev")):
            p = os.path.join(d, name)
            os.rename(p, p + ".moved")
            (os.symlink if kind == "symlink" else os.link)(victim, p)
            n += 1
print(n)
"""


def gated_job(out: Path, environ: dict[str, str], swap: list[str]) -> int:
    """Run GATED, swap once it is ready, let it finish; the number of files swapped."""
    gate = out.parent / f"{out.name}.gate"
    job = subprocess.Popen([sys.executable, "-B", "-c", GATED, str(out), str(N1), str(N2), str(gate)], env=environ,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert job.stdout.readline() == "ready\n"
        attacker = subprocess.run([*swap], capture_output=True, text=True, timeout=60)
        assert attacker.returncode == 0, attacker.stderr
        gate.touch()
        _, err = job.communicate(timeout=120)
    finally:
        job.kill()
    assert job.returncode == 0, err
    assert sorted(p.name for p in out.iterdir()) == [f"f{i:05d}" for i in range(N1 + N2)]
    assert all(out.joinpath(f"f{i:05d}").read_text() == str(i) for i in (0, N1 - 1, N1, N1 + N2 - 1))
    return int(attacker.stdout)


@pytest.mark.parametrize("open_dir", ["traces", "iolog"])
def test_another_user_cannot_turn_a_shared_directory_against_the_job(emu, shared, open_dir):
    """The probe: a trace (or I/O event log) directory anyone can write (0777, no sticky bit);
    nobody swaps the job's shard and event log for symbolic links to a file of root's before the
    job needs its next chunk and exits. libiez refuses such a directory: the victim is untouched,
    the job's files are all there, and the refusal is one log line."""
    need_tool("setpriv", "apt-get install util-linux")
    dirs = {"traces": shared / "traces", "iolog": shared / "iolog"}
    for name, d in dirs.items():
        d.mkdir()
        os.chmod(d, 0o777 if name == open_dir else 0o700)
    victims = shared / "victims"
    victims.mkdir()
    victim, data = victim_file(victims, "secret")
    out = emu.fs / f"shared-{open_dir}"
    out.mkdir()
    log = shared / "libiez.log"
    gated_job(out, env(dirs["traces"], log, IEZ_EMULATED=str(emu.root), IEZ_IOLOG=str(dirs["iolog"])),
              [*NOBODY, sys.executable, "-B", "-c", SWAP, "symlink", str(victim), str(dirs[open_dir])])
    assert victim.read_bytes() == data
    refused = [x for x in lines(log) if "without the sticky bit" in x]
    what = {"traces": "not tracing: the trace directory", "iolog": "no I/O event log: the I/O event log directory"}
    assert len(refused) == 1 and f"{what[open_dir]} {dirs[open_dir]} is writable by others" in refused[0], lines(log)
    assert not list(dirs[open_dir].iterdir())


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_swapped_shard_or_event_log_is_never_written(emu, tmp_path, kind):
    """Whoever swaps the files in a trusted directory (its owner, or anyone on a system without
    fs.protected_hardlinks): the name now holds a link to another file, which libiez neither
    grows nor cuts, since it re-opens its files only to check by fstat that they are its own.
    Tracing stops (one line); what was traced before stays in the moved file."""
    traces, iolog = tmp_path / "traces", tmp_path / "iolog"
    victim, data = victim_file(tmp_path, "victim")
    out = emu.fs / f"swap-{kind}"
    out.mkdir()
    log = tmp_path / "libiez.log"
    swapped = gated_job(out, env(traces, log, IEZ_EMULATED=str(emu.root), IEZ_IOLOG=str(iolog)),
                        [sys.executable, "-B", "-c", SWAP, kind, str(victim), str(traces), str(iolog)])
    assert swapped == 2
    assert victim.read_bytes() == data
    assert [x for x in lines(log) if "cannot grow" in x and ".shard" in x]
    (moved,) = traces.glob("*.shard.moved")
    names = {Path(r.path).name: r.bytes_written for r in read_shard(moved).records}
    assert all(names[f"f{i:05d}"] == len(str(i)) for i in range(N1))


def test_trace_directory_and_missing_parents_are_made_0700(tmp_path):
    traces = tmp_path / "a" / "b" / "traces"
    log = tmp_path / "libiez.log"
    r = subprocess.run([sys.executable, "-B", "-c", "open('out', 'w').write('x')"], cwd=tmp_path,
                       env=env(traces, log), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and (tmp_path / "out").read_text() == "x", r.stderr
    for d in (tmp_path / "a", tmp_path / "a" / "b", traces):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert [Path(x.path).name for x in read_trace(traces).records] == ["out"]
    assert not [x for x in lines(log) if "not tracing" in x]


@pytest.mark.parametrize("mode,owner,reason", [
    (0o777, "root", "is writable by others without the sticky bit (mode 0777)"),
    (0o770, "root", "is writable by its group without the sticky bit (mode 0770)"),
    (0o755, "nobody", "belongs to uid"),
])
def test_untrusted_trace_directory_is_refused(shared, mode, owner, reason):
    traces = shared / "traces"
    traces.mkdir()
    os.chmod(traces, mode)
    if owner == "nobody":
        os.chown(traces, 65534, 65534)
    log = shared / "libiez.log"
    script = "import os\nfor n in 'abc':\n    open(n, 'w').write(n * 100)\nprint(sorted(os.listdir('.')))"
    work = shared / "work"
    work.mkdir()
    r = subprocess.run([sys.executable, "-B", "-c", script], cwd=work, env=env(traces, log), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "['a', 'b', 'c']\n" and r.stderr == "", r.stderr
    assert all((work / n).read_text() == n * 100 for n in "abc")
    refused = [x for x in lines(log) if "not tracing" in x]
    assert len(refused) == 1 and str(traces) in refused[0] and reason in refused[0], lines(log)
    assert not list(traces.iterdir())


def test_sticky_shared_trace_directory_is_accepted(shared):
    """A directory like /tmp (1777): others cannot remove or rename the job's files there."""
    traces = shared / "traces"
    traces.mkdir()
    os.chmod(traces, 0o1777)
    log = shared / "libiez.log"
    r = subprocess.run([sys.executable, "-B", "-c", "open('out', 'w').write('x' * 10)"], cwd=shared,
                       env=env(traces, log), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (shard,) = traces.glob("*.shard")
    assert stat.S_IMODE(shard.stat().st_mode) == 0o600  # the paths a job writes are its own business
    assert [(Path(x.path).name, x.bytes_written) for x in read_shard(shard).records] == [("out", 10)]


# -- a plan that is not a regular file ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "directory", "/dev/zero", "too large"])
def test_plan_that_is_not_a_readable_regular_file(emu, tmp_path, kind):
    """A FIFO no one writes, a directory, a device, a file over the 256 MiB cap as IEZ_PLAN: the
    application's create completes at once, without a plan, and the log says why in one line."""
    plan = tmp_path / "plan"
    if kind == "fifo":
        os.mkfifo(plan)
    elif kind == "directory":
        plan.mkdir()
    elif kind == "/dev/zero":
        plan = Path("/dev/zero")
    else:
        with open(plan, "wb") as f:
            f.truncate((256 << 20) + 1)  # sparse
    out = emu.fs / f"plan-{kind.strip('/').replace('/', '-').replace(' ', '-')}"
    out.mkdir()
    log = tmp_path / "libiez.log"
    r = subprocess.run([sys.executable, "-B", "-c", "open('f', 'w').write('x' * 7)"], cwd=out,
                       env=env(tmp_path / "traces", log, IEZ_EMULATED=str(emu.root), IEZ_PLAN=str(plan)),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert (out / "f").read_text() == "x" * 7
    (rejected,) = [x for x in lines(log) if "plan rejected" in x]
    why = "larger than 256 MiB" if kind == "too large" else "not a regular file"
    assert str(plan) in rejected and why in rejected, rejected
    (shard,) = read_trace(tmp_path / "traces").shards
    assert shard.plan == "rejected"


# -- vfork, and a process with one free descriptor ----------------------------------------------

@pytest.mark.parametrize("parent_first", [False, True])
def test_planned_create_in_a_vfork_child(emu, tmp_path, parent_first):
    """A vfork child's create gets its planned layout (whether or not the parent has loaded the
    plan yet); the child shares the parent's memory, so it is placed but not traced."""
    out = emu.fs / f"vfork-{parent_first}"
    out.mkdir()
    plan = tmp_path / "plan"
    plan.write_text(f"#iez-plan 1\n{out}/child\tc=2,o=3:1\n{out}/first\tc=1,o=2\n")
    log = tmp_path / "libiez.log"
    argv = [str(VFORK), str(out / "child")] + ([str(out / "first")] if parent_first else [])
    r = subprocess.run(argv, env=env(tmp_path / "traces", log, IEZ_EMULATED=str(emu.root), IEZ_PLAN=str(plan)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr, lines(log))
    assert (out / "child").read_bytes() == b"0123456789"
    got = lum.decode(os.getxattr(out / "child", "user.lustre.lov"))
    assert got.plain is not None and (got.plain.stripe_count, got.plain.osts) == (2, (3, 1))
    records = read_trace(tmp_path / "traces").records if (tmp_path / "traces").exists() else []
    assert [Path(x.path).name for x in records] == (["first"] if parent_first else [])
    assert not [x for x in lines(log) if "rejected" in x or "refused" in x]


ONE_FREE = """
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
os.close(held.pop())  # exactly one descriptor free
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"x" * 10)
os.close(fd)
print("created")
"""


def test_create_with_one_free_descriptor(emu, tmp_path):
    """libiez's own create takes the last descriptor, so the emulated MDS cannot be reached: the
    log says so (not "default layout"), and the application's create succeeds as without libiez."""
    out = emu.fs / "onefd"
    out.mkdir()
    plain = subprocess.run([sys.executable, "-B", "-c", ONE_FREE, str(tmp_path / "plain")], capture_output=True,
                           text=True, timeout=60)
    plan = tmp_path / "plan"
    plan.write_text(f"#iez-plan 1\n{out}/f\tc=2\n")
    log = tmp_path / "libiez.log"
    r = subprocess.run([sys.executable, "-B", "-c", ONE_FREE, str(out / "f")], capture_output=True, text=True,
                       timeout=60, env=env(tmp_path / "traces", log, IEZ_EMULATED=str(emu.root), IEZ_PLAN=str(plan)))
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr) == (0, "created\n", "")
    assert (out / "f").read_bytes() == b"x" * 10
    mds = [x for x in lines(log) if "emulated MDS" in x]
    assert len(mds) == 1 and "no free descriptor" in mds[0] and "created without a layout" in mds[0], lines(log)
    assert not [x for x in lines(log) if "default layout" in x]


# -- fuzzing the shard and job-trace readers -----------------------------------------------------

@pytest.fixture(scope="module")
def real_shard(tmp_path_factory) -> bytes:
    """A shard libiez wrote: three files, one with a PFL layout's worth of bytes."""
    d = tmp_path_factory.mktemp("seed")
    script = "for i, n in enumerate('abc'):\n    open(n, 'wb').write(b'z' * (1000 * (i + 1)))\n"
    r = subprocess.run([sys.executable, "-B", "-c", script], cwd=d, env=env(d / "traces", d / "log"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (shard,) = (d / "traces").glob("*.shard")
    data = shard.read_bytes()
    assert len(read_shard(shard).records) == 3
    return data


def job_bytes(shard: bytes) -> bytes:
    """A merged job trace holding one shard (docs/trace-format.md, "Merged job trace")."""
    index = struct.pack("<QQiI", JOB_HEADER + 24, len(shard), 0, zlib.crc32(shard))
    head = bytearray(struct.pack("<8sIIIIQI", JOB_MAGIC, 1, JOB_HEADER, 1, 1, 0, zlib.crc32(index)))
    head += struct.pack("<I", zlib.crc32(bytes(head[:36])))
    return bytes(head).ljust(JOB_HEADER, b"\0") + index + shard


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        kind = draw(st.sampled_from(["flip", "cut", "insert", "word"]))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 600))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "word" and len(data) >= at + 4:
            data[at:at + 4] = struct.pack("<I", draw(st.sampled_from([0, 1, 7, 8, 64, 512, 0xFFFF, 0xFFFFFFFF])))
    return bytes(data)


def check_shard(data: bytes) -> None:
    try:
        shard = parse_shard(data, Path("fuzz.shard"))
    except IezError as e:
        assert "\n" not in str(e)
        return
    assert shard.warning is None or "\n" not in shard.warning
    for r in shard.records:
        assert r.bytes_written >= 0 and isinstance(r.path, str)


@pytest.mark.fuzz
@fuzz_settings(1000)
@given(data=st.data())
def test_fuzz_shard_reader(real_shard, data):
    """Random and mutated shard bytes: the reader returns a shard (damage as one warning line)
    or raises its one-line IezError, never anything else."""
    raw = data.draw(st.one_of(st.binary(max_size=2048), mutated(real_shard),
                              mutated(real_shard[:512] + bytes(64)), st.just(real_shard[:600])))
    check_shard(raw)


@pytest.mark.fuzz
@fuzz_settings(600)
@given(data=st.data())
def test_fuzz_job_trace_reader(real_shard, tmp_path_factory, data):
    raw = data.draw(st.one_of(st.binary(max_size=512), mutated(job_bytes(real_shard))))
    f = tmp_path_factory.mktemp("job") / "iez.h.1.0.job"
    f.write_bytes(raw)
    try:
        shards = read_job(f)
    except IezError as e:
        assert "\n" not in str(e)
        return
    assert all(s.warning is None or "\n" not in s.warning for s in shards)


@pytest.mark.parametrize("name", ["stderr", "/dev/stderr"])
def test_log_to_standard_error_by_either_name(tmp_path, name):
    """/dev/stderr is a symbolic link, which a log file is never opened through; as IEZ_LOG it
    names standard error itself, as it does for every other program."""
    e = env(None, tmp_path / "unused.log", IEZ_LOG=name, IEZ_MODE="sideways")
    r = subprocess.run(["/bin/true"], env=e, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert [ln for ln in r.stderr.splitlines() if "IEZ_MODE=sideways is not" in ln], r.stderr
