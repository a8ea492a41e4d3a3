"""`iez access serve|status|run|tbf|eval`: IO-Cop access control (docs/iocop.md)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from iez.cli import subgroup
from iez.errors import BackendError, ConfigError, IezError

if TYPE_CHECKING:
    from iez.lustre.params import ParamTree

DEFAULT_BIND = "tcp://127.0.0.1:5580"
DEFAULT_LINE = "tcp://127.0.0.1:5581"
MAX_CONNECTIONS = 10_000  # iez.access.server.MAX_CONNECTIONS, without importing zmq for --help


def default_state() -> Path:
    env = os.environ.get("IEZ_ACCESS_STATE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "iez" / "access.db"


def _seconds(text: str) -> float:
    from iez.units import parse_duration

    return parse_duration(text, "duration")


def register(sub: argparse._SubParsersAction) -> None:
    g = subgroup(sub, "access", "IO-Cop: access tokens for I/O phases (controller, client, enforcement)")
    p = g.add_parser("serve", help="run the access controller",
                     description="Run the IO-Cop access controller in the foreground until SIGTERM/SIGINT.")
    p.add_argument("--policy", default="exclusive",
                   help="exclusive | k-concurrent | fair-share | priority | ost-aware (default exclusive)")
    p.add_argument("-k", type=int, default=1, help="holders at once for k-concurrent, fair-share, priority (default 1)")
    p.add_argument("--fair-by", choices=("user", "project"), default="user", help="fair-share groups (default user)")
    p.add_argument("--share", action="append", default=[], metavar="RULE",
                   help="fair-share weight, user:NAME=W or project:NAME=W (repeatable; default 1)")
    p.add_argument("--priority", action="append", default=[], metavar="RULE",
                   help="priority, app:GLOB=N, user:NAME=N or project:NAME=N (repeatable; highest match wins)")
    p.add_argument("--heartbeat", default="1s", help="holder heartbeat interval; the lease is two (default 1s)")
    p.add_argument("--max-hold", default="0", help="revoke a token held longer than this (default 0: never)")
    p.add_argument("--idle-timeout", default="86400",
                   help="end a registration silent and without a claim this long (default 86400 s)")
    p.add_argument("--half-life", default="3600", help="fair-share usage half-life (default 3600 s)")
    p.add_argument("--default-hold", default="60", help="hold time assumed by wait estimates with no history (60 s)")
    p.add_argument("--bind", action="append", metavar="ENDPOINT",
                   help=f"ZeroMQ ROUTER endpoint (repeatable; default {DEFAULT_BIND})")
    p.add_argument("--line", action="append", metavar="ENDPOINT",
                   help=f"raw-TCP line endpoint for C clients (repeatable; default {DEFAULT_LINE}); 'none' to disable")
    p.add_argument("--state", type=Path, help="state file (default $IEZ_ACCESS_STATE or ~/.local/state/iez/access.db)")
    p.add_argument("--events", type=Path, help="append every decision as a JSON line to this file")
    p.add_argument("--db", metavar="URL", help="take applications' OST sets from the planned placements in this "
                                               "interaction database (ost-aware)")
    p.add_argument("--refresh", default="30", help="re-read the placements this often (default 30 s)")
    p.add_argument("--token-file", metavar="FILE",
                   help="the site token requests must be signed with (default $IEZ_SITE_TOKEN)")
    p.add_argument("--trusted-network", action="store_true",
                   help="take unsigned requests over plain ZeroMQ (no CURVE) from anyone who can reach the "
                        "sockets (no site token)")
    p.add_argument("--max-skew", default="30",
                   help="refuse a request stamped further than this from our clock (default 30 s)")
    p.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                   help=f"line clients connected at once (default {MAX_CONNECTIONS})")
    p.set_defaults(func=cmd_serve)

    p = g.add_parser("status", help="who holds tokens, who waits, and how long")
    p.add_argument("--server", default=DEFAULT_BIND, help=f"controller (default {DEFAULT_BIND})")
    p.add_argument("--json", action="store_true", help="print the raw status")
    p.add_argument("--timeout", default="3", help="seconds to wait for the controller (default 3)")
    p.add_argument("--token-file", metavar="FILE", help="site token to sign requests with (default $IEZ_TOKEN_FILE or $IEZ_TOKEN)")
    p.set_defaults(func=cmd_status)

    p = g.add_parser("run", help="run a command holding one token for its whole run (coarse mode)")
    p.add_argument("--server", default=os.environ.get("IEZ_ACCESS_SERVER", DEFAULT_BIND))
    p.add_argument("--appid", help="JOBID:NAME (default from IEZ_RUN/SLURM_JOB_ID and the command)")
    p.add_argument("--phase", default="job")
    p.add_argument("--osts", help="the OSTs the command's files use, e.g. 0,3,8-11 (ost-aware)")
    p.add_argument("--plan", type=Path, help="take the OST set from this plan file")
    p.add_argument("--expect", type=float, help="seconds the command is expected to hold the token")
    p.add_argument("--down-wait", type=float, default=10.0,
                   help="seconds to wait for a controller that does not answer, then run without a token")
    p.add_argument("--token-file", metavar="FILE", help="site token to sign requests with (default $IEZ_TOKEN_FILE or $IEZ_TOKEN)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    p.set_defaults(func=cmd_run)

    p = g.add_parser("tbf", help="render (or apply) Lustre NRS TBF rules from the controller's decisions")
    p.add_argument("--server", default=DEFAULT_BIND)
    p.add_argument("--rate", type=int, default=None, help="RPC/s allowed to an application without a token (default 10)")
    p.add_argument("--param", default="ost.OSS.ost_io", help="the service whose NRS is set (default ost.OSS.ost_io)")
    p.add_argument("--apply", action="store_true", help="run the commands with lctl (only on a Lustre OSS)")
    p.add_argument("--enable", action="store_true",
                   help="also switch the service's NRS policy to 'tbf jobid' (replaces another TBF type's rules)")
    p.add_argument("--follow", metavar="SECONDS", help="keep following the controller, every SECONDS")
    p.add_argument("--timeout", default="3", help="seconds to wait for the controller (default 3)")
    p.add_argument("--token-file", metavar="FILE", help="site token to sign requests with (default $IEZ_TOKEN_FILE or $IEZ_TOKEN)")
    p.set_defaults(func=cmd_tbf)

    p = g.add_parser("eval", help="repeat seed 004's experiments: protocol on an emulated cluster, rates in the simulator")
    p.add_argument("-o", "--out", type=Path, default=Path("iocop-eval"), help="output directory (default iocop-eval)")
    p.add_argument("--quick", action="store_true", help="smaller jobs (for tests)")
    p.add_argument("--no-sim", action="store_true", help="skip the simulator part")
    p.set_defaults(func=cmd_eval)


def cmd_serve(args: argparse.Namespace) -> int:
    from iez.access.auth import Verifier
    from iez.access.queue import AccessQueue, Settings
    from iez.access.admission import make_policy, parse_rule
    from iez.access.server import Server, serve
    from iez.access.statefile import StateFile
    from iez.tokens import read_token
    from iez.files import raise_descriptor_limit

    hb = _seconds(args.heartbeat)
    if hb <= 0:
        raise ConfigError("--heartbeat must be > 0")
    skew = _seconds(args.max_skew)
    if skew <= 0 or args.max_connections < 1:
        raise ConfigError("--max-skew and --max-connections must be > 0")
    if args.trusted_network:
        if args.token_file or os.environ.get("IEZ_SITE_TOKEN"):
            raise ConfigError("--trusted-network takes no site token: drop it, or --token-file/$IEZ_SITE_TOKEN")
        verifier = Verifier(None)
    else:
        try:
            verifier = Verifier(read_token(args.token_file, "IEZ_SITE_TOKEN", "site", "--token-file"), skew)
        except ConfigError as e:
            raise ConfigError(f"{e}; or run with --trusted-network to take unsigned requests from anyone "
                              f"who can reach the sockets") from None
    policy = make_policy(args.policy, k=args.k, fair_by=args.fair_by,
                         shares=[parse_rule(r, "--share") for r in args.share])
    settings = Settings(heartbeat=hb, max_hold=_seconds(args.max_hold), idle_timeout=_seconds(args.idle_timeout),
                        default_hold=_seconds(args.default_hold),
                        priorities=tuple(parse_rule(r, "--priority") for r in args.priority))
    store = StateFile(args.state or default_state(), half_life=max(1.0, _seconds(args.half_life)))
    try:
        now = time.time()
        controller = AccessQueue(policy, settings, store.load(), now=now)
        known = None
        if args.db:
            from iez.access.ostset import known_osts_from_db

            known = (lambda: known_osts_from_db(args.db), max(1.0, _seconds(args.refresh)))
        lines = [] if args.line == ["none"] else (args.line or [DEFAULT_LINE])
        raise_descriptor_limit()  # one descriptor per line client
        server = Server(controller, store, args.bind or [DEFAULT_BIND], lines, verifier, events=args.events,
                        known_osts=known, max_connections=args.max_connections)
    except BaseException:
        store.close()
        raise
    st = controller.state
    print(f"iez access: {policy.describe()}, heartbeat {hb:g} s, lease {settings.lease:g} s; "
          f"{len(st.apps)} registered, {len(controller.holding())} holding, {len(controller.waiting())} waiting "
          f"(state {store.path}); zmq {' '.join(server.zmq_endpoints) or '-'}; "
          f"line {' '.join(server.line_endpoints) or '-'}; "
          f"{'UNSIGNED requests (trusted network)' if verifier.key is None else 'signed requests, CURVE'}",
          flush=True)
    serve(server)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from iez.access.token_client import fetch_status
    from iez.tokens import client_token

    st = fetch_status(args.server, _seconds(args.timeout), client_token(args.token_file))
    if args.json:
        print(json.dumps(st, indent=1))
        return 0
    console = Console()
    console.print(f"policy {st['policy']}, heartbeat {st['heartbeat_ms']} ms, lease {st['lease_ms']} ms; "
                  f"{len(st['apps'])} registered")
    table = Table()
    for col in ("", "app", "phase", "osts", "token/position", "held/waited s", "eta s"):
        table.add_column(col)
    for h in st["holders"]:
        table.add_row("holds", h["app"], h["phase"], h["osts"] or "all", str(h["token"]), f"{h['held_s']:.2f}", "")
    for w in st["waiting"]:
        table.add_row("waits", w["app"], w["phase"], w["osts"] or "all", str(w["position"]), f"{w['waited_s']:.2f}",
                      "?" if w["eta_s"] is None else f"{w['eta_s']:.2f}")
    console.print(table)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from iez.access.token_client import AccessClient
    from iez.access.ostset import osts_of_plan

    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        raise ConfigError("iez access run: give the command after --")
    if args.osts and args.plan:
        raise ConfigError("give --osts or --plan, not both")
    from iez.access.protocol import parse_osts

    osts = parse_osts(args.osts) if args.osts else (osts_of_plan(args.plan) if args.plan else None)
    appid = args.appid or f"{os.environ.get('IEZ_RUN') or os.environ.get('SLURM_JOB_ID') or f'pid{os.getpid()}'}:" \
                          f"{Path(cmd[0]).name}"
    from iez.tokens import client_token

    client = AccessClient(args.server, appid, mode="coarse", osts=osts, down_wait=args.down_wait,
                          token=client_token(args.token_file))
    try:
        client.io_begin(args.phase, expect=args.expect)
        try:
            return subprocess.call(cmd)
        except OSError as e:
            raise IezError(f"cannot run {cmd[0]}: {e.strerror}") from None
    finally:
        client.close()  # releases the token


def cmd_tbf(args: argparse.Namespace) -> int:
    from iez.access import tbf
    from iez.tokens import client_token

    rate = tbf.DEFAULT_RATE if args.rate is None else args.rate
    if not 1 <= rate <= tbf.MAX_RATE:
        raise ConfigError(f"--rate must be 1..{tbf.MAX_RATE} RPC/s")
    timeout = _seconds(args.timeout)
    every = _seconds(args.follow) if args.follow else 0.0
    token = client_token(args.token_file)
    oss = _oss_params() if args.apply else None
    if oss is not None:
        current = _lustre_rules(oss, args.param, args.enable)
    else:
        current = {}
        for c in tbf.enable_settings(args.param):
            print(tbf.shell(c) if args.enable else f"# if TBF by JobID is not active yet: {tbf.shell(c)}")
    while True:
        try:
            current = _tbf_round(args, rate, timeout, token, current, oss)
        except IezError as e:
            if not args.follow:
                raise
            # Following is enforcement: one bad round (controller restarting, an lctl hiccup) is
            # logged and the next round tries again, from the rules the OSS really has.
            print(f"iez access tbf: {e}; again in {every:g} s", file=sys.stderr, flush=True)
            if oss is not None:
                try:
                    current = _lustre_rules(oss, args.param, False)
                except IezError:
                    pass
        if not args.follow:
            return 0
        time.sleep(every)


def _tbf_round(args: argparse.Namespace, rate: int, timeout: float, token: str, current: dict,
               oss: ParamTree | None) -> dict:
    """One round of `iez access tbf`: fetch the decisions, print (and, with `oss`, set) the
    difference; the rules in force afterwards."""
    from iez.access import tbf
    from iez.access.token_client import fetch_status

    want, skipped = tbf.desired_rules(fetch_status(args.server, timeout, token), rate)
    for s in skipped:
        print(f"iez access tbf: skipped {s}", file=sys.stderr)
    for c in tbf.render(current, want, args.param):
        print(tbf.shell(c), flush=True)
        if oss is not None:
            oss.set(c.name, c.value)
    return want


def _oss_params() -> ParamTree:
    """This node's parameters through lctl, for --apply."""
    from iez.lustre.params import ParamTree

    try:
        return ParamTree.from_lctl()
    except BackendError:
        raise IezError("--apply runs lctl on a Lustre OSS; lctl is not installed here (drop --apply to "
                       "print the commands)") from None


def _lustre_rules(oss: ParamTree, param: str, enable: bool) -> dict:
    """The iocop rules this OSS has now; refuses anywhere that is not a Lustre OSS."""
    from iez.access import tbf

    try:
        oss.get_one(f"{param}.nrs_policies")
    except BackendError as e:
        raise IezError(f"--apply needs a Lustre OSS: {e}") from None
    for c in tbf.enable_settings(param) if enable else []:
        oss.set(c.name, c.value)
    try:
        return tbf.parse_rules(oss.get_one(f"{param}.nrs_tbf_rule"))
    except BackendError as e:
        hint = "" if enable else "; --enable starts TBF by JobID"
        raise IezError(f"cannot read the TBF rules of {param}: {e}{hint}") from None


def cmd_eval(args: argparse.Namespace) -> int:
    from iez.access.evaluation import run_evaluation

    run_evaluation(args.out, quick=args.quick, sim=not args.no_sim)
    return 0
