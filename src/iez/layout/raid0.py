"""RAID-0 mapping: where each byte of a striped file lives.

Lustre maps a file offset x inside a component to stripe (x // stripe_size) % stripe_count,
using the absolute file offset, not the offset from the component start
(lustre/lov/lov_offset.c: lov_stripe_number). That is why component ends must be multiples of
the stripe size. Pure functions, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from iez.errors import LayoutError
from iez.layout.layout import LUSTRE_EOF, FileLayout, Layout


def _need(lay: Layout) -> tuple[int, int]:
    if lay.stripe_size <= 0 or lay.stripe_count <= 0:
        raise LayoutError("mapping needs a resolved layout (stripe size and count > 0)")
    return lay.stripe_size, lay.stripe_count


def stripe_of_offset(lay: Layout, offset: int) -> int:
    """Stripe number (0-based) holding file offset `offset`."""
    size, count = _need(lay)
    return (offset // size) % count


def ost_of_offset(layout: Layout | FileLayout, offset: int) -> int:
    """OST index holding file offset `offset`; the layout must name its OSTs."""
    fl = FileLayout.of(layout)
    for c in fl.parts():
        if c.start <= offset < c.end:
            s = stripe_of_offset(c.layout, offset)
            if len(c.layout.osts) <= s:
                raise LayoutError("the layout does not list the OST of every stripe")
            return c.layout.osts[s]
    raise LayoutError(f"offset {offset} is outside every component")


def bytes_per_stripe(stripe_size: int, stripe_count: int, start: int, end: int) -> list[int]:
    """Bytes of the file range [start, end) that land on each stripe (absolute-offset mapping)."""
    if stripe_size <= 0 or stripe_count <= 0:
        raise LayoutError("stripe size and count must be positive")
    out = [0] * stripe_count
    if end <= start:
        return out
    width = stripe_size * stripe_count
    # Whole stripe-width rounds in the middle contribute stripe_size to every stripe.
    first_full = -(-start // width) * width
    last_full = (end // width) * width
    if first_full < last_full:
        rounds = (last_full - first_full) // width
        out = [rounds * stripe_size] * stripe_count
        _add_partial(out, stripe_size, stripe_count, start, first_full)
        _add_partial(out, stripe_size, stripe_count, last_full, end)
    else:
        _add_partial(out, stripe_size, stripe_count, start, end)
    return out


def _add_partial(out: list[int], size: int, count: int, a: int, b: int) -> None:
    # [a, b) spans less than two stripe widths: walk it stripe unit by stripe unit.
    x = a
    while x < b:
        unit_end = min(b, (x // size + 1) * size)
        out[(x // size) % count] += unit_end - x
        x = unit_end


def range_bytes(layout: Layout | FileLayout, start: int, end: int) -> dict[tuple[int, int], int]:
    """Bytes of the file range [start, end) on each (component, stripe), i.e. each OST object,
    of a resolved layout."""
    out: dict[tuple[int, int], int] = {}
    for c, comp in enumerate(FileLayout.of(layout).parts()):
        lo = max(start, comp.start)
        hi = min(end, comp.end if comp.end != LUSTRE_EOF else end)
        if hi <= lo:
            continue
        lay = comp.layout
        if len(lay.osts) < lay.stripe_count:
            raise LayoutError("the layout does not list the OST of every stripe")
        for s, n in enumerate(bytes_per_stripe(lay.stripe_size, lay.stripe_count, lo, hi)):
            if n:
                out[(c, s)] = out.get((c, s), 0) + n
    return out


def bytes_per_ost(layout: Layout | FileLayout, file_size: int) -> dict[int, int]:
    """Bytes of a file of `file_size` bytes held by each OST of its layout."""
    parts = FileLayout.of(layout).parts()
    out: dict[int, int] = defaultdict(int)
    for (c, s), n in range_bytes(layout, 0, file_size).items():
        out[parts[c].layout.osts[s]] += n
    return dict(out)


@dataclass(frozen=True)
class Piece:
    """Part of a file range on one OST object."""

    ost: int
    component: int  # with the stripe, names the OST object
    stripe: int
    obj_offset: int
    file_offset: int
    length: int


def pieces(layout: Layout | FileLayout, offset: int, length: int) -> list[Piece]:
    """The pieces of [offset, offset + length) on each OST object, in file order (one per
    stripe unit touched): what a client's I/O becomes on the OSTs."""
    out: list[Piece] = []
    end = offset + length
    parts = FileLayout.of(layout).parts()
    x = offset
    while x < end:
        found = next(((i, c) for i, c in enumerate(parts) if c.start <= x < c.end), None)
        if found is None:
            raise LayoutError(f"offset {x} is outside every component")
        ci, comp = found
        lay = comp.layout
        s = stripe_of_offset(lay, x)
        if len(lay.osts) <= s:
            raise LayoutError("the layout does not list the OST of every stripe")
        unit_end = min(end, (x // lay.stripe_size + 1) * lay.stripe_size, comp.end if comp.end != LUSTRE_EOF else end)
        width = lay.stripe_size * lay.stripe_count
        obj_off = (x // width) * lay.stripe_size + x % lay.stripe_size
        out.append(Piece(lay.osts[s], ci, s, obj_off, x, unit_end - x))
        x = unit_end
    return out
