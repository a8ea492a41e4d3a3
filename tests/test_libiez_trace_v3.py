"""What trace format 3 adds (docs/trace-format.md), with real programs under LD_PRELOAD: bytes
written through descriptors a process inherited across exec (shell redirects, `>>`, pipelines,
a launcher's files), renames (mv, rsync, Python's os.rename), reads of files on the traced file
system, writer segments, and the job context and program name in each shard's header."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, need_built, need_tool
from iez.trace.ingest import ingest
from iez.trace.shard import read_trace

LIB = BUILD / "libiez" / "libiez.so"
BATCH = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "SLURM_ARRAY_TASK_ID", "PBS_ARRAY_INDEX",
         "PBS_ARRAYID", "LSB_JOBINDEX")


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    need_built(LIB)
    e = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_") and k not in BATCH}
    e.update(LD_PRELOAD=str(LIB), IEZ_MODE="trace", IEZ_TRACE_DIR=str(tmp_path / "traces"), IEZ_RUN="5", **extra)
    return e


def sh(tmp_path: Path, script: str, shell: str = "sh", **extra: str) -> None:
    r = subprocess.run([need_tool(shell, f"apt-get install -y {shell}"), "-c", script], env=env(tmp_path, **extra),
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def requests(tmp_path: Path) -> dict[str, object]:
    done = ingest(read_trace(tmp_path / "traces").records)
    return {Path(q.path).name: q for q in done.requests}


def test_shell_redirect_bytes_are_the_writers(tmp_path):
    """The shell creates out.dat, head (exec'd, writing stdout with fwrite_unlocked) writes it:
    the run wrote exactly 3,000,000 bytes. `>>`, a pipeline into tee and a descriptor opened by
    bash and written by dd and Python count the same way, in every process that writes."""
    sh(tmp_path, "head -c 3000000 /dev/zero > out.dat")
    q = requests(tmp_path)["out.dat"]
    assert (q.write_bytes, q.writer_segments, q.writers) == (3_000_000, 1, 1)
    sh(tmp_path, "printf 12345 > app.log; printf 678 >> app.log; yes | head -c 70000 | tee piped > /dev/null")
    sh(tmp_path, 'exec 3> fd3.dat; dd if=/dev/zero bs=4096 count=10 >&3 2>/dev/null; '
                 f'{sys.executable} -c "import os; os.write(3, b\'x\' * 10)"', shell="bash")
    qs = requests(tmp_path)
    assert {n: qs[n].write_bytes for n in ("app.log", "piped", "fd3.dat")} == {
        "app.log": 8, "piped": 70000, "fd3.dat": 40970}
    assert qs["fd3.dat"].writers == 2  # dd and python, each with a record of its own


def test_pipes_and_ttys_are_not_traced(tmp_path):
    """stdout to a pipe is looked at once and never becomes a record; only files do."""
    r = subprocess.run(["sh", "-c", "head -c 100000 /dev/zero; echo done > f"], env=env(tmp_path), cwd=tmp_path,
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and len(r.stdout) == 100000
    paths = {rec.path for rec in read_trace(tmp_path / "traces").records}
    assert paths == {str(tmp_path / "f")}


def test_renames(tmp_path):
    """A file's records learn the name it ended up with: mv (renameat2), os.rename (rename),
    a directory's rename, a chain; a loop comes back to the first name; a failed rename and
    one across file systems (mv copies: a create of its own) are traced as what happened."""
    sh(tmp_path, "printf abc > tmp.1; mv tmp.1 final; mkdir d; printf xy > d/in; mv d d2; "
                 "printf 1 > a; mv a b; mv b a; printf 22 > c; mv c c1; mv c1 c2; "
                 "mv nothing there 2>/dev/null; printf 4444 > x; mv x /dev/shm/iez-h2-x; rm /dev/shm/iez-h2-x")
    script = "import os\nopen('py.tmp', 'w').write('p')\nos.rename('py.tmp', 'py.final')\n"
    r = subprocess.run([sys.executable, "-c", script], env=env(tmp_path), cwd=tmp_path, timeout=60)
    assert r.returncode == 0
    qs = requests(tmp_path)
    finals = {n: q.final_path and Path(q.final_path).relative_to(tmp_path).as_posix() for n, q in qs.items()
              if q.path.startswith(str(tmp_path))}
    assert finals == {"tmp.1": "final", "in": "d2/in", "a": "", "c": "c2", "x": "", "py.tmp": "py.final"}
    shm = [rec for rec in read_trace(tmp_path / "traces").records if rec.path == "/dev/shm/iez-h2-x"]
    assert len(shm) == 1 and shm[0].created and shm[0].bytes_written == 4


def test_rsync_temporaries_get_their_final_names(tmp_path):
    """rsync writes each file under a temporary name (.name.XXXXXX) and renames it."""
    rsync = need_tool("rsync", "apt-get install -y rsync")
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"f{i}").write_bytes(b"r" * (1000 * (i + 1)))
    r = subprocess.run([rsync, "-a", f"{src}/", str(tmp_path / "dst")], env=env(tmp_path), timeout=60)
    assert r.returncode == 0
    created = [q for q in ingest(read_trace(tmp_path / "traces").records).requests if "/dst/" in q.path]
    assert sorted((Path(q.final_path).name, q.write_bytes) for q in created) == [
        ("f0", 1000), ("f1", 2000), ("f2", 3000)]
    assert all(Path(q.path).name.startswith(".f") for q in created)


def test_reads_on_the_traced_file_system(tmp_path):
    """A file opened only to read is traced on the traced file system (the emulated cluster
    here), with its largest read; elsewhere it is not. The run's reads are Ingested.reads."""
    cluster = tmp_path / "cluster"
    (cluster / "fs").mkdir(parents=True)
    (cluster / "fs" / "input").write_bytes(b"i" * 300_000)
    (tmp_path / "local").write_bytes(b"l" * 1000)
    script = ("import os, sys\n"
              "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
              "while os.read(fd, 65536): pass\n"
              "os.close(fd)\n"
              "open(sys.argv[2], 'rb').read()\n"
              "sys.stdin.buffer.read()\n")
    with open(cluster / "fs" / "input", "rb") as stdin:
        r = subprocess.run([sys.executable, "-c", script, str(cluster / "fs" / "input"), str(tmp_path / "local")],
                           env=env(tmp_path, IEZ_EMULATED=str(cluster)), stdin=stdin, timeout=60)
    assert r.returncode == 0
    recs = read_trace(tmp_path / "traces").records
    assert {rec.path for rec in recs} == {str(cluster / "fs" / "input")}
    # one record of the process for the file, opened by name and inherited as stdin
    assert [(rec.bytes_read, rec.read_size, rec.created) for rec in recs] == [(600_000, 1 << 19, False)]
    done = ingest(recs)
    assert done.requests == [] and done.not_created == 1
    (q,) = done.reads
    assert (q.read_bytes, q.write_bytes, q.read_size) == (600_000, 0, 1 << 19)


SEGMENTS = ("import os, threading\n"
            "fd = os.open('blocks', os.O_WRONLY | os.O_CREAT, 0o644)\n"
            "for k in range(8): os.pwrite(fd, b'b' * 4096, (8 + k) * 4096)\n"
            "os.close(fd)\n"
            "fd = os.open('strided', os.O_WRONLY | os.O_CREAT, 0o644)\n"
            "for k in range(8): os.pwrite(fd, b's' * 4096, k * 3 * 4096)\n"
            "os.close(fd)\n"
            "fd = os.open('threads', os.O_WRONLY | os.O_CREAT, 0o644)\n"
            "def part(i):\n"
            "    for j in range(100): os.pwrite(fd, b't' * 512, (i * 1000 + j) * 512)\n"
            "ts = [threading.Thread(target=part, args=(i,)) for i in range(4)]\n"
            "[t.start() for t in ts]\n"
            "[t.join() for t in ts]\n")


def test_writer_segments(tmp_path):
    """1 + the writes that did not start where the previous one ended: one block is 1, eight
    strided writes are 8; four threads each writing one block count at least their 4 blocks
    and at most one per write."""
    r = subprocess.run([sys.executable, "-c", SEGMENTS], env=env(tmp_path), cwd=tmp_path, timeout=60)
    assert r.returncode == 0
    qs = requests(tmp_path)
    assert (qs["blocks"].writer_segments, qs["strided"].writer_segments) == (1, 8)
    assert 4 <= qs["threads"].writer_segments <= 400 and qs["threads"].write_bytes == 4 * 100 * 512


def test_job_context_and_program(tmp_path):
    """The header names the batch job and array task (Slurm, else PBS, ...) and the program;
    IEZ_APP, given, is every process's app, and each keeps its own program name."""
    sh(tmp_path, "printf 1 > one; cat one > two", SLURM_JOB_ID="4242", SLURM_ARRAY_TASK_ID="7", IEZ_APP="myjob")
    shards = read_trace(tmp_path / "traces").shards
    assert {(s.app, s.app_given, s.program, s.job_id, s.array_task, s.run) for s in shards} == {
        ("myjob", True, "sh", "4242", "7", "5"), ("myjob", True, "cat", "4242", "7", "5")}
    recs = read_trace(tmp_path / "traces").records
    assert {(r.program, r.job_id, r.array_task) for r in recs} == {("sh", "4242", "7"), ("cat", "4242", "7")}
    assert {q.host for q in requests(tmp_path).values()} == {os.uname().nodename}
    other = tmp_path / "pbs"
    other.mkdir()
    sh(other, "printf 1 > one", PBS_JOBID="99.pbs.example.org", PBS_ARRAY_INDEX="3")
    (s,) = read_trace(other / "traces").shards
    assert (s.job_id, s.array_task, s.app, s.app_given, s.program) == ("99.pbs.example.org", "3", "sh", False, "sh")


def test_plain_preload_mpiexec_is_one_run(tmp_path):
    """`LD_PRELOAD=libiez.so mpiexec -n 2 prog`: the launcher and every rank share the run id
    the first traced process exported; each shard names its own program."""
    mpiexec = need_tool("mpiexec", "apt-get install -y mpich")
    e = env(tmp_path)
    del e["IEZ_RUN"]
    r = subprocess.run([mpiexec, "-n", "2", "sh", "-c", 'printf x > "out.$PMI_RANK"'], env=e, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    shards = [s for s in read_trace(tmp_path / "traces").shards if s.records]
    assert len({s.run for s in read_trace(tmp_path / "traces").shards}) == 1
    assert sorted(Path(rec.path).name for s in shards for rec in s.records) == ["out.0", "out.1"]
    assert {s.program for s in shards} == {"sh"}


@pytest.mark.parametrize("bad", ["rename-missing", "exchange"])
def test_failed_and_exchanged_renames_are_plain(tmp_path, bad):
    """The application sees the real call's result; nothing is traced as a rename."""
    script = ("import ctypes, errno, os\n"
              "open('a', 'w').write('1'); open('b', 'w').write('2')\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "if os.environ['BAD'] == 'exchange':\n"
              "    assert libc.renameat2(-100, b'a', -100, b'b', 2) == 0\n"  # RENAME_EXCHANGE
              "    assert open('a').read() == '2'\n"
              "else:\n"
              "    assert libc.rename(b'missing', b'c') == -1 and ctypes.get_errno() == errno.ENOENT\n")
    r = subprocess.run([sys.executable, "-c", script], env=env(tmp_path, BAD=bad), cwd=tmp_path, timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert all(s.renames == () for s in read_trace(tmp_path / "traces").shards)


def test_descriptor_numbers_reused_behind_libiez(tmp_path):
    """A pipe's number, marked not traced at its first write, closed by a raw system call and
    reused for a file: the file is traced (the open replaces the mark); a file made by a raw
    openat system call (unseen by libiez) is traced from its first write."""
    script = ("import ctypes, os\n"
              "r, w = os.pipe()\n"
              "os.write(w, b'p')\n"
              "ctypes.CDLL(None).syscall(3, w)\n"  # SYS_close, unseen by libiez
              "fd = os.open('reused', os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "assert fd == w\n"
              "os.write(fd, b'f' * 10)\n"
              "t = ctypes.CDLL(None).syscall(257, -100, b'tmp.raw', os.O_WRONLY | os.O_CREAT, 0o644)\n"  # SYS_openat
              "os.write(t, b'm' * 20)\n")
    r = subprocess.run([sys.executable, "-c", script], env=env(tmp_path), cwd=tmp_path, timeout=60,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = {Path(rec.path).name[:3]: (rec.bytes_written, rec.created) for rec in read_trace(tmp_path / "traces").records}
    assert got == {"reu": (10, True), "tmp": (20, False)}
