"""`iez trace import PATH... [--app NAME] [--run N]`: traces into the interaction database.

A PATH is a libiez shard directory (docs/trace-format.md) or a Darshan log. Every PATH is one
run: the files it created, and the files it read without creating them. Without --app a run is
stored as the program it ran (a launcher's or a job script's run as the program they started).
All PATHs are read before anything is written, and all runs are written in one transaction: a
bad PATH is one error line and the database keeps what it had.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from iez.cli import subgroup
from iez.errors import IezError
from iez.pipeline import LoadedTrace, load_trace, store_trace
from iez.units import format_size

if TYPE_CHECKING:
    from iez.db import Database


def db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="URL", default=None,
                   help="interaction database: a SQLAlchemy URL (sqlite:///FILE, postgresql://USER@HOST/DB); "
                        "default $IEZ_DB, else ~/.local/share/iez/iez.db")


def open_db(args: argparse.Namespace) -> "Database":
    """The database --db names (SQLAlchemy is imported only by the commands that need it)."""
    from iez.db import Database

    return Database(args.db)


def register(sub: argparse._SubParsersAction) -> None:
    g = subgroup(sub, "trace", "traces of application runs (libiez shards, Darshan logs)")
    p = g.add_parser("import", help="load traces into the interaction database",
                     description="Load each PATH (a libiez shard directory or a Darshan log) as one run of APP: "
                                 "the files it created and the files it only read.")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--app", metavar="NAME",
                   help="the application the runs belong to (default: the program the runs ran, not its launcher "
                        "or wrapper: docs/trace-format.md)")
    p.add_argument("--run", type=int, metavar="N",
                   help="run number (default: one after the newest traced run; a predicted run gets its trace)")
    db_option(p)
    p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    if args.run is not None and len(args.paths) > 1:
        raise IezError("--run names one run: give a single PATH with it")
    from iez.db import check_app_name

    if args.app:
        check_app_name(args.app)
    err = Console(stderr=True)
    loaded: list[LoadedTrace] = []
    with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("reading traces", total=len(args.paths))
        for path in args.paths:
            progress.update(task, description=f"reading {path}")
            loaded.append(load_trace(path, args.app or ""))
            progress.advance(task)
    apps = sorted({t.app for t in loaded})
    if len(apps) > 1:
        raise IezError(f"the PATHs ran different programs ({', '.join(apps)}): give --app NAME, or import each "
                       "program's runs apart")
    app = apps[0]
    numbers: list[int] = []
    notes: list[str] = []
    with open_db(args) as db, db.begin() as tx:
        for t in loaded:
            n, said = store_trace(tx, app, t.ingested, args.run, label=t.label, source=t.source,
                                  source_path=str(t.path.absolute()), nprocs=t.nprocs, meta=t.meta)
            numbers.append(n)
            notes += t.notes + said
    # files: created by the run; shared: of those, written by several ranks; read: files only read;
    # other: neither created nor read (written in place, opened)
    table = Table(title=f"{app}: imported", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("run", "source", "job", "files", "written", "procs", "shared", "read", "bytes read", "other"):
        table.add_column(col, justify="left" if col in ("source", "job") else "right")
    for n, t in zip(numbers, loaded):
        reqs, reads = t.ingested.requests, t.ingested.reads
        table.add_row(str(n), t.source, t.label or "-", str(len(reqs)),
                      format_size(sum(q.write_bytes for q in reqs)), str(t.nprocs),
                      str(sum(q.comm_size > 1 for q in reqs)), str(len(reads)),
                      format_size(sum(q.read_bytes for q in reqs + reads)), str(t.ingested.not_created - len(reads)))
    Console().print(table)
    # Plain prints: paths may hold '[' (rich markup) and must not be wrapped.
    for t in loaded:
        for w in t.meta.get("warnings", []):
            print(f"iez: warning: {w}", file=sys.stderr)
    for note in notes:
        print(note)
    return 0
