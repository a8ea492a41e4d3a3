"""The automatic and hierarchical layouts end to end (docs/layouts.md): the whole control plane as
real processes (an emulated cluster with its MDS, a collector per host, the controller started
with `--layout auto` or `--layout hierarchical`) and real shared-file jobs under `iez run`:
iez-bench's IOR-like shared file through MPI-IO (collective and independent, under mpiexec), its
HACC-IO-like shared file and an HDF5 shared file. Each job writes into a directory whose default
layout is one stripe, as real jobs' shared files end up on one OST. Run 1 is traced there; run 2
is placed from the controller's plan. Run 2's layouts are the plan's exactly (read back through
the backend and `iez getstripe`), its data are the bytes of a run without iez, its job OSTCost
(docs/references.md#s000-eq7) is within 10% of the integer bound for its bytes, and the simulator
writes its layouts faster than run 1's on the seed-000 testbed's hardware."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import BUILD, need_built, need_tool
from iez.backend.emulated import EmulatedBackend
from iez.cluster import make_cluster
from iez.demo.experiment import AppJob, measured_usage, plan_counts, remove_files, replan, rpc_bound, run_jobs
from iez.demo.simulate import seed000_hardware, simulate_rates
from iez.demo.stack import Stack, control_plane
from iez.emulated.usage import file_ost_bytes, ost_bytes
from iez.layout.layout import FileLayout, Layout
from iez.lustre.getstripe import parse_getstripe
from iez.metrics import balance_report
from iez.plan import loads as load_plan
from iez.workload.bench import HaccJob, IorJob, command

MiB = 1 << 20
RANKS = 5  # 15 OSTs: hierarchical cuts 5 writers' file into 5 components of 3 OSTs, all 15 used
BLOCK = 12 * MiB  # per rank: 60 MiB a file, 4 MiB on each of the 15 OSTs when spread evenly
HACC_HEADER = 1 << 20
HACC_PARTICLES = BLOCK // 38  # HACC-IO's 38 bytes a particle, about BLOCK a rank
CLUSTER = seed000_hardware(make_cluster(ost_size=1 << 30))  # the allocator plans for the simulated hardware


def jobs_in(root: Path) -> list[AppJob]:
    """The four shared-file jobs, each in its own directory under `root`."""
    ior = dict(ranks=RANKS, block=BLOCK, transfer=MiB, read=False)
    return [AppJob("ior-collective", root / "ior-collective", 1,
                   IorJob(test_file=str(root / "ior-collective" / "testFile"), api="MPIIO", collective=True, **ior)),
            AppJob("ior-independent", root / "ior-independent", 1,
                   IorJob(test_file=str(root / "ior-independent" / "testFile"), api="MPIIO", **ior)),
            AppJob("hacc-io", root / "hacc-io", 1,
                   HaccJob(path=str(root / "hacc-io" / "out"), particles=HACC_PARTICLES, ranks=RANKS, fpp=False,
                           header=HACC_HEADER, read=False, api="MPIIO")),
            AppJob("hdf5", root / "hdf5", 1,
                   IorJob(test_file=str(root / "hdf5" / "testFile"), api="HDF5", collective=True,
                          **dict(ior, transfer=MiB // 2)))]  # HDF5's 2 KiB of metadata make the file a hair over whole rounds


def moved(j: AppJob, root: Path) -> AppJob:
    """The same job writing under `root` instead."""
    d = root / j.app
    job = replace(j.job, path=str(d / "out")) if isinstance(j.job, HaccJob) else replace(j.job, test_file=str(d / "testFile"))
    return replace(j, directory=d, job=job)


def file_of(j: AppJob) -> str:
    (path,) = j.job.files()
    return path


def placement(fl: FileLayout) -> tuple:
    """What placement decides, per component: extent, stripe size, OSTs in stripe order (the
    stored layout also numbers components and names each one's first OST, as Lustre does)."""
    return tuple((c.start, c.end, c.layout.stripe_size, c.layout.osts) for c in fl.parts())


def getstripe(iez_cmd: list[str], path: str) -> FileLayout:
    r = subprocess.run(iez_cmd + ["getstripe", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (f,) = parse_getstripe(r.stdout).files
    return f.layout


def data_of(j: AppJob) -> tuple[int, str]:
    """(size, sha256) of what a job wrote. An HDF5 file's object header carries its modification
    time (HDF5 tracks object times by default), so two runs differ in that one word: there, the
    dataset's bytes (contiguous, at the offset HDF5 gives) and the file's size are compared."""
    path = file_of(j)
    size = os.path.getsize(path)
    start, end = 0, size
    if j.job.api == "HDF5":
        import h5py

        with h5py.File(path, "r") as f:
            start = f["data"].id.get_offset()
            end = start + f["data"].id.get_storage_size()
    with open(path, "rb") as f:
        f.seek(start)
        return size, hashlib.sha256(f.read(end - start)).hexdigest()


def write_seconds(stack: Stack, j: AppJob, layout: FileLayout, workdir: Path) -> float:
    """The simulated write phase of the job on `layout` (seed-000 testbed hardware)."""
    (req,) = [replace(r, write_bytes=os.path.getsize(r.path)) for r in j.requests()]
    rates = simulate_rates(stack.cluster, [req], {req.path: layout}, workdir=workdir)
    return rates.write_bytes / rates.write_bw


@pytest.mark.parametrize("mode", ["auto", "hierarchical"])
def test_shared_files_spread_by_the_plan(tmp_path, iez_cmd, subenv, mode):
    need_tool("mpiexec", "apt-get install mpich")
    need_built(BUILD / "libiez" / "libiez.so", BUILD / "libiez" / "libiez-mpi.so")
    base_env = {k: v for k, v in subenv.items() if not k.startswith("IEZ_") and k != "LD_PRELOAD"}
    with control_plane(tmp_path / "plane", CLUSTER, seed=3, layout=mode) as stack:
        jobs = jobs_in(stack.cd.fs)
        names = {j.app: f"{mode}-{j.app}" for j in jobs}
        backend = EmulatedBackend(stack.cd.root)
        for j in jobs:  # the file system's default: one stripe (`lfs setstripe -c 1 DIR`)
            j.directory.mkdir()
            backend.set_default(j.directory, Layout(stripe_count=1))

        ref = {}  # the same jobs without iez, outside the cluster
        for j in jobs:
            r = moved(j, tmp_path / "ref")
            r.directory.mkdir(parents=True)
            p = subprocess.run(command(r.job, json_report=False), capture_output=True, text=True, timeout=120,
                               env=base_env)
            assert p.returncode == 0, p.stderr
            ref[j.app] = data_of(r)

        run_jobs(stack, jobs, names)  # run 1: traced, Lustre's default layout
        traced = {j.app: backend.get_layout(file_of(j)) for j in jobs}
        for app, fl in traced.items():
            assert fl.plain is not None and fl.plain.stripe_count == 1, (app, fl)
        slow = {j.app: write_seconds(stack, j, traced[j.app], tmp_path / "sim" / j.app / "1") for j in jobs}

        remove_files(jobs)  # run 2 creates its files anew, as a job's next run does
        replan(stack, list(names.values()))
        plans = {}
        with stack.client() as c:
            for j in jobs:
                reply = c.fetch_plan(names[j.app], wait=60)
                assert reply.status == "ready", reply
                plans[j.app] = load_plan(reply.text).entries
        before = measured_usage(stack)
        run_jobs(stack, jobs, names)  # run 2: placed by libiez from the plan
        assert plan_counts(stack, list(names.values())) == (len(jobs), 0)
        # what the OSSs report (their parameter trees) is what the layouts put on each OST
        after = measured_usage(stack)
        placed = ost_bytes((os.path.getsize(file_of(j)), backend.get_layout(file_of(j))) for j in jobs)
        assert {i: after[i] - before[i] for i in after if after[i] != before[i]} == {i: n for i, n in placed.items() if n}

        for j in jobs:
            path = file_of(j)
            assert sorted(plans[j.app]) == [path]
            planned = plans[j.app][path]
            got = backend.get_layout(path)
            # exactly the plan, as the backend and as `lfs getstripe` (here `iez getstripe`) show it
            assert placement(got) == placement(planned), j.app
            assert placement(getstripe(iez_cmd, path)) == placement(planned), j.app
            if mode == "hierarchical":
                assert len(got.components) == RANKS, (j.app, got)
            else:
                assert got.plain is not None and got.plain.stripe_count > 1, (j.app, got)
            # the bytes of a run without iez
            assert data_of(j) == ref[j.app], j.app
            # spread: within 10% of the best any layout of whole RPCs can do for these bytes
            size = os.path.getsize(path)
            cost = balance_report(stack.cluster, file_ost_bytes(size, got)).job.ost_cost
            bound = rpc_bound(size, len(stack.cluster.osts))
            assert cost <= 1.1 * bound, (j.app, cost, bound, got)
            assert balance_report(stack.cluster, file_ost_bytes(size, traced[j.app])).job.ost_cost == len(CLUSTER.osts)
            # and written faster than on its one OST
            fast = write_seconds(stack, j, got, tmp_path / "sim" / j.app / "2")
            assert fast < slow[j.app] / 2, (j.app, fast, slow[j.app])
