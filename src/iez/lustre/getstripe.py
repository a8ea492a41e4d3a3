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
from dataclasses import dataclass, field, replace
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
    fid: tuple[int, int, int] = (0, 0, 0)  # the file's (directory's) FID, for -v and -F


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
# A port of liblustreapi's lov_dump_user_lmm_header / lov_dump_user_lmm_v1v3 / lov_dump_comp_v1
# (docs/references.md#l-fmt-getstripe), Lustre 2.15's output: which fields print is a mask of
# `enum llapi_layout_verbose` bits, set by lfs getstripe's options as lfs.c sets them.

VERBOSE_COUNT, VERBOSE_SIZE, VERBOSE_OFFSET, VERBOSE_POOL = 0x1, 0x2, 0x4, 0x8
VERBOSE_DETAIL, VERBOSE_OBJID, VERBOSE_GENERATION, VERBOSE_MDTINDEX = 0x10, 0x20, 0x40, 0x80
VERBOSE_PATTERN, VERBOSE_COMP_COUNT, VERBOSE_COMP_FLAGS, VERBOSE_COMP_START = 0x100, 0x200, 0x400, 0x800
VERBOSE_COMP_END, VERBOSE_COMP_ID, VERBOSE_DFID, VERBOSE_MIRROR_COUNT = 0x1000, 0x2000, 0x4000, 0x10000
VERBOSE_MIRROR_ID = 0x20000
VERBOSE_DEFAULT = (VERBOSE_COUNT | VERBOSE_SIZE | VERBOSE_OFFSET | VERBOSE_POOL | VERBOSE_OBJID
                   | VERBOSE_GENERATION | VERBOSE_PATTERN | VERBOSE_COMP_COUNT | VERBOSE_COMP_FLAGS
                   | VERBOSE_COMP_START | VERBOSE_COMP_END | VERBOSE_COMP_ID | VERBOSE_MIRROR_COUNT
                   | VERBOSE_MIRROR_ID)
_COMP_OPTS = VERBOSE_COMP_COUNT | VERBOSE_COMP_ID | VERBOSE_COMP_START | VERBOSE_COMP_END | VERBOSE_COMP_FLAGS

LOV_USER_MAGIC_V1, LOV_USER_MAGIC_V3, LOV_USER_MAGIC_COMP_V1 = 0x0BD10BD0, 0x0BD30BD0, 0x0BD60BD0


@dataclass(frozen=True)
class Range:
    """A --component-start/--component-end filter: lfs find's "+N" (above), "-N" (below), "N"."""

    value: int
    sign: int = 0  # -1 for "+N", 1 for "-N", 0 for equal (find_value_cmp's sign)

    def matches(self, v: int) -> bool:
        return v > self.value if self.sign < 0 else v < self.value if self.sign > 0 else v == self.value


@dataclass(frozen=True)
class Show:
    """What `lfs getstripe` prints: the verbose mask, whether the path line prints (lfs's
    fp_max_depth != 0), --yaml, --raw, and the component filters (-I N, --component-flags=F,
    --component-start=N, --component-end=N)."""

    verbose: int = VERBOSE_DEFAULT
    depth: int = 1
    yaml: bool = False
    raw: bool = False
    comp_id: int | None = None
    comp_flags: tuple[int, int] | None = None  # (flags every shown component has, flags none has)
    comp_start: Range | None = None
    comp_end: Range | None = None

    def filters(self) -> bool:
        return any(x is not None for x in (self.comp_id, self.comp_flags, self.comp_start, self.comp_end))


def _c_hex(v: int, width: int) -> str:
    """C's "%#*llx": no 0x prefix for zero."""
    return f"{hex(v) if v else '0':>{width}}"


def _dfid(fid: tuple[int, int, int], yaml: bool) -> str:
    body = f"{fid[0]:#x}:{fid[1]:#x}:{fid[2]:#x}"
    return body if yaml else f"[{body}]"


def _lmm_magic(lay: Layout) -> int:
    return LOV_USER_MAGIC_V3 if lay.pool else LOV_USER_MAGIC_V1


def _blob_size(lay: Layout, objs: Sequence[StripeObject]) -> int:
    return (48 if lay.pool else 32) + 24 * len(objs)  # lov_user_md_size()


@dataclass
class _Dump:
    show: Show
    f: FileStripe
    default: Layout  # the file system's stripe count and size, for a directory that sets none
    faked: bool = False  # a directory without a default: lfs fakes one (seq FID_SEQ_LOV_DEFAULT)
    out: list[str] = field(default_factory=list)

    def p(self, *text: str) -> None:
        self.out.extend(text)

    def lmm(self, lay: Layout, objs: Sequence[StripeObject], gen: int, indent: bool, skip_objs: bool) -> None:
        """lov_dump_user_lmm_header + lov_dump_user_lmm_v1v3."""
        v, yaml, is_dir = self.show.verbose, self.show.yaml, self.f.is_default
        prefix, space, sep = ("" if is_dir else "lmm_"), ("      " if indent else ""), ""
        wide = " " if not yaml and is_dir else "\n"  # a directory's default prints on one line
        dom = bool(lay.pattern & PATTERN_MDT)
        if self.faked and not self.show.raw and not indent and v & VERBOSE_DETAIL:
            self.p("(Default) ")
        if not yaml and not indent and self.show.depth and (v != VERBOSE_OBJID or not is_dir):
            self.p(self.f.path, "\n")
        fid = self.f.fid
        if v & VERBOSE_DETAIL and not is_dir:
            # lmm_oi of a 2.x file: oi_id = the FID's oid | ver << 32, oi_seq = its sequence
            self.p(f"{space}{prefix}magic:         0x{_lmm_magic(lay):08X}\n",
                   f"{space}{prefix}seq:           {_c_hex(fid[0], 0)}\n",
                   f"{space}{prefix}object_id:     {_c_hex(fid[1] | fid[2] << 32, 0)}\n")
        if v & (VERBOSE_DETAIL | VERBOSE_DFID):
            if v & ~VERBOSE_DFID:
                self.p(f"{space}lmm_fid:           ")
            self.p(_dfid(fid, yaml), "\n")
        if v & VERBOSE_COUNT:
            if v & ~VERBOSE_COUNT:
                self.p(f"{space}{prefix}stripe_count:  ")
            count = lay.stripe_count
            if is_dir and not self.show.raw and count == 0 and not dom:
                count = self.default.stripe_count
            self.p(str(count))
            sep = wide
        if v & VERBOSE_SIZE:
            self.p(sep)
            if v & ~VERBOSE_SIZE:
                self.p(f"{space}{prefix}stripe_size:   ")
            size = lay.stripe_size
            if is_dir and not self.show.raw and size == 0:
                size = self.default.stripe_size
            self.p(str(size))
            sep = wide
        if v & VERBOSE_PATTERN:
            self.p(sep)
            if v & ~VERBOSE_PATTERN:
                self.p(f"{space}{prefix}pattern:       ")
            self.p(pattern_name(lay.pattern))
            sep = wide
        if v & VERBOSE_GENERATION and not is_dir:
            self.p(sep)
            if v & ~VERBOSE_GENERATION:
                self.p(f"{space}{prefix}layout_gen:    ")
            self.p(str(0 if skip_objs else gen))
            sep = "\n"
        if v & VERBOSE_OFFSET:
            self.p(sep)
            if v & ~VERBOSE_OFFSET:
                self.p(f"{space}{prefix}stripe_offset: ")
            # lfs prints the first object's OST; the stored offset for a template or DoM
            self.p(str(lay.stripe_offset if is_dir or skip_objs or dom or not objs else objs[0].ost_idx))
            sep = wide
        if v & VERBOSE_POOL and lay.pool:
            self.p(sep)
            if v & ~VERBOSE_POOL:
                self.p(f"{space}{prefix}pool:          ")
            self.p(lay.pool)
            sep = wide
        if sep:
            self.p("\n")
        released_or_dom = lay.pattern & PATTERN_RELEASED or dom
        if not skip_objs and v & VERBOSE_OBJID and ((not is_dir and not released_or_dom)
                                                     or (is_dir and lay.is_specific)):
            self.p("      lmm_objects:\n" if indent else "lmm_objects:\n" if yaml
                   else "\tobdidx\t\t objid\t\t objid\t\t group\n")
            for n, o in enumerate(objs):
                if yaml:
                    self.p(f"      - l_ost_idx: {o.ost_idx}\n", f"        l_fid:     {_dfid(o.fid(), True)}\n")
                elif indent:
                    self.p(f"      - {n}: {{ l_ost_idx: {o.ost_idx}, l_fid: {_dfid(o.fid(), False)} }}\n")
                elif is_dir:
                    self.p(f"\t{o.ost_idx:6d}\t{'N/A':>14}\t{'N/A':>13}\t{'N/A':>14}\n")
                else:
                    group = f"{o.seq:14d}" if o.seq <= FID_SEQ_RSVD else _c_hex(o.seq, 14)
                    self.p(f"\t{o.ost_idx:6d}\t{o.objid:14d}\t{_c_hex(o.objid, 13)}\t{group}\n")
        if not yaml:
            self.p("\n")

    def composite(self, comps: Sequence[Component], objects: Sequence[Sequence[StripeObject]], forged: bool) -> None:
        """lov_dump_comp_v1; `forged`: a plain layout shown as one component (lov_forge_comp_v1)."""
        s, v, yaml, is_dir = self.show, self.show.verbose, self.show.yaml, self.f.is_default
        if s.depth and (v != VERBOSE_OBJID or not is_dir) and not yaml:
            self.p(self.f.path, "\n")
        sizes = [_blob_size(c.layout, o if c.flags & LCME_FL_INIT else ()) for c, o in zip(comps, objects)]
        if v & VERBOSE_DETAIL:
            flags = ("mirrored" if self.f.mirror_count > 1 else "") if is_dir else "0"
            magic = _lmm_magic(comps[0].layout) if forged else LOV_USER_MAGIC_COMP_V1
            self.p("composite_header:\n", f"  lcm_magic:         0x{magic:08X}\n",
                   f"  lcm_size:          {32 + 48 * len(comps) + sum(sizes)}\n", f"  lcm_flags:         {flags}\n")
        ind = "" if yaml else "  "
        for bit, label, value in ((VERBOSE_GENERATION, "lcm_layout_gen:    ", self.f.layout_gen),
                                  (VERBOSE_MIRROR_COUNT, "lcm_mirror_count:  ", self.f.mirror_count),
                                  (VERBOSE_COMP_COUNT, "lcm_entry_count:   ", 0 if forged else len(comps))):
            if v & bit:
                self.p(f"{ind}{label}" if v & ~bit else "", f"{value}\n")
        if v & VERBOSE_DETAIL or yaml:
            self.p("components:\n")
        last_init = (v & VERBOSE_DEFAULT) != VERBOSE_DEFAULT and not s.filters()
        offset, shown = 32 + 48 * len(comps), False
        i = 0
        for i, c in enumerate(comps):
            offset += sizes[i]
            if s.comp_flags and ((c.flags & s.comp_flags[0]) != s.comp_flags[0] or c.flags & s.comp_flags[1]):
                continue
            if s.comp_id is not None and c.id != s.comp_id:
                continue
            if s.comp_start and not s.comp_start.matches(c.start):
                continue
            if s.comp_end and not s.comp_end.matches(c.end):
                continue
            if last_init:  # part of the layout asked for: only the last instantiated component
                if c.flags & LCME_FL_INIT:
                    continue
                break
            self.entry(c, offset - sizes[i], sizes[i])
            self.lmm(c.layout, objects[i], 0, True, not c.flags & LCME_FL_INIT)
            shown = True
        else:
            i = len(comps)
        if last_init and not shown:
            i = len(comps) - 1 if i == 0 else i - 1
            self.entry(comps[i], 0, sizes[i])
            self.lmm(comps[i].layout, objects[i], 0, True, False)

    def entry(self, c: Component, offset: int, size: int) -> None:
        """lov_dump_comp_v1_entry."""
        v, yaml, sep = self.show.verbose, self.show.yaml, ""
        template = self.f.is_default  # a directory's components are a template: no ids yet
        if v & VERBOSE_COMP_ID or yaml:
            if v & VERBOSE_DETAIL or yaml:
                self.p("  - lcme_id:             ")
            elif v & ~VERBOSE_COMP_ID:
                self.p("    lcme_id:             ")
            self.p("N/A" if template else str(c.id))
            sep = "\n"
        for bit, label, value in (
                (VERBOSE_MIRROR_ID, "lcme_mirror_id:      ", "N/A" if template else str((c.id & 0x7FFF0000) >> 16)),
                (VERBOSE_COMP_FLAGS, "lcme_flags:          ", comp_flags_name(c.flags)),
                (VERBOSE_COMP_START, "lcme_extent.e_start: ", str(c.start)),
                (VERBOSE_COMP_END, "lcme_extent.e_end:   ", "EOF" if c.end == LUSTRE_EOF else str(c.end))):
            if v & bit:
                self.p(sep, f"    {label}" if v & ~bit else "", value)
                sep = "\n"
        if yaml:
            self.p(sep, "    sub_layout:\n")
        elif v & VERBOSE_DETAIL:
            self.p(sep, f"    lcme_offset:         {offset}\n", f"    lcme_size:           {size}\n", "    sub_layout:\n")
        else:
            self.p(sep)


def _objects_for(lay: Layout, given: Sequence[StripeObject] | None) -> list[StripeObject]:
    objs = list(given) if given is not None else [StripeObject(i) for i in lay.osts]
    if [o.ost_idx for o in objs] != list(lay.osts):
        raise LayoutError(f"objects on OSTs {[o.ost_idx for o in objs]} do not match the layout's {list(lay.osts)}")
    return objs


def format_stripe(f: FileStripe, show: Show = Show(), default: Layout = Layout(1 << 20, 1)) -> str:
    """What `lfs getstripe` prints for one file or directory (`f.is_default`) with these options.

    A file without a layout prints "has no stripe info"; a directory without a default prints
    the all-default template lfs fakes (count 0, size 0, pattern 0, offset -1), shown with the
    file system's `default` count and size unless `show.raw`."""
    faked = f.layout is None
    if f.layout is None:
        if not f.is_default:
            return f"{f.path} has no stripe info\n"
        f = replace(f, layout=FileLayout(plain=Layout(0, 0, -1, pattern=0)))
    assert f.layout is not None
    parts = f.layout.parts()
    given = list(f.objects) if f.objects else [None] * len(parts)
    if len(given) != len(parts):
        raise LayoutError(f"{len(given)} object lists for {len(parts)} layout part(s)")
    objects = [_objects_for(c.layout, g) for c, g in zip(parts, given)]
    d = _Dump(show, f, default, faked)
    v = show.verbose
    comp_opts = show.filters() or ((v & ~VERBOSE_DETAIL) != VERBOSE_DEFAULT and bool(v & _COMP_OPTS))
    if f.layout.plain is not None and not comp_opts:
        d.lmm(f.layout.plain, objects[0], f.layout_gen, False, False)
    elif f.layout.plain is not None:
        forged = Component(0, LUSTRE_EOF, f.layout.plain, 0, 0 if f.is_default else LCME_FL_INIT)
        d.composite([forged], objects, True)
    else:
        d.composite(f.layout.components, objects, False)
    return "".join(d.out)


def format_getstripe(path: str, layout: Layout | FileLayout,
                     objects: Sequence[Sequence[StripeObject]] | None = None,
                     layout_gen: int = 0, mirror_count: int = 1) -> str:
    """What `lfs getstripe <path>` prints for a file with this layout. `objects` gives each
    part's objects (default: objid 0 on each OST of the part); a component's objects print
    only when its lcme_flags say it is instantiated (init), as in Lustre."""
    fl = FileLayout.of(layout)
    objs = tuple(tuple(o) for o in objects) if objects is not None else ()
    if objects is not None and len(objs) != len(fl.parts()):
        raise LayoutError(f"{len(objs)} object lists for {len(fl.parts())} layout part(s)")
    return format_stripe(FileStripe(path, fl, objs, layout_gen, mirror_count))


def format_dir_default(path: str, layout: Layout | FileLayout) -> str:
    """What `lfs getstripe DIR` prints for a directory's default layout: the one-line form for
    a plain layout (docs/references.md#l-fmt-getstripe), the component listing for a composite one."""
    return format_stripe(FileStripe(path, FileLayout.of(layout), is_default=True))


def parse_lfs_osts(text: str) -> tuple[list[TargetObd], list[Skipped]]:
    """`lfs osts` / `lfs mdts`: "OBDS:" (or "MDTS:") then target_obd lines, per file system."""
    body = "\n".join("" if ln.strip() in ("OBDS:", "MDTS:") else ln for ln in text.splitlines())
    return parse_target_obd(body)
