"""Simulated I/O rates for the demo: the job a scenario's requests describe, run by the simulator
(`iez.sim`, SimGrid) on exactly the layouts its files got.

The demo measures where bytes landed (OSTCost); this says what that placement does to the job's
bandwidth on the paper's testbed (docs/references.md#s000-testbed). Each request is one file
written and then read back by its rank(s), as IOR and HACC-I/O do: a file per process (FPP)
belongs to its rank, a shared file (SSF, `comm_size` ranks) is cut into one contiguous block per
rank. Ranks go to the client nodes in blocks (`mpiexec -ppn`), and applications of one scenario
share the same nodes and run as one job: they start together, and the write phase ends when the
last file is written (a barrier before the reads, as IOR has).

Hardware. The simulator uses the cluster model's own `write_bw`/`read_bw` (OSTs) and `nic_bw`
(OSSs), so it sees the same hardware as the allocator that placed the files; give the demo's
clusters the seed-000 testbed's with `seed000_hardware`. The paper (1 MDS, 3 OSSs x 5 OSTs of
10 GB, 2 clients) gives no device or network figures; we take the values of
`scenarios/seed000-testbed.toml` (a test keeps them equal):
- an OST is one 7,200 rpm SATA disk under ldiskfs: write 120 MB/s, read 150 MB/s;
- every NIC (the 2 clients, the 3 OSSs) is 10 GbE, 1.25 GB/s.
So the 15 OSTs (1.8 GB/s write, 2.25 GB/s read), not the network, limit a balanced job: the
only regime where placement changes bandwidth. (With the library's default 400/500 MB/s OSTs,
an OSS's five OSTs outrun its NIC and two client NICs cap everything near 2.5 GB/s.)
The allocator and the simulator must see the same figures: `balanced` keeps a job no slower
than round-robin in its own time model, and on different hardware that promise means nothing.

Granularity: one simulated stream per (client node, OST object, phase), the simulator's default
(docs/simulator.md); RPCs are not simulated one by one. The largest demo scenario (64 files x 8
stripes) is 512 streams a phase, so every scenario simulates in tens of milliseconds, and the
run's cost does not grow with the bytes: `scale` multiplies every file back to the paper's size
without slowing anything down.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from iez.cluster import Cluster
from iez.errors import ConfigError
from iez.layout.layout import FileLayout, Layout
from iez.request import Request
from iez.sim import description, engine
from iez.sim.bounds import lower_bound, phase_bound
from iez.sim.results import parse
from iez.sim.scenario import Access, JobEntry, Scenario, SimParams
from iez.sim.trace import workload_from_records
from iez.sim.workload import Pattern
from iez.trace.record import FileRecord

SEED000_OST_WRITE_BW = 120e6  # bytes/s, one SATA disk per OST
SEED000_OST_READ_BW = 150e6
SEED000_NIC_BW = 1.25e9  # 10 GbE, clients and OSSs
SEED000_CLIENTS = 2


@dataclass(frozen=True)
class SimRates:
    """The simulated job: rates in bytes/s, times in seconds."""

    write_bw: float  # bytes written / time of the write phase
    read_bw: float
    makespan: float  # first create to last byte read
    write_bytes: int
    read_bytes: int
    bound: float  # analytic lower bound on the makespan for these layouts (iez.sim.bounds)
    bound_resource: str  # what sets it, e.g. "OST0003 write"
    write_bw_limit: float  # the highest write rate these layouts allow: bytes / the phase's bound
    read_bw_limit: float


def seed000_hardware(cluster: Cluster) -> Cluster:
    """The cluster with the seed-000 testbed's OST and OSS NIC bandwidths (module docstring)."""
    return replace(cluster,
                   osts=tuple(replace(o, write_bw=SEED000_OST_WRITE_BW, read_bw=SEED000_OST_READ_BW)
                              for o in cluster.osts),
                   osses=tuple(replace(s, nic_bw=SEED000_NIC_BW) for s in cluster.osses))


def simulate_rates(cluster: Cluster, requests: Sequence[Request], layouts: Mapping[str, Layout | FileLayout],
                   clients: int = SEED000_CLIENTS, *, workdir: Path, scale: int = 1,
                   client_nic_bw: float = SEED000_NIC_BW) -> SimRates:
    """Simulate the requests' job on `cluster` (its bandwidths) with each file on `layouts[path]`,
    from `clients` client nodes of `client_nic_bw` each.

    `workdir` receives the engine's description.json and results.json. `scale` multiplies every
    request's bytes (the demo divides them to write quickly). Bad input raises one IezError line.
    """
    if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
        raise ConfigError(f"clients must be an integer >= 1, got {clients!r}")
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ConfigError(f"scale must be an integer >= 1, got {scale!r}")
    if not client_nic_bw > 0:
        raise ConfigError(f"client_nic_bw must be > 0, got {client_nic_bw!r}")
    records, files = _records(requests, layouts, clients, scale)
    wl = workload_from_records(records, "+".join(dict.fromkeys(r.app or "job" for r in requests)))
    scn = Scenario(title="demo", cluster=cluster, sim=SimParams(clients=clients, client_nic_bw=client_nic_bw),
                   access=Access(), jobs=(JobEntry(pattern=Pattern(name=wl.name)),))
    desc = description.build(scn, [wl], files)
    job = parse(engine.run(desc, workdir)).job(wl.name)
    bound = lower_bound(desc)
    limits = {"write": 0.0, "read": 0.0}
    for ph in desc["jobs"][0]["phases"]:
        n = sum(s[2] for s in ph["streams"])
        t = phase_bound(desc, desc["jobs"][0], ph).seconds
        if n and t > 0:
            limits[ph["kind"]] = n / t
    return SimRates(write_bw=job.write_bw, read_bw=job.read_bw, makespan=job.makespan,
                    write_bytes=int(job.write_bytes), read_bytes=int(job.read_bytes),
                    bound=bound.seconds, bound_resource=bound.resource,
                    write_bw_limit=limits["write"], read_bw_limit=limits["read"])


def _records(requests: Sequence[Request], layouts: Mapping[str, Layout | FileLayout], clients: int,
             scale: int) -> tuple[list[FileRecord], dict[str, FileLayout]]:
    """What each rank of each application does to each file, as a trace would record it
    (`iez.sim.trace` turns such records into the simulator's workload), and each file's layout."""
    if not requests:
        raise ConfigError("no requests to simulate")
    apps: dict[str, list[Request]] = {}
    files: dict[str, FileLayout] = {}
    for r in requests:
        if r.path in files:
            raise ConfigError(f"{r.path} is requested twice")
        lay = layouts.get(r.path)
        if not isinstance(lay, (Layout, FileLayout)):
            raise ConfigError(f"no layout for {r.path}")
        files[r.path] = FileLayout.of(lay)
        if isinstance(r.write_bytes, bool) or not isinstance(r.write_bytes, int) or r.write_bytes < 0:
            raise ConfigError(f"{r.path}: write_bytes must be an integer >= 0, got {r.write_bytes!r}")
        if r.comm_size < 1 or r.rank < 0 or (r.comm_size > 1 and r.rank >= r.comm_size):
            raise ConfigError(f"{r.path}: rank {r.rank} of {r.comm_size} is not a rank of its communicator")
        apps.setdefault(r.app or "job", []).append(r)
    out: list[FileRecord] = []
    first = 0  # the applications' ranks are numbered one after another within the one job
    for app, reqs in apps.items():
        ranks = max(r.comm_size if r.comm_size > 1 else r.rank + 1 for r in reqs)
        per_node = -(-ranks // clients)
        for r in reqs:
            size = r.write_bytes * scale
            writers = range(r.comm_size) if r.comm_size > 1 else (r.rank,)
            block = -(-size // len(writers))
            for k, rank in enumerate(writers):
                lo, hi = min(size, k * block), min(size, (k + 1) * block)
                if hi <= lo:
                    continue
                out.append(FileRecord(path=r.path, app=app, rank=first + rank, host=f"node{rank // per_node}",
                                      created=k == 0, bytes_written=hi - lo, bytes_read=hi - lo, max_offset=hi,
                                      comm_size=r.comm_size))
        first += ranks
    return out, files
