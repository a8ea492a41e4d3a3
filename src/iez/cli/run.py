"""`iez run --app NAME [--controller URL] -- COMMAND...` (see iez.wrapper), `iez trace upload`,
which retries the upload `iez run` does after the job, and `iez trace fetch-plan`, the fetch
`iez run` does before it (for site-wide placement from a Slurm TaskProlog: docs/install.md)."""

from __future__ import annotations

import argparse
import json
import sys

from iez.cli import subgroup


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a job under iez: traced the first time, placed from then on",
                       description="Runs COMMAND with libiez preloaded. The first run of an application (or "
                       "one after a run that missed more than half its files) is traced; later runs are "
                       "placed with the controller's plan. The trace is uploaded afterwards. If anything on "
                       "iez's side fails, COMMAND still runs, with a warning; the exit status is COMMAND's. "
                       "Only a bad --app or a missing COMMAND stop it before it starts (exit 2).")
    p.add_argument("--app", required=True, help="application name (the same for every run of the job): "
                   "1-128 letters, digits, '.', '_', '+' or '-'")
    controller_option(p)
    p.add_argument("--wait", type=float, default=30.0, help="seconds to wait for a plan being made (default 30)")
    p.add_argument("--emulated", metavar="DIR", help="the emulated cluster the job writes to (sets IEZ_EMULATED)")
    p.add_argument("--trace-dir", metavar="DIR", help="keep the trace in DIR (default: a temporary directory)")
    p.add_argument("--log", metavar="FILE", help="libiez diagnostics to FILE (IEZ_LOG)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    p.set_defaults(func=cmd_run)

    g = subgroup(sub, "trace", "traces of application runs (libiez shards, Darshan logs)")
    u = g.add_parser("upload", help="upload a run's trace to the controller (what iez run does after the job)")
    u.add_argument("trace", help="libiez trace directory (or Darshan log)")
    u.add_argument("--app", required=True, help="application name")
    controller_option(u)
    u.add_argument("--run", type=int, help="the planned run it traced (iez run's warning gives it)")
    u.set_defaults(func=cmd_upload)

    f = g.add_parser("fetch-plan", help="write the controller's plan for APP's coming run to a file and print "
                     "its run number (what iez run does before the job)",
                     description="Exit 0 with the run number on stdout when a plan was written; exit 1 with the "
                     "reason on stderr when there is none yet (trace the run instead). FILE must not exist.")
    f.add_argument("--app", required=True, help="application name")
    controller_option(f)
    f.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a plan being made (default 0)")
    f.add_argument("-o", "--output", required=True, metavar="FILE", help="the plan file to create")
    f.set_defaults(func=cmd_fetch_plan)


def controller_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--controller", metavar="URL", help="controller URL (default $IEZ_CONTROLLER or "
                   "http://127.0.0.1:8760); the token comes from $IEZ_TOKEN or $IEZ_TOKEN_FILE")


def cmd_run(args: argparse.Namespace) -> int:
    from iez.wrapper import RunOptions, command_of, run

    opts = RunOptions(app=args.app, command=command_of(args.command), controller=args.controller, wait=args.wait,
                      emulated=args.emulated, trace_dir=args.trace_dir, log=args.log)
    report = run(opts, lambda m: print(f"iez: warning: {m}", file=sys.stderr))
    return report.rc


def cmd_upload(args: argparse.Namespace) -> int:
    from iez.controller.api_client import ControllerClient
    from iez.wrapper import check_app

    with ControllerClient.from_env(args.controller) as client:
        got = client.upload_trace(check_app(args.app), args.trace, run=args.run)
    print(json.dumps(got))
    return 0


def cmd_fetch_plan(args: argparse.Namespace) -> int:
    import os

    from iez.controller.api_client import ControllerClient
    from iez.wrapper import check_app

    with ControllerClient.from_env(args.controller) as client:
        reply = client.fetch_plan(check_app(args.app), wait=args.wait)
    if reply.status != "ready":
        print(f"iez: no plan for {args.app} ({reply.status}: {reply.reason}): trace this run", file=sys.stderr)
        return 1
    # Created, never replaced: a TaskProlog writes it in a directory other tasks share.
    fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as out:
        out.write(reply.text)
    print(reply.run if reply.run is not None else "")
    return 0
