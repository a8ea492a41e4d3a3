"""The control-plane pipeline (docs/references.md#s000-fig4), one command per step:

    iez trace import PATH --app APP        a trace (libiez or Darshan) into the database
    iez predict APP                        AIPA: the next run's requests
    iez allocate APP --policy P -o PLAN    OSTs for each predicted file, and the plan libiez loads
    iez plan APP --run N -o PLAN           (re)write a run's plan from stored placements
    iez report APP [-o DIR]                OSTCost and OST/OSS utilization, policy by policy; the run's reads

Each command reads what the previous one stored in the interaction database (--db URL).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console
from rich.table import Table

from iez import pipeline
from iez.alloc.policy import LAYOUTS
from iez.alloc.registry import DEFAULT_POLICY, display_rank
from iez.cli.trace_import import db_option, open_db
from iez.errors import IezError
from iez.plan import Plan, format_layout
from iez.report.balance import (CHANGED_COLUMNS, COST_NOTE, PolicyBalance, changed_rows, check_one_cluster,
                                policy_balance, report_json, report_rows)
from iez.units import format_size, parse_duration

if TYPE_CHECKING:
    from iez.db import Txn
    from iez.request import Request


def reservation_ttl_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reservation-ttl", metavar="DURATION",
                   help="other applications' planned runs not run within this long reserve no space "
                        "(default 7d; 0: until they run)")


def reservation_ttl(args: argparse.Namespace) -> float:
    from iez.db.database import RESERVATION_TTL

    if args.reservation_ttl is None:
        return RESERVATION_TTL
    return parse_duration(args.reservation_ttl, "--reservation-ttl")


def _command(sub: argparse._SubParsersAction, name: str, help: str, description: str, func: Any,
             run_help: str | None = None) -> argparse.ArgumentParser:
    """A pipeline subcommand: APP, an optional --run N, and --db."""
    p = sub.add_parser(name, help=help, description=description)
    p.add_argument("app", metavar="APP")
    if run_help:
        p.add_argument("--run", type=int, metavar="N", help=run_help)
    db_option(p)
    p.set_defaults(func=func)
    return p


def register(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "predict", "predict APP's next run from its traced runs (AIPA)",
                 "Fit AIPA's ARIMA models on every traced run of APP and store the requests of the next run.",
                 cmd_predict)
    json_option(p, "the predicted files and the models")

    p = _command(sub, "allocate", "choose OSTs for every file of APP's predicted run",
                 "Place the newest predicted run of APP (or --run N) with each policy.", cmd_allocate,
                 "the predicted run to place (default: the newest)")
    p.add_argument("--policy", default=DEFAULT_POLICY, metavar="P",
                   help=f"allocation policy (default {DEFAULT_POLICY}; an unknown name lists them all); "
                        "several separated by commas")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="TOML", help="cluster description (docs/cluster-toml.md)")
    where.add_argument("--emulated", metavar="DIR", help="an emulated cluster: its model and current usage")
    p.add_argument("--capacity-weight", type=float, metavar="W",
                   help="balanced's trade-off, 0..1: 0 = the job's own I/O time only, 1 = long-term "
                        "capacity balance only (default 0.5; docs/allocation.md)")
    p.add_argument("--routers", action="store_true", default=None,
                   help="balanced: cap each OSS by its share of the LNet routers serving it (the cluster's "
                        "topology; docs/allocation.md)")
    p.add_argument("--stripe-method", choices=("method2", "method1", "fixed"),
                   help="stripe size by seed 000 Method II (default) or I, or the file system default")
    p.add_argument("--layout", choices=LAYOUTS,
                   help="stripe counts and sizes: auto (iez's cost model), keep (the asked ones), hierarchical "
                        "(auto and PFL components per writer group); default: the cluster file's [defaults] "
                        "layout, else auto (docs/layouts.md)")
    p.add_argument("-o", "--output", metavar="PLAN", help="also write the plan file (one policy only)")
    json_option(p, "each policy's placement balance (as iez report --json)")
    reservation_ttl_option(p)
    gate = p.add_argument_group("controller-host gate (seed 000 §III-B2)")
    gate.add_argument("--max-cpu", type=float, metavar="F",
                      help="allocate only while load average / cores is below F (default 0.7)")
    gate.add_argument("--max-mem", type=float, metavar="F",
                      help="allocate only while the used memory fraction is below F (default 0.5)")
    gate.add_argument("--gate-wait", type=float, default=0.0, metavar="S",
                      help="wait up to S seconds for the host to calm down (default: fail at once)")
    gate.add_argument("--no-gate", action="store_true", help="allocate however busy the host is")

    p = _command(sub, "plan", "write the plan file of a run from its stored placements",
                 "Write the plan (docs/plan-format.md) that libiez loads for run N of APP.", cmd_plan,
                 "default: the newest run with placements")
    p.add_argument("--policy", metavar="P", help=f"whose placements (default: {DEFAULT_POLICY}, or the only one)")
    p.add_argument("-o", "--output", required=True, metavar="FILE")

    p = _command(sub, "report", "OSTCost and OST/OSS utilization of every policy, side by side",
                 "Compare the policies that placed run N of APP (seed 000 Figs. 7 and 11).", cmd_report,
                 "default: the newest run with placements")
    p.add_argument("-o", "--output", metavar="DIR", help="also write PNG charts, report.json and index.html here")
    json_option(p, "the comparison, as report.json holds it")


def json_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON instead of tables")


def print_json(doc: Any) -> None:
    import json

    print(json.dumps(doc, indent=1, default=str))


# -- predict ---------------------------------------------------------------------------------


def cmd_predict(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    with open_db(args) as db:
        got = pipeline.predict(db, args.app, progress=err.is_terminal)
    reqs = got.prediction.requests
    if args.json:
        print_json({"app": args.app, "run": got.run, "from_runs": list(got.from_runs),
                    "files": [{"path": q.path, "write_bytes": q.write_bytes, "stripe_count": q.stripe_count,
                               "comm_size": q.comm_size, "rank": q.rank} for q in reqs],
                    "templates": list(got.prediction.templates), "models": got.models, "notes": got.notes})
        return 0
    print(f"{args.app}: predicted run {got.run} from run(s) {', '.join(str(n) for n in got.from_runs)}: "
              f"{len(reqs)} files, {format_size(sum(q.write_bytes for q in reqs))} written, "
              f"{sum(q.comm_size > 1 for q in reqs)} shared")
    Console().print(models_table(got.models))
    for note in got.notes:
        print(note)
    if got.prediction.templates:
        print("file name templates: " + ", ".join(got.prediction.templates))
    return 0


def models_table(models: dict[str, Any]) -> Table:
    """One row per AIPA series (write bytes, stripe count, rank): how it was predicted."""
    table = Table(title="AIPA series")
    for col in ("series", "method", "ARIMA (p,d,q)", "holdout RMSE", "run-to-run alpha", "orders fitted"):
        table.add_column(col, justify="left" if col in ("series", "method") else "right",
                         no_wrap=col == "series")
    for name, method in models.get("method", {}).items():
        order = models.get("orders", {}).get(name)
        rmse = models.get("rmse", {}).get(name)
        alpha = models.get("alpha", {}).get(name)
        grid = models.get("grid", {}).get(name)
        skipped = models.get("skipped", {}).get(name, 0)
        table.add_row(name, method, "(" + ",".join(str(x) for x in order) + ")" if order else "-",
                      f"{rmse:.4g}" if isinstance(rmse, (int, float)) else "-",
                      f"{alpha:.3f}" if isinstance(alpha, (int, float)) else "-",
                      f"{grid - skipped} of {grid}" if grid else "-")
    return table


# -- allocate --------------------------------------------------------------------------------


# Changed layouts printed per policy: `iez allocate` shows a few, `iez report` more, its page and
# report.json all of them.
NOTES_SHOWN = 5
REPORT_NOTES_SHOWN = 20


def cmd_allocate(args: argparse.Namespace) -> int:
    from iez.alloc.gate import GateLimits
    from iez.collect.host import wait_open
    from iez.alloc.policy import AllocOptions

    names = [n.strip() for n in args.policy.split(",") if n.strip()]
    if not names or len(set(names)) != len(names):
        raise IezError(f"--policy {args.policy!r}: give one or more distinct policy names")
    if args.output and len(names) > 1:
        raise IezError("-o writes one plan: give a single --policy with it")
    given = {"capacity_weight": args.capacity_weight, "stripe_method": args.stripe_method, "layout": args.layout,
             "routers": args.routers}
    options = AllocOptions(**{k: v for k, v in given.items() if v is not None})
    limits = {"max_cpu": args.max_cpu, "max_mem": args.max_mem}
    gate = GateLimits(**{k: v for k, v in limits.items() if v is not None})
    status = Console(stderr=True).status("reading the run")

    def state() -> pipeline.ClusterState:
        now = pipeline.cluster_state(args.cluster, args.emulated)
        if not args.no_gate:
            status.update("waiting for the host to be idle enough")
            wait_open(gate, args.gate_wait, lambda d: status.update(f"waiting: {d.reason}"))
        return now

    written: list[Plan] = []

    def plan(tx: Txn, done: pipeline.Allocation) -> None:
        if args.output:
            written.append(pipeline.write_plan(tx, args.app, done.run, names[0], done.cluster,
                                               done.placements[names[0]], args.output))

    with open_db(args) as db, status:
        done = pipeline.allocate(
            db, args.app, args.run, names, state, options, reservation_ttl=reservation_ttl(args), commit=plan,
            site_layout=args.layout is None,
            progress=lambda name, run, n: status.update(f"allocating {n} files of {args.app} run {run} with {name}"))
    asked = {q.path: q.stripe_count for q in done.requests}
    rows = [policy_balance(n, done.cluster, done.snapshot, done.placements[n], asked)
            for n in sorted(done.placements, key=display_rank)]
    if args.json:
        print_json({**report_json(args.app, done.run, rows), "plan": args.output})
        return 0
    if not done.requests:
        collread = any("collread" in p.meta for p in written)
        print(f"{args.app} run {done.run}: predicted to create no file: nothing placed"
              + (f"; plan written to {args.output}" if args.output else "")
              + (", asking for the Lustre-aware collective read" if collread else ""))
        return 0
    Console().print(balance_table(f"{args.app} run {done.run}: placed {len(done.requests)} files", rows))
    print(COST_NOTE)
    print_changed(rows, NOTES_SHOWN)
    if args.output:
        print(f"plan written to {args.output}")
    return 0


# -- plan ------------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    with open_db(args) as db, db.begin() as tx:
        run, policy, cluster, placed = pipeline.plan_source(tx, args.app, args.run, args.policy)
        plan = pipeline.write_plan(tx, args.app, run, policy, cluster, placed, args.output)
    print(f"{args.app} run {run}: {len(plan)} files ({policy}) planned in {args.output}"
          + ("; the Lustre-aware collective read asked for" if "collread" in plan.meta else ""))
    return 0


# -- report ----------------------------------------------------------------------------------


def balance_table(title: str, rows: Sequence[PolicyBalance]) -> Table:
    table = Table(title=title)
    table.add_column("")
    for r in rows:
        table.add_column(r.policy, justify="right")
    for metric, vals in report_rows(rows):
        table.add_row(metric, *vals)
    return table


def print_changed(rows: Sequence[PolicyBalance], limit: int) -> None:
    """The layouts iez changed from the asked ones, and why (docs/layouts.md)."""
    if not any(r.changed for r in rows):
        return
    table = Table(title="layouts iez changed", title_justify="left")
    for col in CHANGED_COLUMNS:
        table.add_column(col, overflow="fold")
    for row in changed_rows(rows, limit):
        table.add_row(*row)
    Console().print(table)


def print_reads(app: str, run: int, reads: Sequence[Request], limit: int) -> None:
    """The files a traced run read and did not create (no layout was chosen for them), the
    most read first."""
    if not reads:
        return
    table = Table(title=f"{app} run {run}: {len(reads)} files read, not created "
                        f"({format_size(sum(q.read_bytes for q in reads))} read)", title_justify="left")
    for col in ("path", "read", "typical read", "layout"):
        table.add_column(col, justify="right" if col in ("read", "typical read") else "left", overflow="fold")
    for q in sorted(reads, key=lambda q: (-q.read_bytes, q.path))[:limit]:
        table.add_row(q.path, format_size(q.read_bytes), format_size(q.read_size) if q.read_size else "-",
                      format_layout(q.observed) if q.observed else "-")
    Console().print(table)
    if len(reads) > limit:
        print(f"(and {len(reads) - limit} more)")


def cmd_report(args: argparse.Namespace) -> int:
    from iez.db import DatabaseError

    with open_db(args) as db, db.begin() as tx:
        try:
            sets = tx.placement_sets(args.app, args.run)
        except DatabaseError:
            reads = tx.run_reads(args.app, args.run) if args.run is not None else []
            if not reads:
                raise
            if args.json:
                print_json({"app": args.app, "run": args.run, "policies": {},
                            "reads": [{"path": q.path, "read_bytes": q.read_bytes} for q in reads]})
                return 0
            print_reads(args.app, args.run, reads, REPORT_NOTES_SHOWN)  # a read-only run: nothing was placed
            return 0
        reads = tx.run_reads(args.app, sets[0].run)
        snaps = {s.snapshot_id: tx.snapshot(s.snapshot_id) for s in sets}
        try:
            asked = {q.path: q.stripe_count for q in tx.prediction(args.app, sets[0].run).requests}
        except DatabaseError:  # placements stored without a prediction: the asked counts are not known
            asked = {}
    rows = []
    for s in sorted(sets, key=lambda s: display_rank(s.policy)):
        cluster, snap = snaps[s.snapshot_id]
        rows.append(policy_balance(s.policy, cluster, snap, s.placements, asked))
    check_one_cluster(args.app, sets[0].run, rows)
    if args.json:
        print_json({**report_json(args.app, sets[0].run, rows),
                    "reads": [{"path": q.path, "read_bytes": q.read_bytes} for q in reads]})
        return 0
    Console().print(balance_table(f"{args.app} run {sets[0].run}", rows))
    print(COST_NOTE)
    print_changed(rows, REPORT_NOTES_SHOWN)
    print_reads(args.app, sets[0].run, reads, REPORT_NOTES_SHOWN)
    if args.output:
        from iez.report.balance_page import write_report

        with Console(stderr=True).status("drawing charts"):
            written = write_report(Path(args.output), args.app, sets[0].run, rows)
        print(f"report written to {written[-1]}")
    return 0
