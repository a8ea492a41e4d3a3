"""`lctl get_param` output (lustre/utils/lustre_param.c: read_param, docs/references.md#l-fmt-getparam).

Four shapes, all read by `parse_getparam`:
  name=value                 a one-line value
  name=                      a value of several lines: the lines that follow, up to the next
  <line> ...                 line that starts with a parameter name and "="
  name=<line>  (-H)          every line of a value prefixed with its name
  value        (-n)          raw values without names: `parse_raw` / `parse_raw_values`

Parameter names are dotted paths; a component may itself contain dots when it is a NID
(`obdfilter.fs-OST0000.exports.10.1.2.3@tcp.stats`, `mgc.MGC10.0.0.1@tcp.import`), so names
are split with `split_param_name`, never with a plain str.split(".").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Mapping

from iez.lustre.parse import LustreFormatError, Skipped

# A parameter name: dotted components of word characters, '-', '@' (NIDs) and ':' (IPv6 NIDs).
# Value lines that start like this are indistinguishable from a new parameter, as for lctl.
_NAME_LINE = re.compile(r"^([A-Za-z0-9_][\w.@:\-]*)=(.*)$")
_OCTET_TAIL = re.compile(r"^\w*?\d+$")


@dataclass
class GetParam:
    """Parameter values by dotted name, in output order, and the lines that were not read.

    A dump may hold a parameter twice (a collector that read brw_stats twice, two nodes'
    dumps concatenated); the later value is kept and the name listed in `repeated`."""

    values: dict[str, str] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)


def parse_getparam(text: str) -> GetParam:
    out = GetParam()
    name: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if name is None:
            return
        if len(lines) > 1 and lines[0] == "":
            del lines[0]  # "name=" then the value on the following lines
        while len(lines) > 1 and not lines[-1].strip():
            lines.pop()
        value = "\n".join(lines)
        if out.values.get(name, value) != value:
            out.repeated.append(name)
        out.values[name] = value

    for i, line in enumerate(text.splitlines(), 1):
        m = _NAME_LINE.match(line)
        if m:
            if m.group(1) == name:  # -H: the next line of the same value
                lines.append(m.group(2))
                continue
            flush()
            name, lines = m.group(1), [m.group(2)]
        elif name is not None:
            lines.append(line)
        elif line.strip():
            out.skipped.append(Skipped(i, line, "text before any parameter name"))
    flush()
    return out


def format_getparam(values: Mapping[str, str], header: bool = False) -> str:
    """What `lctl get_param` prints for these values (`header=True`: the -H style)."""
    out: list[str] = []
    for name, value in values.items():
        lines = value.split("\n")
        if header:
            out.extend(f"{name}={line}" for line in lines)
        elif len(lines) > 1:
            out.append(f"{name}=")
            out.extend(lines)
        else:
            out.append(f"{name}={value}")
    return "".join(line + "\n" for line in out)


def parse_raw(text: str) -> str:
    """`lctl get_param -n NAME` output: the value itself, without the final newline."""
    return text.rstrip("\n")


def parse_raw_values(text: str, names: list[str]) -> dict[str, str]:
    """`lctl get_param -n A B ...` of one-line values: the i-th line is the i-th name's value."""
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    if len(lines) != len(names):
        raise LustreFormatError(
            f"get_param -n output has {len(lines)} line(s) for {len(names)} parameter(s); "
            "raw output can only be split when every value is one line")
    return dict(zip(names, lines))


def split_param_name(name: str) -> list[str]:
    """Components of a dotted parameter name, keeping an IPv4 NID (a.b.c.d@net) whole."""
    out: list[str] = []
    for part in name.split("."):
        head = part.split("@", 1)[0]
        if ("@" in part and head.isdigit() and len(out) >= 3
                and out[-1].isdigit() and out[-2].isdigit() and _OCTET_TAIL.match(out[-3])):
            part = ".".join(out[-3:] + [part])
            del out[-3:]
        out.append(part)
    return out


def param_matches(pattern: str, name: str) -> bool:
    """True when `name` matches the lctl glob `pattern` component by component."""
    pc, nc = split_param_name(pattern), split_param_name(name)
    return len(pc) == len(nc) and all(fnmatchcase(n, p) for p, n in zip(pc, nc))
