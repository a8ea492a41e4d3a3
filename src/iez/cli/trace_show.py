"""`iez trace show DIR`: what libiez traced in a shard directory, per run and per file, with the
writers' facts the automatic layout reads and the readers' (bytes read, typical read); with `--app`, whether iez changed the layout of each
file placed from a plan, and why, from the interaction database (a trace records the layout a
file got, not the one it asked for)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from iez.cli import subgroup
from iez.cli.trace_import import db_option, open_db
from iez.errors import IezError
from iez.fields import Matchers, process_fields
from iez.trace.shard import RunSummary, Trace, read_trace_file, shard_files
from iez.units import format_size


def register(sub: argparse._SubParsersAction) -> None:
    g = subgroup(sub, "trace", "traces of application runs (libiez shards, Darshan logs)")
    p = g.add_parser("show", help="print the records of a libiez shard directory",
                     description="Print every file each traced process wrote (one row per file and process), "
                                 "and per run the plan hits and misses. Damaged shards are read as far as "
                                 "they are intact, with one warning line each.")
    p.add_argument("dir", metavar="DIR", help="the IEZ_TRACE_DIR of the runs (shards and merged MPI job traces)")
    p.add_argument("--json", action="store_true", help="print records and runs as JSON")
    p.add_argument("--app", metavar="NAME",
                   help="the application's name in the interaction database: say, for each file placed from "
                        "its plan, whether iez changed the asked layout and why")
    p.add_argument("--run", type=int, metavar="N",
                   help="with --app: the planned run the trace followed (default: the run imported from this "
                        "trace, found by its label, else the newest planned run)")
    db_option(p)
    p.set_defaults(func=cmd_show)


def plan_notes(args: argparse.Namespace, runs: list[RunSummary]) -> tuple[int, str, dict[str, str]]:
    """(run number, policy, path -> note) of the plan the traced run followed: the placements of
    the policy whose plan the run was given, from the interaction database."""
    with open_db(args) as db, db.begin() as tx:
        known = tx.runs(args.app)
        labels = {r.run for r in runs}
        chosen = ([r for r in known if r.number == args.run] if args.run is not None else
                  [r for r in known if r.label in labels] or [r for r in known if r.planned_policy][-1:])
        if not chosen or not chosen[-1].planned_policy:
            which = f"run {args.run}" if args.run is not None else "a run"
            raise IezError(f"{args.app} has no planned {which} in the database (give --run N of the run the "
                           "trace followed)")
        info = chosen[-1]
        [placed] = [s for s in tx.placement_sets(args.app, info.number) if s.policy == info.planned_policy]
    return info.number, info.planned_policy, {p.path: p.note for p in placed.placements}


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
    planned = plan_notes(args, runs) if args.app else None
    if args.json:
        doc: dict[str, Any] = {
            "runs": [{**asdict(r), "miss_ratio": r.miss_ratio, "needs_retrace": r.needs_retrace} for r in runs],
            "records": [asdict(r) for r in trace.records]}
        if planned:
            doc["plan"] = {"app": args.app, "run": planned[0], "policy": planned[1], "notes": planned[2]}
        print(json.dumps(doc, indent=1))
        return 0
    out = Console(highlight=False, width=240)  # a row a record: long paths, many columns
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
    right = ("rank", "pid", "comm", "written", "max offset", "writers", "xfer", "align", "read", "rsize")
    for col in ("path", "rank", "pid", "api", "comm", "created", "written", "max offset", "writers", "xfer", "align",
                "read", "rsize", "layout", "plan"):
        table.add_column(col, justify="right" if col in right else "left", overflow="fold")
    notes = planned[2] if planned else {}
    entry = Matchers(notes)  # the plan entry a name fell under: itself, or a template (docs/plan-format.md)
    changed: dict[str, str] = {}
    for r in sorted(trace.records, key=lambda r: (r.app, r.run, r.path, r.rank, r.pid)):
        plan = {True: "hit", False: "miss", None: ""}[r.plan_hit]
        if r.plan_hit and planned:
            key = entry(r.path, process_fields(r.job_id, r.array_task, r.host, r.rank))
            note = notes.get(key, "") if key else ""
            plan += ", iez changed it" if note else ", as asked"
            if note:
                changed[r.path] = note
        table.add_row(r.path, str(r.rank), str(r.pid), r.api, str(r.comm_size), "yes" if r.created else "",
                      format_size(r.bytes_written), str(r.max_offset), str(r.writers),
                      format_size(r.transfer_size) if r.transfer_size else "-",
                      format_size(r.write_align) if r.write_align else "-", format_size(r.bytes_read),
                      format_size(r.read_size) if r.read_size else "-", r.layout or "-", plan)
    out.print(table)
    if planned:
        out.print(f"plan of {args.app} run {planned[0]} ({planned[1]}): iez changed {len(changed)} of the layouts "
                  "this trace placed", markup=False)
        for path, note in sorted(changed.items()):
            out.print(f"  {path}: {note}", markup=False, soft_wrap=True)
    elif any(r.plan_hit for r in trace.records):
        out.print("whether iez changed a planned layout, and why, is in the interaction database: "
                  "give --app NAME (and --db)", markup=False)
    return 0
