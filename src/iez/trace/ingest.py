"""Trace ingestion: per-process FileRecords (libiez shards, Darshan logs) -> normalised Requests.

A run's trace holds one record per (file, process, API layer). The control plane wants one
`Request` per file the run created (file name, write bytes, stripe count, MPI rank:
docs/references.md#s000-table1), because a layout is chosen once, at create. Rules, in order:

- Only files some process created become requests; files the run merely opened, read or
  appended to keep the layout they already had, so they are counted but not returned.
- Bytes of one API layer are summed over ranks (a shared file's bytes come from all of them).
  Layers stacked on one file (HDF5 over MPI-IO over POSIX) describe the same bytes, so the
  file's bytes are the largest layer total, not their sum.
- comm_size is the largest communicator any record saw, and at least the number of distinct
  ranks that touched the file (so an SSF is recognised even without MPI-IO records).
- rank is the lowest creating rank; api is the highest layer seen (hdf5 > mpiio > stdio > posix).
- create_time is the creator's first open, in seconds from the run's first open.
- The observed layout comes from the record's `layout` string (plan grammar), else from its
  stripe size, count and OST list when those are known.
- writers is the number of processes (rank, host, pid) that wrote to the file, or the ranks a
  Darshan shared record stands for. transfer_size and write_align are those of the highest
  layer whose writing records all know their write size (the calls the application made:
  MPI-IO's, not ROMIO's aggregated POSIX writes beneath): the most common transfer size among
  its writers (ties: the larger), since ranks of one job mostly write alike and a lone rank
  writing a header or a tail must not set it; and the smallest alignment any of them wrote
  with. 0 when no record knows. writer_segments is the most common number of contiguous extents
  the writers of that kind of layer wrote (1: one block per writer; ties: the larger), for the
  same reason: HACC-IO's rank 0 writes the header apart from its block, and one such writer must
  not make a file of one block per writer read as segmented. read_size is the readers' most
  common largest read, read_bytes as write_bytes are.
- A file the run read but did not create is one of `Ingested.reads` (a read-only run is
  imported as reads); final_path is the name a rename in the run gave the file; host is the
  creator's (or first reader's).
- name_random is the count of generated characters ending the name: as libiez's mkstemp
  wrappers traced it, else, for a file the `mktemp` command created (its creator's `program`;
  coreutils generates the name with gnulib's own code, which no wrapper sees), the name's last
  part after `.`, `-` or `_` (or the whole base name) when it is 3 or more letters and digits.
- read_collective: some process read the file with a collective MPI-IO call.

Pure: takes records, returns requests; no I/O.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from iez.errors import IezError, LayoutError
from iez.layout.layout import FileLayout, Layout
from iez.plan import parse_layout
from iez.request import Request
from iez.trace.record import FileRecord

API_LEVEL = {"posix": 0, "stdio": 1, "mpiio": 2, "hdf5": 3}
MKTEMP_PROGRAMS = frozenset({"mktemp"})  # programs whose created names end in their own X's
_MKTEMP_TAIL = re.compile(r"(?:^|(?<=[._-]))[A-Za-z0-9]{3,}$")


class TraceError(IezError):
    """A trace (shard directory or Darshan log) that cannot be read or makes no sense."""


@dataclass
class Ingested:
    """What one run's trace says: its requests and what was left out, with reasons."""

    requests: list[Request] = field(default_factory=list)
    not_created: int = 0  # files written or read but not created by the run
    # Files the run read but did not create (write_bytes: what it wrote in place, mostly 0),
    # ordered as requests are: for read plans and the audit.
    reads: list[Request] = field(default_factory=list)
    plan_hits: int = 0  # created files placed from a plan (libiez only)
    plan_misses: int = 0  # created files a plan was loaded for but that it did not name


def observed_layout(rec: FileRecord) -> FileLayout | None:
    """The layout a record says its file got, or None when the trace does not know it."""
    try:
        if rec.layout:
            return parse_layout(rec.layout)
        if rec.osts and rec.stripe_size:
            return FileLayout(plain=Layout(stripe_size=rec.stripe_size, osts=rec.osts))
    except LayoutError as e:
        raise TraceError(f"{rec.path}: bad layout in the trace ({e})") from None
    return None


def _api_level(api: str, path: str) -> int:
    try:
        return API_LEVEL[api]
    except KeyError:
        raise TraceError(f"{path}: unknown API {api!r} (one of {', '.join(API_LEVEL)})") from None


def _top_layer(path: str, recs: list[FileRecord], known: Callable[[FileRecord], int]) -> list[FileRecord]:
    """The records of the highest API layer all of whose records know a fact (the calls the
    application made: MPI-IO's, not ROMIO's aggregated POSIX calls beneath); [] if none."""
    layers = {r.api for r in recs if all(known(w) > 0 for w in recs if w.api == r.api)}
    if not layers:
        return []
    top = max(layers, key=lambda a: _api_level(a, path))
    return [r for r in recs if r.api == top]


def _most_common(sizes: Iterable[int]) -> int:
    """The most common size (ties: the larger), 0 for none."""
    count = Counter(sizes)
    return max(count, key=lambda s: (count[s], s)) if count else 0


def _write_facts(path: str, recs: list[FileRecord]) -> tuple[int, int, int, int]:
    """(writers, transfer_size, write_align, writer_segments) of one file's records, 0 where not known."""
    wrote = [r for r in recs if r.bytes_written > 0]
    if not wrote:
        return 0, 0, 0, 0
    writers = max(len({(r.rank, r.host, r.pid) for r in wrote}), max(r.writers for r in wrote))
    layer = _top_layer(path, wrote, lambda r: r.transfer_size)
    segments = _most_common(r.writer_segments for r in _top_layer(path, wrote, lambda r: r.writer_segments))
    return (writers, _most_common(r.transfer_size for r in layer),
            min((r.write_align for r in layer if r.write_align > 0), default=0), segments)


def _read_facts(path: str, recs: list[FileRecord]) -> tuple[int, int]:
    """(read_bytes, read_size) of one file's records: bytes as write bytes are (the largest layer
    total), the readers' most common largest read of the highest layer that knows it."""
    per_layer: dict[str, int] = defaultdict(int)
    for r in recs:
        per_layer[r.api] += r.bytes_read
    read = [r for r in recs if r.bytes_read > 0]
    return max(per_layer.values()), _most_common(r.read_size for r in _top_layer(path, read, lambda r: r.read_size))


def _name_random(path: str, creators: list[FileRecord]) -> int:
    """Generated characters ending the name of a file these records created (0: none known)."""
    created = [r for r in creators if r.created]
    known = max((r.name_random for r in created), default=0)
    if known or not any(r.program in MKTEMP_PROGRAMS for r in created):
        return known
    m = _MKTEMP_TAIL.search(path.rsplit("/", 1)[-1])
    return len(m.group()) if m else 0


def _file_request(path: str, recs: list[FileRecord], t0: float, app: str, run: str) -> Request:
    """The file's request: of its creators when the run created it, else of its readers."""
    per_layer: dict[str, int] = defaultdict(int)
    for r in recs:
        if (r.bytes_written < 0 or r.bytes_read < 0 or r.rank < 0 or r.comm_size < 0 or r.transfer_size < 0
                or r.write_align < 0 or r.writers < 0 or r.writer_segments < 0 or r.read_size < 0
                or r.name_random < 0):
            raise TraceError(f"{path}: negative bytes, rank, communicator size or write facts in the trace")
        per_layer[r.api] += r.bytes_written
    creators = sorted((r for r in recs if r.created), key=lambda r: (r.rank, r.open_time))
    if not creators:
        creators = sorted(recs, key=lambda r: (r.rank, r.open_time))
    first = creators[0]
    api = max((r.api for r in recs), key=lambda a: _api_level(a, path))
    layout = None
    for r in creators + [r for r in recs if not r.created]:
        layout = observed_layout(r)
        if layout is not None:
            break
    stripe_count = next((r.stripe_count for r in recs if r.stripe_count > 0), 0)
    pool = ""
    if layout is not None:
        head = layout.parts()[0].layout
        stripe_count = stripe_count or head.stripe_count
        pool = head.pool
    writers, transfer_size, write_align, segments = _write_facts(path, recs)
    read_bytes, read_size = _read_facts(path, recs)
    return Request(
        path=path,
        write_bytes=max(per_layer.values()),
        stripe_count=stripe_count if stripe_count > 0 else 1,
        rank=first.rank,
        app=app or first.app,
        run=run or first.run,
        create_time=max(0.0, min(r.open_time for r in creators) - t0),
        comm_size=max(max(r.comm_size for r in recs), len({r.rank for r in recs})),
        api=api,
        pool=pool,
        observed=layout,
        writers=writers,
        transfer_size=transfer_size,
        write_align=write_align,
        writer_segments=segments,
        read_bytes=read_bytes,
        read_size=read_size,
        host=first.host,
        final_path=next((r.renamed_to for r in creators + recs if r.renamed_to), ""),
        name_random=_name_random(path, creators),
        read_collective=any(r.read_collective for r in recs),
    )


def ingest(records: Iterable[FileRecord], app: str = "", run: str = "") -> Ingested:
    """One run's records -> one Request per created file, ordered by create time then path.

    `app` and `run`, when given, override what the records carry (`iez trace import --app`).
    """
    by_path: dict[str, list[FileRecord]] = defaultdict(list)
    for r in records:
        if not r.path.startswith("/"):
            raise TraceError(f"trace names a file by a relative path {r.path!r}")
        by_path[r.path].append(r)
    out = Ingested()
    if not by_path:
        return out
    t0 = min(r.open_time for rs in by_path.values() for r in rs)
    for path, recs in by_path.items():
        if not any(r.created for r in recs):
            out.not_created += 1
            if any(r.bytes_read > 0 for r in recs):
                out.reads.append(_file_request(path, recs, t0, app, run))
            continue
        req = _file_request(path, recs, t0, app, run)
        hits = [r.plan_hit for r in recs if r.created and r.plan_hit is not None]
        if hits:
            if any(hits):
                out.plan_hits += 1
                req = replace(req, placed=True)
            else:
                out.plan_misses += 1
        out.requests.append(req)
    for qs in (out.requests, out.reads):
        qs.sort(key=lambda q: (q.create_time, q.rank, q.path))
    return out
