"""`iez emulate init|up|down|status`: an emulated Lustre cluster on a local directory."""

from __future__ import annotations

import argparse

from iez.cli import subgroup
from iez.cluster import (DEFAULT_FSNAME, DEFAULT_OSS, DEFAULT_OST_SIZE, DEFAULT_OSTS_PER_OSS,
                         load_cluster, make_cluster)
from iez.units import format_size, parse_size


def register(sub: argparse._SubParsersAction) -> None:
    g = subgroup(sub, "emulate", "run an emulated Lustre cluster on a local directory")
    p = g.add_parser("init", help="make an emulated cluster (default: the seed-000 testbed)")
    p.add_argument("dir")
    p.add_argument("--oss", type=int, default=DEFAULT_OSS, help=f"number of OSSs (default {DEFAULT_OSS})")
    p.add_argument("--osts-per-oss", type=int, default=DEFAULT_OSTS_PER_OSS,
                   help=f"OSTs per OSS (default {DEFAULT_OSTS_PER_OSS})")
    p.add_argument("--ost-size", default=str(DEFAULT_OST_SIZE), help="capacity of each OST (default 10GiB)")
    p.add_argument("--fsname", default=DEFAULT_FSNAME, help=f"file-system name (default {DEFAULT_FSNAME})")
    p.add_argument("--cluster", metavar="TOML", help="take the cluster from a TOML file instead")
    p.set_defaults(func=cmd_init)
    p = g.add_parser("up", help="start the emulated MDS (in the background unless --foreground)")
    p.add_argument("dir")
    p.add_argument("--foreground", action="store_true")
    p.add_argument("--seed", type=int, help="seed the allocator's random choices (reproducible runs)")
    p.set_defaults(func=cmd_up)
    p = g.add_parser("down", help="stop the emulated MDS")
    p.add_argument("dir")
    p.set_defaults(func=cmd_down)
    p = g.add_parser("status", help="is the emulated MDS running?")
    p.add_argument("dir")
    p.set_defaults(func=cmd_status)


def cmd_init(args: argparse.Namespace) -> int:
    from iez.emulated.clusterdir import init_cluster_dir

    if args.cluster:
        cluster = load_cluster(args.cluster)
    else:
        cluster = make_cluster(args.oss, args.osts_per_oss, parse_size(args.ost_size, "--ost-size"), args.fsname)
    cd = init_cluster_dir(args.dir, cluster)
    print(f"emulated cluster {cluster.fsname}: 1 MDS, {len(cluster.osses)} OSS, {len(cluster.osts)} OSTs, "
          f"{format_size(cluster.total_capacity)}iB in all")  # OSTs of 1 MiB at least: always a unit
    print(f"mount: {cd.fs}")
    print(f"start its MDS with: iez emulate up {args.dir}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from iez.emulated import mds, mds_client
    from iez.emulated.clusterdir import open_cluster_dir

    cd = open_cluster_dir(args.dir)
    if args.foreground:
        return mds.main([str(cd.root)] + ([] if args.seed is None else ["--seed", str(args.seed)]))
    pid = mds_client.up(cd, seed=args.seed)
    print(f"emulated MDS of {cd.root} running (pid {pid}); mount: {cd.fs}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from iez.emulated import mds_client
    from iez.emulated.clusterdir import open_cluster_dir

    cd = open_cluster_dir(args.dir)
    print("emulated MDS stopped" if mds_client.down(cd) else "emulated MDS was not running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from iez.emulated.mds_client import MdsClient
    from iez.emulated.clusterdir import open_cluster_dir
    from iez.emulated.mds import running_pid

    cd = open_cluster_dir(args.dir)
    pid = running_pid(cd)
    if pid is not None and MdsClient(cd, 2000).ping():
        print(f"running (pid {pid})")
        return 0
    print("not running")
    return 1
