"""The seed-000 evaluation (§II-D, §IV) as allocation requests, for benchmarks, tests and demos.

The jobs come from the simulator's workload generators (`iez.sim.workload`), so a scenario
placed here and one simulated there are the same files. Pure: no I/O.

Testbed: 1 MDS, 3 OSSs x 5 OSTs of 10 GB (`iez.cluster.make_cluster()`). Jobs:
- IOR FPP with 8, 16 and 64 processes writing 16, 32 and 64 GB (2, 2 and 1 GiB a process),
  stripe count 8 (Fig. 7) and 4 (Fig. 8);
- HACC-I/O FPP with 8, 16 and 32 processes, 10M particles of 38 bytes per rank (§IV-B),
  stripe count 8 (Fig. 9). HACC-IO's particle argument is per rank, and it gives 3.0, 6.1 and
  12.2 GB, close to the paper's "approximately 4, 7.7 and 13.5 GB" (10M split over the ranks
  would be 0.38 GB in every case);
- IOR SSF: 16 processes writing one 32 GB file and 32 processes one 64 GB file, stripe count 8
  (Figs. 12, 13);
- HACC-I/O (16 processes, stripe count 8) and IOR (16 processes, 2 GiB each, stripe count 4)
  at once (Fig. 14).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iez.cluster import Cluster
from iez.errors import ConfigError
from iez.request import Request
from iez.sim import workload as sim_workload
from iez.sim.workload import Pattern, Workload, generated

GiB = 1 << 30
HACC_PARTICLES = 10_000_000


@dataclass(frozen=True)
class Scenario:
    name: str
    requests: tuple[Request, ...]
    paper: tuple[float, float] | None = None  # seed 000's OSTCost under RR and under iez
    source: str = ""  # where seed 000 reports it


def requests_of(wl: Workload, run: str = "1") -> list[Request]:
    """One request per file of the workload: a shared file (one file, several ranks) is SSF."""
    shared = len(wl.files) == 1 and wl.ranks > 1
    return [Request(path=f.path, write_bytes=f.size, stripe_count=f.stripe_count, rank=0 if shared else k,
                    app=wl.name, run=run, comm_size=wl.ranks if shared else 1, api="mpiio" if shared else "posix")
            for k, f in enumerate(wl.files)]


def ior(ranks: int, block: int, stripe_count: int, mode: str = "fpp", name: str = "ior") -> list[Request]:
    """IOR: each rank writes `block` bytes, to its own file (fpp) or its part of one (ssf)."""
    return requests_of(generated(Pattern(name=name, kind="ior", ranks=ranks, mode=mode, block=block,
                                         transfer=_transfer(block), stripe_count=stripe_count), sim_workload.ior))


def hacc_io(ranks: int, particles: int = HACC_PARTICLES, stripe_count: int = 8, mode: str = "fpp",
            name: str = "hacc-io", per_rank: bool = False) -> list[Request]:
    """HACC-I/O: 38 bytes a particle; `particles` split over the ranks (or each rank's, per_rank)."""
    if ranks < 1 or particles < 1:
        raise ConfigError("HACC-I/O needs at least one rank and one particle")
    each = particles if per_rank else -(-particles // ranks)
    return requests_of(generated(Pattern(name=name, kind="hacc-io", ranks=ranks, mode=mode, particles=each,
                                         stripe_count=stripe_count), sim_workload.hacc_io))


def _transfer(block: int) -> int:
    # IOR's -t must divide -b: 1 MiB when it does, else the whole block in one call.
    return 1 << 20 if block % (1 << 20) == 0 else block


def paper_scenarios() -> list[Scenario]:
    out = []
    for count, paper, fig in ((8, (1.47, 1.01), "Fig. 7"), (4, (1.22, 1.01), "Fig. 8")):
        for ranks, block in ((8, 2 * GiB), (16, 2 * GiB), (64, GiB)):
            out.append(Scenario(f"IOR FPP {ranks} procs c={count}", tuple(ior(ranks, block, count)),
                                paper if ranks == 64 else None, fig))
    for ranks in (8, 16, 32):
        out.append(Scenario(f"HACC-I/O FPP {ranks} procs c=8", tuple(hacc_io(ranks, per_rank=True)),
                            (1.37, 1.00) if ranks == 32 else None, "Fig. 9"))
    out.append(Scenario("IOR SSF 16 procs 32 GiB c=8", tuple(ior(16, 2 * GiB, 8, "ssf")), None, "Fig. 12"))
    out.append(Scenario("IOR SSF 32 procs 64 GiB c=8", tuple(ior(32, 2 * GiB, 8, "ssf")), None, "Fig. 13"))
    both = hacc_io(16, name="hacc-io", per_rank=True) + ior(16, 2 * GiB, 4, name="ior")
    out.append(Scenario("HACC-I/O c=8 + IOR c=4, 16 procs each", tuple(both), (1.17, 1.00), "Fig. 14"))
    return out


def uneven_fill(cluster: Cluster, low: float = 0.1, high: float = 0.4, seed: int = 0) -> Cluster:
    """The cluster with each OST already `low`..`high` full (uniform, reproducible by seed)."""
    if not 0 <= low <= high < 1:
        raise ConfigError(f"fill range {low}..{high}: need 0 <= low <= high < 1")
    fill = np.random.default_rng(seed).uniform(low, high, len(cluster.osts))
    return cluster.with_used({o.index: int(f * o.capacity) for o, f in zip(cluster.osts, fill)})
