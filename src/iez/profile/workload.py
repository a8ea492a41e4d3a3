"""An IOR-like shared-file (SSF) reader/writer that logs its I/O events (`iez.profile.ioevents`).

One process per rank, under `mpiexec -n N python -m iez.profile.workload ...` (the rank comes
from PMI_RANK/PMI_SIZE, which MPICH's Hydra sets) or with --rank/--nprocs. Each rank plays one
client node with its own NID. Offsets are explicit:
  interleaved  rank r's k-th transfer at (k*N + r) * xfer        (IOR's default segmented order)
  contiguous   rank r reads/writes its own 1/N of the file        (ROMIO-like file domains)
  ost          rank r touches only the stripes on the r-th OST of the layout (one reader per OST,
               LIOPProf's Lustre-aware collective read, docs/references.md#s003-figs4-5);
               needs N == stripe count
Rank 0 creates the file with --stripe-count/--stripe-size through the file's backend (the
emulated MDS or real Lustre); the other ranks wait for it.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

from iez.backend import backend_for
from iez.errors import IezError
from iez.layout.layout import Layout
from iez.profile.ioevents import SUFFIX, EventLog, IoEvent
from iez.units import parse_size

PATTERNS = ("interleaved", "contiguous", "ost")


def offsets(pattern: str, rank: int, nprocs: int, xfer: int, segments: int, stripe_size: int,
            stripe_count: int) -> list[int]:
    """Byte offsets of one rank's transfers (each `xfer` long), in issue order."""
    if pattern == "interleaved":
        return [(k * nprocs + rank) * xfer for k in range(segments)]
    if pattern == "contiguous":
        return [(rank * segments + k) * xfer for k in range(segments)]
    if nprocs != stripe_count or xfer != stripe_size:
        raise IezError("pattern ost needs one rank per stripe (-n = stripe count) and xfer = stripe size")
    return [(k * stripe_count + rank) * stripe_size for k in range(segments)]


def barrier(directory: Path, rank: int, nprocs: int, timeout: float = 60.0) -> None:
    """Every rank leaves a file in `directory`, then waits until all are there."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / str(rank)).touch()
    deadline = time.time() + timeout
    while len(os.listdir(directory)) < nprocs:
        if time.time() > deadline:
            raise IezError(f"barrier {directory}: not every one of {nprocs} ranks arrived in {timeout:.0f} s")
        time.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iez.profile.workload", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--op", choices=("read", "write"), required=True)
    ap.add_argument("--pattern", choices=PATTERNS, default="interleaved")
    ap.add_argument("--xfer", default="1M", help="transfer size (default 1M)")
    ap.add_argument("--segments", type=int, default=8, help="transfers per rank (default 8)")
    ap.add_argument("--stripe-count", type=int, default=4)
    ap.add_argument("--stripe-size", default="1M")
    ap.add_argument("--iolog", required=True, help="directory of the I/O event logs (an emulated cluster's iolog/)")
    ap.add_argument("--nid-prefix", default="192.168.1.", help="client NIDs are PREFIX(10+rank)@tcp")
    ap.add_argument("--jobid", default="ior.0")
    ap.add_argument("--barrier", metavar="DIR", help="wait for every rank here before the first transfer "
                    "(IOR's barrier before a phase)")
    ap.add_argument("--rank", type=int, default=int(os.environ.get("PMI_RANK", "0")))
    ap.add_argument("--nprocs", type=int, default=int(os.environ.get("PMI_SIZE", "1")))
    a = ap.parse_args(argv)
    try:
        xfer, ssize = parse_size(a.xfer, "--xfer"), parse_size(a.stripe_size, "--stripe-size")
        path = Path(a.file).absolute()
        backend = backend_for(path)
        if a.op == "write" and a.rank == 0 and not path.exists():
            backend.create(path, Layout(stripe_size=ssize, stripe_count=a.stripe_count))
        deadline = time.time() + 20
        while True:
            try:
                lay = backend.get_layout(path).parts()[0].layout
                break
            except IezError:
                if time.time() > deadline:
                    raise
                time.sleep(0.02)
        offs = offsets(a.pattern, a.rank, a.nprocs, xfer, a.segments, lay.stripe_size, lay.stripe_count)
        nid = f"{a.nid_prefix}{10 + a.rank}@tcp"
        log = EventLog(Path(a.iolog) / f"{socket.gethostname()}.{os.getpid()}{SUFFIX}")
        buf = bytes([65 + a.rank % 26]) * xfer
        fd = os.open(path, os.O_RDWR)
        if a.barrier:
            barrier(Path(a.barrier), a.rank, a.nprocs)
        try:
            for off in offs:
                t = time.time()
                if a.op == "write":
                    os.pwrite(fd, buf, off)
                else:
                    os.pread(fd, xfer, off)
                log.add([IoEvent(t, a.op, str(path), off, xfer, nid, os.getpid(), a.jobid)])
        finally:
            os.close(fd)
            log.close()
    except IezError as e:
        print(f"workload: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
