"""RAID-0 mapping: where each byte of a striped file lives.

Lustre maps a file offset x inside a component to stripe (x // stripe_size) % stripe_count,
using the absolute file offset, not the offset from the component start
(lustre/lov/lov_offset.c: lov_stripe_number). That is why component ends must be multiples of
the stripe size. Pure functions, no I/O.
"""

from __future__ import annotations

from collections import defaultdict

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


def bytes_per_ost(layout: Layout | FileLayout, file_size: int) -> dict[int, int]:
    """Bytes of a file of `file_size` bytes held by each OST of its layout."""
    fl = FileLayout.of(layout)
    out: dict[int, int] = defaultdict(int)
    for c in fl.parts():
        lo, hi = c.start, min(c.end, file_size) if c.end != LUSTRE_EOF else file_size
        if hi <= lo:
            continue
        lay = c.layout
        per = bytes_per_stripe(lay.stripe_size, lay.stripe_count, lo, hi)
        if len(lay.osts) < lay.stripe_count:
            raise LayoutError("the layout does not list the OST of every stripe")
        for s, n in enumerate(per):
            if n:
                out[lay.osts[s]] += n
    return dict(out)
