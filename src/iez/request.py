"""Requests and placements: what a job will write, and where iez puts it.

A `Request` is one file a run creates (file name, write bytes, stripe count, MPI rank:
docs/references.md#s000-table1), whether traced, read from a Darshan log or predicted. A
`Placement` is the allocator's answer for it (stripe size and OST list: #s000-table2). Plain
data shared by ingestion, prediction, allocation, the interaction database and the plan writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence, TypeVar, overload

import numpy as np

from iez.layout.layout import FileLayout


@dataclass(frozen=True)
class Request:
    path: str  # absolute path, as the application names it
    write_bytes: int
    stripe_count: int = 1  # what the application (or the file-system default) asked for
    rank: int = 0
    app: str = ""
    run: str = ""
    create_time: float = 0.0  # seconds from the run's start (orders the time series)
    comm_size: int = 1  # 1 for POSIX / COMM_SELF (FPP); >1 for a shared file (SSF)
    api: str = "posix"  # posix | stdio | mpiio | hdf5
    pool: str = ""
    observed: FileLayout | None = field(default=None, compare=False)  # layout it really got
    # Who wrote it and how, for the automatic layout (docs/layouts.md); 0 = not known.
    writers: int = 0  # ranks (processes) that wrote to it
    transfer_size: int = 0  # bytes of the writers' typical write call
    write_align: int = 0  # the largest power of two dividing every write's offset and size
    # Per writer: contiguous extents each wrote (1 = one block per writer, the case hierarchical
    # striping is for; >1 = segmented or variable by variable; 0 = not known).
    writer_segments: int = 0
    # Reads of the file in the run (a read-only file has write_bytes 0): bytes and the readers'
    # typical read call (0 = not known). For read plans and the audit.
    read_bytes: int = 0
    read_size: int = 0
    # The host that created it (a name field of its plan entry can stand for it: docs/plan-format.md).
    host: str = field(default="", compare=False)
    # The name the run renamed it to ("" = it kept its name): rsync-style temporaries.
    final_path: str = field(default="", compare=False)
    # Its bytes rose over the traced runs: the layout widens ahead of growth (docs/layouts.md).
    grows: bool = field(default=False, compare=False)
    # Traced as created from a plan: its observed layout and stripe count are iez's, not the
    # ones the job asks for (pipeline.store_trace gives it back the asked count).
    placed: bool = field(default=False, compare=False)
    # Random characters at the end of the name, generated at create (mkstemp); 0 = none known.
    name_random: int = field(default=0, compare=False)
    # Some process read it with a collective MPI-IO call (the Lustre-aware read is for such files).
    read_collective: bool = field(default=False, compare=False)

    @property
    def writer_count(self) -> int:
        """The writers the layout is made for: the traced ones, else the communicator's ranks."""
        return self.writers or self.comm_size


@dataclass(frozen=True)
class Placement:
    path: str
    layout: FileLayout  # resolved: stripe size and the OST of every stripe
    write_bytes: int = 0
    app: str = ""
    run: str = ""
    policy: str = ""
    note: str = ""  # why the layout differs from the one the request asked for ("" = it does not)


T = TypeVar("T")


class Rows(Sequence[T]):
    """A sequence of items built on demand from arrays (`RequestColumns`, the allocator's
    `Placements`): a subclass gives `__len__` and `row(i)` for 0 <= i < len."""

    def row(self, i: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self.row(k) for k in range(*i.indices(len(self)))]
        return self.row(range(len(self))[i])  # negative indices; IndexError past the end


@dataclass(frozen=True, eq=False)
class RequestColumns(Rows[Request]):
    """Many requests as columns (one entry per file), for jobs of 10^5-10^6 files: the allocator
    reads the arrays, and a `Request` is built only for the files a caller indexes. Fields not
    held here take `Request`'s defaults; `pool` is an index into `pools`."""

    path: Sequence[str]
    write_bytes: np.ndarray  # int64
    stripe_count: np.ndarray  # int64
    create_time: np.ndarray  # float
    pool: np.ndarray  # int64, into `pools`
    pools: tuple[str, ...] = ("",)
    app: str = ""
    run: str = ""
    read_bytes: np.ndarray | None = None  # int64; None = no reads known
    # Other `Request` fields by name, a column of plain values each (a stored prediction's rank,
    # api, writers' facts, ...): rows carry them.
    more: Mapping[str, Sequence] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.path)

    def row(self, i: int) -> Request:
        return Request(self.path[i], int(self.write_bytes[i]), int(self.stripe_count[i]), app=self.app,
                       run=self.run, create_time=float(self.create_time[i]), pool=self.pools[int(self.pool[i])],
                       read_bytes=0 if self.read_bytes is None else int(self.read_bytes[i]),
                       **{k: c[i] for k, c in self.more.items()})


def distinct(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(column, return_inverse=True)` for a column of few distinct values (stripe sizes,
    counts, pools, layout kinds of 10^5-10^6 files), without a sort of the whole column: small
    whole numbers by a count of each value; others by the distinct values of a sample, kept if
    every value is among them (they are then all of them, sorted), each row's found by comparing
    it with each (up to FEW of them), else by bisection."""
    n = len(column)
    # The first rows and a stride over all: a column repeating with a period that divides the
    # stride (sizes in turn) shows all its values in the first.
    some = np.concatenate([column[:1024], column[::max(1, n // 4096)]])
    small = max(n, 1 << 16)  # values below it are counted in an array no longer than the column
    if n and column.dtype.kind in "iu" and some.min() >= 0 and some.max() < small and column.max() < small:
        try:
            present = np.bincount(column) > 0
        except (TypeError, ValueError):  # negative values, or unsigned ones wider than intp
            pass
        else:
            values = np.flatnonzero(present)
            if len(values) == 1:
                return values, np.zeros(n, np.intp)
            return values, (np.cumsum(present) - 1)[column]
    some = np.unique(some)
    if len(some) <= FEW:  # a row's rank is how many values lie below it: a compare a value, no search
        if sum(int(np.count_nonzero(column == v)) for v in some) < n:
            return np.unique(column, return_inverse=True)
        rank = (column > some[0]).view(np.int8).copy()
        for v in some[1:-1]:
            rank += column > v
        return some, rank.astype(np.intp)
    at = np.minimum(np.searchsorted(some, column), len(some) - 1)
    if (some[at] == column).all():
        return some, at
    return np.unique(column, return_inverse=True)


FEW = 16  # distinct values `distinct` ranks by comparisons (a bisection's steps cost more per row)
