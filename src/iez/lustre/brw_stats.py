"""read|write histograms: OSD `brw_stats` and its client analogue `osc.*.rpc_stats`.

brw_stats (osd_lproc.c <=2.14, lprocfs_status_server.c 2.15+; docs/references.md#l-fmt-brw-stats):
  header   "snapshot_time:         <s>.<ns> (secs.nsecs)"      2.10-2.14 (2.5: secs.usecs)
           "snapshot_time            : <s>.<ns> secs.nsecs"    2.15.0-2 (+ start/elapsed)
           "snapshot_time:            <s>.<ns> secs.nsecs"     2.15.3+ (+ start_time:, elapsed_time:)
  section  "<26 spaces>read      |     write"
           "%-22s %-5s %% cum %% |  %-11s %% cum %%"           name, units, units
  rows     "<bucket>:\t\t%10lu %3u %3u   | %4lu %3u %3u"     count pct cum | count pct cum
Bucket labels are 2^i for i<10, then "%luK" and "%luM" (scaled sections) or plain integers.
Rows are printed from the first non-zero bucket until both cumulative columns reach 100, so
the counts of a section sum to its total.

rpc_stats adds "name: value" lines (read RPCs in flight, pending write pages, ...) before the
sections, whose header is "\t\t\tread\t\t\twrite"; the rows have the same columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iez.lustre.parse import Skipped, Times, parse_time_line

_SECTION = re.compile(r"^\s*read\s+\|?\s*write\s*$")
_NAMES = re.compile(r"^(?P<name>\S.*?)\s+(?P<ru>[\w/]+)\s+%\s+cum\s+%\s*\|\s*(?P<wu>[\w/]+)\s+%\s+cum\s+%\s*$")
_ROW = re.compile(r"^\s*(\d+)([KMG]?):\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*(\d+)\s+(\d+)\s+(\d+)\s*$")
_SCALAR = re.compile(r"^([A-Za-z][\w ]*?):\s+(-?\d+)\s*$")
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class Bucket:
    label: str  # as printed: "1", "512", "1K", "4M"
    value: int  # the bucket's number: 1K -> 1024 (pages, ms, bytes, ... per the section)
    read: int
    read_pct: int
    read_cum: int
    write: int
    write_pct: int
    write_cum: int


@dataclass(frozen=True)
class Histogram:
    name: str  # "pages per bulk r/w", "disk I/O size", ...
    read_unit: str  # "rpcs", "ios", "maps"
    write_unit: str
    buckets: tuple[Bucket, ...]

    @property
    def read_total(self) -> int:
        return sum(b.read for b in self.buckets)

    @property
    def write_total(self) -> int:
        return sum(b.write for b in self.buckets)

    def bucket(self, label: str) -> Bucket | None:
        return next((b for b in self.buckets if b.label == label), None)


@dataclass(frozen=True)
class BrwStats:
    times: Times
    histograms: tuple[Histogram, ...]
    scalars: dict[str, int]  # rpc_stats: "write RPCs in flight" -> 6, ...
    skipped: tuple[Skipped, ...] = ()

    def histogram(self, name: str) -> Histogram | None:
        return next((h for h in self.histograms if h.name == name), None)


def parse_brw_stats(text: str) -> BrwStats:
    """Read a brw_stats or rpc_stats text (every header style)."""
    fields: dict[str, int] = {}
    scalars: dict[str, int] = {}
    hists: list[Histogram] = []
    skipped: list[Skipped] = []
    cur: tuple[str, str, str] | None = None  # the section being read: name, units
    rows: list[Bucket] = []
    expect_names = False

    def close() -> None:
        if cur is not None:
            hists.append(Histogram(*cur, tuple(rows)))

    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if _SECTION.match(line):
            close()
            cur, rows, expect_names = None, [], True
            continue
        if expect_names:
            expect_names = False
            m = _NAMES.match(line)
            if m:
                cur = (m["name"], m["ru"], m["wu"])
                continue
            skipped.append(Skipped(i, line, "a read|write header not followed by a section name"))
            continue
        m = _ROW.match(line)
        if m:
            if cur is None:
                skipped.append(Skipped(i, line, "histogram row outside a section"))
                continue
            n, suffix, *cols = m.groups()
            rows.append(Bucket(n + suffix, int(n) * _SCALE[suffix], *(int(c) for c in cols)))
            continue
        t = parse_time_line(line)
        if t is not None:
            fields[t[0]] = t[1]
            continue
        m = _SCALAR.match(line)
        if m and cur is None and not hists:
            scalars[m.group(1)] = int(m.group(2))
            continue
        skipped.append(Skipped(i, line, "not a brw_stats header, section or row"))
    close()
    return BrwStats(Times.of(fields), tuple(hists), scalars, tuple(skipped))
