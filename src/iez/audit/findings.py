"""The striping problems a Darshan log shows for one file, each with its evidence in words.

Five kinds (docs/audit.md, "What iez looks for"):

- `few-osts`: a shared file (several writers) on half or fewer of the OSTs iez's automatic layout
  gives it: its writers queue on a few OSTs while the others idle (the OSTCost of seed 000,
  docs/references.md#s000-eq7).
- `wide-small`: a file striped wider than its bytes fill: objects under 1 MiB each ("a file
  smaller than 1 MB, does not need to be striped", docs/references.md#s001-hierarchical): every
  stripe costs an object, an extent lock and an RPC for no bandwidth.
- `straddle`: writes that cross stripe boundaries: of the write size and the stripe size, the
  smaller does not divide the larger or the writes' offsets, or Darshan counted writes off the
  file system's block (their alignment is then unknown, `FileFacts.misaligned`). A straddling
  write is two RPCs on two OSTs.
- `shared-stripes`: writers sharing stripes: a shared file whose writers each write less than a
  stripe, so every stripe (one OST object) is written by several clients and its extent lock
  moves between them (docs/references.md#s001-fig3).
- `reads-everywhere`: each reader's bytes span a whole round of stripes, so every reader (or
  collective-buffering aggregator) talks to every OST of the file: readers x stripes streams.

Pure: plain numbers in, findings out.
"""

from __future__ import annotations

from dataclasses import dataclass

from iez.layout.auto import MIN_STRIPE_BYTES
from iez.units import format_size

KINDS = ("few-osts", "wide-small", "straddle", "shared-stripes", "reads-everywhere")
TITLES = {
    "few-osts": "shared file on too few OSTs",
    "wide-small": "small file on a wide stripe",
    "straddle": "writes straddle stripes",
    "shared-stripes": "many writers share stripes",
    "reads-everywhere": "every reader reads every OST",
}


@dataclass(frozen=True)
class FileFacts:
    """One file of one job as the log saw it (0 / () = not known)."""

    path: str
    write_bytes: int = 0
    read_bytes: int = 0
    writers: int = 0
    readers: int = 0
    transfer_size: int = 0  # the writers' most common write
    write_align: int = 0  # largest power of two dividing every write's offset and size
    misaligned: bool = False  # writes were seen off the file system's block (alignment unknown)
    stripe_count: int = 0  # of the recorded layout (0 = no LUSTRE record)
    stripe_size: int = 0
    osts: tuple[int, ...] = ()

    @property
    def has_layout(self) -> bool:
        return self.stripe_count > 0 and self.stripe_size > 0


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    path: str
    bytes: int  # the file's bytes the problem touches (written, or read for reads-everywhere)
    text: str


def findings(f: FileFacts, iez_count: int) -> list[Finding]:
    """The problems of one file; `iez_count` is the stripe count iez's layout gives it (0 = none)."""
    if not f.has_layout:
        return []
    out = []
    c, s = f.stripe_count, f.stripe_size
    if f.writers > 1 and f.write_bytes > 0 and iez_count >= 2 * c:
        out.append(Finding("few-osts", f.path, f.write_bytes,
                           f"{format_size(f.write_bytes)} by {f.writers} writers on {c} OST{'s' * (c > 1)}; "
                           f"iez would use {iez_count}"))
    if c > 1 and 0 < f.write_bytes < c * MIN_STRIPE_BYTES:
        out.append(Finding("wide-small", f.path, f.write_bytes,
                           f"{format_size(f.write_bytes)} over {c} stripes: "
                           f"{format_size(f.write_bytes // c)} an object, under {format_size(MIN_STRIPE_BYTES)}"))
    if f.write_bytes > 0 and f.transfer_size > 0:
        # Writes of t bytes at offsets that are multiples of a fit stripes of s when the smaller
        # of t and s divides the larger, and the offsets are multiples of it (a = 0: not known).
        small, large = sorted((f.transfer_size, s))
        if large % small or f.write_align % small:
            out.append(Finding("straddle", f.path, f.write_bytes,
                               f"writes of {format_size(f.transfer_size)}"
                               + (f" at multiples of {format_size(f.write_align)}" if f.write_align else "")
                               + f" cross {format_size(s)} stripe boundaries"))
        elif f.misaligned:
            out.append(Finding("straddle", f.path, f.write_bytes,
                               f"writes of {format_size(f.transfer_size)} were seen off the file system's "
                               f"block: some cross {format_size(s)} stripe boundaries"))
    if f.writers > 1 and f.write_bytes > 0 and f.write_bytes // f.writers < s:
        share = f.write_bytes // f.writers
        out.append(Finding("shared-stripes", f.path, f.write_bytes,
                           f"{f.writers} writers of {format_size(share)} each on {format_size(s)} stripes: "
                           f"about {min(f.writers, -(-s // max(1, share)))} writers per stripe"))
    if f.readers > 1 and c > 1 and f.read_bytes // f.readers >= s * c:
        out.append(Finding("reads-everywhere", f.path, f.read_bytes,
                           f"{f.readers} readers of {format_size(f.read_bytes // f.readers)} each over "
                           f"{c} stripes of {format_size(s)}: {f.readers * c} reader-OST streams"))
    return out
