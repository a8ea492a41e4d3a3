"""`iez sim SCENARIO.toml -o DIR`: run a simulator scenario (docs/simulator.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

MIB = 1 << 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim", help="simulate jobs on a Lustre cluster (SimGrid) and plot the I/O rates")
    p.add_argument("scenario", help="scenario TOML file (docs/simulator.md; examples in scenarios/)")
    p.add_argument("-o", "--out", default="sim-out", help="output directory (default: sim-out)")
    p.add_argument("--only", metavar="LABEL", action="append", default=[],
                   help="run only the variants whose label contains LABEL (repeatable)")
    p.set_defaults(func=cmd_sim)


def cmd_sim(args: argparse.Namespace) -> int:
    from iez.sim.scenario import load_scenario, variants
    from iez.sim.study import compare_line, run_all, summarise

    doc, base = load_scenario(args.scenario)
    vs = variants(doc, base)
    if args.only:
        vs = [v for v in vs if any(s in v.label for s in args.only)]
        if not vs:
            from iez.errors import ConfigError
            raise ConfigError(f"no variant label contains {' or '.join(args.only)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    console = Console()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as prog:
        task = prog.add_task("simulating", total=len(vs))
        runs = []
        # the runs share placements and live views (iez.sim.placement.place, iez.sim.study.live_view)
        cache: dict = {}
        views: dict = {}
        for v in vs:
            prog.update(task, description=f"simulating {v.label}")
            runs.extend(run_all([v], out, cache=cache, views=views))
            prog.advance(task)
    summary = summarise(vs[0].scenario, runs, out)
    table = Table(title=summary["title"] or str(args.scenario))
    for col in ("run", "job", "write MiB/s", "read MiB/s", "end-to-end s", "token wait s", "bound s"):
        table.add_column(col, justify="left" if col in ("run", "job") else "right")
    for r in summary["runs"]:
        for j in r["jobs"]:
            table.add_row(r["label"], j["name"], f"{j['write_bw'] / MIB:.0f}", f"{j['read_bw'] / MIB:.0f}",
                          f"{j['end_to_end']:.2f}", f"{j['token_wait']:.2f}", f"{r['lower_bound']:.2f}")
    console.print(table)
    for c in summary["compare"]:
        console.print(compare_line(c))
    console.print(f"results in {out}/ (summary.json, figure.png, one directory per run)")
    return 0
