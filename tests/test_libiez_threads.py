"""libiez's counters under threads (docs/libiez.md, "Performance" and "Processes"): a process
counts with plain stores while it has one application thread (MPI's own threads, started inside
MPI_Init of a process that had none, do not count; nor does a fork child before it creates a
thread) and with atomic updates once another may write. Real programs (tests/c/threadcounts.c)
whose threads write and read one traced descriptor at once; the trace's byte counters must be
exact. With the switch disabled (a thread created after MPI_Init, or in a fork child, left on
plain stores) these runs lost counts in 8 of 8 and 3 of 5 runs on this 2-core machine, and
every case failed with atomics off altogether; each case runs twice. Before timer_create was
wrapped, the timer case lost counts in 4 of 4 runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, need_built, need_tool
from iez.trace.record import FileRecord
from iez.trace.shard import read_shards

LIBDIR = BUILD / "libiez"
LIB, MPILIB = LIBDIR / "libiez.so", LIBDIR / "libiez-mpi.so"
PROG, PROG_MPI = LIBDIR / "iez-test-threadcounts", LIBDIR / "iez-test-threadcounts-mpi"
THREADS, WRITES = 3, 20000
READS = 4  # preads per write (threadcounts.c's READS)
ROUNDS = 2
# the main thread and THREADS others: writer w writes 1 + w % 4 bytes each time
TOGETHER = WRITES * sum(1 + w % 4 for w in range(THREADS + 1))
ALONE = WRITES  # the main thread (writer 0) on its own


def run(tmp: Path, lib: Path, prog: Path, *args: object, mpi: bool = False) -> dict[str, FileRecord]:
    """prog under lib (under mpiexec, one rank), traced into a fresh directory: its records by
    path (one record each)."""
    need_built(lib, prog)
    traces = tmp / "traces"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
    env.update(LD_PRELOAD=str(lib), IEZ_TRACE_DIR=str(traces), IEZ_APP="threads")
    argv = [need_tool("mpiexec", "apt-get install mpich"), "-n", "1"] if mpi else []
    argv += [str(a) for a in (prog, *args)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=tmp)
    assert r.returncode == 0, f"{argv} failed ({r.returncode}): {r.stdout}\n{r.stderr}"
    records = read_shards(traces)
    paths = [rec.path for rec in records]
    assert len(paths) == len(set(paths)), paths
    return {rec.path: rec for rec in records}


def assert_exact(rec: FileRecord, path: Path, written: int) -> None:
    """Every write and read counted: a lost update of a shared counter would show."""
    assert path.stat().st_size == written
    assert (rec.bytes_written, rec.bytes_read, rec.max_offset) == (written, READS * written, written)


def rounds(tmp: Path):
    """A fresh directory for each round."""
    for i in range(ROUNDS):
        d = tmp / str(i)
        d.mkdir()
        yield d


# After MPI_Init of a process that had no thread: plain stores until the application's first
# thread (pthread_create, libgomp's own for the OpenMP region, or the threads glibc creates
# inside libc to run SIGEV_THREAD timers' functions) switches atomics back on.
# Before: the threads exist before MPI_Init and none is created after it; the process was not
# alone, so MPI_Init leaves atomics on.
@pytest.mark.parametrize("how,when", [("pthread", "after"), ("omp", "after"), ("timer", "after"), ("pthread", "before")])
def test_mpi_process_threads_count_atomically(tmp_path, how, when):
    for d in rounds(tmp_path):
        recs = run(d, MPILIB, PROG_MPI, d / "f", how, THREADS, WRITES, *(["before"] if when == "before" else []),
                   mpi=True)
        assert_exact(recs[str(d / "f.0")], d / "f.0", TOGETHER)


def test_c11_threads_count_atomically(tmp_path):
    for d in rounds(tmp_path):
        recs = run(d, LIB, PROG, d / "f", "thrd", THREADS, WRITES)
        assert_exact(recs[str(d / "f")], d / "f", TOGETHER)


def test_fork_child_after_threads_counts_its_own(tmp_path):
    # the parent's threads are joined before the fork; the child writes alone (plain stores),
    # then with threads of its own made by thrd_create, while the parent writes on
    for d in rounds(tmp_path):
        recs = run(d, LIB, PROG, d / "f", "fork", THREADS, WRITES)
        parent, child = recs[str(d / "f")], recs[str(d / "f.child")]
        assert parent.pid != child.pid
        assert_exact(parent, d / "f", TOGETHER + ALONE)
        assert_exact(child, d / "f.child", ALONE + TOGETHER)
