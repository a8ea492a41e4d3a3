"""`iez advise LOG` (one job) and `iez audit LOGS...` (a site, on Dask): docs/audit.md."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


SHOWN = 20  # files with problems printed; --json and the page have all


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("advise", help="one Darshan log: its files' striping problems and what iez would do")
    p.add_argument("log", help="a Darshan log")
    p.add_argument("--cluster", metavar="TOML", help="the file system's cluster file (default: a model "
                   "with the OSTs the log names)")
    p.add_argument("-o", "--out", metavar="DIR", help="write an HTML page with figures here")
    p.add_argument("--json", action="store_true", help="print the advice as JSON")
    p.add_argument("--no-sim", action="store_true", help="skip the simulated times")
    p.set_defaults(func=cmd_advise)

    p = sub.add_parser("audit", help="many Darshan logs on Dask: the site's worst jobs, users and "
                       "applications, badly striped bytes, OSTCost, trends")
    p.add_argument("logs", nargs="+", help="logs: files, directories (every file below) or globs")
    p.add_argument("-o", "--out", metavar="DIR", default="audit-out",
                   help="HTML report and Parquet tables (default: audit-out)")
    p.add_argument("--cluster", metavar="TOML", help="the file system's cluster file (default: per log, "
                   "a model with the OSTs it names)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler (tcp://host:8786); "
                   "default: an embedded LocalCluster")
    p.add_argument("--workers", type=int, default=0, help="LocalCluster workers (default: one per CPU)")
    p.add_argument("--json", action="store_true", help="print the site summary as JSON")
    p.add_argument("--no-sim", action="store_true", help="skip the simulated times")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per log that could not be read")
    p.set_defaults(func=cmd_audit)


def _cluster_text(path: str | None) -> str:
    """The cluster file's text, checked here (one error line) before any worker parses it."""
    if not path:
        return ""
    from iez.cluster import load_cluster

    load_cluster(path)
    return Path(path).read_text()


def cmd_advise(args: argparse.Namespace) -> int:
    from iez.audit.job import audit_log
    from iez.trace.ingest import TraceError

    out = audit_log(args.log, _cluster_text(args.cluster), simulate=not args.no_sim)
    if not out["ok"]:
        raise TraceError(out["error"])
    adv = out["advice"]
    if args.json:
        json.dump(adv.to_dict(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print_advice(adv, Console())
    if args.out:
        from iez.audit.page import advice_page

        page = advice_page(adv, Path(args.out))
        (Path(args.out) / "advice.json").write_text(json.dumps(adv.to_dict(), indent=1))
        if not args.json:
            Console().print(f"page: {page}")
    return 0


def _print_advice(adv: Any, console: Console) -> None:
    from iez.audit.findings import TITLES
    from iez.units import format_size

    console.print(f"[bold]job {adv.jobid}[/] {adv.app or adv.exe} (user {adv.user or '?'}, {adv.nprocs} processes, "
                  f"{len(adv.files)} files)")
    for n in adv.notes:
        console.print(f"  note: {n}")
    if adv.has_layout:
        console.print(f"  OSTCost: {adv.ost_cost_recorded:.2f} recorded, {adv.ost_cost_iez:.2f} with iez's layouts "
                      f"({adv.n_osts} OSTs)")
        if adv.time_lost is not None:
            console.print(f"  simulated write {adv.write_recorded:.3g} s -> {adv.write_iez:.3g} s, "
                          f"read {adv.read_recorded:.3g} s -> {adv.read_iez:.3g} s")
    found = adv.findings
    if not found:
        console.print("  no known striping problem")
        return
    by_file: dict[str, list[Any]] = {}
    for x in found:
        by_file.setdefault(x.path, []).append(x)
    advice = {f.facts.path: f for f in adv.files}
    for path, xs in list(by_file.items())[:SHOWN]:
        console.print(f"[bold]{path}[/] ({format_size(xs[0].bytes)})", highlight=False)
        for x in xs:
            console.print(f"  {TITLES[x.kind]}: {x.text}", highlight=False)
        f = advice[path]
        if f.iez:
            console.print(f"  iez: {f.iez}\n       {f.why}", highlight=False)
    if len(by_file) > SHOWN:
        console.print(f"... {len(by_file) - SHOWN} more files with problems (--json or -o for all)")


def cmd_audit(args: argparse.Namespace) -> int:
    from iez.audit.execute import audit, expand
    from iez.audit.page import site_page

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True)
    paths = list(expand(args.logs))  # the progress bar needs the total; paths only, not logs

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=args.json) as prog:
        bar = prog.add_task("auditing", total=len(paths))

        def progress(a: dict[str, Any]) -> None:
            if not a["ok"] and args.verbose:
                prog.console.print(f"iez: skipped: {a['error']} [{a['cause']}]", markup=False,
                                   highlight=False, soft_wrap=True)
            prog.advance(bar)

        site = audit(paths, out, progress, scheduler=args.scheduler or "", workers=args.workers,
                     cluster_toml=_cluster_text(args.cluster), simulate=not args.no_sim)
    page = site_page(site, out)
    doc = site.to_dict()
    (out / "site.json").write_text(json.dumps(doc, indent=1))
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    c = Console()
    failed = sum(site.failures.values())
    c.print(f"{site.jobs} jobs advised ({site.without_layout} without LUSTRE records), {failed} logs unreadable"
            + (f": {', '.join(f'{n} {k}' for k, n in sorted(site.failures.items()))}" if failed else ""))
    if site.time_recorded:
        c.print(f"simulated I/O time: {site.time_recorded:.4g} s recorded, {site.time_iez:.4g} s with iez's layouts")
    for r in site.worst_jobs()[:5]:
        c.print(f"  job {r['jobid']} {r['app']} ({r['user'] or '?'}): {r['time_lost']:.3g} s lost, "
                f"OSTCost {r['ost_cost_recorded']:.2f} -> {r['ost_cost_iez']:.2f}")
    c.print(f"report: {page}; tables: {', '.join(p.name for p in out.glob('*.parquet'))}")
    return 0

