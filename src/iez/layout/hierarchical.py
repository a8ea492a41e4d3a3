"""Hierarchical striping on PFL: a shared file cut into one component per group of writers, each
component striped over its own subset of OSTs.

Seed 001's hierarchical striping (docs/references.md#s001-hierarchical) gives each subfile of a
shared file (a) a subfile size, (b) a subset size, the OSTs it stripes over, and (c) a subset
index, which disjoint subset it takes. It rested on Lustre's file joining, which is gone; a
composite (PFL) layout does the same job inside one file: a component per subfile extent, each
with its own explicit OST list. Here:

- subfile size = a component's extent. With W writers each writing B/W contiguous bytes (IOR's
  shared file, one segment), groups of W/G consecutive ranks write G contiguous extents of B/G;
  component g covers group g's extent, its boundaries moved to the nearest multiple of the
  component's stripe width k·S (so each bounded component is whole rounds of its k stripes and
  the MDS keeps its stripe count: references: l-abi-comp-create), the last to EOF. When B/G is a
  multiple of k·64 KiB (any power-of-two block size) the boundaries are the groups' own.
- subset size = k, the component's stripe count; subset index = g, its OST list, chosen by the
  allocator (`iez.alloc.balanced`) disjoint from the other components'.

The rule for G and k (`choose`), from the seed's four conditions (s001-hierarchical, §3.2):
the file would get c stripes as a plain file (the user's count or iez's automatic one); G is the
largest divisor of the writer count W (whole groups of consecutive ranks) such that
(1) each subfile holds at least 1 MiB ("a file smaller than 1 MB, does not need to be striped"),
(2) each subset has at least SUBSET_SIZE = 2 OSTs, the width the paper's experiments used for
each subfile ("each subfile should not stripe too wide"), and (4) the subsets together cover the
file's c OSTs: k = c // G, so G·k ≤ c ≤ the usable OSTs, and among the G that qualify those
covering the most of the c come first (2,048 writers on c = 20: G = 4 of 5 OSTs, all 20, rather
than G = 8 of 2, which would leave 4 of the OSTs the cost model chose unused); (3) no overlap:
the allocator keeps the subsets disjoint. G < 2 (one writer, or too small a file or count) means no hierarchy: the file
keeps its plain layout. Why not always the widest G: the paper's BT-IO run (§4.3, same anchor)
lost time when each step wrote one subfile only, so the groups are the writers that write at
once, never finer than one component per writer.

Which files (`one_block_each`): the rule's premise is one contiguous block per writer. A file
whose writers each wrote several extents (`Request.writer_segments` > 1: IOR with -s N, HACC-IO
variable by variable) is never cut: each of its write steps falls into one or a few components,
the BT-IO case above. Where the trace does not say (0), an MPI-IO or HDF5 shared file is taken
as one block per writer, since under libiez-mpi split writing gives each collective-buffering
aggregator one component whatever the ranks' own extents; a POSIX or stdio one is not cut.
Nor is a file that grows from run to run (`premise`).

Pure: plain numbers and layouts in and out; a layout Lustre would refuse is an
`AllocationError` with errno EINVAL (`validate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from iez.errors import AllocationError, LayoutError
from iez.layout.layout import LOV_MIN_STRIPE_SIZE, LUSTRE_EOF, Component, FileLayout, Layout
from iez.layout.lum import lum_size

SUBSET_SIZE = 2  # OSTs per subfile at least: the paper's subfile stripe width (references: s001-hierarchical)
SUBFILE_MIN = 1 << 20  # "a file smaller than 1 MB, does not need to be striped" (references: s001-hierarchical)
# The composite lov_user_md must fit one extended attribute value (Linux's XATTR_SIZE_MAX) and
# one request to the emulated MDS (references: l-abi-comp-create).
LUM_MAX = 65536


BLOCK_APIS = ("mpiio", "hdf5")  # writers' extents unknown: split writing aligns the aggregators


def premise(segments: int, api: str, grows: bool) -> tuple[bool, str]:
    """Whether a shared file may be cut, and the note's words (`one_block_each`): a file that
    grows never is, since its writers' blocks move as it grows (IOR's rank r writes at r times its
    block), so extents cut for its predicted bytes would not follow them."""
    if grows:
        return False, "not hierarchical: it grows, and its writers' blocks move as it does"
    return one_block_each(segments, api)


def one_block_each(segments: int, api: str) -> tuple[bool, str]:
    """Whether a shared file's writers are taken to write one contiguous block each, the case
    hierarchical striping is for, given the extents each wrote (`segments`, 0 = not known) and
    its I/O layer; and the placement note's words when that is not known for sure or not so."""
    if segments == 1:
        return True, ""
    if segments > 1:
        return False, f"not hierarchical: each writer wrote {segments} extents, not one block"
    if api in BLOCK_APIS:
        return True, "writers' extents unknown: one block each, as collective buffering writes them"
    return False, "not hierarchical: writers' extents unknown"


@dataclass(frozen=True)
class Grouping:
    """How a shared file is cut: G components (writer groups) of k OSTs each."""

    groups: int  # G: components, one per group of writers/G consecutive ranks
    subset: int  # k: OSTs per component (the subset size)

    @property
    def stripes(self) -> int:
        return self.groups * self.subset


def _lum_bytes(groups: int, stripes: int) -> int:
    """Bytes of a composite lov_user_md of `groups` SPECIFIC components with `stripes` OSTs in
    all (references: l-abi-structs: header 32, entry 48, V3 body 48, object 24)."""
    return 32 + groups * (48 + 48) + 24 * stripes


@dataclass(frozen=True)
class Cut:
    """A shared file's hierarchical geometry: its grouping, stripe size and component extents."""

    grouping: Grouping
    stripe_size: int
    spans: tuple[tuple[int, int], ...]  # [start, end) of each component, the last to EOF


def choose(file_bytes: int, writers: int, stripe_count: int) -> list[Grouping]:
    """The groupings the rule allows for a file of `file_bytes` written by `writers` ranks that
    would get `stripe_count` stripes as a plain file, best (most of the stripes covered, then most
    groups) first (the module docstring's rule); empty: no hierarchy."""
    most = min(stripe_count // SUBSET_SIZE, writers, file_bytes // SUBFILE_MIN)
    fits = [Grouping(g, stripe_count // g) for g in range(most, 1, -1)
            if writers % g == 0 and _lum_bytes(g, stripe_count // g * g) <= LUM_MAX]
    # the groupings that cover the most of the c stripes first (condition 4), then the most groups
    return sorted(fits, key=lambda x: -x.stripes)


def cut(file_bytes: int, writers: int, stripe_count: int, stripe_size_for: Callable[[int], int]) -> Cut | None:
    """The first grouping of `choose` whose extents work out with the stripe size
    `stripe_size_for(G·k)` gives (the allocator's stripe method for the file on G·k stripes);
    None: the file keeps a plain layout."""
    for grouping in choose(file_bytes, writers, stripe_count):
        size = stripe_size_for(grouping.stripes)
        try:
            return Cut(grouping, size, tuple(extents(file_bytes, grouping, size)))
        except AllocationError:
            continue  # a fixed stripe size too wide for this many components: fewer of them
    return None


def extents(file_bytes: int, grouping: Grouping, stripe_size: int) -> list[tuple[int, int]]:
    """The component extents [start, end) of `grouping` over a file of `file_bytes` with stripe
    size `stripe_size`: boundaries at the multiples of the stripe width k·S nearest to the groups'
    g·B/G, the last to EOF. Raises AllocationError (EINVAL) when the file is too small for G
    components of whole stripe rounds."""
    g_count, k = grouping.groups, grouping.subset
    if stripe_size <= 0 or stripe_size % LOV_MIN_STRIPE_SIZE:
        raise AllocationError(f"EINVAL: stripe size {stripe_size} is not a positive multiple of 64 KiB",
                              errno="EINVAL")
    width = k * stripe_size
    # nearest multiple of the width to g·B/G, in integers (files reach 2**52 bytes)
    bounds = [0] + [max(1, (2 * g * file_bytes + g_count * width) // (2 * g_count * width)) * width
                    for g in range(1, g_count)]
    if any(b <= a for a, b in zip(bounds, bounds[1:])) or bounds[-1] >= max(file_bytes, 1):
        raise AllocationError(f"EINVAL: {file_bytes} bytes do not make {g_count} components of {k} stripes of "
                              f"{stripe_size} bytes", errno="EINVAL")
    return list(zip(bounds, bounds[1:] + [LUSTRE_EOF]))


def interleave(osts: Sequence[int], oss_of: Mapping[int, str]) -> list[int]:
    """`osts` reordered one OSS at a time (the first of each OSS, then the second, ...), each
    OSS's OSTs in their given order: consecutive runs of k then span min(k, OSSs) servers."""
    by_oss: dict[str, list[int]] = {}
    for o in osts:
        by_oss.setdefault(oss_of[o], []).append(o)
    queues = list(by_oss.values())
    out: list[int] = []
    for rank in range(max((len(q) for q in queues), default=0)):
        out.extend(q[rank] for q in queues if rank < len(q))
    return out


def composite(spans: Sequence[tuple[int, int]], stripe_size: int, subsets: Sequence[Sequence[int]],
              pool: str = "") -> FileLayout:
    """The composite layout: component g covers spans[g] on the OSTs subsets[g], in stripe order."""
    if len(spans) != len(subsets):
        raise AllocationError(f"EINVAL: {len(spans)} extents for {len(subsets)} OST subsets", errno="EINVAL")
    try:
        return FileLayout(components=tuple(
            Component(a, b, Layout(stripe_size=stripe_size, stripe_count=len(s), pool=pool, osts=tuple(s)))
            for (a, b), s in zip(spans, subsets)))
    except LayoutError as e:
        raise AllocationError(f"EINVAL: {e}", errno="EINVAL") from None


def validate(fl: FileLayout, osts: Sequence[int]) -> None:
    """Raise AllocationError (EINVAL, one line) if Lustre would refuse this composite layout with
    explicit OST lists on a file system of OSTs `osts`, or if its subsets overlap. The extents'
    order and alignment (from 0, contiguous, ends on 64 KiB and stripe-size multiples) are
    checked when the FileLayout is built (`composite`); here: the component count, OSTs the
    file system does not have, overlapping subsets, and bounded components too short for their
    stripe count, which the MDS would cut (references: l-abi-comp-create)."""
    def refuse(why: str) -> None:
        raise AllocationError(f"EINVAL: {why}", errno="EINVAL")

    comps = fl.components
    if not comps:
        refuse("a hierarchical layout is composite: it has no components")
    size = lum_size(fl)
    if size > LUM_MAX or len(comps) > 0xFFFF:
        refuse(f"{len(comps)} components take {size} bytes of lov_user_md, more than {LUM_MAX}")
    have = set(osts)
    seen: set[int] = set()  # disjoint subsets of known OSTs: never more OSTs than the file system has
    for c in comps:
        lay = c.layout
        unknown = sorted(set(lay.osts) - have)
        if unknown:
            refuse(f"component [{c.start}, {c.end}) names OSTs {unknown}, which the file system does not have")
        if seen & set(lay.osts):
            refuse(f"component [{c.start}, {c.end}) shares OSTs {sorted(seen & set(lay.osts))} with an earlier one")
        seen.update(lay.osts)
        if c.end != LUSTRE_EOF and lay.stripe_size and -(-(c.end - c.start) // lay.stripe_size) < lay.stripe_count:
            refuse(f"component [{c.start}, {c.end}) is too short for its {lay.stripe_count} stripes of "
                   f"{lay.stripe_size} bytes")
