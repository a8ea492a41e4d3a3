"""`iez run` with MPI: an MPI job gets libiez-mpi.so in every rank, anything else
libiez.so. End to end with a real emulated cluster, collectors and a controller: an MPI-IO
HACC-IO job run with `iez run ... -- mpiexec -n 4 iez-bench -a MPIIO ...` is traced through its
MPI-IO layer the first time, then placed by the controller's plan."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, need_tool
from iez.cluster import make_cluster
from iez.demo.stack import control_plane
from iez.plan import loads as load_plan
from iez.preload import elf_needed, launcher_args, uses_mpi
from iez.trace.shard import read_trace
from iez.workload.bench import HaccJob, command

LIBDIR = BUILD / "libiez"


def test_which_commands_run_mpi_ranks(tmp_path):
    for argv in (["mpiexec", "-n", "2", "x"], ["/usr/bin/mpirun", "x"], ["srun", "-n", "4", "x"], ["orterun", "x"]):
        assert uses_mpi(argv), argv
    mpiio, h5mpi, h5, writes = (LIBDIR / n for n in ("iez-test-mpiio", "iez-test-h5-mpi", "iez-test-h5",
                                                     "iez-test-writes"))
    for p in (mpiio, h5mpi, h5, writes):
        if not p.exists():
            pytest.fail(f"{p} is missing: build with MPICH and HDF5 installed (cmake --build build)")
    assert "libmpich.so.12" in elf_needed(mpiio)
    assert uses_mpi([str(mpiio)]) and uses_mpi([str(h5mpi)])  # an MPI singleton links libmpi
    assert not uses_mpi([str(h5)]) and not uses_mpi([str(writes)])
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nmpiexec -n 2 true\n")
    script.chmod(0o755)
    assert not uses_mpi([str(script)]) and not uses_mpi(["sh", "-c", "mpiexec true"]) and not uses_mpi(["nothere"])
    assert elf_needed(script) == [] and elf_needed(tmp_path / "nothere") == []


def test_open_mpi_launchers_are_told_to_pass_the_environment(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    shutil.copy("/bin/true", bin_ / "orterun")
    (bin_ / "mpirun").symlink_to("orterun")  # Debian: mpirun -> mpirun.openmpi -> orterun
    env = {"PATH": str(bin_)}
    assert launcher_args(["mpirun", "-n", "2", "app"], ["LD_PRELOAD", "IEZ_APP"], env) == [
        "mpirun", "-x", "LD_PRELOAD", "-x", "IEZ_APP", "-n", "2", "app"]
    mpiexec = need_tool("mpiexec", "apt-get install mpich")  # MPICH's passes everything
    assert launcher_args([mpiexec, "-n", "2", "app"], ["LD_PRELOAD"]) == [mpiexec, "-n", "2", "app"]
    assert launcher_args(["sh", "-c", "x"], ["LD_PRELOAD"]) == ["sh", "-c", "x"]


def test_an_mpi_job_runs_unchanged_when_the_controller_is_down(iez_cmd, subenv, tmp_path):
    mpiexec = need_tool("mpiexec", "apt-get install mpich")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    marker = tmp_path / "preload"
    r = subprocess.run(iez_cmd + ["run", "--app", "m", "--controller", f"http://127.0.0.1:{port}", "--", mpiexec,
                                  "-n", "2", "sh", "-c", f'echo "[$LD_PRELOAD]" >> {marker}; exit 3'],
                       capture_output=True, text=True, timeout=120, env=subenv)
    assert r.returncode == 3 and "running the command unchanged" in r.stderr
    assert marker.read_text().splitlines() == ["[]", "[]"]


@pytest.fixture
def stack(tmp_path):
    with control_plane(tmp_path / "plane", make_cluster(ost_size=1 << 30), seed=4) as s:
        yield s


def layouts_of(files) -> dict[str, tuple]:
    from iez.backend import backend_for

    return {f: tuple((c.start, c.end, c.layout.stripe_size, c.layout.osts) for c in backend_for(f).get_layout(f).parts())
            for f in files}


def test_mpi_job_traced_then_placed(stack, iez_cmd, subenv, tmp_path):
    out = stack.cd.fs / "hacc"
    out.mkdir()
    job = HaccJob(str(out / "FPP"), particles=20000, ranks=4, fpp=True, header=4096, read=False, api="MPIIO")
    env = stack.client_env(subenv)
    traces = tmp_path / "t1"

    def argv(trace_dir: Path) -> list[str]:
        return iez_cmd + ["run", "--app", "hacc", "--emulated", str(stack.cd.root), "--trace-dir", str(trace_dir),
                          "--"] + command(job, json_report=False)

    r1 = subprocess.run(argv(traces), capture_output=True, text=True, timeout=180, env=env)
    assert r1.returncode == 0, r1.stderr
    assert "warning" not in r1.stderr, r1.stderr
    files = sorted(job.files())
    # every rank ran libiez-mpi: its MPI-IO records, one file each on MPI_COMM_SELF, in the job's merged trace
    recs = [x for x in read_trace(traces).records if x.api == "mpiio"]
    assert sorted((x.path, x.rank, x.comm_size, x.created) for x in recs) == [(f, r, 1, True) for r, f in enumerate(files)]
    assert len(list(traces.glob("*.job"))) == 1
    assert all(len(p[0][3]) == 1 for p in layouts_of(files).values())  # traced run: the default layout

    with stack.client() as c:
        reply = c.fetch_plan("hacc", wait=60)
    assert reply.status == "ready", reply
    plan = load_plan(reply.text)
    assert sorted(plan.entries) == files
    for f in files:
        os.unlink(f)  # HACC-IO writes an existing file in place: the next run creates them anew
    r2 = subprocess.run(argv(tmp_path / "t2"), capture_output=True, text=True, timeout=180, env=env)
    assert r2.returncode == 0 and "warning" not in r2.stderr, r2.stderr
    want = {f: tuple((c.start, c.end, c.layout.stripe_size, c.layout.osts) for c in plan.entries[f].parts())
            for f in files}
    assert layouts_of(files) == want
    with stack.client() as c:
        status = c.app("hacc")
    (run2,) = [x for x in status["runs"] if x["run"] == reply.run]
    assert run2["plan_hits"] == 4 and run2["plan_misses"] == 0, status

    # a command that is no MPI job gets the plain library
    marker = tmp_path / "preload"
    r3 = subprocess.run(iez_cmd + ["run", "--app", "shell", "--", "sh", "-c", f'echo "$LD_PRELOAD" > {marker}'],
                        capture_output=True, text=True, timeout=120, env=env)
    assert r3.returncode == 0, r3.stderr
    assert Path(marker.read_text().split()[0]).name == "libiez.so"
