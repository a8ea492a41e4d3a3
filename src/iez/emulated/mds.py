"""The emulated MDS: hands out layouts the way LOD does and keeps the parameter trees current.

`MdsCore` holds the state and answers requests; it is transport-free, so tests can drive it
directly. `serve()` runs it behind the two transports of docs/emulated.md: a line protocol on
an AF_UNIX socket (libiez, no library needed in C) and ZeroMQ REP (Python clients), plus a
refresh loop that rescans `fs/` and rewrites `params/` every second.

Run with `iez emulate up DIR` (background) or `python -m iez.emulated.mds DIR` (foreground).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import zmq

from iez.cluster import Cluster, OSTStats, Snapshot, ost_name, ost_uuid
from iez.emulated.clusterdir import ClusterDir, directory_default, inherit, open_cluster_dir
from iez.emulated.paramtree import (OSTCounters, OSTSpace, render_mds, render_oss,
                                    write_tree)
from iez.emulated.usage import ScanResult, UsageScanner
from iez.errors import AllocationError, IezError, shown
from iez.files import raise_descriptor_limit
from iez.lustre.lfsdf import DfRow
from iez.plan import format_layout, parse_layout

log = logging.getLogger("iez.mds")

REFRESH_INTERVAL = 1.0  # s, how often params/ is rewritten
QOS_MAXAGE = 5  # s, lod.*.qos_maxage default (docs/references.md#l-alloc-tunables)
BYTES_PER_INODE = 64 << 10  # emulated OST inode ratio (ldiskfs OSTs use 64-1024 KiB)
MDT_SIZE = 16 << 30
MDT_INODE = 4096
# Requests are one short line (a path and a layout); the same cap on both transports, enforced
# while reading, so a client cannot make the MDS buffer more than this.
MAX_CLIENTS = 4096  # line clients connected at once (a thread each)
SPARE_FDS = 64  # descriptors kept for the MDS's own files and sockets
MAX_REQUEST = 64 << 10
PATH_MAX = 4096  # linux/limits.h, with its NUL


def space_from_scan(cluster: Cluster, scan: ScanResult) -> dict[int, OSTSpace]:
    """Per-OST statfs figures: the cluster's base usage plus what files under fs/ occupy."""
    out = {}
    for o in cluster.osts:
        used = min(o.capacity, o.used + scan.bytes_on.get(o.index, 0))
        free_kb = (o.capacity - used) // 1024
        files = max(1, o.capacity // BYTES_PER_INODE)
        out[o.index] = OSTSpace(kbytestotal=o.capacity // 1024, kbytesfree=free_kb, kbytesavail=free_kb,
                                filestotal=files, filesfree=max(0, files - scan.objects.get(o.index, 0)))
    return out


def snapshot_from_space(cluster: Cluster, space: dict[int, OSTSpace], now: float) -> Snapshot:
    return Snapshot(time=now, osts={
        o.index: OSTStats(index=o.index, kbytestotal=space[o.index].kbytestotal,
                          kbytesavail=space[o.index].kbytesavail, kbytesfree=space[o.index].kbytesfree,
                          state=o.state, time=now)
        for o in cluster.osts})


def df_rows(cluster: Cluster, space: dict[int, OSTSpace], files: int, inodes: bool) -> list[DfRow]:
    """The rows of `lfs df` (or `lfs df -i`) for this cluster."""
    mdt_total = MDT_SIZE // 1024
    mdt_used = files * MDT_INODE // 1024
    mdt_inodes = MDT_SIZE // MDT_INODE
    rows = [DfRow(f"{cluster.fsname}-MDT0000_UUID", "MDT", 0,
                        mdt_inodes if inodes else mdt_total,
                        files if inodes else mdt_used,
                        (mdt_inodes - files) if inodes else (mdt_total - mdt_used))]
    flags = {"degraded": "D", "readonly": "R", "nocreate": "N"}
    for o in cluster.osts:
        sp = space[o.index]
        if inodes:
            total, used, avail = sp.filestotal, sp.filestotal - sp.filesfree, sp.filesfree
        else:
            total, used, avail = sp.kbytestotal, sp.kbytestotal - sp.kbytesfree, sp.kbytesavail
        if o.state == "inactive":  # lfs df prints no numbers for it (docs/references.md#l-fmt-lfs-df)
            rows.append(DfRow(ost_name(cluster.fsname, o.index), "OST", o.index, None, None, None,
                              status="inactive device"))
        else:
            rows.append(DfRow(ost_uuid(cluster.fsname, o.index), "OST", o.index, total, used, avail,
                              flags=flags.get(o.state, "")))
    return rows


@dataclass
class AllocReply:
    ok: bool
    layout: str = ""
    errno: str = ""
    error: str = ""


class MdsCore:
    """The MDS's state: cluster model, LOD allocator, statfs cache, counters."""

    def __init__(self, cd: ClusterDir, seed: int | None = None, statfs_maxage: float = 2 * QOS_MAXAGE):
        from iez.alloc.lod import LodAllocator

        self.cd = cd
        self.cluster = cd.cluster()
        self.lock = threading.Lock()  # guards the allocator and the statistics
        self.refresh_lock = threading.Lock()  # one refresh at a time: they write the same files
        self.scanner = UsageScanner(cd.fs)
        self.start = time.time()
        self.counters = {o.index: OSTCounters() for o in self.cluster.osts}
        self.prev_bytes: dict[int, int] = {}
        self.statfs_maxage = statfs_maxage  # LOD refreshes its statfs cache after 2*qos_maxage
        # Like Lustre's MDS, allocator state lives in memory only: a restart reseeds RR
        # (start_count starts at 0, docs/references.md#l-alloc-rr) and clears QoS penalties.
        self.alloc = LodAllocator(self.cluster, seed=int.from_bytes(os.urandom(4), "little") if seed is None else seed)
        self.creates = 0
        self.scan = self.scanner.scan()
        self.space = space_from_scan(self.cluster, self.scan)
        self.prev_bytes = dict(self.scan.bytes_on)  # growth counts from MDS start
        self.lod_snapshot = snapshot_from_space(self.cluster, self.space, self.start)
        self.refresh()

    # -- requests -------------------------------------------------------------------------
    def allocate(self, path: str, spec: str) -> AllocReply:
        if not path.startswith("/") or "\0" in path:
            return AllocReply(False, errno="EINVAL", error=f"not an absolute path: {shown(path)}")
        if len(os.fsencode(path)) >= PATH_MAX:  # open() would refuse it; and the directory walk stays short
            return AllocReply(False, errno="ENAMETOOLONG", error=f"path longer than {PATH_MAX - 1} bytes")
        try:
            # what the create leaves unset comes from its directory's default, then the fs's
            req = inherit(parse_layout(spec if spec.strip() else "c=0"), directory_default(self.cd, Path(path)))
        except IezError as e:
            return AllocReply(False, errno="EINVAL", error=str(e))
        now = time.time()
        with self.lock:
            if now - self.lod_snapshot.time > self.statfs_maxage:
                self.lod_snapshot = snapshot_from_space(self.cluster, self.space, now)
            try:
                got = self.alloc.allocate_file(req, self.lod_snapshot, now)
            except AllocationError as e:  # the errno has its own field: don't say it twice
                return AllocReply(False, errno=e.errno, error=str(e).removeprefix(f"{e.errno}: "))
            except IezError as e:
                return AllocReply(False, errno="EINVAL", error=str(e))
            self.creates += 1
        # debug only: under heavy writes a log line on the same disk can block for seconds
        # (dirty-page throttling), and the allocation path must not wait on the disk.
        log.debug("alloc %s %s -> %s", path, spec or "default", format_layout(got))
        return AllocReply(True, layout=format_layout(got))

    def refresh(self) -> None:
        with self.refresh_lock:
            self._refresh()

    def _refresh(self) -> None:
        scan = self.scanner.scan()
        now = time.time()
        with self.lock:
            self.scan = scan
            self.space = space_from_scan(self.cluster, scan)
            for i, b in scan.bytes_on.items():
                grown = b - self.prev_bytes.get(i, 0)
                if grown > 0 and i in self.counters:
                    self.counters[i].write_bytes.add_bytes(grown)
            self.prev_bytes = dict(scan.bytes_on)
            space, counters = dict(self.space), self.counters
        for s in self.cluster.osses:
            write_tree(self.cd.host_params(s.name), render_oss(self.cluster, s.name, space, counters, now, self.start))
        write_tree(self.cd.host_params(self.cluster.mds.name), render_mds(self.cluster, space, QOS_MAXAGE))

    def df(self, inodes: bool = False) -> list[DfRow]:
        with self.lock:
            return df_rows(self.cluster, self.space, self.scan.files, inodes)

    # -- protocols ------------------------------------------------------------------------
    def handle_line(self, line: str) -> str:
        """One request line -> one reply line (no newline in it, whatever the request held)."""
        parts = line.rstrip("\r\n").split("\t")
        op = parts[0]
        if op == "PING":
            return "OK\tpong"
        if op == "REFRESH":
            self.refresh()
            return "OK\trefreshed"
        if op == "ALLOC" and len(parts) in (2, 3):
            r = self.allocate(parts[1], parts[2] if len(parts) == 3 else "")
            reply = f"OK\t{r.layout}" if r.ok else f"ERR\t{r.errno}\t{r.error}"
            return reply.replace("\n", " ").replace("\r", " ")
        return "ERR\tEPROTO\tunreadable request"

    def handle_json(self, msg: dict) -> dict:
        op = msg.get("op")
        if op == "ping":
            return {"ok": True, "pong": True}
        if op == "refresh":
            self.refresh()
            return {"ok": True}
        if op == "alloc" and isinstance(msg.get("path"), str):
            r = self.allocate(msg["path"], str(msg.get("layout", "")))
            return {"ok": True, "layout": r.layout} if r.ok else {"ok": False, "errno": r.errno, "error": r.error}
        if op == "df":
            rows = self.df(bool(msg.get("inodes")))
            return {"ok": True, "targets": [r.__dict__ for r in rows]}
        return {"ok": False, "errno": "EPROTO", "error": f"unknown request {shown(op)}"}


class _LineHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        try:
            self._serve()
        except OSError as e:  # the client went away mid-request or mid-reply: its business
            log.debug("line client gone: %s", e)

    def _serve(self) -> None:
        core: MdsCore = self.server.core  # type: ignore[attr-defined]
        while raw := self.rfile.readline(MAX_REQUEST + 1):
            if len(raw) > MAX_REQUEST:  # no end of line within the cap: refuse and hang up
                self._reply("ERR\tEPROTO\trequest too long")
                return
            if not raw.endswith(b"\n"):  # the client closed mid-request: nothing to answer
                return
            try:
                reply = core.handle_line(raw.decode("utf-8"))
            except UnicodeDecodeError:
                reply = "ERR\tEPROTO\trequest is not UTF-8"
            except Exception as e:  # answer, log, and keep serving: clients fall back on ERR
                log.exception("request failed")
                reply = f"ERR\tEIO\t{type(e).__name__}: {e}".replace("\n", " ")
            self._reply(reply)

    def _reply(self, line: str) -> None:
        self.wfile.write((line + "\n").encode())
        self.wfile.flush()


class _LineServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = socket.SOMAXCONN  # every rank of a job may connect at once

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        # libiez keeps its connection between creates, so each client holds a thread: a local
        # user opening idle connections without end would exhaust them. Past the cap a client
        # is told so and hung up on; libiez then creates the file without a layout.
        self.slots = threading.BoundedSemaphore(min(MAX_CLIENTS, raise_descriptor_limit() - SPARE_FDS))

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                request.sendall(b"ERR\tEAGAIN\ttoo many clients\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def _zmq_loop(core: MdsCore, endpoint: str, stop: threading.Event) -> None:
    ctx: zmq.Context = zmq.Context.instance()
    sock = ctx.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST)  # a larger message drops its sender, unread
    sock.bind(endpoint)
    try:
        while not stop.is_set():
            if not sock.poll(200):
                continue
            raw = sock.recv()
            try:
                msg = json.loads(raw)
                reply = core.handle_json(msg) if isinstance(msg, dict) else {"ok": False, "errno": "EPROTO", "error": "not an object"}
            except (ValueError, RecursionError):  # json recurses once per nesting level
                reply = {"ok": False, "errno": "EPROTO", "error": "not JSON"}
            except Exception as e:  # a REP socket must answer every request, or it wedges
                log.exception("request failed")
                reply = {"ok": False, "errno": "EIO", "error": f"{type(e).__name__}: {e}"}
            sock.send(json.dumps(reply).encode())
    finally:
        sock.close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_pid(cd: ClusterDir) -> int | None:
    try:
        pid = int(cd.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def serve(cd: ClusterDir, seed: int | None = None) -> None:
    other = running_pid(cd)
    if other is not None and other != os.getpid():
        raise IezError(f"an emulated MDS (pid {other}) already serves {cd.root}")
    cd.run.mkdir(parents=True, exist_ok=True)
    cd.sock.unlink(missing_ok=True)
    core = MdsCore(cd, seed=seed)
    stop = threading.Event()
    server = _LineServer(str(cd.sock), _LineHandler)
    os.chmod(cd.sock, 0o666)  # every user's jobs create files on the cluster, as on a real MDS
    server.core = core  # type: ignore[attr-defined]
    threads = [threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True),
               threading.Thread(target=_zmq_loop, args=(core, cd.ipc, stop), daemon=True)]
    for t in threads:
        t.start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cd.pidfile.write_text(f"{os.getpid()}\n")
    log.info("emulated MDS of %s up (pid %d)", cd.root, os.getpid())
    try:
        while not stop.wait(REFRESH_INTERVAL):
            try:
                core.refresh()
            except OSError as e:  # a racing unlink or a full disk must not kill the MDS
                log.warning("refresh failed: %s", e)
        core.refresh()
    finally:
        server.shutdown()
        server.server_close()
        threads[1].join(timeout=2)
        cd.sock.unlink(missing_ok=True)
        if running_pid(cd) == os.getpid():
            cd.pidfile.unlink(missing_ok=True)
        log.info("emulated MDS of %s down", cd.root)


def main(argv: list[str]) -> int:
    import argparse

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ap = argparse.ArgumentParser(prog="python -m iez.emulated.mds")
    ap.add_argument("dir")
    ap.add_argument("--seed", type=int, help="seed LOD's random choices (RR start, QoS) for a reproducible run")
    a = ap.parse_args(argv)
    try:
        serve(open_cluster_dir(Path(a.dir)), seed=a.seed)
    except IezError as e:
        print(f"iez: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
