"""`iez demo`: the main job (see iez.demo.experiment)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from iez.alloc.registry import DEFAULT_POLICY


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the main job: seed 000's evaluation and a shared file's automatic layout on an emulated cluster, default vs iez")
    p.add_argument("-o", "--out", default="demo-out", help="where the report and PNGs go (default demo-out)")
    p.add_argument("--scale", type=int, default=32, help="divide OST capacity and file sizes by this (default 32)")
    p.add_argument("--seed", type=int, default=1, help="seed of the emulated MDS's allocator (default 1)")
    p.add_argument("--policy", default=DEFAULT_POLICY, help=f"iez allocation policy (default {DEFAULT_POLICY})")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="run only scenarios whose name contains TEXT (repeatable)")
    p.add_argument("--quick", action="store_true",
                   help="five scenarios, one of each kind, instead of all thirteen (on both clusters)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from iez.demo import report
    from iez.demo.experiment import QUICK, DemoOptions, run_demo
    from iez.errors import ConfigError

    if args.scale < 1:
        raise ConfigError("--scale must be at least 1")
    console = Console(width=report.WIDTH)
    opts = DemoOptions(out=Path(args.out), scale=args.scale, seed=args.seed,
                       only=tuple(args.only) + (QUICK if args.quick else ()), policy=args.policy)
    t0 = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        models, outcomes = run_demo(opts, progress)
    report.print_results(console, models, outcomes, opts)
    page = report.write(opts, models, outcomes)
    cluster = models["empty"]
    console.print(f"\n{report.SCOPE}", highlight=False)
    console.print(f"Data scaled down {opts.scale}x (OSTs of {cluster.osts[0].capacity >> 20} MiB); "
                  f"{len(outcomes)} scenarios in {time.perf_counter() - t0:.0f} s.", highlight=False)
    console.print(f"Report: {page.resolve()}", highlight=False, soft_wrap=True)
    return 0
