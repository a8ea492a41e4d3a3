"""`iez trace show DIR`: what libiez traced in a shard directory, per run and per file."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from iez.cli import subgroup
from iez.trace.shard import Trace, read_trace_file, shard_files
from iez.units import format_size


def register(sub: argparse._SubParsersAction) -> None:
    g = subgroup(sub, "trace", "traces of application runs (libiez shards, Darshan logs)")
    p = g.add_parser("show", help="print the records of a libiez shard directory",
                     description="Print every file each traced process wrote (one row per file and process), "
                                 "and per run the plan hits and misses. Damaged shards are read as far as "
                                 "they are intact, with one warning line each.")
    p.add_argument("dir", metavar="DIR", help="the IEZ_TRACE_DIR of the runs (shards and merged MPI job traces)")
    p.add_argument("--json", action="store_true", help="print records and runs as JSON")
    p.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    files = shard_files(args.dir)
    trace = Trace()
    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("reading shards", total=len(files))
        for f in files:
            trace.shards.extend(read_trace_file(f))
            progress.advance(task)
    for w in trace.warnings:
        print(f"iez: warning: {w}", file=sys.stderr)
    runs = trace.runs()
    if args.json:
        print(json.dumps({
            "runs": [{**asdict(r), "miss_ratio": r.miss_ratio, "needs_retrace": r.needs_retrace} for r in runs],
            "records": [asdict(r) for r in trace.records]}, indent=1))
        return 0
    out = Console(highlight=False, width=200)
    if not trace.shards:
        out.print(f"no trace shards in {args.dir}")
        return 0
    for run in runs:
        plan = ("plan rejected" if run.plan_rejected else
                f"plan: {run.plan_hits} hits, {run.plan_misses} misses ({run.miss_ratio:.0%} missing)"
                if run.plan_hits + run.plan_misses else "no plan")
        retrace = "; trace again" if run.needs_retrace and run.plan_hits + run.plan_misses else ""
        out.print(f"app {run.app} run {run.run}: {run.processes} processes, {run.files} files; {plan}{retrace}",
                  markup=False)
    table = Table(box=None, pad_edge=False)
    for col in ("path", "rank", "pid", "api", "comm", "created", "written", "max offset", "layout", "plan"):
        table.add_column(col, justify="right" if col in ("rank", "pid", "comm", "written", "max offset") else "left",
                         overflow="fold")
    for r in sorted(trace.records, key=lambda r: (r.app, r.run, r.path, r.rank, r.pid)):
        plan = {True: "hit", False: "miss", None: ""}[r.plan_hit]
        table.add_row(r.path, str(r.rank), str(r.pid), r.api, str(r.comm_size), "yes" if r.created else "",
                      format_size(r.bytes_written), str(r.max_offset), r.layout or "-", plan)
    out.print(table)
    return 0
