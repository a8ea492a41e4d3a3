"""One job's advice: each file's recorded layout and problems, iez's layout for it, and the
job's OSTCost both ways (docs/audit.md).

The job's files come from its trace records (`FileRecord`s, as `iez.trace.darshan` reads a log);
iez's layouts are what the control plane would have planned: the default policy (`balanced`)
with layout mode `hierarchical` (the automatic count and size, and seed 001's components for a
shared file written in blocks by groups of writers), on the log's file system. A log without
LUSTRE records says nothing of layouts: its advice lists the files and says so.

The cluster model of a log (`log_cluster`): as many OSTs as the highest OST index its LUSTRE
records name, plus one (a lower bound of the file system's size: Darshan records only the OSTs
the job's files got), DEFAULT_OSTS_PER_OSS to an OSS, the model's default bandwidths; or the
site's cluster file (`--cluster`).

Pure: records and a cluster in, an `Advice` out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import Any, Iterable

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import DEFAULT_POLICY, get_policy
from iez.audit.findings import KINDS, FileFacts, Finding, findings
from iez.cluster import DEFAULT_OST_SIZE, DEFAULT_OSTS_PER_OSS, Cluster, Snapshot, cluster_from_doc
from iez.layout.layout import FileLayout
from iez.layout.raid0 import bytes_per_ost
from iez.metrics import ost_cost, ost_utilization
from iez.plan import format_layout
from iez.trace.ingest import API_LEVEL, ingest, observed_layout
from iez.trace.record import FileRecord

LAYOUT_MODE = "hierarchical"  # auto, plus hierarchical striping where it applies (docs/layouts.md)
# Darshan's log name: <user>_<exe>_id<jobid>_<month>-<day>-<seconds>-<hash>.darshan (darshan-runtime).
LOG_NAME = re.compile(r"^(?P<user>[^_]+)_(?P<exe>.+)_id(?P<jobid>\d+)_\d+-\d+-\d+")


@dataclass(frozen=True)
class Job:
    """What a log says of its job, as plain data (`iez.trace.darshan.DarshanLog`'s fields)."""

    path: str
    jobid: int = 0
    nprocs: int = 1
    start_time: float = 0.0
    exe: str = ""
    records: tuple[FileRecord, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass
class FileAdvice:
    facts: FileFacts
    recorded: str = ""  # the recorded layout in plan grammar ("" = not known)
    iez: str = ""  # iez's layout ("" = none: read only, or no LUSTRE records)
    iez_count: int = 0
    why: str = ""  # iez's reason (Placement.note)
    findings: list[Finding] = field(default_factory=list)


@dataclass
class Advice:
    path: str
    jobid: int
    user: str
    app: str
    exe: str
    nprocs: int
    start_time: float
    n_osts: int  # OSTs of the cluster model (0 = no layout figures)
    has_layout: bool  # the log has LUSTRE records
    ost_cost_recorded: float = 0.0  # OSTCost of the job's written bytes (eq. 7), 0 = not known
    ost_cost_iez: float = 0.0
    files: list[FileAdvice] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The simulator's job times (seconds), filled by `iez.audit.simulate`; None = not simulated.
    write_recorded: float | None = None
    read_recorded: float | None = None
    write_iez: float | None = None
    read_iez: float | None = None

    @property
    def findings(self) -> list[Finding]:
        return [x for f in self.files for x in f.findings]

    @property
    def time_lost(self) -> float | None:
        """Simulated seconds the recorded layouts cost over iez's (write + read)."""
        if None in (self.write_recorded, self.read_recorded, self.write_iez, self.read_iez):
            return None
        return (self.write_recorded or 0.0) + (self.read_recorded or 0.0) - (self.write_iez or 0.0) - \
            (self.read_iez or 0.0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["time_lost"] = self.time_lost
        return d


def log_cluster(n_osts: int, job_bytes: int = 0) -> Cluster:
    """The cluster model of a log whose LUSTRE records name OSTs 0..n_osts-1 (module docstring),
    each OST large enough to take all of the job's bytes (the log says nothing of free space)."""
    per = DEFAULT_OSTS_PER_OSS
    return cluster_from_doc({"fsname": "log", "ost_defaults": {"size": max(DEFAULT_OST_SIZE, 2 * job_bytes)}, "oss": [
        {"name": f"oss{s}", "osts": list(range(s * per, min(n_osts, (s + 1) * per)))}
        for s in range(-(-n_osts // per))]})


def _job_bytes(files: list[FileAdvice]) -> int:
    return sum(f.facts.write_bytes for f in files)


def model_cluster(adv: Advice) -> Cluster:
    """The log's own cluster model `advise` used for `adv` (no --cluster)."""
    return log_cluster(adv.n_osts, _job_bytes(adv.files))


def user_and_app(path: str, exe: str) -> tuple[str, str]:
    """The job's user and application from Darshan's log name, else ("", the executable's name)."""
    m = LOG_NAME.match(PurePath(path).name)
    if m:
        return m["user"], m["exe"]
    return "", PurePath(exe.split(" ", 1)[0]).name if exe else ""


def _layer_bytes(recs: list[FileRecord], attr: str) -> int:
    """A file's bytes: per API layer summed over ranks, the largest layer (iez.trace.ingest's rule)."""
    per: dict[str, int] = defaultdict(int)
    for r in recs:
        per[r.api] += getattr(r, attr)
    return max(per.values(), default=0)


def _processes(recs: list[FileRecord]) -> int:
    return max(len({(r.rank, r.host, r.pid) for r in recs}), max((r.writers for r in recs), default=0)) \
        if recs else 0


def file_facts(recs: list[FileRecord], writers: int, transfer: int, align: int) -> FileFacts:
    """One file's facts from its records and its writers' facts (ingest's, for a written file).
    The alignment is the lowest layer's (POSIX: the calls the file system saw); alignment 0 with a
    known write size there means Darshan saw writes off the file system's block."""
    lowest = min(API_LEVEL.get(r.api, 0) for r in recs)
    low = [r for r in recs if API_LEVEL.get(r.api, 0) == lowest and r.bytes_written > 0]
    if low and all(r.transfer_size > 0 for r in low):
        aligns = [r.write_align for r in low]
        align = min(aligns) if all(aligns) else 0
        misaligned = not all(aligns)
    else:
        misaligned = False
    lay = next((x for x in map(observed_layout, recs) if x is not None), None)
    head = lay.parts()[0].layout if lay is not None else None
    return FileFacts(
        path=recs[0].path, write_bytes=_layer_bytes(recs, "bytes_written"), read_bytes=_layer_bytes(recs, "bytes_read"),
        writers=writers, readers=_processes([r for r in recs if r.bytes_read > 0]), transfer_size=transfer,
        write_align=align, misaligned=misaligned,
        stripe_count=head.stripe_count if head is not None else 0,
        stripe_size=head.stripe_size if head is not None else 0,
        osts=tuple(lay.osts()) if lay is not None else ())


def _cost(cluster: Cluster, layouts: Iterable[tuple[FileLayout, int]]) -> float:
    on: dict[int, int] = defaultdict(int)
    for lay, n in layouts:
        for ost, b in bytes_per_ost(lay, n).items():
            on[ost] += b
    return ost_cost(ost_utilization(cluster, dict(on))) if on else 0.0


def advise(job: Job, cluster: Cluster | None = None) -> Advice:
    """The advice of one job; `cluster` None = the log's own model (`log_cluster`).
    Raises TraceError on records that make no sense."""
    user, app = user_and_app(job.path, job.exe)
    by_path: dict[str, list[FileRecord]] = defaultdict(list)
    for r in job.records:
        by_path[r.path].append(r)
    requests = {q.path: q for q in ingest(job.records).requests}
    files, recorded = [], []
    for path, recs in sorted(by_path.items()):
        q = requests.get(path)
        facts = file_facts(recs, q.writers if q else 0, q.transfer_size if q else 0, q.write_align if q else 0)
        lay = next((x for x in map(observed_layout, recs) if x is not None), None)
        files.append(FileAdvice(facts, recorded=format_layout(lay) if lay is not None else ""))
        if lay is not None and facts.write_bytes:
            recorded.append((lay, facts.write_bytes))
    seen = {o for f in files for o in f.facts.osts}
    adv = Advice(path=job.path, jobid=job.jobid, user=user, app=app, exe=job.exe, nprocs=job.nprocs,
                 start_time=job.start_time, n_osts=0, has_layout=bool(seen), files=files,
                 notes=list(job.warnings))
    if not seen:
        adv.notes.append("no LUSTRE records for the files of this log (not Lustre, or Darshan's LUSTRE "
                         "module was off): no layouts, OSTCost or simulated times")
        return adv
    if cluster is None:
        cluster = log_cluster(max(seen) + 1, _job_bytes(files))
        adv.notes.append(f"cluster model: {max(seen) + 1} OSTs, "
                         "the highest OST index the log names + 1 (give --cluster for the real file system)")
    missing = seen - set(cluster.ost_indices())
    if missing:
        adv.notes.append(f"the log names OSTs {sorted(missing)[:8]} the cluster model does not have: "
                         "no layout figures")
        adv.has_layout = False
        return adv
    adv.n_osts = len(cluster.ost_indices())
    reqs = [q for q in requests.values() if q.write_bytes > 0]
    placements = get_policy(DEFAULT_POLICY).place(reqs, cluster, Snapshot.from_cluster(cluster),
                                                  AllocOptions(layout=LAYOUT_MODE)) if reqs else []
    placed = {p.path: p for p in placements}
    for f in files:
        p = placed.get(f.facts.path)
        if p is not None:
            f.iez, f.iez_count, f.why = format_layout(p.layout), len(set(p.layout.osts())), p.note
        f.findings = findings(f.facts, f.iez_count)
    adv.ost_cost_recorded = _cost(cluster, recorded)
    adv.ost_cost_iez = _cost(cluster, [(p.layout, p.write_bytes) for p in placements])
    return adv


def finding_counts(adv: Advice) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for x in adv.findings:
        counts[x.kind] += 1
    return counts
