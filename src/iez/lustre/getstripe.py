"""`lfs getstripe` output, read and written, and `lfs osts` (liblustreapi.c,
docs/references.md#l-fmt-getstripe).

Plain file (2.11+ spacing; 2.10 prints the pattern in hex, "lmm_pattern:       1"; 2.5 pads
with one more space and has no names):
    <path>
    lmm_stripe_count:  3
    lmm_stripe_size:   1048576
    lmm_pattern:       raid0
    lmm_layout_gen:    0
    lmm_stripe_offset: 1
    lmm_pool:          <pool>                          only with a pool
    \\tobdidx\\t\\t objid\\t\\t objid\\t\\t group
    "\\t%6u\\t%14llu\\t%#13llx\\t" + "%14llu" (group <= 11) or "%#14llx"
Composite (PFL) file: lcm_* header lines, then per component "lcme_*" lines and the component's
lmm_* lines indented, objects as "      - %d: { l_ost_idx: %d, l_fid: [0x%llx:0x%x:0x%x] }".
A component without objects is not instantiated (its lmm_stripe_offset is the requested one).

Parsed layouts are `iez.layout` types; the objects of a part give its OST list (`Layout.osts`)
and `stripe_offset` is what lfs prints: the first object's OST for an instantiated part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from iez.errors import LayoutError
from iez.layout.layout import (
    LUSTRE_EOF,
    PATTERN_MDT,
    PATTERN_OVERSTRIPING,
    PATTERN_RAID0,
    Component,
    FileLayout,
    Layout,
)
from iez.lustre.parse import Skipped
from iez.lustre.targets import TargetObd, parse_target_obd

PATTERN_RELEASED = 0x8000_0000  # LOV_PATTERN_F_RELEASED (docs/references.md#l-abi-lum-magics)
_PATTERN_NAMES = {"raid0": PATTERN_RAID0, "mdt": PATTERN_MDT, "overstriped": PATTERN_OVERSTRIPING,
                  "released": PATTERN_RELEASED | PATTERN_RAID0}

# lcme_flags (lustre_user.h, lov_comp_md_entry_flags) in the order lfs prints them.
LCME_FL_INIT = 0x10
_COMP_FLAGS = (("init", 0x10), ("stale", 0x1), ("prefer", 0x6), ("prefrd", 0x2), ("prefwr", 0x4),
               ("offline", 0x8), ("nosync", 0x20), ("extension", 0x40), ("parity", 0x80),
               ("compress", 0x100), ("partial", 0x200), ("nocompr", 0x400))

FID_SEQ_IDIF = 0x1_0000_0000  # IDIF FIDs map "group 0" objects: [0x1<ost:16><oid hi:16>:oid:0]
FID_SEQ_IDIF_MAX = 0x1_FFFF_FFFF
FID_SEQ_RSVD = 11  # groups up to this print in decimal (fid_seq_is_rsvd / fid_seq_is_mdt0)

_KEY = re.compile(r"^(\s*)(?:-\s+)?(lmm_\w+|lcm_\w+|lcme_[\w.]+):\s*(.*?)\s*$")
_OBJ_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+|0)\s+(0x[0-9a-fA-F]+|\d+)(\s+\*)?\s*$")
_HEX = r"(0x[0-9a-fA-F]+)"
_OBJ_FID = re.compile(rf"^\s*-\s*(\d+):\s*\{{\s*l_ost_idx:\s*(\d+),\s*l_fid:\s*\[{_HEX}:{_HEX}:{_HEX}\]\s*\}}\s*$")
_OBJ_HEAD = re.compile(r"^\s*obdidx\s+objid\s+objid\s+group\s*$")
_DIR_DEFAULT = re.compile(r"^\s*stripe_count:\s+(-?\d+)\s+stripe_size:\s+(\d+)\s+(?:pattern:\s+(\S+)\s+)?"
                          r"stripe_offset:\s+(-?\d+)(?:\s+pool:\s+(\S+))?\s*$")
_NO_STRIPE = re.compile(r"^(.*) has no stripe info\s*$")
_IGNORED = ("composite_header:", "components:", "sub_layout:", "lmm_objects:")


@dataclass(frozen=True)
class StripeObject:
    """One OST object of a stripe: the `lfs getstripe` objid and group (the FID sequence)."""

    ost_idx: int
    objid: int = 0
    seq: int = 0

    def fid(self) -> tuple[int, int, int]:
        """The object's FID as lfs prints it (ostid_to_fid): group 0 maps into IDIF."""
        if self.seq == 0:
            return (FID_SEQ_IDIF | (self.ost_idx << 16) | ((self.objid >> 32) & 0xFFFF),
                    self.objid & 0xFFFF_FFFF, self.objid >> 48)
        return self.seq, self.objid, 0

    @classmethod
    def from_fid(cls, ost_idx: int, seq: int, oid: int, ver: int) -> "StripeObject":
        if FID_SEQ_IDIF <= seq <= FID_SEQ_IDIF_MAX:
            return cls(ost_idx, ((seq & 0xFFFF) << 32) | oid | (ver << 48), 0)
        return cls(ost_idx, oid, seq)


@dataclass(frozen=True)
class FileStripe:
    """One file (or directory default) from `lfs getstripe`."""

    path: str
    layout: FileLayout | None  # None: "has no stripe info"
    objects: tuple[tuple[StripeObject, ...], ...] = ()  # per layout part; () if not instantiated
    layout_gen: int = 0
    mirror_count: int = 1
    is_default: bool = False  # a directory's default layout, printed on one line


@dataclass
class GetStripeReport:
    files: list[FileStripe] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def parse_pattern(text: str) -> int:
    """"raid0", "raid0,overstriped", "mdt", "released", or hex as 2.5/2.10 print it."""
    if all(p in _PATTERN_NAMES for p in text.split(",")):
        out = 0
        for p in text.split(","):
            out |= _PATTERN_NAMES[p]
        return out
    return int(text, 16)


def pattern_name(pattern: int) -> str:
    """layout2name(): names for the supported patterns, "%x" hex otherwise."""
    if pattern & PATTERN_RELEASED:
        return "released"
    names = {PATTERN_RAID0: "raid0", PATTERN_MDT: "mdt", PATTERN_RAID0 | PATTERN_OVERSTRIPING: "raid0,overstriped"}
    return names.get(pattern, f"{pattern:x}")


def parse_comp_flags(text: str) -> int:
    names = dict(_COMP_FLAGS)
    out = 0
    for word in text.split(","):
        out |= names[word] if word in names else int(word, 0)
    return out


def comp_flags_name(flags: int) -> str:
    """lcme_flags2str(): "0", or names joined by ",", leftovers as "%#x"."""
    if not flags:
        return "0"
    words = []
    for name, bit in _COMP_FLAGS:
        if flags & bit == bit:
            words.append(name)
            flags &= ~bit
    if flags:
        words.append(hex(flags))
    return ",".join(words)


class _Part:
    """The fields of one plain layout or one component while it is being read."""

    def __init__(self) -> None:
        self.f: dict[str, str] = {}
        self.objects: list[StripeObject] = []

    def layout(self) -> Layout:
        f = self.f
        pattern = parse_pattern(f.get("lmm_pattern", "raid0"))
        count = int(f.get("lmm_stripe_count", "0"))
        osts = tuple(o.ost_idx for o in self.objects)
        return Layout(stripe_size=int(f.get("lmm_stripe_size", "0")), stripe_count=count,
                      stripe_offset=int(f.get("lmm_stripe_offset", "-1")), pool=f.get("lmm_pool", ""),
                      osts=osts, pattern=pattern)


class _File:
    def __init__(self, path: str, lineno: int) -> None:
        self.path, self.lineno = path, lineno
        self.head: dict[str, str] = {}
        self.parts: list[_Part] = []
        self.comps: list[dict[str, str]] = []

    def part(self) -> _Part:
        if not self.parts:
            self.parts.append(_Part())
        return self.parts[-1]

    def build(self) -> FileStripe:
        if not self.parts:
            raise ValueError("a path without layout lines")
        objects = tuple(tuple(p.objects) for p in self.parts)
        if not any(objects):
            objects = ()
        if not self.comps:
            gen = int(self.parts[0].f.get("lmm_layout_gen", "0"))
            return FileStripe(self.path, FileLayout(plain=self.parts[0].layout()), objects, gen)
        if len(self.comps) != len(self.parts):
            raise ValueError("layout lines outside a component")
        comps = []
        for c, p in zip(self.comps, self.parts):
            end = c.get("lcme_extent.e_end", "EOF")
            comps.append(Component(int(c.get("lcme_extent.e_start", "0")),
                                   LUSTRE_EOF if end == "EOF" else int(end), p.layout(),
                                   id=int(c.get("lcme_id", "0")), flags=parse_comp_flags(c.get("lcme_flags", "0"))))
        return FileStripe(self.path, FileLayout(components=tuple(comps)), objects,
                          int(self.head.get("lcm_layout_gen", "0")), int(self.head.get("lcm_mirror_count", "1")))


def parse_getstripe(text: str) -> GetStripeReport:
    """Read `lfs getstripe` output for any number of files (plain, composite, -v, dir defaults)."""
    report = GetStripeReport()
    cur: _File | None = None

    def close() -> None:
        nonlocal cur
        if cur is not None:
            try:
                report.files.append(cur.build())
            except (ValueError, LayoutError) as e:
                report.skipped.append(Skipped(cur.lineno, cur.path, f"unusable layout: {e}"))
        cur = None

    for i, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped in _IGNORED or _OBJ_HEAD.match(line):
            continue
        m = _KEY.match(line)
        if m:
            if cur is None:  # field lines without a path line before them
                cur = _File("", i)
            key, value = m.group(2), m.group(3)
            if key == "lcme_id":
                cur.comps.append({})
                cur.parts.append(_Part())
            if key.startswith("lcme_") and cur.comps:
                cur.comps[-1][key] = value
            elif key.startswith("lcm_"):
                cur.head[key] = value
            elif key.startswith("lmm_"):
                cur.part().f[key] = value
            continue
        m = _OBJ_ROW.match(line) or _OBJ_FID.match(line)
        if m:
            obj = _object(m) if cur is not None else None
            if cur is None or obj is None:
                report.skipped.append(Skipped(i, line, "object row without a file, or with disagreeing objids"))
            else:
                cur.part().objects.append(obj)
            continue
        m = _DIR_DEFAULT.match(line)
        if m:
            if cur is not None and cur.parts:
                close()
            path = cur.path if cur is not None else ""
            cur = None
            count, size, pattern, offset, pool = m.groups()
            try:
                lay = Layout(int(size), int(count), int(offset), pool or "",
                             pattern=parse_pattern(pattern or "raid0"))
                report.files.append(FileStripe(path, FileLayout(plain=lay), is_default=True))
            except (ValueError, LayoutError) as e:
                report.skipped.append(Skipped(i, line, f"unusable layout: {e}"))
            continue
        m = _NO_STRIPE.match(line)
        if m:
            close()
            report.files.append(FileStripe(m.group(1), None))
            continue
        if line[0].isspace():
            report.skipped.append(Skipped(i, line, "not an lfs getstripe line"))
            continue
        close()
        cur = _File(line, i)
    close()
    return report


def _object(m: re.Match) -> StripeObject | None:
    if m.re is _OBJ_FID:
        idx, seq, oid, ver = int(m.group(2)), int(m.group(3), 16), int(m.group(4), 16), int(m.group(5), 16)
        return StripeObject.from_fid(idx, seq, oid, ver)
    idx, objid, objhex, group = m.group(1), int(m.group(2)), int(m.group(3), 16), m.group(4)
    if objid != objhex:
        return None
    return StripeObject(int(idx), objid, int(group, 16) if group.startswith("0x") else int(group))


# -- the formatter ------------------------------------------------------------------------------


def _c_hex(v: int, width: int) -> str:
    """C's "%#*llx": no 0x prefix for zero."""
    return f"{hex(v) if v else '0':>{width}}"


def _header(lay: Layout, objs: list[StripeObject], gen: int, indent: str) -> list[str]:
    # lfs prints the first object's OST; 0 for DoM; the requested offset when not instantiated
    offset = objs[0].ost_idx if objs else (0 if lay.pattern == PATTERN_MDT else lay.stripe_offset)
    out = [f"{indent}lmm_stripe_count:  {lay.stripe_count}",
           f"{indent}lmm_stripe_size:   {lay.stripe_size}",
           f"{indent}lmm_pattern:       {pattern_name(lay.pattern)}",
           f"{indent}lmm_layout_gen:    {gen}",
           f"{indent}lmm_stripe_offset: {offset}"]
    if lay.pool:
        out.append(f"{indent}lmm_pool:          {lay.pool}")
    return out


def _objects_for(lay: Layout, given: Sequence[StripeObject] | None) -> list[StripeObject]:
    objs = list(given) if given is not None else [StripeObject(i) for i in lay.osts]
    if [o.ost_idx for o in objs] != list(lay.osts):
        raise LayoutError(f"objects on OSTs {[o.ost_idx for o in objs]} do not match the layout's {list(lay.osts)}")
    return objs


def format_getstripe(path: str, layout: Layout | FileLayout,
                     objects: Sequence[Sequence[StripeObject]] | None = None,
                     layout_gen: int = 0, mirror_count: int = 1) -> str:
    """What `lfs getstripe <path>` prints (2.11+ style) for this layout.

    `objects` gives each part's objects (default: objid 0 on each OST of the part). A component
    with OSTs is instantiated: its lcme_flags get "init" (a DoM component is "init" without
    OSTs when its flags say so)."""
    fl = FileLayout.of(layout)
    parts = fl.parts()
    given = list(objects) if objects is not None else [None] * len(parts)
    if len(given) != len(parts):
        raise LayoutError(f"{len(given)} object lists for {len(parts)} layout part(s)")
    out = [path]
    if fl.plain is not None:
        lay = fl.plain
        objs = _objects_for(lay, given[0])
        out += _header(lay, objs, layout_gen, "")
        if objs:
            out.append("\tobdidx\t\t objid\t\t objid\t\t group")
            for o in objs:
                group = f"{o.seq:14d}" if o.seq <= FID_SEQ_RSVD else _c_hex(o.seq, 14)
                out.append(f"\t{o.ost_idx:6d}\t{o.objid:14d}\t{_c_hex(o.objid, 13)}\t{group}")
        out.append("")
        return "".join(x + "\n" for x in out)
    out += [f"  lcm_layout_gen:    {layout_gen}", f"  lcm_mirror_count:  {mirror_count}",
            f"  lcm_entry_count:   {len(parts)}"]
    for comp, g in zip(parts, given):
        lay = comp.layout
        objs = _objects_for(lay, g)
        flags = comp.flags | LCME_FL_INIT if objs else comp.flags
        end = "EOF" if comp.end == LUSTRE_EOF else str(comp.end)
        out += [f"    lcme_id:             {comp.id}",
                f"    lcme_mirror_id:      {(comp.id & 0x7FFF0000) >> 16}",
                f"    lcme_flags:          {comp_flags_name(flags)}",
                f"    lcme_extent.e_start: {comp.start}",
                f"    lcme_extent.e_end:   {end}"]
        out += _header(lay, objs, 0, "      ")
        if objs:
            out.append("      lmm_objects:")
            for n, o in enumerate(objs):
                seq, oid, ver = o.fid()
                out.append(f"      - {n}: {{ l_ost_idx: {o.ost_idx}, l_fid: [{seq:#x}:{oid:#x}:{ver:#x}] }}")
        out.append("")
    return "".join(x + "\n" for x in out)


def format_dir_default(path: str, layout: Layout | FileLayout) -> str:
    """What `lfs getstripe -d DIR` prints for a directory's default layout: the one-line form
    for a plain layout (docs/references.md#l-fmt-getstripe), the component listing for a composite one."""
    fl = FileLayout.of(layout)
    if fl.plain is None:
        return format_getstripe(path, fl)
    lay = fl.plain
    line = (f"stripe_count:  {lay.stripe_count} stripe_size:   {lay.stripe_size} "
            f"pattern:       {pattern_name(lay.pattern)} stripe_offset: {lay.stripe_offset}")
    if lay.pool:
        line += f" pool:          {lay.pool}"
    return f"{path}\n{line}\n"


def parse_lfs_osts(text: str) -> tuple[list[TargetObd], list[Skipped]]:
    """`lfs osts` / `lfs mdts`: "OBDS:" (or "MDTS:") then target_obd lines, per file system."""
    body = "\n".join("" if ln.strip() in ("OBDS:", "MDTS:") else ln for ln in text.splitlines())
    return parse_target_obd(body)
