"""Reading libiez traces: one shard per traced process, and the merged job trace an MPI job
writes at MPI_Finalize, which holds its ranks' shards (format: docs/trace-format.md).

`read_shards(DIR)` gives every intact `FileRecord` of every shard in DIR (merged job traces
included); `read_trace(DIR)` also gives each process's header (app, run, plan hits and misses,
clean exit) and one warning line per damaged shard. A shard written by a process that was
killed, or copied while it was running, is read as far as its records are intact: each record
carries a CRC and is published by its magic, written last, so a torn or garbled record is
skipped, never misread.
"""

from __future__ import annotations

import bisect
import struct
import warnings
import zlib
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from iez.errors import IezError
from iez.plan import format_layout
from iez.trace.record import FileRecord

MAGIC = b"IEZTRACE"
VERSION = 3  # 1 and 2 are read too: 1's bytes 18-19 are zero (write facts unknown) and in the CRC
VERSIONS = (1, 2, 3)
SUFFIX = ".shard"
JOB_SUFFIX = ".job"
JOB_MAGIC = b"IEZJOBTR"
JOB_VERSION = 1
JOB_HEADER = 64
REC_MAGIC = 0x525A4549  # the bytes "IEZR"
REC_FIXED = 96  # version 3; 64 before
HEADER_SIZE = 1024  # version 3; 512 before
HEADER_CRC_END = 456
PROGRAM = slice(512, 640)  # version 3: the process's own program name

# header: magic, version, header_size, chunk_size, pid, ppid, rank, start_ns, app, run, host,
#         job_id, array_task (version 3; zero, so "", before)
_HEAD = struct.Struct("<8sIIIiiiQ128s128s64s64s32s")
# live header fields at 456: crc, flags, end_ns, plan_hits, plan_misses, plan_entries
_LIVE = struct.Struct("<IIQQQQ")
# record: magic, size, crc, api, flags, path_len, lum_len, write_align, write_max, comm_size,
#         open_ns, bytes_written, bytes_read, max_offset, close_ns
_REC = struct.Struct("<IIIBBHHBBIQQQQQ")
# version 3's live record facts at 64: segments, write_end + 1, read_max, collective read
_REC3 = struct.Struct("<QQBB")
LIVE_FACTS = slice(18, 20)  # the write facts: live since version 2, so the CRC takes them as 0
# merged job trace: magic, version, header size, shards, ranks, written ns, index CRC, header CRC
_JOB = struct.Struct("<8sIIIIQII")
_JOB_ENTRY = struct.Struct("<QQiI")  # offset, length, rank, CRC-32 of the shard's bytes
assert _HEAD.size == 456 and _REC.size == 64

CLEAN_EXIT, PLAN_LOADED, PLAN_REJECTED, APP_GIVEN = 0x1, 0x2, 0x4, 0x8
REC_CREATED, REC_PLAN_HIT, REC_PLAN_MISS, REC_RENAME = 0x1, 0x2, 0x4, 0x8
REC_RANDOM_SHIFT = 4  # the flags' high nibble: generated characters ending a created name
APIS = {0: "posix", 1: "stdio", 2: "mpiio", 3: "hdf5"}


class ShardWarning(UserWarning):
    """A shard was damaged or truncated: its intact records were still read."""


@dataclass(frozen=True)
class Rename:
    """A successful rename a traced process made (version 3): old and new absolute names."""

    old: str
    new: str
    time: float  # epoch seconds


@dataclass(frozen=True)
class Shard:
    """One traced process: its header and its intact records."""

    path: Path
    app: str
    run: str
    host: str
    pid: int
    ppid: int
    rank: int
    start_time: float
    end_time: float  # 0.0: the process did not finish normally (killed, exec'd) or still runs
    clean_exit: bool
    plan: str  # "none" | "loaded" | "rejected"
    plan_hits: int
    plan_misses: int
    plan_entries: int
    records: tuple[FileRecord, ...]
    warning: str | None = None
    program: str = ""  # this process's own program name ("" before version 3)
    app_given: bool = False  # app came from IEZ_APP (else it is the program's name)
    job_id: str = ""
    array_task: str = ""
    renames: tuple[Rename, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    """Plan hits and misses of one run, over all its processes (the control plane traces an
    application again when more than half of its files miss the plan: docs/references.md#s000-retrace)."""

    app: str
    run: str
    processes: int
    files: int
    plan_hits: int
    plan_misses: int
    plan_rejected: bool

    @property
    def miss_ratio(self) -> float:
        total = self.plan_hits + self.plan_misses
        return self.plan_misses / total if total else 0.0

    @property
    def needs_retrace(self) -> bool:
        return self.miss_ratio > 0.5 or self.plan_rejected


@dataclass
class Trace:
    shards: list[Shard] = field(default_factory=list)

    @property
    def records(self) -> list[FileRecord]:
        """Every record, each with the name its file ended up with after the renames of its
        run (any process of the run may have renamed it: `mv` after the writer exited)."""
        runs: dict[str, list[Rename]] = defaultdict(list)
        for s in self.shards:
            runs[s.run].extend(s.renames)
        finals = {run: _Renames(rs) for run, rs in runs.items() if rs}
        return [finals[r.run].apply(r) if r.run in finals else r for s in self.shards for r in s.records]

    @property
    def warnings(self) -> list[str]:
        return [s.warning for s in self.shards if s.warning]

    def runs(self) -> list[RunSummary]:
        groups: dict[tuple[str, str], list[Shard]] = defaultdict(list)
        for s in self.shards:
            groups[(s.app, s.run)].append(s)
        return [RunSummary(app, run, len(ss), len({r.path for s in ss for r in s.records}),
                           sum(s.plan_hits for s in ss), sum(s.plan_misses for s in ss),
                           any(s.plan == "rejected" for s in ss))
                for (app, run), ss in sorted(groups.items())]


class _Renames:
    """A run's renames in time order, to follow a name through them (a directory's rename
    renames what is under it). Each step takes a later rename, so a loop (a -> b -> a) ends."""

    def __init__(self, renames: list[Rename]) -> None:
        self.order = sorted(renames, key=lambda r: r.time)
        self.times = [r.time for r in self.order]
        self.by_old: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(self.order):
            self.by_old[r.old].append(i)

    def _next(self, name: str, after: int) -> int | None:
        """The first rename after index `after` of name or of a directory above it."""
        best = None
        prefix = name
        while prefix:
            idx = self.by_old.get(prefix)
            if idx:
                j = bisect.bisect_right(idx, after)
                if j < len(idx) and (best is None or idx[j] < best):
                    best = idx[j]
            prefix = prefix.rsplit("/", 1)[0] if prefix.count("/") > 1 else ""
        return best

    def final(self, path: str, since: float) -> str:
        name, k = path, bisect.bisect_left(self.times, since) - 1
        while (i := self._next(name, k)) is not None:
            r = self.order[i]
            name, k = r.new + name[len(r.old):], i
        return name

    def apply(self, rec: FileRecord) -> FileRecord:
        final = self.final(rec.path, rec.open_time)
        return replace(rec, renamed_to=final) if final != rec.path else rec


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _layout_fields(lum: bytes, max_offset: int) -> tuple[str, int, int, tuple[int, ...]]:
    """(layout in plan grammar, stripe count, stripe size, OSTs) of the bytes the file system
    returned. A PFL file's count and size are those of the component holding its last byte."""
    from iez.layout import lum as codec

    fl = codec.decode(lum)
    last = max(max_offset - 1, 0)
    part = next((c for c in fl.parts() if c.start <= last < c.end), fl.parts()[-1])
    return format_layout(fl), part.layout.stripe_count, part.layout.stripe_size, tuple(fl.osts())


def _sane(data: bytes, off: int, chunk: int, fixed: int) -> tuple[int, int, int, int] | None:
    """(size, crc, path_len, lum_len) of a plausible record at off, or None."""
    if off + fixed > len(data):
        return None
    magic, size, crc, _, _, plen, llen = struct.unpack_from("<IIIBBHH", data, off)
    if size < fixed or size % 8 or off % chunk + size > chunk or fixed + plen + llen > size:
        return None
    return size, crc, plen, llen


def _crc_ok(data: bytes, off: int, crc: int, plen: int, llen: int, fixed: int) -> bool:
    # Version 1 wrote zeros at 18-19, so taking them as 0 reads every version.
    c = zlib.crc32(data[off + 12:off + LIVE_FACTS.start] + bytes(2) + data[off + LIVE_FACTS.stop:off + 32])
    return zlib.crc32(data[off + fixed:off + fixed + plen + llen], c) == crc


def _read(p: Path, what: str) -> bytes:
    try:
        return p.read_bytes()
    except OSError as e:
        raise IezError(f"cannot read {what} {p}: {e.strerror}") from None


def read_shard(path: str | Path) -> Shard:
    p = Path(path)
    return parse_shard(_read(p, "trace shard"), p)


def _bad(p: Path, warning: str) -> Shard:
    return Shard(p, "", "", "", 0, 0, 0, 0.0, 0.0, False, "none", 0, 0, 0, (), warning)


def parse_shard(data: bytes, p: Path, where: str = "") -> Shard:
    """One shard's bytes (a file, or one rank's part of a merged job trace: `where` names it)."""
    p_name = f"{p}{where}"
    if len(data) < 512 or data[:8] != MAGIC:
        return _bad(p, f"{p_name}: not a libiez trace shard (bad magic or shorter than its header)")
    magic, version, hsize, chunk, pid, ppid, rank, start, app, run, host, job, task = _HEAD.unpack_from(data)
    crc, flags, end, hits, misses, entries = _LIVE.unpack_from(data, HEADER_CRC_END)
    if version not in VERSIONS:
        return _bad(p, f"{p_name}: trace shard version {version} is not supported (this iez reads {VERSIONS[0]} to {VERSION})")
    v3 = version >= 3
    want, fixed = (HEADER_SIZE, REC_FIXED) if v3 else (512, 64)
    head_crc = zlib.crc32(data[:HEADER_CRC_END])
    if v3:  # the version 3 fields at 512 are under the same CRC
        head_crc = zlib.crc32(data[HEADER_CRC_END + 56:HEADER_SIZE], head_crc)
    if len(data) < hsize or head_crc != crc or hsize != want or chunk < 4096 or chunk % 8:
        return _bad(p, f"{p_name}: the shard's header is damaged; its records cannot be attributed")
    common = dict(app=_text(app), run=_text(run), host=_text(host), pid=pid, rank=rank,
                  program=_text(data[PROGRAM]) if v3 else "", job_id=_text(job), array_task=_text(task))
    records: list[FileRecord] = []
    renames: list[Rename] = []
    problems: list[str] = []
    off = hsize
    while off < len(data):
        if off + 8 > len(data):
            if any(data[off:]):
                problems.append(f"truncated at byte {off}")
            break
        rmagic, size = struct.unpack_from("<II", data, off)
        if rmagic == 0 and size == 0:  # nothing more in this chunk
            nxt = (off // chunk + 1) * chunk
            if any(data[off:nxt]):
                problems.append(f"stray bytes at {off}")
            off = nxt
            continue
        rec = _sane(data, off, chunk, fixed)
        if rec is not None and off + rec[0] > len(data):
            problems.append(f"truncated in the record at byte {off}")
            break
        if rec is not None and rmagic == 0:  # allocated, never published (killed while writing it)
            off += rec[0]
            continue
        if rec is None or rmagic != REC_MAGIC or not _crc_ok(data, off, rec[1], rec[2], rec[3], fixed):
            problems.append(f"damaged record at byte {off}")
            off = _resync(data, off + 8, chunk, fixed)
            continue
        if v3 and data[off + 13] & REC_RENAME:
            renames.append(_rename(data, off, rec[2], rec[3]))
        else:
            records.append(_record(data, off, rec[2], rec[3], fixed, common, problems))
        off += rec[0]
    plan = "rejected" if flags & PLAN_REJECTED else "loaded" if flags & PLAN_LOADED else "none"
    warning = None
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        warning = f"{p_name}: {problems[0]}{more}; read {len(records)} intact records"
    return Shard(p, common["app"], common["run"], common["host"], pid, ppid, rank, start / 1e9, end / 1e9,
                 bool(flags & CLEAN_EXIT), plan, hits, misses, entries, tuple(records), warning,
                 program=common["program"], app_given=bool(flags & APP_GIVEN), job_id=common["job_id"],
                 array_task=common["array_task"], renames=tuple(renames))


def _with(shard: Shard, warning: str) -> Shard:
    return Shard(**{**shard.__dict__, "warning": warning})


def _resync(data: bytes, off: int, chunk: int, fixed: int) -> int:
    """The next offset, 8-aligned, that holds a valid record or starts a chunk."""
    off += -off % 8
    while off < len(data):
        if off % chunk == 0:
            return off
        rec = _sane(data, off, chunk, fixed)
        if (rec and struct.unpack_from("<I", data, off)[0] == REC_MAGIC
                and _crc_ok(data, off, rec[1], rec[2], rec[3], fixed)):
            return off
        off += 8
    return off


def _name(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _rename(data: bytes, off: int, plen: int, llen: int) -> Rename:
    at = off + REC_FIXED
    return Rename(_name(data[at:at + plen]), _name(data[at + plen:at + plen + llen]), _REC.unpack_from(data, off)[10] / 1e9)


def _record(data: bytes, off: int, plen: int, llen: int, fixed: int, common: dict, problems: list[str]) -> FileRecord:
    (_, _, _, api, flags, _, _, align, wmax, comm_size, open_ns, written, read, max_offset,
     close_ns) = _REC.unpack_from(data, off)
    segments, _, rmax, coll = _REC3.unpack_from(data, off + 64) if fixed > 64 else (0, 0, 0, 0)
    path = _name(data[off + fixed:off + fixed + plen])
    lum = data[off + fixed + plen:off + fixed + plen + llen]
    osts: tuple[int, ...] = ()
    layout, count, size = "", 0, 0
    if lum:
        try:
            layout, count, size, osts = _layout_fields(lum, max_offset)
        except IezError as e:
            problems.append(f"{path}: unreadable layout ({e})")
    hit = True if flags & REC_PLAN_HIT else False if flags & REC_PLAN_MISS else None
    return FileRecord(path=path, api=APIS.get(api, f"api{api}"), created=bool(flags & REC_CREATED),
                      bytes_written=written, bytes_read=read, max_offset=max_offset, stripe_count=count,
                      stripe_size=size, osts=osts, layout=layout, open_time=open_ns / 1e9,
                      close_time=close_ns / 1e9, comm_size=max(comm_size, 1), plan_hit=hit,
                      transfer_size=1 << (wmax - 1) if wmax else 0,
                      write_align=1 << (64 - align) if 0 < align <= 64 else 0, writer_segments=segments,
                      read_size=1 << (rmax - 1) if rmax else 0, name_random=flags >> REC_RANDOM_SHIFT,
                      read_collective=coll != 0, **common)


def read_job(path: str | Path) -> list[Shard]:
    """The shards of a merged job trace (MPI_Finalize's), each read as a shard file is; a
    damaged part gives a Shard with a warning and no records, the others are read."""
    p = Path(path)
    data = _read(p, "job trace")
    if len(data) < JOB_HEADER or data[:8] != JOB_MAGIC:
        return [_bad(p, f"{p}: not a libiez job trace (bad magic or shorter than its header)")]
    _, version, hsize, n, _ranks, _t, index_crc, head_crc = _JOB.unpack_from(data)
    if version != JOB_VERSION:
        return [_bad(p, f"{p}: job trace version {version} is not supported (this iez reads {JOB_VERSION})")]
    end = hsize + _JOB_ENTRY.size * n
    if (zlib.crc32(data[:36]) != head_crc or hsize != JOB_HEADER or end > len(data)
            or zlib.crc32(data[hsize:end]) != index_crc):
        return [_bad(p, f"{p}: the job trace's header or index is damaged; its shards cannot be found")]
    shards = []
    for i in range(n):
        off, length, rank, crc = _JOB_ENTRY.unpack_from(data, hsize + _JOB_ENTRY.size * i)
        where = f"[rank {rank}]"
        part = data[off:off + length]
        if off < end or len(part) != length:
            shards.append(_bad(p, f"{p}{where}: truncated (the file ends before this rank's shard)"))
        elif zlib.crc32(part) != crc:
            shards.append(_bad(p, f"{p}{where}: damaged (CRC mismatch); its records are not read"))
        else:
            shards.append(parse_shard(part, p, where))
    return shards


def read_trace_file(path: str | Path) -> list[Shard]:
    """The shards of one trace file: a shard, or a merged job trace."""
    return read_job(path) if Path(path).name.endswith(JOB_SUFFIX) else [read_shard(path)]


def shard_files(directory: str | Path) -> list[Path]:
    """The trace files of a directory: shards and merged job traces."""
    d = Path(directory)
    if not d.is_dir():
        raise IezError(f"{d}: no such trace directory")
    return sorted([*d.glob(f"*{SUFFIX}"), *d.glob(f"iez.*{JOB_SUFFIX}")])


def read_trace(directory: str | Path) -> Trace:
    return Trace([s for f in shard_files(directory) for s in read_trace_file(f)])


def read_shards(directory: str | Path) -> list[FileRecord]:
    """Every intact record of every shard in directory; a damaged shard gives a ShardWarning."""
    trace = read_trace(directory)
    for w in trace.warnings:
        warnings.warn(w, ShardWarning, stacklevel=2)
    return trace.records
