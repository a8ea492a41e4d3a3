"""Past runs to predict from: IOR-like, HACC-IO-like and checkpointing jobs (docs/references.md#s000-testbed).

Each generator returns `runs` runs, oldest first, each a list of `Request` in create order, with
the run-to-run variation such jobs show:

- IOR (`ior -w -F -b BLOCK -t XFER -o DIR/testFile`): FPP files `testFile.%08d` (the rank),
  or one shared file (SSF). The block size fixes every file's bytes, so without a deadline the
  runs differ only in when each rank creates its file. With a stonewall deadline (`-D`), each
  rank writes what it can by then: whole transfers, in proportion to its rate, which has a lasting
  per-rank part (its node) and a per-run part.
- HACC-IO: FPP files `FPP<run>-Part%08d-of-%08d.data` (docs/references.md#s000-table1), 38 bytes per particle.
  Particle counts start imbalanced across ranks and then migrate between neighbouring ranks
  from one checkpoint (run) to the next; the total is conserved, as in the N-body code.
- Checkpoint: every rank writes `ckpt_step%04d_r%d.h5` several times per run, the step counter
  continuing across runs; sizes grow a little with each step.

Pure and seeded: the same arguments give the same runs.
"""

from __future__ import annotations

import numpy as np

from iez.request import Request

MiB = 1 << 20
GiB = 1 << 30
HACC_PARTICLE_BYTES = 38  # x, y, z, vx, vy, vz, phi as float32 (28) + id int64 (8) + mask uint16 (2)


def _open_times(rng: np.random.Generator, n: int, start: float, spread: float) -> np.ndarray:
    """When n ranks create their files after a barrier at `start`: a race, up to `spread` s."""
    return start + rng.uniform(0.0, spread, n)


def _in_create_order(requests: list[Request]) -> list[Request]:
    return sorted(requests, key=lambda q: q.create_time)


def ior(
    *,
    runs: int = 5,
    nprocs: int = 64,
    block: int = GiB,
    transfer: int = MiB,
    stripe_count: int = 8,
    fpp: bool = True,
    deadline: float = 0.0,
    directory: str = "/lustre/scratch/ior",
    app: str = "ior",
    seed: int = 0,
) -> list[list[Request]]:
    """IOR write runs. `deadline` > 0: stonewalling, each rank's rate spread by that fraction
    (the deadline falls at 90% of the block at the mean rate)."""
    rng = np.random.default_rng(seed)
    node = 1 + deadline * rng.standard_normal(nprocs)  # a rank's lasting speed (its node)
    out = []
    for r in range(1, runs + 1):
        start = rng.uniform(0.2, 1.5)  # MPI init and IOR setup before the write phase
        times = _open_times(rng, nprocs, start, 0.005)
        if deadline:
            rate = node * (1 + deadline * rng.standard_normal(nprocs))
            xfers = np.minimum(block // transfer, np.floor(0.9 * rate * (block // transfer)))
            sizes = (np.maximum(xfers, 1) * transfer).astype(int)
        else:
            sizes = np.full(nprocs, block)
        if fpp:
            reqs = [
                Request(f"{directory}/testFile.{k:08d}", int(sizes[k]), stripe_count, k, app, str(r), float(times[k]))
                for k in range(nprocs)
            ]
        else:
            reqs = [
                Request(f"{directory}/testFile", int(sizes.sum()), stripe_count, 0, app, str(r), float(times.min()),
                        comm_size=nprocs, api="mpiio")
            ]
        out.append(_in_create_order(reqs))
    return out


def hacc_io(
    *,
    runs: int = 5,
    nprocs: int = 32,
    particles: int = 10_000_000,
    stripe_count: int = 8,
    imbalance: float = 0.03,
    migration: float = 0.002,
    directory: str = "/lustre/scratch/hacc-io",
    app: str = "hacc-io",
    seed: int = 0,
) -> list[list[Request]]:
    """HACC-IO FPP checkpoints, `particles` per rank on average. `imbalance`: spread of the first
    counts; `migration`: particles crossing each rank boundary per run, as a fraction."""
    rng = np.random.default_rng(seed)
    counts = particles * (1 + imbalance * rng.standard_normal(nprocs))
    counts *= particles * nprocs / counts.sum()
    out = []
    for r in range(1, runs + 1):
        if r > 1:  # flux[i] crosses from rank i to rank i+1 (periodic box): the total is unchanged
            flux = migration * particles * rng.standard_normal(nprocs)
            counts = counts - flux + np.roll(flux, 1)
        n = np.rint(counts).astype(int)
        times = _open_times(rng, nprocs, rng.uniform(5.0, 8.0), 0.05)
        reqs = [
            Request(
                f"{directory}/FPP{r}-Part{k:08d}-of-{nprocs:08d}.data",
                int(n[k]) * HACC_PARTICLE_BYTES,
                stripe_count,
                k,
                app,
                str(r),
                float(times[k]),
                api="mpiio",
            )
            for k in range(nprocs)
        ]
        out.append(_in_create_order(reqs))
    return out


def checkpoint(
    *,
    runs: int = 3,
    nprocs: int = 4,
    per_run: int = 3,
    interval: int = 10,
    size: int = 64 * MiB,
    growth: float = 0.001,
    stripe_count: int = 2,
    directory: str = "/lustre/scratch/sim",
    app: str = "sim",
    seed: int = 0,
) -> list[list[Request]]:
    """A simulation writing a checkpoint per rank every `interval` steps, `per_run` per run."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(runs):
        reqs = []
        for k in range(per_run):
            n = r * per_run + k
            step = (n + 1) * interval
            times = _open_times(rng, nprocs, 60.0 * (k + 1), 0.01)
            reqs += [
                Request(
                    f"{directory}/ckpt_step{step:04d}_r{rank}.h5",
                    int(size * (1 + growth) ** n),
                    stripe_count,
                    rank,
                    app,
                    str(r + 1),
                    float(times[rank]),
                    api="hdf5",
                )
                for rank in range(nprocs)
            ]
        out.append(_in_create_order(reqs))
    return out
