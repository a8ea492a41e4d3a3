"""libiez's write wrappers make the system call themselves when libc's function would only make
it (docs/libiez.md, "Performance"): while no other thread can cancel the caller, and only when
the next write, pwrite and pwrite64 are libc's own. Real programs under LD_PRELOAD: the
cancellation point of a write still acts (tests/c/cancel.c; with the pthread_cancel check left
out, the self-cancelled write returned and "after" was printed), another interposer preloaded
after libiez still sees every call (tests/c/count_writes.c), a failed call sets errno as libc's
does, and the trace counts every byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, need_built
from iez.trace.shard import read_shards

LIBDIR = BUILD / "libiez"
LIB = LIBDIR / "libiez.so"


def env_for(tmp: Path, preload: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
    env.update(LD_PRELOAD=preload, IEZ_TRACE_DIR=str(tmp / "traces"), IEZ_APP="direct")
    return env


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, f"{argv} failed ({r.returncode}): {r.stdout}\n{r.stderr}"
    return r


@pytest.mark.parametrize("how,out", [("self", "before\n"), ("thread", "before\ncancelled\n")])
def test_cancellation_point_of_write_acts(tmp_path, how, out):
    prog = LIBDIR / "iez-test-cancel"
    need_built(LIB, prog)
    plain = run([str(prog), str(tmp_path / "plain"), how], {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert plain.stdout == out
    assert run([str(prog), str(tmp_path / "f"), how], env_for(tmp_path, str(LIB))).stdout == out


@pytest.mark.parametrize("call", ["write", "pwrite"])
def test_interposer_after_libiez_sees_every_write(tmp_path, call):
    prog, counter = LIBDIR / "iez-test-writes", LIBDIR / "libiez-test-countwrites.so"
    need_built(LIB, prog, counter)
    n, size = 1000, 512
    r = run([str(prog), str(tmp_path / "f"), str(n), str(size), call], env_for(tmp_path, f"{LIB} {counter}"))
    assert f"countwrites {n}\n" in r.stderr
    (rec,) = [rec for rec in read_shards(tmp_path / "traces") if rec.path == str(tmp_path / "f")]
    assert (rec.bytes_written, rec.max_offset) == (n * size, n * size)


def test_direct_writes_counted_and_errno_kept(tmp_path):
    need_built(LIB)
    script = """
import errno, os, sys
f = sys.argv[1]
fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
assert os.write(fd, b"a" * 100) == 100
assert os.pwrite(fd, b"b" * 50, 1000) == 50
for call, err in ((lambda: os.pwrite(fd, b"c", -1), errno.EINVAL), (lambda: os.write(12345, b"c"), errno.EBADF)):
    try:
        call()
    except OSError as e:
        assert e.errno == err, (e.errno, err)
    else:
        raise AssertionError("no error")
ro = os.open(f, os.O_RDONLY)
try:
    os.write(ro, b"c")
except OSError as e:
    assert e.errno == errno.EBADF
os.close(fd)
print("ok")
"""
    r = run([sys.executable, "-c", script, str(tmp_path / "f")], env_for(tmp_path, str(LIB)))
    assert r.stdout == "ok\n"
    (rec,) = [rec for rec in read_shards(tmp_path / "traces") if rec.path == str(tmp_path / "f")]
    assert (rec.bytes_written, rec.max_offset, rec.created) == (150, 1050, True)
