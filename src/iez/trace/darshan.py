"""Darshan logs -> FileRecords, through pydarshan (the PyPI `darshan` package).

Read: the POSIX, MPI-IO and STDIO module records (bytes, ranks, open/close times, access
sizes) and the
LUSTRE module (`mod_read_all_lustre_records`): stripe size, stripe count, pool and the OST ids
each file really got, component by component.

libdarshan-util, the C library under pydarshan, does not report a damaged log to its caller:
a truncated module region reads as "no more records", and a failed inflate aborts the process
when the log is closed (an assert in darshan_log_close). So a log is read in a child Python
process. The child checks every record's return code itself (`darshan_log_get_record` < 0 is
a damaged region) and checks that every record has a name; any failure, or a child killed by
a signal, is one TraceError line naming the first error the C library printed.

The writers' facts (FileRecord.transfer_size, write_align, writers): Darshan keeps each
module's four most common access sizes (`*_ACCESS1_ACCESS` .. `ACCESS4`, with their counts, of
reads and writes together); the transfer size is the most common. It keeps no offsets, only a
count of POSIX accesses that did not start on `POSIX_FILE_ALIGNMENT` (the file system's block
size): when there were none, and the four sizes cover every access, write_align is the largest
power of two dividing that alignment and the four sizes, a lower bound; otherwise unknown (0),
as it always is for MPI-IO. A shared record (rank -1), which Darshan reduces from every rank
when all of them opened the file, stands for all the job's ranks as writers when it was
written (which ranks wrote is not kept).

Darshan cannot tell which files a job created. A file the job wrote to is taken as created by
it (true of checkpoint and output files, the ones placement is for); a file only read is not,
and keeps its bytes read and its readers' typical read (`read_size`: the most common access
size, which is a read's when the record wrote nothing).

Which files are on Lustre, decided per file and counted per reason (`DarshanLog.decisions`,
said in `notes` and `warnings`):

- a file with a LUSTRE record is on Lustre, whatever the mount table says: Darshan makes that
  record from the layout the open file's own file system returned, while the mount table is
  matched against the name as the job spelled it, so a file opened through a symbolic link into
  Lustre (a project directory) is under no Lustre mount of the table;
- else, when the log knows Lustre (a Lustre mount in its table, or LUSTRE records), a file is on
  Lustre when the longest mount point above its name is a Lustre one (STDIO files have no LUSTRE
  record), and off Lustre otherwise (skipped);
- a log that knows no Lustre at all keeps every file: it cannot tell;
- a record with an anonymised name (darshan-convert --obfuscate: a hash, or a mount point and a
  hash, in a log whose executable is a hash too) is skipped: its file cannot be named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iez.trace.ingest import TraceError
from iez.trace.record import FileRecord

# Darshan module name -> our API name (FileRecord.api), and its counter prefix.
MODULES = {"POSIX": ("posix", "POSIX"), "MPI-IO": ("mpiio", "MPIIO"), "STDIO": ("stdio", "STDIO")}
CHILD_TIMEOUT = 300.0  # seconds; a 2048-rank log reads in well under one


@dataclass
class DarshanLog:
    path: str
    jobid: int = 0
    nprocs: int = 1
    start_time: float = 0.0  # epoch seconds
    exe: str = ""
    records: list[FileRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what was skipped, and damage
    notes: list[str] = field(default_factory=list)  # how the files kept were found on Lustre
    # Files (distinct names, <STDOUT> and the like aside) per decision: DECISIONS' keys, and
    # "files" (all of them) and "read_only" (only read, whatever else was decided).
    decisions: dict[str, int] = field(default_factory=dict)


# Why a file was kept or skipped, as the notes and warnings say it ("N file(s) ...").
DECISIONS = {
    "lustre_record": "on Lustre by the LUSTRE record",
    "lustre_record_unmounted": ("on Lustre by the LUSTRE record although under no Lustre mount of the log's mount "
                                "table (opened through a symbolic link into Lustre?)"),
    "mount": "on Lustre by the log's mount table (no LUSTRE record)",
    "unknown": "kept although the log cannot tell whether they are on Lustre (no LUSTRE record, no Lustre mount)",
    "off_lustre": "skipped: not on Lustre (no LUSTRE record, under no Lustre mount)",
    "anonymised": "skipped: anonymised (hashed) names",
}
KEPT = ("lustre_record", "lustre_record_unmounted", "mount", "unknown")


def read_log(path: str | Path) -> DarshanLog:
    """Every file record of a Darshan log; a damaged log raises TraceError (one line)."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such Darshan log")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "iez.trace.darshan", str(p)],
            capture_output=True, text=True, timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise TraceError(f"{p}: reading the Darshan log took over {CHILD_TIMEOUT:.0f} s") from None
    c_error = next((ln.strip() for ln in proc.stderr.splitlines() if ln.startswith("Error:")), "")
    try:
        doc = json.loads(proc.stdout) if proc.stdout else {}
    except json.JSONDecodeError:
        doc = {}
    if proc.returncode != 0 or not doc.get("ok"):
        why = doc.get("error") or c_error or _last_line(proc.stderr) or f"reader exited with {proc.returncode}"
        if c_error and c_error not in why:
            why = f"{why}; {c_error}"
        raise TraceError(f"{p}: {why}")
    log = DarshanLog(path=str(p), jobid=doc["jobid"], nprocs=doc["nprocs"], start_time=doc["start_time"],
                     exe=doc["exe"], warnings=doc["warnings"], notes=doc["notes"], decisions=doc["decisions"])
    log.records = [FileRecord(**{**r, "osts": tuple(r["osts"])}) for r in doc["records"]]
    return log


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# -- the child: everything below runs in the reader process ----------------------------------


class _Damaged(Exception):
    pass


def _count_records(path: str) -> dict[str, int]:
    """Records per module, checking each read's return code (pydarshan treats errors as EOF)."""
    from darshan.backend import cffi_backend as be  # type: ignore[import-untyped]  # ships no type hints

    log = be.log_open(path)
    if not log["handle"]:
        raise _Damaged("not a readable Darshan log (bad header)")
    counts = {}
    for mod, info in be.log_get_modules(log).items():
        if mod not in (*MODULES, "LUSTRE"):
            continue
        n = 0
        while True:
            buf = be.ffi.new("void **")  # a fresh NULL each time: the library fills a non-NULL one
            r = be.libdutil.darshan_log_get_record(log["handle"], info["idx"], buf)
            if r < 0:
                raise _Damaged(f"corrupt or truncated Darshan log (module {mod} after {n} records)")
            if r == 0:
                break
            be.libdutil.darshan_free(buf[0])
            n += 1
        counts[mod] = n
    be.log_close(log)
    return counts


def _mount_of(path: str, mounts: list[tuple[str, str]]) -> tuple[str, str]:
    """(mount point, file system type) of the longest mount point above path; ("", "") if none."""
    best, found = -1, ("", "")
    for mnt, fstype in mounts:
        root = mnt.rstrip("/") + "/"
        if (path + "/").startswith(root) and len(root) > best:
            best, found = len(root), (mnt, fstype)
    return found


def _anonymised(name: str, mounts: list[tuple[str, str]], hashed_exe: bool) -> bool:
    """A name darshan-convert --obfuscate wrote: the hash of the name, after the file's mount
    point when it had one; it hashes the executable's name too."""
    if not name.startswith("/"):
        return True
    parent, _, base = name.rpartition("/")
    return hashed_exe and base.isdigit() and any(parent == mnt.rstrip("/") for mnt, _ in mounts)


def _decide(name: str, has_lustre_record: bool, mounts: list[tuple[str, str]], knows_lustre: bool,
            hashed_exe: bool) -> str:
    """Whether a file is kept, and why: a key of DECISIONS."""
    if _anonymised(name, mounts, hashed_exe):
        return "anonymised"
    mounted = _mount_of(name, mounts)[1] == "lustre"
    if has_lustre_record:
        return "lustre_record" if mounted or not any(t == "lustre" for _, t in mounts) else "lustre_record_unmounted"
    if not knows_lustre:
        return "unknown"
    return "mount" if mounted else "off_lustre"


def _said(decided: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """(notes, warnings) of the decisions: one line per reason that decided a file."""
    notes: list[str] = []
    warnings: list[str] = []
    for key, text in DECISIONS.items():
        if decided.get(key):
            n = len(decided[key])
            (notes if key in KEPT else warnings).append(f"{n} file{'s' * (n != 1)} {text}")
    return notes, warnings


def _lustre_layouts(report: Any) -> dict[int, dict[str, Any]]:
    """Record id -> stripe size, count, pool, OSTs and plan-grammar layout of the file."""
    from iez.errors import LayoutError
    from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout
    from iez.plan import format_layout

    out: dict[int, dict[str, Any]] = {}
    if "LUSTRE" not in report.modules:
        return out
    report.mod_read_all_lustre_records(dtype="dict", warnings=False)
    for rec in report.records["LUSTRE"]:
        comps = rec["components"]
        if not comps:
            continue
        first = comps[0]["counters"]
        info: dict[str, Any] = {
            "stripe_size": max(0, int(first["LUSTRE_COMP_STRIPE_SIZE"])),
            "stripe_count": max(0, int(first["LUSTRE_COMP_STRIPE_COUNT"])),
            "osts": [int(i) for i in comps[0]["ost_ids"]],
            "layout": "",
        }
        try:
            parts = []
            for c in comps:
                cnt = c["counters"]
                lay = Layout(stripe_size=int(cnt["LUSTRE_COMP_STRIPE_SIZE"]), pool=c["pool_name"],
                             osts=tuple(int(i) for i in c["ost_ids"]))
                end = int(cnt["LUSTRE_COMP_EXT_END"])
                parts.append(Component(max(0, int(cnt["LUSTRE_COMP_EXT_START"])),
                                       LUSTRE_EOF if end < 0 else end, lay))
            fl = (FileLayout(plain=parts[0].layout)
                  if len(parts) == 1 and parts[0].end == LUSTRE_EOF else FileLayout(components=tuple(parts)))
            info["layout"] = format_layout(fl)
        except LayoutError:
            info["layout"] = ""  # stripe count and OSTs above still hold what Darshan saw
        out[rec["id"]] = info
    return out


def _access_facts(c: dict[str, Any], prefix: str) -> tuple[int, int]:
    """(transfer size, write alignment) of one record's counters, 0 where not known."""
    sizes = [(int(c.get(f"{prefix}_ACCESS{i}_COUNT", 0)), int(c.get(f"{prefix}_ACCESS{i}_ACCESS", 0)))
             for i in range(1, 5)]  # STDIO keeps none
    sizes = [(n, size) for n, size in sizes if n > 0 and size > 0]
    if not sizes:
        return 0, 0
    transfer = max(sizes)[1]
    calls = int(c.get(f"{prefix}_READS", -1)) + int(c.get(f"{prefix}_WRITES", -1))
    block = int(c.get(f"{prefix}_FILE_ALIGNMENT", 0))
    if block <= 0 or int(c.get(f"{prefix}_FILE_NOT_ALIGNED", -1)) != 0 or sum(n for n, _ in sizes) != calls:
        return transfer, 0
    bits = block
    for _, size in sizes:
        bits |= size
    return transfer, bits & -bits


def _extract(path: str) -> dict[str, Any]:
    import darshan  # type: ignore[import-untyped]  # ships no type hints

    counts = _count_records(path)
    report = darshan.DarshanReport(path, read_all=False)
    job = report.metadata["job"]
    nprocs = max(1, int(job["nprocs"]))
    start = job["start_time_sec"] + job["start_time_nsec"] * 1e-9
    report.read_name_records()
    names = report.name_records
    mounts = report.data.get("mounts") or []
    warnings = [f"module {m} is partial (Darshan ran out of memory for its records)"
                for m, info in report.modules.items() if info.get("partial_flag")]
    layouts = _lustre_layouts(report)
    if "LUSTRE" in counts and len(report.records.get("LUSTRE", ())) != counts["LUSTRE"]:
        raise _Damaged("corrupt or truncated Darshan log (file-name table damaged)")
    exe = report.metadata.get("exe", "")
    hashed_exe = exe.strip().isdigit()
    knows_lustre = any(fstype == "lustre" for _, fstype in mounts) or bool(layouts)
    records: list[dict[str, Any]] = []
    decided: dict[str, set[str]] = defaultdict(set)  # decision -> names
    wrote: set[str] = set()
    read: set[str] = set()
    for mod, (api, prefix) in MODULES.items():
        if mod not in report.modules:
            continue
        report.mod_read_all_records(mod, dtype="dict", warnings=False)
        recs = report.records[mod]
        if len(recs) != counts.get(mod, 0):
            raise _Damaged("corrupt or truncated Darshan log (file-name table damaged)")
        for rec in recs:
            name = names.get(rec["id"], "")
            if name.startswith("<"):  # <STDOUT> and friends are not files
                continue
            c, f = rec["counters"], rec["fcounters"]
            written = max(0, int(c[f"{prefix}_BYTES_WRITTEN"]))
            bytes_read = max(0, int(c[f"{prefix}_BYTES_READ"]))
            key = name or f"#{rec['id']}"
            (wrote if written else read if bytes_read else set()).add(key)
            decision = _decide(name, rec["id"] in layouts, mounts, knows_lustre, hashed_exe)
            decided[decision].add(key)
            if decision not in KEPT:
                continue
            lay = layouts.get(rec["id"], {})
            shared = rec["rank"] < 0
            # the access sizes count reads and writes together: a record that wrote nothing read them
            transfer, align = _access_facts(c, prefix) if written or bytes_read else (0, 0)
            records.append(asdict(FileRecord(
                path=name, rank=0 if shared else int(rec["rank"]), api=api, created=written > 0,
                bytes_written=written, bytes_read=bytes_read,
                max_offset=max(0, int(c.get(f"{prefix}_MAX_BYTE_WRITTEN", -1)) + 1),
                stripe_count=lay.get("stripe_count", 0), stripe_size=lay.get("stripe_size", 0),
                osts=tuple(lay.get("osts", ())), layout=lay.get("layout", ""),
                open_time=start + max(0.0, float(f[f"{prefix}_F_OPEN_START_TIMESTAMP"])),
                close_time=start + max(0.0, float(f[f"{prefix}_F_CLOSE_END_TIMESTAMP"])),
                comm_size=nprocs if shared else 1,
                transfer_size=transfer if written else 0, write_align=align if written else 0,
                writers=nprocs if shared else 1, read_size=0 if written else transfer,
                read_collective=int(c.get(f"{prefix}_COLL_READS", 0)) > 0,
            )))
    notes, skipped = _said(decided)
    decisions = {k: len(v) for k, v in decided.items()}
    decisions["files"] = len(set().union(*decided.values())) if decided else 0
    decisions["read_only"] = len(read - wrote)
    return {"ok": True, "jobid": int(job["jobid"]), "nprocs": nprocs, "start_time": start, "exe": exe,
            "records": records, "warnings": warnings + skipped, "notes": notes, "decisions": decisions}


def _child(path: str) -> int:
    try:
        doc = _extract(path)
    except _Damaged as e:
        doc = {"ok": False, "error": str(e)}
    except (RuntimeError, ValueError, KeyError) as e:
        doc = {"ok": False, "error": f"unreadable Darshan log ({e})"}
    sys.stdout.write(json.dumps(doc))
    sys.stdout.flush()
    # Skip interpreter teardown: pydarshan closes the log from __del__, which aborts on a
    # damaged one, and the answer is already written.
    os._exit(0 if doc["ok"] else 3)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m iez.trace.darshan LOG")
    _child(sys.argv[1])
