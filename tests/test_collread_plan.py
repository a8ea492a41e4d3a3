"""The plan turns on libiez-mpi's Lustre-aware collective read (docs/plan-format.md, `collread`;
docs/libiez.md, "Chosen by the plan"): the rule (a striped file read with collective MPI-IO
calls), the trace's collective-read fact from real MPI processes and from Darshan's counters,
the plan `iez allocate -o`
writes from it, and that plan choosing the read under mpiexec on the emulated cluster without
IEZ_COLLREAD, while IEZ_COLLREAD=off still wins."""

from __future__ import annotations

import subprocess

import pytest

from conftest import need_built
from iez import plan as planfile
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.layout.collread import spans_osts, striped_collective_reads
from iez.pipeline import load_trace
from iez.plan import parse_layout
from iez.request import Request
from iez.trace.shard import read_shards
from test_collread import BENCH, IOR, MPILIB, readers_per_ost
from test_split_writing import Job

HERE = "the plan asks for the Lustre-aware collective read"


@pytest.mark.parametrize("spec,spans", [("c=1", False), ("o=3", False), ("S=65536,c=2", True), ("c=-1", True),
                                        ("0-1048576/o=1;1048576-EOF/o=1", False),
                                        ("0-1048576/o=1;1048576-EOF/o=4", True), ("c=0", False)])
def test_a_layout_spans_osts(spec, spans):
    assert spans_osts(parse_layout(spec)) is spans


def test_only_files_read_collectively_and_striped_call_for_the_read():
    def q(path: str, spec: str | None, coll: bool) -> Request:
        return Request(path, 0, observed=parse_layout(spec) if spec else None, read_collective=coll)

    files = [q("/f/wide", "S=1048576,c=4", True), q("/f/one", "c=1", True), q("/f/indep", "c=4", False),
             q("/f/unknown", None, True), q("/f/a", "o=0:5", True)]
    assert striped_collective_reads(files) == ["/f/a", "/f/wide"]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    need_built(MPILIB, IOR, BENCH)
    with running_cluster(tmp_path_factory.mktemp("collplan") / "emu", make_cluster(4, 4), seed=3) as cd:
        yield cd


def test_the_trace_and_the_plan_carry_collective_reads(emu, tmp_path, iez_cmd, subenv):
    """iez-bench writes and reads back an IOR-like shared file collectively (a striped file) and
    a file per rank independently; the trace marks only the collective reader's records, the
    import names the striped file, and the plan iez writes asks for the read."""
    job = Job(emu, tmp_path, "trace")
    shared, fpp = job.path("ior"), job.path("fpp")
    job.plan({"ior": "S=65536,c=3"})
    traces = tmp_path / "t1"
    job.mpi(2, [BENCH, "-a", "MPIIO", "-c", "-b", "128k", "-t", "64k", "-k", "-o", shared],
            IEZ_TRACE_DIR=str(traces), IEZ_RUN="r1", IEZ_APP="coll")
    job.mpi(2, [BENCH, "-a", "MPIIO", "-F", "-b", "128k", "-t", "64k", "-k", "-o", fpp],
            IEZ_TRACE_DIR=str(tmp_path / "t0"), IEZ_RUN="r0", IEZ_APP="coll")
    coll = {(r.path, r.api, r.rank) for r in read_shards(traces) if r.read_collective}
    assert coll == {(str(shared), "mpiio", 0), (str(shared), "mpiio", 1)}  # MPI-IO's records only
    assert not any(r.read_collective for r in read_shards(tmp_path / "t0"))
    db = f"sqlite:///{tmp_path / 'iez.db'}"
    env = {**subenv, "HOME": str(tmp_path / "home")}
    env.pop("IEZ_DB", None)

    def iez(*args: object) -> str:
        p = subprocess.run([*iez_cmd, *map(str, args), "--db", db], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=300)
        assert p.returncode == 0, f"iez {args}: {p.stderr}"
        return p.stdout

    assert load_trace(tmp_path / "t0").meta["collective_reads"] == []
    assert load_trace(traces).meta["collective_reads"] == [str(shared)]
    for d in ("t1", "t0"):  # the last traced run decides
        iez("trace", "import", tmp_path / d, "--app", "coll")
    iez("predict", "coll")
    iez("allocate", "coll", "--policy", "rr", "--emulated", emu.root, "-o", "t0.plan", "--no-gate")
    assert "collread" not in planfile.load(tmp_path / "t0.plan").meta
    iez("trace", "import", traces, "--app", "coll", "--run", "3")
    iez("plan", "coll", "-o", "t1.plan")
    assert planfile.load(tmp_path / "t1.plan").meta["collread"] == "lustre"


@pytest.mark.parametrize("collread,mode", [(None, "trace,place"), ("off", "trace,place"), (None, "trace")])
def test_a_plan_with_collread_chooses_the_read_unless_the_environment_says_off(emu, tmp_path, collread, mode):
    """Seed 003's interleaved read (3 ranks, block = transfer = stripe, 2 OSTs): with the plan's
    collread=lustre and no IEZ_COLLREAD, one aggregator reads each OST (iez's read) and the log
    says the plan asked; with IEZ_COLLREAD=off, or tracing only (the plan not followed), MPICH's
    read has every rank on both OSTs."""
    job = Job(emu, tmp_path, f"plan-{collread}-{mode.replace(',', '-')}")
    f = job.path("f")
    (tmp_path / "plan").write_text(f"#iez-plan 1\n#app=coll collread=lustre\n{f}\tS=65536,c=2\n")
    job.mpi(3, [IOR, f, 65536, 4, "write"], IEZ_COLLREAD="off")
    env = {"IEZ_NID": "10.0.0.%r@tcp", "IEZ_IOLOG": str(tmp_path / "reads"), "IEZ_MODE": mode}
    if collread:
        env["IEZ_COLLREAD"] = collread
    assert "read 786432 bytes" in job.mpi(3, [IOR, f, 65536, 4, "read"], **env)
    per_ost = readers_per_ost(tmp_path / "reads", f)
    assert len(per_ost) == 2
    if collread is None and mode == "trace,place":
        assert all(len(nids) == 1 for nids in per_ost.values()) and HERE in job.log(), (per_ost, job.log())
    else:
        assert all(len(nids) == 3 for nids in per_ost.values()) and HERE not in job.log(), (per_ost, job.log())


def test_a_darshan_log_says_which_files_were_read_collectively(tmp_path):
    """Darshan counts collective reads (MPIIO_COLL_READS): a generated log of a job reading one
    striped file collectively, one independently and one striped on a single OST collectively."""
    from iez.audit.synthetic import SynthFile, write_log
    from iez.trace.darshan import read_log

    files = [SynthFile("/lustre/coll", 0, osts=(0, 1, 2), shared=True, read_bytes=3 << 20, mpiio="collective"),
             SynthFile("/lustre/indep", 0, osts=(3, 4), shared=True, read_bytes=2 << 20, mpiio="independent"),
             SynthFile("/lustre/narrow", 0, osts=(5,), shared=True, read_bytes=1 << 20, mpiio="collective")]
    log = write_log(tmp_path / "job.darshan", files, nprocs=4, exe="/apps/ior -r")
    assert {(r.path, r.api) for r in read_log(log).records if r.read_collective} == {
        ("/lustre/coll", "mpiio"), ("/lustre/narrow", "mpiio")}
    assert load_trace(log, app="ior").meta["collective_reads"] == ["/lustre/coll"]
