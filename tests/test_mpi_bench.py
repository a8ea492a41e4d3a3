"""iez-bench through MPI: under MPICH's mpiexec the ranks are MPI's, and the MPI-IO and
HDF5 backends write what the POSIX one does (IOR's offsets and data pattern, HACC-IO's files),
file per process on MPI_COMM_SELF or one shared file on MPI_COMM_WORLD, independent or
collective. Errors stay one line; under libiez-mpi the files are placed and traced per rank."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import BUILD, need_tool
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.errors import ConfigError
from iez.layout import lum
from iez.trace.shard import read_trace
from iez.workload.bench import HaccJob, IorJob, command, run

BENCH = BUILD / "bench_app" / "iez-bench"
MPILIB = BUILD / "libiez" / "libiez-mpi.so"
KiB = 1 << 10


def exe() -> str:
    if not BENCH.exists():
        pytest.fail(f"{BENCH} is missing: build it (cmake -S . -B build && cmake --build build)")
    return str(BENCH)


def mpi(n: int, *args, check: int | None = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [need_tool("mpiexec", "apt-get install mpich"), "-n", str(n), exe(), *map(str, args)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    if check is not None:
        assert r.returncode == check, f"{argv}: {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def report(n: int, *args) -> dict:
    return json.loads(mpi(n, *args, "--json").stdout.strip().splitlines()[-1])


def errors(r: subprocess.CompletedProcess) -> list[str]:
    return [ln.removeprefix("iez-bench: error: ") for ln in r.stderr.splitlines() if ln.startswith("iez-bench: error: ")]


def ior_words(path: Path, ranks: np.ndarray, offsets: np.ndarray) -> None:
    """The file holds IOR's pattern: each 8-byte word is rank << 48 | its offset."""
    got = np.fromfile(path, dtype="<u8")
    assert np.array_equal(got, (ranks.astype(np.uint64) << np.uint64(48)) | offsets.astype(np.uint64))


@pytest.mark.parametrize("api", ["MPIIO", "HDF5"])
@pytest.mark.parametrize("collective", [False, True], ids=["independent", "collective"])
def test_ior_shared_file(tmp_path, api, collective):
    f = tmp_path / "ssf"
    doc = report(4, "-a", api, *(["-c"] * collective), "-b", "64k", "-t", "16k", "-s", 2, "-o", f, "-k", "--verify")
    assert (doc["launcher"], doc["ranks"], doc["api"], doc["mode"], doc["collective"]) == ("mpi", 4, api, "ssf", collective)
    assert [p["bytes"] for p in doc["phases"]] == [4 * 2 * 64 * KiB] * 2 and doc["verify"]["mismatched"] == 0
    if api == "MPIIO":  # segment-major blocks, exactly as the POSIX backend lays them out
        words = np.arange(4 * 2 * 64 * KiB // 8, dtype=np.uint64) * 8
        ior_words(f, (words // (64 * KiB)) % 4, words)
    else:  # one dataset of the job's bytes, plus HDF5's own metadata
        assert 4 * 2 * 64 * KiB < f.stat().st_size < 4 * 2 * 64 * KiB + 64 * KiB


@pytest.mark.parametrize("api", ["MPIIO", "HDF5"])
def test_ior_file_per_process(tmp_path, api):
    doc = report(3, "-a", api, "-F", "-b", "32k", "-t", "8k", "-o", tmp_path / "t", "-k", "--verify")
    assert doc["files"] == [str(tmp_path / f"t.{r:08d}") for r in range(3)] and doc["verify"]["mismatched"] == 0
    if api == "MPIIO":
        for r in range(3):
            ior_words(tmp_path / f"t.{r:08d}", np.full(4096, r), np.arange(4096) * 8)


def test_posix_under_mpiexec_takes_mpis_ranks(tmp_path):
    doc = report(3, "-F", "-b", "16k", "-t", "16k", "-o", tmp_path / "p", "-k")
    assert (doc["launcher"], doc["ranks"], doc["api"]) == ("mpi", 3, "POSIX")
    for r in range(3):
        ior_words(tmp_path / f"p.{r:08d}", np.full(2048, r), np.arange(2048) * 8)


@pytest.mark.parametrize("api", ["MPIIO", "HDF5"])
def test_hacc_io(tmp_path, api):
    counts = [1000, 2500, 40]
    ssf = report(3, "-a", api, "--workload", "hacc-io", "-p", ",".join(map(str, counts)), "--header-size", 4096,
                 "-o", tmp_path / "s", "--verify")
    fpp = report(3, "-a", api, "--workload", "hacc-io", "-F", "-p", 700, "--header-size", 4096, "-o", tmp_path / "f",
                 "--verify")
    assert ssf["verify"]["mismatched"] == fpp["verify"]["mismatched"] == 0
    shared = tmp_path / "s-Part00000000-of-00000001.data"
    if api == "MPIIO":
        assert shared.stat().st_size == 4096 + 38 * sum(counts)
        head = np.fromfile(shared, dtype="<i8", count=22)
        assert list(head[:9]) == [0, 16, 4096, 38, sum(counts), sum(counts), 3, 1, 0]
        assert list(head[16:22]) == counts + [0, 1, 2]
        assert all((tmp_path / f"f-Part{r:08d}-of-00000003.data").stat().st_size == 4096 + 38 * 700 for r in range(3))
    else:
        assert shared.stat().st_size > 4096 + 38 * sum(counts)


def test_one_line_errors(tmp_path):
    r = subprocess.run([exe(), "-a", "MPIIO", "-o", str(tmp_path / "x")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and errors(r) == [
        "-a MPIIO: not started by an MPI launcher, this iez-bench has the POSIX interface only: run "
        "mpiexec -n RANKS iez-bench -a MPIIO ... (iez-bench --help)"]
    r = mpi(2, "-n", 3, "-o", tmp_path / "x", check=2)
    assert errors(r) == ["-n 3: the MPI launcher started 2 ranks (iez-bench --help)"]  # rank 0 alone says it
    r = mpi(1, "-c", "-o", tmp_path / "x", check=2)
    assert "collective I/O is MPI's" in errors(r)[0]
    r = mpi(1, "-a", "HDF5", "-c", "--workload", "hacc-io", "-p", 1, "-o", tmp_path / "x", check=2)
    assert "-c with --workload hacc-io: -a MPIIO only" in errors(r)[0]
    assert list(tmp_path.iterdir()) == []
    missing = tmp_path / "no" / "where"
    r = mpi(2, "-a", "MPIIO", "-o", missing, check=None)
    assert r.returncode != 0
    lines = errors(r)  # the collective open fails on every rank: one line each
    assert lines and all(ln.startswith("rank ") and f"create {missing}: " in ln and "MPI error" in ln for ln in lines)
    r = mpi(2, "-a", "HDF5", "-r", "-o", missing, check=None)
    assert r.returncode != 0 and f"open {missing}: H5Fopen failed" in errors(r)[0]


def test_workload_jobs_through_mpi(tmp_path):
    job = IorJob(str(tmp_path / "w"), ranks=2, block="32k", transfer="8k", api="mpiio", collective=True, verify=True)
    argv = command(job)
    assert Path(argv[0]).name == "mpiexec" and argv[1:3] == ["-n", "2"] and ["-a", "MPIIO", "-c"] == argv[6:9]
    doc = run(job)
    assert doc["collective"] and doc["verify"]["mismatched"] == 0
    assert os.path.getsize(tmp_path / "w") == job.files()[str(tmp_path / "w")]
    doc = run(HaccJob(str(tmp_path / "h"), particles=[10, 20], ranks=2, header=4096, api="HDF5", fpp=True, verify=True))
    assert doc["api"] == "HDF5" and doc["verify"]["mismatched"] == 0
    for bad, says in ((dict(api="NFS"), "api: one of POSIX, MPIIO, HDF5"),
                      (dict(collective=True), "collective I/O needs api MPIIO or HDF5")):
        with pytest.raises(ConfigError, match=says):
            IorJob("x", **bad).args()


def test_placed_and_traced_under_libiez_mpi(tmp_path):
    if not MPILIB.exists():
        pytest.fail(f"{MPILIB} is missing: build libiez with MPICH installed (apt-get install libmpich-dev)")
    with running_cluster(tmp_path / "emu", make_cluster(), seed=2) as cd:
        d = cd.fs / "bench"
        d.mkdir()
        plan = tmp_path / "plan"
        plan.write_text(f"#iez-plan 1\n#app=b\n{d / 'ior'}\tc=4,S=65536\n{d / 'hacc-Part00000001-of-00000002.data'}\tc=2,S=65536\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
        env.update(LD_PRELOAD=str(MPILIB), IEZ_EMULATED=str(cd.root), IEZ_TRACE_DIR=str(tmp_path / "t"),
                   IEZ_PLAN=str(plan), IEZ_APP="b")
        mpi(4, "-a", "MPIIO", "-c", "-b", "64k", "-t", "16k", "-o", d / "ior", "-k", env=env)
        mpi(2, "-a", "MPIIO", "--workload", "hacc-io", "-F", "-p", 500, "--header-size", 4096, "-o", d / "hacc", env=env)
        for name, count in (("ior", 4), ("hacc-Part00000001-of-00000002.data", 2)):
            got = lum.decode(os.getxattr(d / name, "user.lustre.lov")).plain
            assert (got.stripe_count, got.stripe_size) == (count, 65536)
        recs = [r for r in read_trace(tmp_path / "t").records if r.api == "mpiio"]
        ior = sorted((r.rank, r.comm_size, r.bytes_written, r.bytes_read) for r in recs if r.path == str(d / "ior"))
        assert ior == [(k, 4, 64 * KiB, 64 * KiB) for k in range(4)]
        # HACC-IO: its file per process on MPI_COMM_SELF, written and read back by its rank
        hacc = sorted((r.rank, r.comm_size, r.created) for r in recs if "hacc" in r.path and r.bytes_written)
        assert hacc == [(0, 1, True), (1, 1, True)]
