"""Per-target values: space and inodes, `target_obd` lists, OSP states, LOD/LOV tunables.

Inputs are `{dotted parameter name: value text}` maps as `ParamTree.get` or `parse_getparam`
return them, so one function serves a /proc or /sys tree, a get_param dump and real lctl.
  kbytestotal kbytesfree kbytesavail filestotal filesfree blocksize   one integer (§1)
  <index>: <uuid> [IN]ACTIVE                                          target_obd, `lfs osts` (§5)
  qos_prio_free 91% / 90   qos_threshold_rr 17%   qos_maxage "5 Sec" / 5   (2.10 text vs 2.16)
(Sections of docs/lustre/formats.md in parentheses: docs/references.md#l-fmt-kbytes, #l-fmt-getstripe.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from iez.lustre.parse import Skipped
from iez.lustre.getparam import split_param_name

SPACE_FIELDS = ("kbytestotal", "kbytesfree", "kbytesavail", "filestotal", "filesfree", "blocksize")
# obdfilter values subtract dirty and pending grants from kbytesavail (ofd_statfs); the OSD's
# are the raw backend. Prefer the OFD's view, as the MDS allocator sees through OSP.
_SOURCE_ORDER = ("obdfilter", "osd-ldiskfs", "osd-zfs", "osd-wbcfs", "osc", "osp", "mdc", "mdt")

_TARGET = re.compile(r"^(?P<fs>[\w-]+?)-(?P<kind>OST|MDT)(?P<idx>[0-9a-fA-F]{4})(?:_UUID|-.*)?$")
_TARGET_OBD = re.compile(r"^\s*(\d+):\s+(\S+)\s+(IN)?ACTIVE\s*$")
_NUMBER_UNIT = re.compile(r"^\s*(-?\d+)\s*(%|[Ss]ecs?)?\s*$")
U64_MAX = (1 << 64) - 1


def parse_target_name(name: str) -> tuple[str, str, int] | None:
    """`(fsname, "OST"|"MDT", index)` from a target, UUID or device name; the index is hex
    (`fs-OST000b` is OST 11). Device suffixes are ignored (`fs-OST0001-osc-MDT0000`)."""
    m = _TARGET.match(name)
    if not m:
        return None
    return m["fs"], m["kind"], int(m["idx"], 16)


@dataclass(frozen=True)
class TargetSpace:
    """Space and inodes of one target as one device reports them (KiB, inode counts)."""

    device: str  # "obdfilter.lustrefs-OST0000", "osd-zfs.lustrefs-OST0000", "osc.fs-OST0000-osc-..."
    kind: str  # "OST", "MDT", or the device name for others ("MGS")
    index: int | None
    kbytestotal: int | None = None
    kbytesfree: int | None = None
    kbytesavail: int | None = None
    filestotal: int | None = None
    filesfree: int | None = None
    blocksize: int | None = None

    @property
    def source(self) -> str:
        return self.device.split(".", 1)[0]


@dataclass
class TargetSpaceReport:
    devices: dict[str, TargetSpace] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)  # lineno 0: a parameter value

    def by_index(self, kind: str = "OST") -> dict[int, TargetSpace]:
        """One view per target index, the OFD's when present (see _SOURCE_ORDER)."""
        rank = {s: i for i, s in enumerate(_SOURCE_ORDER)}
        out: dict[int, TargetSpace] = {}
        for t in self.devices.values():
            if t.kind != kind or t.index is None:
                continue
            old = out.get(t.index)
            if old is None or rank.get(t.source, 99) < rank.get(old.source, 99):
                out[t.index] = t
        return dict(sorted(out.items()))


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def target_space(values: Mapping[str, str]) -> TargetSpaceReport:
    """Space fields of every device in `values` (other parameters are ignored)."""
    fields: dict[str, dict[str, int]] = {}
    report = TargetSpaceReport()
    for name, text in values.items():
        parts = split_param_name(name)
        if len(parts) != 3 or parts[2] not in SPACE_FIELDS:
            continue
        v = _int(text)
        if v is None:
            report.skipped.append(Skipped(0, f"{name}={text}", "not an integer"))
            continue
        fields.setdefault(f"{parts[0]}.{parts[1]}", {})[parts[2]] = v
    for device, f in fields.items():
        parsed = parse_target_name(device.split(".", 1)[1])
        kind, index = (parsed[1], parsed[2]) if parsed else (device.split(".", 1)[1], None)
        report.devices[device] = TargetSpace(device, kind, index, **f)
    return report


@dataclass(frozen=True)
class TargetObd:
    index: int
    uuid: str
    active: bool


def parse_target_obd(text: str) -> tuple[list[TargetObd], list[Skipped]]:
    """`lov.*.target_obd` / `lod.*.target_obd` lines: "%d: %s %sACTIVE"."""
    out, skipped = [], []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _TARGET_OBD.match(line)
        if m:
            out.append(TargetObd(int(m.group(1)), m.group(2), m.group(3) is None))
        else:
            skipped.append(Skipped(i, line, "not an '<index>: <uuid> ACTIVE|INACTIVE' line"))
    return out, skipped


def format_target_obd(targets: list[TargetObd]) -> str:
    return "".join(f"{t.index}: {t.uuid} {'' if t.active else 'IN'}ACTIVE\n" for t in targets)


def parse_server_uuid(text: str) -> tuple[str, str] | None:
    """`osc.*.ost_server_uuid`: "<uuid>\\t<import state>" (FULL, DISCONN, ...)."""
    parts = text.split()
    return (parts[0], parts[1]) if len(parts) == 2 else None


def osp_states(values: Mapping[str, str]) -> dict[int, str]:
    """OST states as an MDS sees them through OSP: `osp.<ost>-osc-<mdt>.active` 0 is
    "inactive", `max_create_count` 0 is "nocreate" (no new objects). Where several MDTs
    report one OST, the most restrictive state wins."""
    severity = {"active": 0, "nocreate": 1, "inactive": 2}
    out: dict[int, str] = {}
    for name, text in values.items():
        parts = split_param_name(name)
        if len(parts) != 3 or parts[0] != "osp" or parts[2] not in ("active", "max_create_count"):
            continue
        target = parse_target_name(parts[1])
        v = _int(text)
        if target is None or target[1] != "OST" or v is None:
            continue
        state = "active" if v else ("inactive" if parts[2] == "active" else "nocreate")
        if severity[state] >= severity[out.get(target[2], "active")]:
            out[target[2]] = state
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class StripingTunables:
    """`lod.<mdt>-mdtlov.*` (MDS) or `lov.<fs>-clilov-*.*` (client) values."""

    device: str
    qos_prio_free: int | None = None  # percent
    qos_threshold_rr: int | None = None  # percent
    qos_maxage: int | None = None  # seconds
    stripe_count: int | None = None
    stripe_size: int | None = None
    stripe_offset: int | None = None  # -1: any OST (printed as u64 -1 up to 2.10)
    stripe_pattern: int | None = None  # stripetype: 1 = RAID0
    numobd: int | None = None
    activeobd: int | None = None


_TUNABLE_FIELDS = {
    "qos_prio_free": "qos_prio_free", "qos_threshold_rr": "qos_threshold_rr", "qos_maxage": "qos_maxage",
    "stripecount": "stripe_count", "stripesize": "stripe_size", "stripeoffset": "stripe_offset",
    "stripetype": "stripe_pattern", "numobd": "numobd", "activeobd": "activeobd",
}


def parse_tunable(text: str) -> int | None:
    """A number as LOD prints it: "91%", "17", "5 Sec", or u64 -1 for "any"."""
    m = _NUMBER_UNIT.match(text)
    if not m:
        return None
    v = int(m.group(1))
    return -1 if v == U64_MAX else v


def striping_tunables(values: Mapping[str, str]) -> tuple[dict[str, StripingTunables], list[Skipped]]:
    fields: dict[str, dict[str, int]] = {}
    skipped: list[Skipped] = []
    for name, text in values.items():
        parts = split_param_name(name)
        if len(parts) != 3 or parts[0] not in ("lod", "lov") or parts[2] not in _TUNABLE_FIELDS:
            continue
        v = parse_tunable(text)
        if v is None:
            skipped.append(Skipped(0, f"{name}={text}", "not a number, percentage or seconds"))
            continue
        fields.setdefault(f"{parts[0]}.{parts[1]}", {})[_TUNABLE_FIELDS[parts[2]]] = v
    return {d: StripingTunables(d, **f) for d, f in fields.items()}, skipped
