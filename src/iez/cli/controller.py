"""`iez controller`: the control plane's server (docs/references.md#s000-collect, #s000-alg2), on the MDS or
a management node.

    iez controller --cluster /etc/iez/cluster.toml --db postgresql://iez@db/iez \\
        --listen 0.0.0.0:8760 --stats tcp://*:5556 \\
        --site-token-file /etc/iez/site.token --admin-token-file /etc/iez/admin.token

It subscribes to every collector (they connect to --stats), keeps the global view, predicts
and allocates when traces or requests arrive, and serves plans over HTTP (docs/controller.md).
"""

from __future__ import annotations

import argparse
import logging

from iez.alloc.policy import LAYOUTS
from iez.errors import ConfigError


def size_arg(text: str) -> int:
    from iez.units import parse_size

    try:
        return parse_size(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def register(sub: argparse._SubParsersAction) -> None:
    from iez.alloc.registry import DEFAULT_POLICY
    from iez.cli.pipeline import reservation_ttl_option
    from iez.cli.trace_import import db_option
    from iez.controller.view import MAX_CLOCK_SKEW

    p = sub.add_parser("controller", help="run the controller: global view, allocation, plans over HTTP",
                       description="Run the iez controller (docs/controller.md).")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="TOML", help="the cluster description (docs/cluster-toml.md)")
    where.add_argument("--emulated", metavar="DIR", help="the cluster of an emulated cluster directory")
    db_option(p)
    p.add_argument("--listen", default="127.0.0.1:8760", metavar="HOST:PORT",
                   help="HTTP address (default 127.0.0.1:8760; 0.0.0.0:8760 for every interface)")
    p.add_argument("--stats", default="tcp://*:5556", metavar="ENDPOINT",
                   help="ZeroMQ address collectors publish to (default tcp://*:5556); a CURVE server that "
                        "admits holders of the site token only")
    p.add_argument("--site-token-file", metavar="FILE", help="site token (default $IEZ_SITE_TOKEN)")
    p.add_argument("--admin-token-file", metavar="FILE", help="admin token (default $IEZ_ADMIN_TOKEN)")
    p.add_argument("--uploads", choices=("site", "admin"), default="site",
                   help="which token may upload traces and requests (default site: jobs upload their own)")
    p.add_argument("--policy", default=DEFAULT_POLICY, help=f"allocation policy (default {DEFAULT_POLICY})")
    p.add_argument("--capacity-weight", type=float, metavar="W", help="balanced's trade-off, 0..1 (default 0.5)")
    p.add_argument("--routers", action="store_true",
                   help="balanced: cap each OSS by its share of the LNet routers serving it (docs/allocation.md)")
    p.add_argument("--layout", choices=LAYOUTS,
                   help="stripe counts and sizes: auto, keep or hierarchical (default: the cluster file's "
                        "[defaults] layout; docs/layouts.md)")
    p.add_argument("--layout-keep", action="append", default=[], metavar="APP",
                   help="keep the stripe counts and sizes APP asks for, whatever --layout says (repeatable)")
    reservation_ttl_option(p)
    p.add_argument("--stale-after", type=float, default=0.0, metavar="S",
                   help="statistics older than S seconds are stale (default: 3 collector intervals)")
    gate = p.add_argument_group("host gate (seed 000 §III-B2)")
    gate.add_argument("--max-cpu", type=float, default=0.7, metavar="F",
                      help="allocate only while load average / cores is below F (default 0.7)")
    gate.add_argument("--max-mem", type=float, default=0.5, metavar="F",
                      help="allocate only while the used memory fraction is below F (default 0.5)")
    gate.add_argument("--gate-proc", default="/proc", metavar="DIR", help="where loadavg and meminfo are read")
    gate.add_argument("--no-gate", action="store_true", help="allocate however busy the host is")
    limits = p.add_argument_group("limits (docs/controller.md, Limits)")
    limits.add_argument("--max-trace-body", type=size_arg, metavar="SIZE",
                        help="largest POST /apps/APP/traces body (default 64MiB; a million files is ~200MB)")
    limits.add_argument("--max-requests-body", type=size_arg, metavar="SIZE",
                        help="largest POST /apps/APP/requests body (default 64MiB)")
    limits.add_argument("--max-other-body", type=size_arg, metavar="SIZE",
                        help="largest body of any other request (default 64KiB)")
    limits.add_argument("--max-uploads", type=int, metavar="N",
                        help="uploads read at once; others are told 503 and try again (default 2; each costs "
                             "about 10x its body while parsed)")
    limits.add_argument("--max-clock-skew", type=float, default=MAX_CLOCK_SKEW, metavar="S",
                        help=f"refuse collector statistics stamped more than S seconds ahead of this host's clock "
                             f"(default {MAX_CLOCK_SKEW:g})")
    p.add_argument("--metrics-listen", metavar="HOST:PORT",
                   help="also serve /metrics here without a token, read-only (off by default; anyone who "
                        "reaches it reads OST usage and application names: docs/controller.md, Metrics)")
    p.add_argument("--iocop", metavar="ENDPOINT", default="",
                   help="IO-Cop's address (iez access serve --bind), for the dashboard's view of its holders "
                        "and queue (asked with the site token)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (and --tls-key)")
    p.add_argument("--tls-key", metavar="PEM")
    p.set_defaults(func=cmd_controller)


def parse_listen(text: str, option: str = "--listen") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigError(f"{option} {text!r}: give HOST:PORT, e.g. 0.0.0.0:8760")
    return host.strip("[]"), int(port)


def cmd_controller(args: argparse.Namespace) -> int:
    from iez.alloc.gate import GateLimits
    from iez.controller.api import BodyCaps
    from iez.tokens import Tokens, read_token
    from iez.controller.server import serve
    from iez.cli.pipeline import reservation_ttl
    from iez.controller.service import Controller, Settings
    from iez.pipeline import cluster_model

    host, port = parse_listen(args.listen)
    metrics_listen = parse_listen(args.metrics_listen, "--metrics-listen") if args.metrics_listen else None
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ConfigError("give both --tls-cert and --tls-key")
    if args.stale_after < 0:
        raise ConfigError("--stale-after must be >= 0 seconds")
    if not args.max_clock_skew >= 0:
        raise ConfigError("--max-clock-skew must be >= 0 seconds")
    tokens = Tokens(read_token(args.site_token_file, "IEZ_SITE_TOKEN", "site", "--site-token-file"),
                    read_token(args.admin_token_file, "IEZ_ADMIN_TOKEN", "admin", "--admin-token-file"))
    cluster = cluster_model(args.cluster, args.emulated)
    settings = Settings(cluster=cluster, db_url=args.db, policy=args.policy, capacity_weight=args.capacity_weight,
                        routers=args.routers,
                        layout=args.layout, layout_keep=frozenset(args.layout_keep),
                        stale_after=args.stale_after, gate=None if args.no_gate else GateLimits(args.max_cpu, args.max_mem),
                        gate_proc=args.gate_proc, site_key=tokens.site,
                        reservation_ttl=reservation_ttl(args), max_clock_skew=args.max_clock_skew,
                        iocop=args.iocop)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    controller = Controller(settings)
    serve(controller, tokens, host, port, args.stats, uploads=args.uploads,
          caps=BodyCaps(**{k: v for k, v in (("trace", args.max_trace_body), ("requests", args.max_requests_body),
                                             ("other", args.max_other_body),
                                             ("uploads_at_once", args.max_uploads)) if v is not None}),
          tls_cert=args.tls_cert, tls_key=args.tls_key, metrics_listen=metrics_listen)
    return 0
