"""Jobs from traces: the `FileRecord`s libiez writes, or that the Darshan importer makes.

Darshan enters here too: `iez.trace.darshan` turns a log into the same `FileRecord`s, so a
Darshan job is `workload_from_records(records_from_darshan_log(...))` with no simulator code of
its own. A trace says how many bytes each rank moved and where the file ended, not the order
of its calls, so each rank's bytes are taken as one contiguous run ending at its highest
offset, written in one phase (then read in one phase if it read). Pure, no I/O.
"""

from __future__ import annotations

from typing import Iterable

from iez.errors import ConfigError
from iez.sim.workload import Extent, FileSpec, Phase, Workload
from iez.trace.ingest import observed_layout
from iez.trace.record import FileRecord


def workload_from_records(records: Iterable[FileRecord], name: str = "") -> Workload:
    # API layers stacked on one file (HDF5 over MPI-IO over POSIX) describe the same bytes:
    # keep, per (file, rank), the layer that moved the most (as iez.trace.ingest does).
    best: dict[tuple[str, int], FileRecord] = {}
    for r in records:
        k = (r.path, r.rank)
        if r.bytes_written + r.bytes_read > (best[k].bytes_written + best[k].bytes_read if k in best else 0):
            best[k] = r
    recs = list(best.values())
    if not recs:
        raise ConfigError(f"trace {name or '?'}: no record moved any bytes")
    name = name or recs[0].app or "trace"
    ranks = max(r.rank for r in recs) + 1
    hosts: dict[str, int] = {}
    node_map = [0] * ranks
    for r in sorted(recs, key=lambda r: r.rank):
        node_map[r.rank] = hosts.setdefault(r.host or f"rank{r.rank}", len(hosts))
    files: dict[str, FileSpec] = {}
    for r in recs:
        size = max(r.max_offset, r.bytes_written, r.bytes_read, files[r.path].size if r.path in files else 0)
        lay = observed_layout(r)
        plain = lay.plain if lay is not None and lay.plain is not None and lay.plain.osts else None
        if plain is not None:
            files[r.path] = FileSpec(r.path, size, plain.stripe_count, plain.stripe_size or 1 << 20, plain.osts)
        else:
            files[r.path] = FileSpec(r.path, size, r.stripe_count or 1, r.stripe_size or 1 << 20)
    phases = []
    for kind, attr in (("write", "bytes_written"), ("read", "bytes_read")):
        ext = []
        for r in recs:
            n = getattr(r, attr)
            if n:
                end = max(r.max_offset, n)
                ext.append(Extent(r.rank, r.path, end - n, n))
        if ext:
            creates = tuple((r.rank, 1) for r in recs if kind == "write" and r.created)
            opens = tuple((r.rank, 1) for r in recs if not (kind == "write" and r.created) and getattr(r, attr))
            phases.append(Phase(kind, f"trace {kind}", extents=tuple(ext), creates=creates, opens=opens))
    return Workload(name, ranks, tuple(files.values()), tuple(phases), node_map=tuple(node_map))
