"""`iez profile start|stop|report`: LIOPProf, the Lustre I/O profiler (docs/liopprof.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from iez.cli import subgroup


def register(sub: argparse._SubParsersAction) -> None:
    g = subgroup(sub, "profile", "LIOPProf: profile Lustre OSSs (rpctrace, iostat, stats) and report")
    for name, helptext in (("start", "start the logging services on the OSSs"),
                           ("stop", "stop them and collect what they recorded into --out")):
        p = g.add_parser(name, help=helptext)
        where = p.add_mutually_exclusive_group(required=name == "start")
        where.add_argument("--oss", help="OSS hosts, comma separated (`local` for this machine); needs root there")
        where.add_argument("--cluster", metavar="DIR", help="an emulated cluster (iez emulate init) instead")
        p.add_argument("--out", required=True, type=Path, help="the profile directory")
        p.add_argument("--transport", default="auto", choices=("auto", "local", "ssh", "pdsh"),
                       help="how to reach the OSSs (default: local if all are this machine, else pdsh, else ssh)")
        p.add_argument("--remote-dir", default="/var/tmp/iez-profile", help="working directory on each OSS")
        p.add_argument("--sudo", action="store_true", help="run the root commands through `sudo -n`")
        p.add_argument("--dry-run", action="store_true", help="print every command instead of running it")
        if name == "start":
            p.add_argument("--interval", type=float, default=5.0,
                           help="seconds between exports/job stats samples (default 5)")
            p.add_argument("--survey", action="store_true", help="run obdfilter-survey first (loads the OSTs)")
        else:
            p.add_argument("--style", default="2.13", choices=("2.13", "2.11", "2.5"),
                           help="rpctrace format of emulated logs (default 2.13, as Lustre 2.13+ prints)")
        p.set_defaults(func=cmd_start if name == "start" else cmd_stop)
    p = g.add_parser("report", help="parse a profile directory and write an HTML report with pictures")
    p.add_argument("dir", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path("report.html"))
    p.add_argument("--bin", type=float, help="time bin in seconds (default: the sampling interval)")
    p.add_argument("--trace", type=Path, help="a libiez trace directory: map the job's files to the OSTs")
    p.set_defaults(func=cmd_report)


def _runner(args: argparse.Namespace, hosts: list[str]):
    from iez.profile.remote import Runner

    return Runner(hosts, args.transport, args.dry_run, args.sudo)


def _hosts(text: str) -> list[str]:
    return [h.strip() for h in text.split(",") if h.strip()]


def cmd_start(args: argparse.Namespace) -> int:
    from iez.profile import services

    if args.cluster:
        meta = services.start_emulated(args.cluster, args.out, args.interval)
        print(f"profiling emulated OSSs {', '.join(meta.hosts)} into {args.out}; I/O event logs go to "
              f"{Path(args.cluster).absolute() / services.IOLOG}")
        return 0
    meta = services.start(_runner(args, _hosts(args.oss)), args.out, args.interval, args.survey, args.remote_dir)
    if not args.dry_run:
        print(f"profiling {', '.join(meta.hosts)}; stop with: iez profile stop --oss {args.oss} --out {args.out}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from iez.profile import services
    from iez.profile.profiledir import read_meta

    if args.cluster:
        meta = services.stop_emulated(args.cluster, args.out, args.style)
    else:
        hosts = _hosts(args.oss) if args.oss else list(read_meta(args.out).hosts)
        meta = services.stop(_runner(args, hosts), args.out, args.remote_dir)
    if not args.dry_run:
        print(f"profile of {', '.join(meta.hosts)} in {args.out}; report with: iez profile report {args.out}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn

    from iez.profile.report import write_report

    with Progress(TextColumn("parsing {task.description}"), BarColumn(), DownloadColumn(), transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(host: str, done: int, total: int) -> None:
            if host not in tasks:
                tasks[host] = bar.add_task(host, total=total)
            bar.update(tasks[host], completed=done)

        found = write_report(args.dir, args.output, args.bin, progress, args.trace)
    for f in found:
        print(f)
    print(f"report: {args.output}")
    return 0
