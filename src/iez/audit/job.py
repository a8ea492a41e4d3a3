"""One log, start to end: read (`iez.trace.darshan.read_log`), advised, simulated. This is the
task a Dask worker runs (`iez.audit.execute`); it never raises for a bad log: it answers with the
cause, one of CAUSES, and one line.

pydarshan parses in a child process (`read_log`): libdarshan-util aborts the process on some
damaged logs (docs/control-plane.md, "Darshan logs"), and in a Dask worker that would kill the
worker and lose its other tasks. So the child stays, at ~0.4 s of interpreter start a log.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from iez.audit.advice import Advice, Job, advise, model_cluster
from iez.cluster import Cluster, parse_cluster
from iez.errors import IezError
from iez.trace.darshan import read_log

# Why a log gave no advice; "failed" is the executor's: the task itself failed (a worker lost).
CAUSES = ("empty", "not-darshan", "truncated", "corrupt", "unreadable", "unusable", "failed")
DARSHAN_MAGIC = 6567223  # DARSHAN_MAGIC_NR of darshan-log-format.h, little-endian in the header
HEADER = 24  # version string[8], magic int64, comp type, partial flag; then the region maps (off, len)
MAPS = 17  # the name map and DARSHAN_MAX_MODS = 16 module maps (log versions up to 3.2x; 3.4x has more)


def _cause(path: Path, message: str) -> str:
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(HEADER + 16 * MAPS)
    except OSError:
        return "unreadable"
    if size == 0:
        return "empty"
    if len(head) < HEADER + 16 * MAPS or struct.unpack_from("<q", head, 8)[0] != DARSHAN_MAGIC:
        return "not-darshan"
    # The regions the header maps end where the log should: a shorter file was cut.
    ends = [o + n for o, n in struct.iter_unpack("<QQ", head[HEADER:]) if n and o + n < 1 << 48]
    if ends and size < max(ends):
        return "truncated"
    if "corrupt or truncated" in message:
        return "corrupt"
    return "unusable"


def audit_log(path: str, cluster_toml: str = "", simulate: bool = True) -> dict[str, Any]:
    """{"ok": True, "advice": Advice} or {"ok": False, "path", "cause", "error"}; `cluster_toml`
    is a cluster file's text ("" = the log's own model)."""
    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size == 0:
            return {"ok": False, "path": path, "cause": "empty", "error": f"{path}: empty file"}
        log = read_log(p)
    except IezError as e:
        return {"ok": False, "path": path, "cause": _cause(p, str(e)), "error": str(e)}
    except OSError as e:
        return {"ok": False, "path": path, "cause": "unreadable", "error": f"{path}: {e.strerror or e}"}
    records = tuple(log.records)
    try:
        cluster: Cluster | None = parse_cluster(cluster_toml, "--cluster") if cluster_toml else None
        adv = advise(Job(path, log.jobid, log.nprocs, log.start_time, log.exe, records, tuple(log.warnings)), cluster)
    except IezError as e:
        return {"ok": False, "path": path, "cause": "unusable", "error": f"{path}: {e}"}
    if simulate and adv.has_layout:
        _simulate(adv, records, cluster)
    return {"ok": True, "advice": adv}


def _simulate(adv: Advice, records: tuple[Any, ...], cluster: Cluster | None) -> None:
    from iez.audit.simulate import simulate

    try:
        simulate(adv, records, cluster or model_cluster(adv))
    except IezError as e:
        adv.notes.append(f"not simulated: {e}")
