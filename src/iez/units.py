"""Quantities as people write them: byte sizes (1048576, "1M", "64KiB", "10 GiB", binary like lfs)
and durations (30, "200us", "5ms", "2min", "7d")."""

import math
import re
from decimal import Decimal
from typing import Any

from iez.errors import ConfigError, shown

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
MAX_SIZE = (1 << 63) - 1  # Lustre's largest file size (and what a signed 64-bit field holds)
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*(ns|us|µs|ms|s|min|h|d)?\s*$")
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_size(value: int | float | str, what: str = "size") -> int:
    """Parse a byte count; suffixes K/M/G/T/P (optionally iB or B) are powers of 1024."""
    if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"{what}: expected a size, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ConfigError(f"{what}: negative size {shown(value)}")
        n = int(value)
    else:
        m = _RE.match(str(value))
        if not m:
            raise ConfigError(f"{what}: cannot read {shown(value)} as a size (examples: 1048576, 64K, 10GiB)")
        # Decimal, not float: 400 digits must be "too large", not an OverflowError
        n = int(Decimal(m.group(1)) * _UNITS[m.group(2).lower()])
    if n > MAX_SIZE:
        raise ConfigError(f"{what}: {shown(value)} is larger than 8 EiB")
    return n


def format_size(n: float) -> str:
    """Human form with lfs df -h conventions: one decimal and a K/M/G/T/P/E suffix (base 1024)."""
    for unit in ("", "K", "M", "G", "T", "P", "E"):
        if abs(n) < 1024 or unit == "E":
            return f"{n:.1f}{unit}" if unit else f"{int(n)}"
        n /= 1024
    raise AssertionError("unreachable")


def parse_duration(v: Any, what: str) -> float:
    """Seconds: a number, or text like "200us", "5ms", "30s", "2min", "7d"."""
    if isinstance(v, bool):
        raise ConfigError(f"{what}: expected a duration, got {v!r}")
    if isinstance(v, (int, float)):
        if v < 0:
            raise ConfigError(f"{what}: duration must be >= 0, got {v}")
        return float(v)
    m = _TIME.match(str(v))
    if not m:
        raise ConfigError(f"{what}: cannot read {v!r} as a duration (examples: 30, 200us, 5ms, 2min)")
    return float(m.group(1)) * _TIME_UNITS[m.group(2)]
