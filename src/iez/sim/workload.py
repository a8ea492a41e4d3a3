"""Jobs as the simulator sees them: files, and phases of compute or of I/O extents per MPI rank.

The generators follow the benchmarks the papers ran (IOR, HACC-I/O, NAS BT-IO, MPI-Tile-IO), and
`generated` repeats their I/O in the bursty compute/I-O cycles of docs/references.md#s004-figs3-4.
They only say which byte ranges each rank reads or writes and how many application calls that
takes; where the bytes land (layouts, OSTs) is decided later by the placement. Which generator a
job's `kind` names is `iez.sim.kinds`' table. Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from iez.errors import ConfigError

HACC_BYTES_PER_PARTICLE = 38  # xx yy zz vx vy vz phi (7 x float32) + pid (int64) + mask (uint16)
HACC_VARIABLES = 9  # HACC-I/O writes each variable with its own call
BT_DUMPS = 40  # NAS BT-IO writes the solution every 5 of 200 time steps
BT_CLASS_POINTS = {"A": 64, "B": 102, "C": 162, "D": 408}  # grid points per dimension
BT_BYTES_PER_POINT = 5 * 8  # five doubles


@dataclass(frozen=True)
class FileSpec:
    path: str
    size: int
    stripe_count: int = 1
    stripe_size: int = 1 << 20
    osts: tuple[int, ...] = ()  # the layout the file really got, when a trace says so


@dataclass(frozen=True)
class Extent:
    rank: int
    path: str
    offset: int
    length: int


@dataclass(frozen=True)
class Phase:
    kind: str  # compute | write | read
    label: str = ""
    seconds: float = 0.0  # compute phases
    extents: tuple[Extent, ...] = ()
    calls: int = 1  # application calls per rank
    call_size: int = 0  # bytes per call
    creates: tuple[tuple[int, int], ...] = ()  # (rank, files created)
    opens: tuple[tuple[int, int], ...] = ()  # (rank, files opened, not created)
    collective_read: str = "off"  # a read phase's two-phase collective read: off | romio | lustre (iez.sim.collread)


@dataclass(frozen=True)
class Workload:
    name: str
    ranks: int
    files: tuple[FileSpec, ...]
    phases: tuple[Phase, ...]
    ranks_per_node: int = 1
    node_map: tuple[int, ...] = ()  # node of each rank when known (traces); else rank // ranks_per_node

    @property
    def nodes(self) -> int:
        if self.node_map:
            return max(self.node_map) + 1
        return -(-self.ranks // self.ranks_per_node)

    def node_of(self, rank: int) -> int:
        return self.node_map[rank] if self.node_map else rank // self.ranks_per_node


@dataclass(frozen=True)
class Pattern:
    """What a job does, as its scenario entry says it (every size in bytes)."""

    name: str
    kind: str = "ior"  # a name in iez.sim.kinds.KINDS
    ranks: int = 1
    ranks_per_node: int = 1
    mode: str = "fpp"  # fpp (file per process) | ssf (single shared file)
    block: int = 1 << 30  # IOR -b, bytes per rank per segment
    transfer: int = 1 << 20  # IOR -t, bytes per call
    segments: int = 1  # IOR -s
    stripe_count: int = 1
    stripe_size: int = 1 << 20
    write: bool = True
    read: bool = False
    particles: int = 0  # HACC-I/O particles per rank
    bt_class: str = "B"
    dumps: int = BT_DUMPS  # BT-IO solution dumps (seed 001's modified BT-IO writes 8: docs/references.md#s001-fig7)
    tile: tuple[int, int] = (2048, 1536)  # MPI-Tile-IO elements per tile (x, y)
    element: int = 64  # MPI-Tile-IO bytes per element
    collective: bool = True  # MPI-IO collective buffering (one aggregator per node)
    bursts: int = 1  # compute/I-O cycles
    compute: float = 0.0  # seconds of compute in each burst
    compute_after: bool = False  # each burst is I/O then compute (default: compute then I/O)
    collective_read: str = "off"  # how its reads are collective: off | romio | lustre (iez.sim.collread)
    split_writing: bool = False  # mpi-open: one rank creates, the others open nothing (docs/references.md#s001-hierarchical)
    prefix: str = "/lustre/scratch"
    extra: dict = field(default_factory=dict, compare=False)


# A generated kind: the files a job's pattern makes and its I/O phases, once.
Generator = Callable[[Pattern], tuple[list[FileSpec], list[Phase]]]


def generated(p: Pattern, make: Generator, repeats: bool = True) -> Workload:
    """The workload of a generated kind: `make`'s I/O, once per burst with compute before (or
    after) it, unless the kind makes its own bursts (`repeats=False`)."""
    if p.ranks < 1 or p.ranks_per_node < 1:
        raise ConfigError(f"job {p.name}: ranks and ranks_per_node must be >= 1")
    if p.mode not in ("fpp", "ssf"):
        raise ConfigError(f"job {p.name}: mode {p.mode!r} is not fpp or ssf")
    if p.bursts < 1 or p.compute < 0:
        raise ConfigError(f"job {p.name}: bursts must be >= 1 and compute >= 0")
    files, io = make(p)
    if not repeats:
        return Workload(p.name, p.ranks, tuple(files), tuple(io), p.ranks_per_node)
    phases: list[Phase] = []
    for b in range(p.bursts):
        compute = [Phase("compute", label=f"compute {b + 1}", seconds=p.compute)] if p.compute > 0 else []
        if not p.compute_after:
            phases += compute
        for ph in io:
            label = ph.label if p.bursts == 1 else f"{ph.label} {b + 1}"
            # Files exist after the first burst: later bursts open them instead of creating.
            if b and ph.creates:
                ph = replace(ph, opens=_merge(ph.opens, ph.creates), creates=())
            phases.append(replace(ph, label=label))
        if p.compute_after:
            phases += compute
    return Workload(p.name, p.ranks, tuple(files), tuple(phases), p.ranks_per_node)


def _merge(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: dict[int, int] = {}
    for r, n in a + b:
        out[r] = out.get(r, 0) + n
    return tuple(sorted(out.items()))


def _rw(p: Pattern, extents: list[Extent], calls: int, call_size: int, files: list[FileSpec]) -> list[Phase]:
    """A write phase (creating the files) and/or a read phase over the same extents."""
    shared = len(files) == 1 and p.ranks > 1
    creates = ((0, 1),) if shared else tuple((r, 1) for r in range(p.ranks))
    opens = tuple((r, 1) for r in range(1, p.ranks)) if shared else ()
    out = []
    if p.write:
        out.append(Phase("write", f"{p.kind} write", extents=tuple(extents), calls=calls,
                         call_size=call_size, creates=creates, opens=opens))
    if p.read:
        out.append(Phase("read", f"{p.kind} read", extents=tuple(extents), calls=calls, call_size=call_size,
                         opens=tuple((r, 1) for r in range(p.ranks)), collective_read=p.collective_read))
    if not out:
        raise ConfigError(f"job {p.name}: neither write nor read is set")
    return out


def _per_rank(p: Pattern, per_rank: int, calls: int, call_size: int, stem: str) -> tuple[list[FileSpec], list[Phase]]:
    """Each rank moves `per_rank` contiguous bytes: its own file (FPP) or its block of one (SSF)."""
    if p.mode == "fpp":
        files = [FileSpec(f"{p.prefix}/{p.name}/{stem}.{r:08d}", per_rank, p.stripe_count, p.stripe_size)
                 for r in range(p.ranks)]
        extents = [Extent(r, files[r].path, 0, per_rank) for r in range(p.ranks)]
    else:
        path = f"{p.prefix}/{p.name}/{stem}"
        files = [FileSpec(path, per_rank * p.ranks, p.stripe_count, p.stripe_size)]
        extents = [Extent(r, path, r * per_rank, per_rank) for r in range(p.ranks)]
    return files, _rw(p, extents, calls, call_size, files)


def ior(p: Pattern) -> tuple[list[FileSpec], list[Phase]]:
    """IOR: `segments` x `block` bytes per rank in `transfer`-byte calls, file per process or shared."""
    if p.block <= 0 or p.transfer <= 0 or p.segments < 1 or p.block % p.transfer:
        raise ConfigError(f"job {p.name}: IOR needs block > 0, transfer > 0, block a multiple of transfer")
    calls = p.block // p.transfer * p.segments
    if p.segments == 1:
        return _per_rank(p, p.block, calls, p.transfer, "ior")
    # Segmented IOR: segment s of rank r sits at (s * ranks + r) * block in a shared file.
    if p.mode == "fpp":
        return _per_rank(p, p.block * p.segments, calls, p.transfer, "ior")
    path = f"{p.prefix}/{p.name}/ior"
    files = [FileSpec(path, p.block * p.segments * p.ranks, p.stripe_count, p.stripe_size)]
    extents = [Extent(r, path, (s * p.ranks + r) * p.block, p.block)
               for r in range(p.ranks) for s in range(p.segments)]
    return files, _rw(p, extents, calls, p.transfer, files)


def hacc_io(p: Pattern) -> tuple[list[FileSpec], list[Phase]]:
    """HACC-I/O: `particles` x 38 bytes per rank (or `block`), one call per variable."""
    per_rank = p.particles * HACC_BYTES_PER_PARTICLE if p.particles else p.block
    if per_rank <= 0:
        raise ConfigError(f"job {p.name}: HACC-I/O needs particles (per rank) or block")
    return _per_rank(p, per_rank, HACC_VARIABLES, -(-per_rank // HACC_VARIABLES), "hacc")


def _aggregated(p: Pattern, start: int, size: int, path: str) -> list[Extent]:
    """Collective buffering: the first rank of each node writes one contiguous file domain."""
    nodes = -(-p.ranks // p.ranks_per_node)
    dom = -(-size // nodes)
    return [Extent(n * p.ranks_per_node, path, start + n * dom, min(dom, size - n * dom))
            for n in range(nodes) if n * dom < size]


def bt_io(p: Pattern) -> tuple[list[FileSpec], list[Phase]]:
    """NAS BT-IO: `dumps` (40) collective dumps of the class's grid, `compute` seconds apart (its own bursts)."""
    if p.bt_class not in BT_CLASS_POINTS:
        raise ConfigError(f"job {p.name}: BT-IO class {p.bt_class!r} is not one of {', '.join(BT_CLASS_POINTS)}")
    dump = BT_CLASS_POINTS[p.bt_class] ** 3 * BT_BYTES_PER_POINT
    path = f"{p.prefix}/{p.name}/btio.out"
    if p.dumps < 1:
        raise ConfigError(f"job {p.name}: BT-IO needs dumps >= 1")
    files = [FileSpec(path, dump * p.dumps, p.stripe_count, p.stripe_size)]
    phases: list[Phase] = []
    for k in range(p.dumps):
        if p.compute > 0:
            phases.append(Phase("compute", f"bt compute {k + 1}", seconds=p.compute))
        ext = tuple(_aggregated(p, k * dump, dump, path))
        phases.append(Phase("write", f"bt dump {k + 1}", extents=ext, calls=1, call_size=dump // len(ext),
                            creates=((0, 1),) if k == 0 else (),
                            opens=tuple((r, 1) for r in range(1, p.ranks)) if k == 0 else ()))
    return files, phases


def mpi_open(p: Pattern) -> tuple[list[FileSpec], list[Phase]]:
    """A collective MPI_File_open creating one shared file, no data (the PVFS2 microbenchmark of
    seed 001 Table 2, docs/references.md#s001-table2): ROMIO opens it on every rank, so one rank
    creates it and the others open it; with split writing rank 0 alone creates it, the others'
    subfiles waiting for their first write (docs/references.md#s001-hierarchical)."""
    path = f"{p.prefix}/{p.name}/open.out"
    opens = () if p.split_writing else tuple((r, 1) for r in range(1, p.ranks))
    return [FileSpec(path, 0, p.stripe_count, p.stripe_size)], [Phase("write", "open", creates=((0, 1),), opens=opens)]


def mpi_tile_io(p: Pattern) -> tuple[list[FileSpec], list[Phase]]:
    """MPI-Tile-IO: one tile per rank in a shared file, collectively or one call per tile row."""
    tx, ty = p.tile
    if tx < 1 or ty < 1 or p.element < 1:
        raise ConfigError(f"job {p.name}: MPI-Tile-IO needs tile sizes and element size >= 1")
    # Tiles form a grid as square as the rank count allows; each tile row is one contiguous run.
    gx = max(d for d in range(1, int(p.ranks ** 0.5) + 1) if p.ranks % d == 0)
    gx = p.ranks // gx
    row = tx * p.element
    size = p.ranks * tx * ty * p.element
    path = f"{p.prefix}/{p.name}/tile.out"
    files = [FileSpec(path, size, p.stripe_count, p.stripe_size)]
    if p.collective:
        ext = _aggregated(p, 0, size, path)
        calls, call = 1, max(e.length for e in ext)
    else:
        ext = [Extent(r, path, ((r // gx) * ty + y) * gx * row + (r % gx) * row, row)
               for r in range(p.ranks) for y in range(ty)]
        calls, call = ty, row
    return files, _rw(p, ext, calls, call, files)

