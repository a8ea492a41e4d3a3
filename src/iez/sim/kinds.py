"""The kinds of job a scenario's `[[job]]` can be, in one table: `KINDS`.

A generated kind makes its files and I/O phases from the job's parameters (the benchmarks of
`iez.sim.workload`); a recorded kind reads what a job did from the file its `path` names (a
libiez trace directory, a Darshan log) and places its files where they were observed unless the
job says otherwise. The scenario parser checks `kind` against the table and lists it in its
error, `build` makes every job's workload through it, and docs/simulator.md names the same kinds
(a test holds them equal).

To add a kind: a generator in `iez.sim.workload` (or a reader of records) and one row in `KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from iez.errors import ConfigError
from iez.sim.trace import workload_from_records
from iez.sim.workload import Generator, Pattern, Workload, bt_io, generated, hacc_io, ior, mpi_open, mpi_tile_io
from iez.trace.darshan import read_log
from iez.trace.record import FileRecord
from iez.trace.shard import read_shards


@dataclass(frozen=True)
class Kind:
    build: Callable[[Pattern, str], Workload]  # the job's pattern and the path it names ("" if none)
    recorded: bool = False  # read from `path`, and placed where it was observed by default


def _generated(make: Generator, repeats: bool = True) -> Kind:
    return Kind(lambda p, path: generated(p, make, repeats))


def _recorded(read: Callable[[str], Iterable[FileRecord]]) -> Kind:
    return Kind(lambda p, path: workload_from_records(read(path), p.name), recorded=True)


KINDS: dict[str, Kind] = {
    "ior": _generated(ior),
    "hacc-io": _generated(hacc_io),
    "bt-io": _generated(bt_io, repeats=False),  # its 40 dumps are its bursts
    "mpi-tile-io": _generated(mpi_tile_io),
    "mpi-open": _generated(mpi_open),
    "trace": _recorded(read_shards),
    "darshan": _recorded(lambda path: read_log(path).records),
}


def kind_of(name: str, job: str) -> Kind:
    """The table's row for `name`; a ConfigError (one line, naming every kind) if there is none."""
    kind = KINDS.get(name)
    if kind is None:
        raise ConfigError(f"job {job}: kind {name!r} is not one of {', '.join(KINDS)}")
    return kind


def build(p: Pattern, path: str = "") -> Workload:
    """The workload of a job: `p` as the scenario gave it, `path` the file a recorded kind reads."""
    return kind_of(p.kind, p.name).build(p, path)
