"""`iez collect oss|mds`: the statistics collectors (docs/references.md#s000-collect), one per server.

    iez collect oss --oss-id oss0 --params / --publish tcp://mds:5556 [--interval 60]
    iez collect mds --mds-id mds0 --params / --publish tcp://mds:5556
    iez collect oss --oss-id oss0 --getparam dump.txt --print      # one round, as JSON
    iez collect oss --oss-id oss0 --no-collector ost_rates ...     # node_exporter-style choice

Parameters come from `--params ROOT` (a /proc and /sys tree below ROOT: `/` on a real node,
`DIR/params/<host>` on an emulated cluster), `--getparam FILE` (an `lctl get_param` dump, read
again every round) or `--lctl` (runs lctl). Messages: docs/controller.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from iez.cli import subgroup
from iez.errors import ConfigError, IezError

if TYPE_CHECKING:
    from iez.lustre.params import ParamTree


def register(sub: argparse._SubParsersAction) -> None:
    from iez.collect.collectors import COLLECTORS

    g = subgroup(sub, "collect", "statistics collectors for OSSs and the MDS (publish to the controller)")
    for role, host in (("oss", "an OSS: space and I/O rates of its OSTs, host CPU and memory"),
                       ("mds", "the MDS: OST states as its OSPs see them, host CPU and memory")):
        p = g.add_parser(role, help=f"collect on {host}", description=f"Collect statistics on {host}.")
        p.add_argument(f"--{role}-id", dest="id", required=True, metavar="ID",
                       help=f"this {role.upper()}'s name in the cluster description (e.g. {role}0)")
        src = p.add_mutually_exclusive_group()
        src.add_argument("--params", metavar="ROOT", default="/",
                         help="read /proc/fs/lustre and /sys/fs/lustre below ROOT (default /)")
        src.add_argument("--getparam", metavar="FILE", help="read an `lctl get_param` dump, again every round")
        src.add_argument("--lctl", nargs="?", const="lctl", metavar="PATH", help="run lctl get_param")
        out = p.add_mutually_exclusive_group(required=True)
        out.add_argument("--publish", metavar="ENDPOINT",
                         help="the controller's statistics address, e.g. tcp://mds0:5556")
        out.add_argument("--print", action="store_true", help="collect once and print the message as JSON")
        p.add_argument("--interval", type=float, default=60.0, metavar="S",
                       help="seconds between rounds, 0.1..3600 (default 60, as the paper's collectors)")
        p.add_argument("--collector", action="append", default=[], metavar="NAME",
                       help=f"also run collector NAME (repeatable; {role} runs "
                            f"{', '.join(n for n, r in COLLECTORS.items() if role in r.roles)}; all: "
                            f"{'; '.join(f'{n}: {r.about}' for n, r in COLLECTORS.items())})")
        p.add_argument("--no-collector", action="append", default=[], metavar="NAME",
                       help="do not run collector NAME (repeatable)")
        p.add_argument("--proc", default="/proc", metavar="DIR",
                       help="where loadavg and meminfo are read (default /proc)")
        p.add_argument("--token-file", metavar="FILE",
                       help="the site token (default: $IEZ_SITE_TOKEN); messages are signed with it and the "
                            "connection to the controller is CURVE with keys derived from it")
        p.set_defaults(func=cmd_collect, role=role)


def tree_source(args: argparse.Namespace) -> Callable[[], ParamTree]:
    from iez.lustre.params import ParamTree

    if args.lctl:
        ParamTree.from_lctl(args.lctl)  # fail now, with the install hint, if lctl is missing
        return lambda: ParamTree.from_lctl(args.lctl)
    if args.getparam:
        path = Path(args.getparam)

        def dump() -> ParamTree:
            try:
                return ParamTree.from_getparam_text(path.read_text(errors="replace"))
            except OSError as e:
                raise ConfigError(f"cannot read {path}: {e.strerror}") from None

        dump()
        return dump
    root = Path(args.params)
    if not root.is_dir():
        raise ConfigError(f"--params {root}: no such directory")
    return lambda: ParamTree(root)


def cmd_collect(args: argparse.Namespace) -> int:
    from iez.collect.collectors import collectors_for
    from iez.collect.message import check_host_id, check_interval
    from iez.collect.publisher import Publisher
    from iez.tokens import read_token

    try:
        check_interval(args.interval)
    except IezError as e:
        raise ConfigError(f"--{e}") from None
    check_host_id(args.id)
    source = tree_source(args)
    collectors = collectors_for(args.role, args.proc, args.collector, args.no_collector)
    if args.print:
        pub = Publisher(args.role, args.id, collectors, source, "", args.interval)
        print(json.dumps(pub.round().to_json(), indent=1))
        return 0
    token = read_token(args.token_file, "IEZ_SITE_TOKEN", "site", "--token-file")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s iez collect %(levelname)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    Publisher(args.role, args.id, collectors, source, token, args.interval).run(args.publish, stop)
    return 0
