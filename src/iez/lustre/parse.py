"""What every Lustre text parser shares: the skipped-line report and lprocfs timestamps."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from iez.errors import IezError


class LustreFormatError(IezError):
    """Text that is not the Lustre format it was expected to be."""


@dataclass(frozen=True)
class Skipped:
    """A line a parser could not read: reported, never fatal."""

    lineno: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.lineno}: {self.reason}: {self.text[:80]!r}"


def require_clean(skipped: Iterable[Skipped], what: str) -> None:
    """Raise one line naming the first unreadable line, for callers that want strict input."""
    bad = list(skipped)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise LustreFormatError(f"{what}: {bad[0]}{more}")


# lprocfs header lines, every version (docs/references.md#l-fmt-stats, #l-fmt-brw-stats; lprocfs_stats_header):
#   "snapshot_time             1510782606.789180921 secs.nsecs"       stats 2.10+
#   "snapshot_time             1400000000.5 secs.usecs"               stats 2.5 (usec not padded)
#   "snapshot_time:         1510782606.797216394 (secs.nsecs)"        brw_stats <=2.14
#   "snapshot_time            : 1234.000000001 secs.nsecs"            brw_stats 2.15.0-2
#   "  snapshot_time:   1510782606"                                    job_stats 2.10 (seconds)
_TIME = re.compile(
    r"^\s*(snapshot_time|start_time|elapsed_time)\s*:?\s+(\d+)(?:\.(\d+))?"
    r"\s*(?:\(?secs\.(usecs|nsecs)\)?)?\s*$"
)


def parse_time_line(line: str) -> tuple[str, int] | None:
    """`(field, nanoseconds)` for a snapshot/start/elapsed time line, else None.

    The fraction is an integer count of its unit: 2.5 prints usecs without zero padding, so
    "12.5 secs.usecs" is 12 s + 5 us. A fraction without a unit is read as nsecs."""
    m = _TIME.match(line)
    if not m:
        return None
    field, sec, frac, unit = m.groups()
    ns = int(sec) * 1_000_000_000
    if frac:
        ns += int(frac) * (1000 if unit == "usecs" else 1)
    return field, ns


@dataclass(frozen=True)
class Times:
    """The snapshot/start/elapsed header of a stats file, in integer nanoseconds.

    2.15.0-2.15.2 print snapshot_time from the monotonic clock (seconds since boot); the
    difference between two snapshots of one node is still a valid interval."""

    snapshot_ns: int | None = None
    start_ns: int | None = None
    elapsed_ns: int | None = None

    @classmethod
    def of(cls, fields: dict[str, int]) -> "Times":
        return cls(fields.get("snapshot_time"), fields.get("start_time"), fields.get("elapsed_time"))

    @property
    def snapshot(self) -> float | None:
        return None if self.snapshot_ns is None else self.snapshot_ns / 1e9

    @property
    def start(self) -> float | None:
        return None if self.start_ns is None else self.start_ns / 1e9

    @property
    def elapsed(self) -> float | None:
        return None if self.elapsed_ns is None else self.elapsed_ns / 1e9


def format_time(field: str, ns: int, width: int = 25, colon: bool = False) -> str:
    """One header line as lprocfs_stats_header prints it ("%-*s %llu.%09lu secs.nsecs")."""
    name = field + (":" if colon else "")
    return f"{name:<{width}} {ns // 1_000_000_000}.{ns % 1_000_000_000:09d} secs.nsecs"
