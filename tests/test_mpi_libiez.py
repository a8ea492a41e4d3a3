"""libiez-mpi end to end: real MPI programs under MPICH's mpiexec, and HDF5 programs
(serial, parallel, h5py), on an emulated cluster whose MDS runs as a real process. Files created
by MPI_File_open and H5Fcreate get exactly the planned layouts, rank 0 of the communicator
creating them; traces carry each rank and its bytes, the communicator size tells a file per
process from a shared file, and the ranks' shards end up in one merged job trace. Nothing
breaks without a plan, with a bad one, or with the MDS down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, need_tool
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.emulated.clusterdir import init_cluster_dir
from iez.layout import lum
from iez.layout.layout import FileLayout, Layout
from iez.plan import parse_layout
from iez.trace.ingest import ingest
from iez.trace.record import FileRecord
from iez.trace.shard import read_trace, read_job

LIBDIR = BUILD / "libiez"
LIB, MPILIB = LIBDIR / "libiez.so", LIBDIR / "libiez-mpi.so"
MPIIO, H5, H5MPI = LIBDIR / "iez-test-mpiio", LIBDIR / "iez-test-h5", LIBDIR / "iez-test-h5-mpi"
MiB = 1 << 20
KiB = 1 << 10


def need_built(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.fail(f"{p} is missing: install MPICH and parallel HDF5 (apt-get install mpich libmpich-dev "
                        "libhdf5-dev libhdf5-mpich-dev) and build (cmake -S . -B build && cmake --build build)")


def mpiexec() -> str:
    return need_tool("mpiexec", "apt-get install mpich")


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    need_built(LIB, MPILIB, MPIIO, H5, H5MPI)
    with running_cluster(tmp_path_factory.mktemp("mpi") / "emu", make_cluster(), seed=5) as cd:
        yield cd


class Job:
    """One test's directory on the cluster, its plan, trace directory and libiez log."""

    def __init__(self, root: Path, fs: Path, tmp: Path, name: str):
        self.root = root
        self.dir = fs / name
        self.dir.mkdir(parents=True)
        self.traces = tmp / "traces"
        self.plan_file = tmp / "plan"
        self.log = tmp / "libiez.log"

    def path(self, name: str) -> Path:
        return self.dir / name

    def plan(self, entries: dict[str, str]) -> None:
        self.plan_file.write_text("#iez-plan 1\n#app=test\n" + "".join(f"{self.path(n)}\t{s}\n" for n, s in entries.items()))

    def env(self, lib: Path = MPILIB, **extra: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
        env.update(LD_PRELOAD=str(lib), IEZ_EMULATED=str(self.root), IEZ_TRACE_DIR=str(self.traces),
                   IEZ_LOG=str(self.log), IEZ_APP="mpitest")
        if self.plan_file.exists():
            env["IEZ_PLAN"] = str(self.plan_file)
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def run(self, argv: list, ok: bool = True, lib: Path = MPILIB, **extra: str | None) -> subprocess.CompletedProcess:
        r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                           env=self.env(lib, **extra), cwd=self.dir)
        if ok:
            assert r.returncode == 0, f"{argv} failed ({r.returncode}): {r.stdout}\n{r.stderr}"
        return r

    def mpi(self, n: int, argv: list, ok: bool = True, **extra: str | None) -> subprocess.CompletedProcess:
        return self.run([mpiexec(), "-n", n, *argv], ok=ok, **extra)

    def layout(self, name: str) -> FileLayout:
        return lum.decode(os.getxattr(self.path(name), "user.lustre.lov"))

    def trace(self):
        return read_trace(self.traces)

    def records(self, name: str, api: str) -> list[FileRecord]:
        return sorted((r for r in self.trace().records if r.path == str(self.path(name)) and r.api == api),
                      key=lambda r: r.rank)


@pytest.fixture
def job(emu, tmp_path, request):
    return Job(emu.root, emu.fs, tmp_path, request.node.name.replace("[", "_").replace("]", ""))


def assert_planned(job: Job, name: str, spec: str) -> None:
    got, want = job.layout(name).plain, parse_layout(spec).plain
    assert got.stripe_size == want.stripe_size and got.stripe_count == want.stripe_count == len(set(got.osts))


def assert_default(job: Job, name: str) -> None:
    got = job.layout(name).plain
    assert (got.stripe_count, got.stripe_size) == (1, MiB)


# -- MPI-IO -------------------------------------------------------------------------------------

def test_shared_file_placed_by_rank_0_and_traced_per_rank(job):
    job.plan({"ssf": "c=4,S=1048576"})
    job.mpi(4, [MPIIO, "--calls", "at_all", "--read", "--bytes", 256 * KiB, "--xfer", 64 * KiB, job.path("ssf")])
    assert_planned(job, "ssf", "c=4,S=1048576")
    assert job.path("ssf").stat().st_size == 4 * 256 * KiB
    recs = job.records("ssf", "mpiio")
    assert [r.rank for r in recs] == [0, 1, 2, 3] and len({r.pid for r in recs}) == 4
    assert all(r.comm_size == 4 and r.bytes_written == r.bytes_read == 256 * KiB for r in recs)
    assert [r.max_offset for r in recs] == [256 * KiB * (k + 1) for k in range(4)]
    assert [r.created for r in recs] == [True, False, False, False]
    assert [r.plan_hit for r in recs] == [True, None, None, None]
    assert all(r.layout == recs[0].layout and r.stripe_count == 4 and r.close_time > r.open_time > 0 for r in recs)
    # ROMIO's own POSIX calls beneath are traced too: the same bytes, once more per rank
    assert sum(r.bytes_written for r in job.records("ssf", "posix")) == 4 * 256 * KiB
    # the four shards went into one merged job trace at MPI_Finalize, and are gone
    trace = job.trace()
    ranks = [s for s in trace.shards if s.app == "mpitest"]
    assert len(ranks) == 4 and all(s.path.suffix == ".job" and s.clean_exit for s in ranks)
    assert len(list(job.traces.glob("*.job"))) == 1
    assert not [p for p in job.traces.glob("*.shard") if "mpitest" in p.read_bytes()[40:168].decode(errors="replace")]
    (run,) = [r for r in trace.runs() if r.app == "mpitest"]
    assert (run.processes, run.plan_hits, run.plan_misses) == (4, 1, 0)
    (req,) = [q for q in ingest([r for r in trace.records if r.app == "mpitest"]).requests
              if q.path == str(job.path("ssf"))]
    assert (req.comm_size, req.rank, req.api, req.write_bytes) == (4, 0, "mpiio", 4 * 256 * KiB)
    # the writers' facts as their MPI-IO calls had them: 64 KiB at 64 KiB boundaries
    assert (req.writers, req.transfer_size, req.write_align) == (4, 64 * KiB, 64 * KiB)


def test_file_per_process_on_comm_self_with_8_ranks(job):
    job.plan({f"fpp.{r:08d}": f"c=2,S={128 * KiB}" for r in range(0, 8, 2)})  # even ranks' files only
    job.mpi(8, [MPIIO, "--fpp", "--calls", "ind", "--bytes", 128 * KiB, "--xfer", 32 * KiB, job.path("fpp")])
    for r in range(8):
        name = f"fpp.{r:08d}"
        if r % 2 == 0:
            assert_planned(job, name, f"c=2,S={128 * KiB}")
        else:
            assert_default(job, name)
        (rec,) = job.records(name, "mpiio")
        assert (rec.rank, rec.comm_size, rec.created, rec.bytes_written, rec.max_offset) == (r, 1, True, 128 * KiB, 128 * KiB)
        assert rec.plan_hit is (r % 2 == 0)
    (run,) = [r for r in job.trace().runs() if r.app == "mpitest"]
    assert (run.processes, run.plan_hits, run.plan_misses) == (8, 4, 4)
    reqs = ingest([r for r in job.trace().records if r.app == "mpitest"]).requests
    assert sorted((q.rank, q.comm_size) for q in reqs) == [(r, 1) for r in range(8)]


@pytest.mark.parametrize("calls", ["at", "at_all", "ind", "ind_all", "iat", "split", "view", "large", "shared",
                                   "ordered"])
def test_every_kind_of_write_counts_its_bytes(job, calls):
    job.mpi(2, [MPIIO, "--calls", calls, "--bytes", 64 * KiB, "--xfer", 16 * KiB, job.path("f")])
    recs = job.records("f", "mpiio")
    assert [(r.rank, r.comm_size, r.bytes_written) for r in recs] == [(0, 2, 64 * KiB), (1, 2, 64 * KiB)]
    # the end of what each rank wrote: from the offset, the individual pointer or the view; the
    # shared file pointer's position is not asked for (it takes a lock on the file)
    want = [0, 0] if calls in ("shared", "ordered") else [64 * KiB, 128 * KiB]
    assert [r.max_offset for r in recs] == want
    # the writes as MPI-IO sees them: 16 KiB calls at 16 KiB boundaries; where a call starts is
    # not known under the shared pointer nor under a view of MPI_INT (its bytes need not be contiguous)
    align = 0 if calls in ("shared", "ordered", "view") else 16 * KiB
    assert [(r.transfer_size, r.write_align) for r in recs] == [(16 * KiB, align)] * 2
    assert job.path("f").stat().st_size == 128 * KiB


def test_mpi_init_thread(job):
    job.plan({"t": "c=3,S=1048576"})
    job.mpi(2, [MPIIO, "--thread", "--calls", "iat", "--read", "--bytes", 64 * KiB, "--xfer", 64 * KiB, job.path("t")])
    assert_planned(job, "t", "c=3,S=1048576")
    recs = job.records("t", "mpiio")
    assert [(r.rank, r.comm_size, r.bytes_written, r.bytes_read) for r in recs] == [(0, 2, 64 * KiB, 64 * KiB),
                                                                                  (1, 2, 64 * KiB, 64 * KiB)]


def test_rank_and_run_come_from_mpi(job):
    """Preloaded into the ranks only (-genv), each rank's library starts with its own pid as
    run id; MPI_Init gives every rank rank 0's, and the rank is MPI's."""
    env = job.env(LD_PRELOAD=None)
    r = subprocess.run([mpiexec(), "-genv", "LD_PRELOAD", str(MPILIB), "-n", "3", str(MPIIO), "--calls", "at",
                        "--bytes", "4096", "--xfer", "4096", str(job.path("r"))], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    recs = job.records("r", "mpiio")
    assert [x.rank for x in recs] == [0, 1, 2]
    assert {x.run for x in recs} == {str(recs[0].pid)}


def test_an_existing_file_is_never_relaid_out(job, emu):
    from iez.backend.emulated import EmulatedBackend

    EmulatedBackend(emu.root).create(job.path("old"), Layout(stripe_size=2 * MiB, stripe_count=2))
    before = job.layout("old")
    job.plan({"old": "c=5,S=1048576"})
    job.mpi(2, [MPIIO, "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("old")])
    assert job.layout("old") == before
    assert not any(r.created for r in job.records("old", "mpiio"))
    (run,) = [r for r in job.trace().runs() if r.app == "mpitest"]
    assert (run.plan_hits, run.plan_misses) == (0, 0)  # only files that did not exist count


def test_mpi_mode_excl(job):
    job.plan({"x": "c=2,S=1048576", "y": "c=4,S=1048576"})
    job.mpi(2, [MPIIO, "--excl", "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("x")])
    assert_planned(job, "x", "c=2,S=1048576")  # libiez's exclusive create did not make MPI_MODE_EXCL fail
    job.path("y").write_bytes(b"keep")
    r = job.mpi(2, [MPIIO, "--excl", "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("y")], ok=False)
    assert r.returncode != 0 and "MPI_File_open" in r.stderr  # the real call's error, as without libiez
    assert job.path("y").read_bytes() == b"keep"


def test_without_a_plan_files_get_the_mds_layout(job):
    job.mpi(2, [MPIIO, "--calls", "at_all", "--bytes", 4096, "--xfer", 4096, job.path("n")])
    assert_default(job, "n")
    assert [r.plan_hit for r in job.records("n", "mpiio")] == [None, None]


def test_a_rejected_plan_places_nothing(job):
    job.plan_file.write_text("#iez-plan 1\nnot a plan line\n")
    job.mpi(2, [MPIIO, "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("p")])
    assert_default(job, "p")
    (run,) = [r for r in job.trace().runs() if r.app == "mpitest"]
    assert run.plan_rejected and "plan rejected" in job.log.read_text()


def test_mds_down(tmp_path):
    cd = init_cluster_dir(tmp_path / "down", make_cluster())  # never started
    j = Job(cd.root, cd.fs, tmp_path, "d")
    j.plan({"f": "c=2,S=1048576"})
    j.mpi(2, [MPIIO, "--calls", "at_all", "--read", "--bytes", 8192, "--xfer", 4096, j.path("f")])
    assert j.path("f").stat().st_size == 2 * 8192
    with pytest.raises(OSError):
        os.getxattr(j.path("f"), "user.lustre.lov")
    assert [r.bytes_written for r in j.records("f", "mpiio")] == [8192, 8192]
    assert "cannot reach the emulated MDS" in j.log.read_text()


def test_mode_off_leaves_everything_alone(job):
    job.plan({"o": "c=2,S=1048576"})
    job.mpi(2, [MPIIO, "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("o")], IEZ_MODE="off")
    with pytest.raises(OSError):
        os.getxattr(job.path("o"), "user.lustre.lov")
    assert not job.traces.exists()


# -- the merged job trace -------------------------------------------------------------------------

def test_merged_job_trace_survives_damage_to_one_rank(job, tmp_path):
    job.mpi(3, [MPIIO, "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("m")])
    (src,) = job.traces.glob("*.job")
    data = bytearray(src.read_bytes())
    off = int.from_bytes(data[64 + 24:64 + 32], "little")  # the second shard's offset in the index
    data[off + 600] ^= 0xFF
    bad = tmp_path / "bad.job"
    bad.write_bytes(bytes(data))
    shards = read_job(bad)
    assert [s.warning is None for s in shards] == [True, False, True]
    assert "[rank 1]: damaged (CRC mismatch)" in shards[1].warning
    assert sorted(r.rank for s in shards for r in s.records if r.api == "mpiio") == [0, 2]
    data[20] ^= 0xFF  # the header
    bad.write_bytes(bytes(data))
    (s,) = read_job(bad)
    assert "header or index is damaged" in s.warning and not s.records


def test_trace_show_reads_the_job_trace(job, iez_cmd):
    import json

    job.mpi(2, [MPIIO, "--fpp", "--calls", "at", "--bytes", 4096, "--xfer", 4096, job.path("s")])
    r = subprocess.run(iez_cmd + ["trace", "show", "--json", str(job.traces)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    mine = [x for x in doc["records"] if x["api"] == "mpiio"]
    assert sorted((x["rank"], x["comm_size"], Path(x["path"]).name) for x in mine) == [
        (0, 1, "s.00000000"), (1, 1, "s.00000001")]
    table = subprocess.run(iez_cmd + ["trace", "show", str(job.traces)], capture_output=True, text=True, timeout=60)
    assert "mpiio" in table.stdout and "comm" in table.stdout


# -- HDF5 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("lib", [LIB, MPILIB], ids=["libiez", "libiez-mpi"])
def test_h5fcreate_serial(job, lib):
    job.plan({"s.h5": "c=3,S=2097152", "x.h5": "c=2,S=1048576"})
    job.run([H5, job.path("s.h5"), 5000], lib=lib)
    job.run([H5, "--excl", job.path("x.h5"), 100], lib=lib)
    assert_planned(job, "s.h5", "c=3,S=2097152")
    assert_planned(job, "x.h5", "c=2,S=1048576")
    for name, count in (("s.h5", 3), ("x.h5", 2)):
        (rec,) = job.records(name, "hdf5")
        assert (rec.created, rec.plan_hit, rec.comm_size, rec.stripe_count) == (True, True, 1, count)
        assert rec.close_time > rec.open_time > 0  # H5Fclose ended the record
        assert sum(r.bytes_written for r in job.records(name, "posix")) >= (5000 if name == "s.h5" else 100)
    # H5F_ACC_TRUNC of an existing file: truncated, never laid out again
    before = job.layout("s.h5")
    job.plan({"s.h5": "c=5,S=1048576"})
    job.run([H5, job.path("s.h5"), 10], lib=lib)
    assert job.layout("s.h5") == before
    assert [r.created for r in job.records("s.h5", "hdf5")] == [True, False]


def test_h5fcreate_parallel(job):
    job.plan({"p.h5": "c=4,S=1048576", "q.h5.00000001": "c=2,S=1048576"})
    job.mpi(3, [H5MPI, "--excl", job.path("p.h5"), 3000])
    assert_planned(job, "p.h5", "c=4,S=1048576")
    h5 = job.records("p.h5", "hdf5")
    assert [(r.rank, r.comm_size, r.created, r.plan_hit) for r in h5] == [(0, 3, True, True), (1, 3, False, None),
                                                                          (2, 3, False, None)]
    assert [(r.rank, r.comm_size) for r in job.records("p.h5", "mpiio")] == [(0, 3), (1, 3), (2, 3)]
    (run,) = [r for r in job.trace().runs() if r.app == "mpitest"]
    assert (run.plan_hits, run.plan_misses) == (1, 0)  # placed once, by rank 0, not again by the MPI-IO layer
    job.mpi(2, [H5MPI, "--fpp", job.path("q.h5"), 1000])  # MPI_COMM_SELF per file
    assert_default(job, "q.h5.00000000")
    assert_planned(job, "q.h5.00000001", "c=2,S=1048576")
    assert [(r.rank, r.comm_size, r.created) for r in job.records("q.h5.00000001", "hdf5")] == [(1, 1, True)]


def test_parallel_hdf5_under_plain_libiez_is_placed_by_the_posix_layer(job):
    """libiez.so has no MPI layer: the rank whose POSIX open creates the file (ROMIO's) places it."""
    job.plan({"l.h5": "c=3,S=1048576"})
    job.mpi(2, [H5MPI, job.path("l.h5"), 1000], LD_PRELOAD=str(LIB))
    assert_planned(job, "l.h5", "c=3,S=1048576")
    assert not job.records("l.h5", "hdf5") and job.records("l.h5", "posix")


H5PY_SCRIPT = """
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = np.arange(10000, dtype=np.int64)
with h5py.File(sys.argv[2], "x") as f:
    f["y"] = np.zeros(100)
print(h5py.version.hdf5_version)
"""


def test_h5py_script(job):
    """h5py's wheel bundles its own HDF5 and Python loads it privately (RTLD_LOCAL): H5Fcreate is
    reached by its dynamic symbol, the real one found next to the caller."""
    try:
        import h5py  # noqa: F401
    except ImportError:
        pytest.fail("h5py is not installed: .venv/bin/pip install h5py")
    job.plan({"py.h5": "c=3,S=1048576", "px.h5": "c=4,S=2097152"})
    r = job.run([sys.executable, "-c", H5PY_SCRIPT, job.path("py.h5"), job.path("px.h5")], lib=LIB)
    assert r.stdout.strip()  # the bundled HDF5's version
    assert_planned(job, "py.h5", "c=3,S=1048576")
    assert_planned(job, "px.h5", "c=4,S=2097152")
    for name in ("py.h5", "px.h5"):
        (rec,) = job.records(name, "hdf5")
        assert rec.created and rec.plan_hit and rec.comm_size == 1
    assert sum(r.bytes_written for r in job.records("py.h5", "posix")) > 80000
