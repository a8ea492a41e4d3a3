"""Stripe-size computation of seed 000 (Lustre's 64 KiB alignment constraint: docs/references.md#s000-ap,
#s000-method1, #s000-method2).

AP (Alignment Parameter) = 65536 bytes, and stripes are *even* multiples of AP, i.e. multiples
of 2*AP = 128 KiB. Worked example in the paper (Table I/II): 803,405,824 bytes on 8 stripes.
Method II gives a stripe size of 100,532,224 bytes (Table II's "Write Bytes" column) and
allocates 851,968 bytes more than written (the paper's "833 KB"); Method I allocates 65,536
more (the paper's "63 KB").
"""

from __future__ import annotations

from dataclasses import dataclass

from iez.errors import LayoutError

AP = 65536
UNIT = 2 * AP  # "even multiple of AP"


def _check(write_bytes: int, stripe_count: int) -> None:
    if write_bytes < 0:
        raise LayoutError(f"write bytes must be >= 0, got {write_bytes}")
    if stripe_count < 1:
        raise LayoutError(f"stripe count must be >= 1, got {stripe_count}")


def method2_stripe_size(write_bytes: int, stripe_count: int, unit: int = UNIT) -> int:
    """Method II (eqs. 5-6): one stripe size for all stripes, N = ceil(w / (2*AP*sc))."""
    _check(write_bytes, stripe_count)
    if unit <= 0 or unit % AP:
        raise LayoutError(f"alignment unit {unit} is not a positive multiple of 64 KiB")
    n = -(-write_bytes // (unit * stripe_count))
    return unit * max(1, n)


@dataclass(frozen=True)
class Method1:
    """Method I (eqs. 1-4): sc-1 stripes of 2*AP*N bytes, and a last one of 2*AP*X bytes."""

    first: int  # bytes on each of the first stripe_count-1 OSTs
    last: int  # bytes on the last OST
    stripe_count: int

    @property
    def allocated(self) -> int:
        return self.first * (self.stripe_count - 1) + self.last

    def per_stripe(self) -> list[int]:
        return [self.first] * (self.stripe_count - 1) + [self.last]


def method1(write_bytes: int, stripe_count: int) -> Method1:
    _check(write_bytes, stripe_count)
    if stripe_count == 1:
        return Method1(first=0, last=UNIT * max(1, -(-write_bytes // UNIT)), stripe_count=1)
    n = write_bytes // (UNIT * (stripe_count - 1))  # eq. 2 (rounded down)
    # eq. 3 as the text explains it: what is left after the first sc-1 stripes.
    remaining = write_bytes - UNIT * n * (stripe_count - 1)
    x = -(-remaining // UNIT)  # eq. 4 (rounded up)
    return Method1(first=UNIT * n, last=UNIT * x, stripe_count=stripe_count)
