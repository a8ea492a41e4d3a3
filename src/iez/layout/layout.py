"""The layout of a Lustre file: plain RAID-0 striping, or PFL components each with its own.

Field meanings follow `lfs setstripe` and `struct lov_user_md` (docs/references.md#l-abi-structs):
stripe_size 0 = file-system default, stripe_count 0 = default and -1 = every OST,
stripe_offset -1 = "any OST" (LOV_OFFSET_DEFAULT), an explicit `osts` list = SPECIFIC layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from iez.errors import LayoutError

LUSTRE_EOF = 0xFFFF_FFFF_FFFF_FFFF
LOV_MIN_STRIPE_SIZE = 65536  # stripe sizes are multiples of 64 KiB (docs/references.md#l-abi-limits)
LOV_MAX_STRIPE_COUNT = 2000
LOV_MAXPOOLNAME = 15
STRIPE_SIZE_LIMIT = 1 << 32  # stripe size must be < 4 GiB

PATTERN_RAID0 = 0x1
PATTERN_MDT = 0x100
PATTERN_OVERSTRIPING = 0x200


@dataclass(frozen=True)
class Layout:
    """One RAID-0 layout: a plain file's layout, or one PFL component's body."""

    stripe_size: int = 0
    stripe_count: int = 0
    stripe_offset: int = -1
    pool: str = ""
    osts: tuple[int, ...] = ()
    pattern: int = PATTERN_RAID0

    def __post_init__(self) -> None:
        object.__setattr__(self, "osts", tuple(int(i) for i in self.osts))
        if self.osts and self.stripe_count == 0:
            object.__setattr__(self, "stripe_count", len(self.osts))
        validate_plain(self)

    @property
    def is_specific(self) -> bool:
        return bool(self.osts)

    def resolved(self, default_stripe_size: int, default_stripe_count: int, n_osts: int) -> "Layout":
        """The same layout with file-system defaults substituted for 0 / -1 counts and sizes."""
        size = self.stripe_size or default_stripe_size
        count = self.stripe_count or default_stripe_count
        if count == -1:
            count = n_osts
        return replace(self, stripe_size=size, stripe_count=count)


@dataclass(frozen=True)
class Component:
    """A PFL component: the extent [start, end) of the file it covers, and its layout."""

    start: int
    end: int
    layout: Layout
    id: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.start < self.end <= LUSTRE_EOF):
            raise LayoutError(f"bad component extent [{self.start}, {self.end})")


@dataclass(frozen=True)
class FileLayout:
    """A file's whole layout: either `plain` or a tuple of `components` (PFL)."""

    plain: Layout | None = None
    components: tuple[Component, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", tuple(self.components))
        if (self.plain is None) == (not self.components):
            raise LayoutError("a file layout is either plain or composite, not both or neither")
        if self.components:
            validate_components(self.components)

    @classmethod
    def of(cls, layout: "Layout | FileLayout") -> "FileLayout":
        return layout if isinstance(layout, FileLayout) else cls(plain=layout)

    @property
    def is_composite(self) -> bool:
        return bool(self.components)

    def parts(self) -> tuple[Component, ...]:
        """Components, with a plain layout seen as one component covering [0, EOF)."""
        if self.plain is not None:
            return (Component(0, LUSTRE_EOF, self.plain),)
        return self.components

    def osts(self) -> list[int]:
        """Every explicit OST index, component by component, without repeats."""
        out: list[int] = []
        for c in self.parts():
            out.extend(i for i in c.layout.osts if i not in out)
        return out


def validate_plain(lay: Layout) -> None:
    if lay.stripe_size < 0 or lay.stripe_size >= STRIPE_SIZE_LIMIT:
        raise LayoutError(f"stripe size {lay.stripe_size} out of range (0 or 64 KiB .. < 4 GiB)")
    if lay.stripe_size % LOV_MIN_STRIPE_SIZE:
        raise LayoutError(f"stripe size {lay.stripe_size} is not a multiple of 64 KiB")
    if lay.stripe_count < -1 or lay.stripe_count > LOV_MAX_STRIPE_COUNT:
        raise LayoutError(f"stripe count {lay.stripe_count} out of range (-1 .. {LOV_MAX_STRIPE_COUNT})")
    if lay.stripe_offset < -1 or lay.stripe_offset > 0xFFFE:
        raise LayoutError(f"stripe offset {lay.stripe_offset} out of range (-1 .. 65534)")
    if len(lay.pool.encode()) > LOV_MAXPOOLNAME:
        raise LayoutError(f"pool name {lay.pool!r} is longer than {LOV_MAXPOOLNAME} bytes")
    if lay.osts:
        if any(i < 0 or i > 0xFFFE for i in lay.osts):
            raise LayoutError(f"OST index out of range in {list(lay.osts)}")
        overstriped = bool(lay.pattern & PATTERN_OVERSTRIPING)
        if not overstriped and len(set(lay.osts)) != len(lay.osts):
            raise LayoutError(f"OST list {list(lay.osts)} repeats an OST (only overstriping may)")
        if lay.stripe_count not in (0, len(lay.osts)):
            raise LayoutError(f"stripe count {lay.stripe_count} differs from the OST list length {len(lay.osts)}")
        if lay.stripe_offset != -1 and lay.stripe_offset not in lay.osts:
            raise LayoutError(f"stripe offset {lay.stripe_offset} is not in the OST list")


def validate_components(comps: tuple[Component, ...]) -> None:
    """PFL rules that llapi_layout_sanity() enforces: contiguous extents from 0, last may be EOF."""
    if comps[0].start != 0:
        raise LayoutError("the first component must start at offset 0")
    for a, b in zip(comps, comps[1:]):
        if a.end != b.start:
            raise LayoutError(f"component extents are not contiguous: [{a.start},{a.end}) then [{b.start},{b.end})")
    for c in comps:
        if c.end != LUSTRE_EOF and c.end % LOV_MIN_STRIPE_SIZE:
            raise LayoutError(f"component end {c.end} is not a multiple of 64 KiB")
        ss = c.layout.stripe_size
        if ss and c.end != LUSTRE_EOF and c.end % ss:
            raise LayoutError(f"component end {c.end} is not a multiple of its stripe size {ss}")
