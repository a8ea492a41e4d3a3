"""`lfs df` output, read and written (lustre/utils/lfs.c: mntdf/showdf, docs/references.md#l-fmt-lfs-df).

    header  UUF" "CSF" "CSF" "CSF" "RSF" %-s"   "UUID", "1K-blocks"|"bytes"|"Inodes", "Used"|"IUsed",
                                                 "Available"|"IFree", "Use%"|"IUse%", "Mounted on"
    row     UUF" "CSF" "CSF" "CSF" "RSF" %-s[%s:%d]" uuid total used avail "%3d%%" mount, MDT|OST, index
            + " <flags>" (D degraded, R readonly, S out of space, I out of inodes, N no-create, ...)
    other   UUF": inactive device"  /  UUF": <strerror>"
    summary blank line, "filesystem_summary:" (<=2.9: "filesystem summary:") row, blank line
with UUF "%-20s", CSF "%11s", RSF "%4s". -h prints "%8.1f%c" (K M G T P E, base 1024) of bytes.
Values are KiB (blocks), bytes (-h) or inode counts (-i); Use% = ceil(used / (used + avail) * 100).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from iez.lustre.parse import Skipped

SUMMARY = "filesystem_summary:"
_OLD_SUMMARY = "filesystem summary:"
_NUM = r"(\d+(?:\.\d+)?[KMGTPEZYk]?)"
_ROW = re.compile(rf"^(\S+)\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+(\d+)%\s+(.*?)(?:\[(MDT|OST):(\d+)\])?(?:\s+([A-Za-z]+))?\s*$")
_OTHER = re.compile(r"^(\S+)\s*: (.+?)\s*$")
_NAMED = re.compile(r"^(?:.*-)?(MDT|OST)([0-9a-fA-F]{4})(?:_UUID)?$")
_SUFFIX = "KMGTPEZY"


@dataclass(frozen=True)
class DfRow:
    """One `lfs df` line. total/used/avail are in the table's unit; None for inactive or failed
    targets, whose `status` then says why ("inactive device" or the error text)."""

    uuid: str
    kind: str | None  # "MDT" or "OST"; None for the summary
    index: int | None
    total: int | None
    used: int | None
    avail: int | None
    use_pct: int | None = None
    mount: str = ""
    flags: str = ""
    status: str = ""  # "" when the numbers are valid

    @property
    def active(self) -> bool:
        return not self.status

    def numbers(self) -> tuple[int, int, int]:
        """total, used, avail of a row that has them (an active target or the summary)."""
        if self.total is None or self.used is None or self.avail is None:
            raise ValueError(f"{self.uuid}: no numbers ({self.status or 'none given'})")
        return self.total, self.used, self.avail


@dataclass
class DfTable:
    unit: str  # "KiB" (lfs df), "bytes" (-h, values rounded to the printed 0.1), "inodes" (-i)
    rows: list[DfRow] = field(default_factory=list)
    summary: DfRow | None = None


@dataclass
class DfReport:
    tables: list[DfTable] = field(default_factory=list)  # one per mounted file system
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def targets(self) -> list[DfRow]:
        """Every MDT and OST row of every table, in output order (summaries left out)."""
        return [r for t in self.tables for r in t.rows]


def _value(text: str, base: int) -> int:
    if text[-1].isalpha():
        return round(float(text[:-1]) * base ** (_SUFFIX.index(text[-1].upper()) + 1))
    return int(float(text))


def parse_lfs_df(text: str, si: bool = False) -> DfReport:
    """Read `lfs df [-i] [-h|-H]` output. `si=True` reads -H values (powers of 1000)."""
    base = 1000 if si else 1024
    report = DfReport()
    table: DfTable | None = None
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        words = line.split()
        if words[0] == "UUID":
            unit = {"1K-blocks": "KiB", "bytes": "bytes", "Inodes": "inodes"}.get(words[1] if len(words) > 1 else "")
            if unit is None:
                report.skipped.append(Skipped(i, line, "unknown lfs df header"))
                continue
            table = DfTable(unit)
            report.tables.append(table)
            continue
        if table is None:
            report.skipped.append(Skipped(i, line, "lfs df row before the UUID header"))
            continue
        summary = line.startswith((SUMMARY, _OLD_SUMMARY))
        body = SUMMARY + line[len(_OLD_SUMMARY):] if line.startswith(_OLD_SUMMARY) else line
        m = _ROW.match(body)
        if m:
            uuid, t, u, a, pct, mount, kind, idx, flags = m.groups()
            row = DfRow(uuid, kind, int(idx) if idx else None, _value(t, base), _value(u, base),
                        _value(a, base), int(pct), mount.strip(), flags or "")
        elif (m := _OTHER.match(line)) and not summary:
            named = _NAMED.match(m.group(1))
            row = DfRow(m.group(1), named.group(1) if named else None,
                        int(named.group(2), 16) if named else None, None, None, None, status=m.group(2))
        else:
            report.skipped.append(Skipped(i, line, "not an lfs df row"))
            continue
        if summary:
            table.summary = replace(row, kind=None, index=None)
        else:
            table.rows.append(row)
    return report


# -- the formatter ------------------------------------------------------------------------------


def use_percent(used: int, avail: int) -> int:
    """ceil(used / (used + avail) * 100), in integers so 100% means really full."""
    return -(-used * 100 // (used + avail)) if used + avail > 0 else 0


def _cook(value: int) -> str:
    """-h: "%8.1f%c" after dividing by 1024 while >= 1024 (lfs COOK); small values "%11llu"."""
    v, i = float(value), 0
    while v >= 1024 and i < len(_SUFFIX):
        v /= 1024
        i += 1
    return f"{v:8.1f}{_SUFFIX[i - 1]}" if i else f"{value:11d}"


def summarize(rows: list[DfRow], inodes: bool) -> DfRow:
    """The filesystem_summary row as lfs computes it: block space of the OSTs (the MDTs' only
    when there are no OSTs); inodes of the MDTs, capped by the OSTs' free objects."""
    ok = [r for r in rows if r.active]
    osts = [r.numbers() for r in ok if r.kind == "OST"]
    mdts = [r.numbers() for r in ok if r.kind == "MDT"]
    if inodes:
        total, free = sum(n[0] for n in mdts), sum(n[2] for n in mdts)
        ost_free = sum(n[2] for n in osts)
        if osts and ost_free < free:
            total, free = total - free + ost_free, ost_free
        return DfRow(SUMMARY, None, None, total, total - free, free)
    src = osts or mdts
    return DfRow(SUMMARY, None, None, sum(n[0] for n in src), sum(n[1] for n in src), sum(n[2] for n in src))


def format_lfs_df(rows: list[DfRow], mount: str, inodes: bool = False, human: bool = False) -> str:
    """What `lfs df [-i] [-h]` prints for these targets (MDTs then OSTs, as given).

    Row numbers are KiB (inode counts with `inodes=True`); `use_pct` and `mount` of the rows
    are recomputed. `status` rows print as "<uuid>: <status>"."""
    if inodes:
        head = ("UUID", "Inodes", "IUsed", "IFree", "IUse%")
    else:
        head = ("UUID", "bytes" if human else "1K-blocks", "Used", "Available", "Use%")
    out = [f"{head[0]:<20} {head[1]:>11} {head[2]:>11} {head[3]:>11} {head[4]:>4} Mounted on"]

    def show(n: int) -> str:
        return _cook(n * 1024) if human and not inodes else f"{n:11d}"

    def line(r: DfRow) -> str:
        if r.status:
            return f"{r.uuid:<20}: {r.status}"
        total, used, avail = r.numbers()
        pct = f"{use_percent(used, avail):3d}%"
        s = f"{r.uuid:<20} {show(total):>11} {show(used):>11} {show(avail):>11} {pct:>4} {mount}"
        if r.kind:
            s += f"[{r.kind}:{r.index}]"
        return s + (f" {r.flags}" if r.flags else "")

    out.extend(line(r) for r in rows)
    out += ["", line(summarize(rows, inodes)), ""]
    return "".join(x + "\n" for x in out)
