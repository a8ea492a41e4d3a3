"""`iostat -x [-t] INTERVAL` output (sysstat 9 to 12.7), streamed report by report.

Each report: an optional time line (-t: ISO `2026-11-22T03:31:41+0000` with S_TIME_FORMAT=ISO,
else the locale's `11/22/2026 03:31:41 AM` or `22/11/26 03:31:41`), an `avg-cpu:` header and
its values, then a `Device` header (`Device:` before sysstat 11.5) and one row per device.
Columns are read by name, so every column set works (10.x `rrqm/s ... avgrq-sz avgqu-sz await
svctm %util`, 12.x `r/s rkB/s ... aqu-sz %util`, -m's `rMB/s`). The first report of a run is
the average since boot (`since_boot`). Lines that fit nowhere are reported, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable

from iez.lustre.parse import Skipped

_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S%z", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y %H:%M:%S", "%m/%d/%y %H:%M:%S",
                 "%d/%m/%y %H:%M:%S", "%m/%d/%y %I:%M:%S %p")
_BANNER = re.compile(r"^\S+ \S+ \(.*\)\s")  # "Linux 6.1.0 (host)  2026-11-22  _x86_64_  (2 CPU)"


@dataclass
class IostatReport:
    time: float | None  # epoch seconds (None without -t)
    cpu: dict[str, float] = field(default_factory=dict)  # "%user" -> 49.4
    devices: dict[str, dict[str, float]] = field(default_factory=dict)  # "sda" -> {"%util": 1.4, ...}
    since_boot: bool = False

    def kb_per_s(self, device: str, op: str) -> float | None:
        """rkB/s or wkB/s of a device, whichever unit iostat printed."""
        cols = self.devices.get(device, {})
        for name, scale in ((f"{op}kB/s", 1.0), (f"{op}MB/s", 1024.0), (f"{op}sec/s", 0.5)):
            if name in cols:
                return cols[name] * scale
        return None


def _time(line: str) -> float | None:
    text = line.strip()
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def _numbers(parts: Iterable[str]) -> list[float] | None:
    try:
        return [float(p.replace(",", ".")) for p in parts]
    except ValueError:
        return None


def parse_iostat(text: str) -> tuple[list[IostatReport], list[Skipped]]:
    reports: list[IostatReport] = []
    skipped: list[Skipped] = []
    cur: IostatReport | None = None
    cols: list[str] | None = None  # the header being read: "cpu" columns or device columns
    section = ""
    pending_time: float | None = None

    def report() -> IostatReport:
        nonlocal cur, pending_time
        if cur is None:
            cur = IostatReport(pending_time, since_boot=not reports)
            reports.append(cur)
            pending_time = None
        return cur

    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            if section == "dev":
                section, cur = "", None  # a report ends after its device rows
            continue
        if _BANNER.match(line) and not reports and cur is None:
            continue
        t = _time(s)
        if t is not None:
            cur, section, pending_time = None, "", t
            continue
        head = s.split()
        if head[0] == "avg-cpu:":
            if cur is not None and cur.cpu:
                cur = None
            report()
            cols, section = head[1:], "cpu"
            continue
        if head[0] in ("Device", "Device:"):
            if cur is not None and cur.devices:
                cur = None
            report()
            cols, section = head[1:], "dev"
            continue
        if section == "cpu" and cols:
            vals = _numbers(head)
            if vals is not None and len(vals) == len(cols):
                report().cpu = dict(zip(cols, vals))
                section = ""
                continue
        if section == "dev" and cols and len(head) == len(cols) + 1:
            vals = _numbers(head[1:])
            if vals is not None:
                report().devices[head[0]] = dict(zip(cols, vals))
                continue
        skipped.append(Skipped(i, line, "not an iostat time, header or row"))
    return reports, skipped
