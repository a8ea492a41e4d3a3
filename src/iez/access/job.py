"""An IOR-like bursty job for the emulated cluster, run under IO-Cop: `python -m iez.access.job`.

Each burst writes `files` files of `size` bytes in `transfer`-sized calls, each file striped
over the job's OSTs (an explicit OST list, created through the emulated MDS as a real create
with a layout), then computes for `compute` seconds. The client marks every level (job, files,
phase, each call), so `--mode` alone chooses the granularity (docs/references.md#s004-fig8): coarse (the whole job),
file (first open to last close), phase (each burst's I/O) or fine (each write call).
`--pace` caps the job's write rate, so phases last long enough to be seen on a fast local disk.
The timeline (JSON) records every wait, grant, release and write with wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from iez.access.token_client import MODES, AccessClient
from iez.access.protocol import parse_osts
from iez.files import replace_atomically
from iez.layout.layout import Layout
from iez.units import parse_size


def run_job(client: AccessClient, directory: Path, osts: list[int], files: int, size: int, transfer: int,
            bursts: int, compute: float, pace: float, stripe_size: int, ready: Callable[[], None] = lambda: None) -> dict:
    """The job's bursts; `ready()` is called once everything before the first request for access is
    done (the backend found, registered), so jobs started together can be held at a barrier there."""
    from iez.backend.emulated import EmulatedBackend, find_cluster_dir

    root = find_cluster_dir(directory.absolute())
    if root is None:
        raise SystemExit(f"{directory} is not under an emulated cluster's fs/")
    backend = EmulatedBackend(root)
    directory.mkdir(parents=True, exist_ok=True)
    client.timeline = []
    writes = []
    buf = os.urandom(transfer)
    if client.mode != "off":
        client.register()
    ready()
    start = time.time()
    with client.job():
        for b in range(bursts):
            with client.phase(f"write{b + 1}"):
                for k in range(files):
                    path = directory / f"{client.appid.replace(':', '_').replace('/', '_')}.{k:04d}"
                    if b == 0:
                        backend.create(path, Layout(stripe_size=stripe_size, osts=tuple(osts)))
                    client.file_open()
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        for off in range(0, size, transfer):
                            n = min(transfer, size - off)
                            with client.call():
                                t0 = time.time()
                                os.pwrite(fd, buf[:n], off)
                                if pace > 0:
                                    time.sleep(max(0.0, n / pace - (time.time() - t0)))
                                writes.append([t0, time.time(), n])
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                        client.file_close()
            if compute > 0:
                time.sleep(compute)
    return {"appid": client.appid, "mode": client.mode, "osts": osts, "start": start, "end": time.time(),
            "untokened": client.untokened, "lost": client.lost, "timeline": client.timeline, "writes": writes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iez.access.job", description=__doc__.split("\n")[0])
    p.add_argument("--server", required=True)
    p.add_argument("--appid", required=True)
    p.add_argument("--dir", type=Path, required=True, help="a directory under an emulated cluster's fs/")
    p.add_argument("--osts", required=True, help="the job's OSTs, e.g. 0,1,2")
    p.add_argument("--mode", choices=MODES, default="coarse")
    p.add_argument("--files", type=int, default=1)
    p.add_argument("--size", default="4MiB")
    p.add_argument("--transfer", default="1MiB")
    p.add_argument("--stripe-size", default="1MiB")
    p.add_argument("--bursts", type=int, default=1)
    p.add_argument("--compute", type=float, default=0.0)
    p.add_argument("--pace", default="0", help="bytes/s at most (0: as fast as the disk)")
    p.add_argument("--declare-osts", action="store_true", help="register the OST set with the controller")
    p.add_argument("--down-wait", type=float, default=10.0)
    p.add_argument("--barrier", action="store_true",
                   help="once set up, print 'ready' and start at the next line on stdin (jobs started together "
                        "then ask for access together, whatever their interpreters' start-up took)")
    p.add_argument("--timeline", type=Path, required=True)
    a = p.parse_args(argv)
    osts = sorted(parse_osts(a.osts))
    client = AccessClient(a.server, a.appid, mode=a.mode, osts=frozenset(osts) if a.declare_osts else None,
                          down_wait=a.down_wait)

    def barrier() -> None:
        if a.barrier:
            print("ready", flush=True)
            sys.stdin.readline()
    try:
        result = run_job(client, a.dir, osts, a.files, parse_size(a.size, "--size"),
                         parse_size(a.transfer, "--transfer"), a.bursts, a.compute, float(parse_size(a.pace)),
                         parse_size(a.stripe_size, "--stripe-size"), barrier)
    finally:
        client.close()
    replace_atomically(a.timeline, json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
