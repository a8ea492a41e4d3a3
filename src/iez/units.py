"""Byte sizes as people write them: 1048576, "1M", "64KiB", "10 GiB" (binary, like lfs)."""

import re

from iez.errors import ConfigError

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: int | str, what: str = "size") -> int:
    """Parse a byte count; suffixes K/M/G/T/P (optionally iB or B) are powers of 1024."""
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a size, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"{what}: negative size {value}")
        return value
    if isinstance(value, float):
        if value < 0:
            raise ConfigError(f"{what}: negative size {value}")
        return int(value)
    m = _RE.match(str(value))
    if not m:
        raise ConfigError(f"{what}: cannot read {value!r} as a size (examples: 1048576, 64K, 10GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n: float) -> str:
    """Human form with lfs df -h conventions: one decimal and a K/M/G/T/P/E suffix (base 1024)."""
    for unit in ("", "K", "M", "G", "T", "P", "E"):
        if abs(n) < 1024 or unit == "E":
            return f"{n:.1f}{unit}" if unit else f"{int(n)}"
        n /= 1024
    raise AssertionError("unreachable")
