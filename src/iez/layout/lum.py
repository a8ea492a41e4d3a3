"""The `lov_user_md` codec: a file layout as the bytes a Lustre client takes and gives back.

`encode` builds what `llapi_layout_to_lum()` builds for a create (V1, V3, SPECIFIC, COMP_V1);
`decode` also reads what a real client returns from `lustre.lov` or LL_IOC_LOV_GETSTRIPE
(objects present, lmm_layout_gen in the offset slot, INIT components, 2.16 fields). Structs and
values: docs/references.md#l-abi-lum-magics, #l-abi-limits, #l-abi-structs; what is encoded how:
docs/layout-codec.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from iez.errors import LayoutError
from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout

LOV_USER_MAGIC_V1 = 0x0BD10BD0
LOV_USER_MAGIC_V3 = 0x0BD30BD0
LOV_USER_MAGIC_SPECIFIC = 0x0BD50BD0  # V3 + explicit OST list (2.7+)
LOV_USER_MAGIC_COMP_V1 = 0x0BD60BD0  # composite header (2.10+)
LOV_USER_MAGIC_SEL = 0x0BD80BD0  # composite header of a self-extending layout, as stored

LOV_OFFSET_DEFAULT = 0xFFFF  # stripe_offset -1: any OST
LOV_ALL_STRIPES = 0xFFFF  # stripe_count -1: every OST
LOV_ALL_STRIPES_WIDE = 0xFFE0  # 0xFFE0..0xFFFE: -32..-2, N-times overstriped across every OST
LCME_FL_INIT = 0x10  # component instantiated: its blob carries objects
DUMMY_OST = 0xFFFFFFFF  # l_ost_idx of a slot with no object yet (lod_gen_component_ea, 2.16)
# LOV_PATTERN_RAID0, RAID1, MDT, OVERSTRIPING, FOREIGN, COMPRESS, F_HOLE, F_RELEASED
# (docs/references.md#l-abi-lum-magics)
KNOWN_PATTERN_BITS = 0x1 | 0x2 | 0x100 | 0x200 | 0x400 | 0x800 | 0x40000000 | 0x80000000

# Every format starts with '<'. The user, ioctl and lustre.lov buffers are host-endian
# (docs/references.md#l-abi-structs) and the hosts Lustre clients run on (x86_64, aarch64,
# ppc64le) are little-endian;
# '<' also drops C alignment padding, so each layout matches its packed struct byte for byte.
_LMM = struct.Struct("<IIQQIHH")  # lov_user_md_v1: magic, pattern, lmm_oi, size, count, offset/gen
_POOL = struct.Struct("<16s")  # lov_user_md_v3.lmm_pool_name, at offset 32
_OBJ = struct.Struct("<QQII")  # lov_user_ost_data_v1: l_ost_oi (oi_id, oi_seq), l_ost_gen, l_ost_idx
_LCM = struct.Struct("<IIIHHHB5sQ")  # lov_comp_md_v1 (2.16: lcm_ec_count at 18)
_LCME = struct.Struct("<IIQQIIIQ4s")  # lov_comp_md_entry_v1 (2.16: EC/compression bytes at 44)
assert (_LMM.size, _OBJ.size, _LCM.size, _LCME.size) == (32, 24, 32, 48)

_NAMES = {
    LOV_USER_MAGIC_V1: "V1",
    LOV_USER_MAGIC_V3: "V3",
    LOV_USER_MAGIC_SPECIFIC: "SPECIFIC",
    LOV_USER_MAGIC_COMP_V1: "COMP_V1",
    LOV_USER_MAGIC_SEL: "SEL",
}
_UNSUPPORTED = {
    0x0BD20BD0: "an obsolete JOIN layout (LOV_USER_MAGIC_JOIN_V1)",
    0x0BD40BD0: "a server-internal MIGRATE layout (LOV_MAGIC_MIGRATE)",
    0x0BD70BD0: "a foreign layout (LOV_USER_MAGIC_FOREIGN), which iez does not handle",
    0x0CD20CD0: "directory striping (LMV_MAGIC_V0), not a file layout",
    0x0CD30CD0: "directory striping (LMV_USER_MAGIC), not a file layout",
    0x0CD40CD0: "directory striping (LMV_USER_MAGIC_SPECIFIC), not a file layout",
}


def lov_user_md_size(stripe_count: int, magic: int) -> int:
    """Bytes of one lov_user_md with `stripe_count` objects, as the C macro of that name."""
    return (32 if magic == LOV_USER_MAGIC_V1 else 48) + 24 * stripe_count


@dataclass(frozen=True)
class LumObject:
    """One lov_user_ost_data_v1: the OST of a stripe and, read back, its object's id."""

    ost_idx: int
    ost_gen: int = 0
    oi_id: int = 0
    oi_seq: int = 0


@dataclass(frozen=True)
class Lmm:
    """One V1 / V3 / SPECIFIC lov_user_md, field by field as stored."""

    magic: int
    pattern: int
    oi_id: int
    oi_seq: int
    stripe_size: int
    stripe_count: int  # raw u16
    offset_or_gen: int  # raw u16: lmm_stripe_offset in a request, lmm_layout_gen read back
    pool: str
    objects: tuple[LumObject, ...]


@dataclass(frozen=True)
class Lcme:
    """One lov_comp_md_entry_v1 and the lov_user_md blob it points to."""

    id: int
    flags: int
    start: int
    end: int
    offset: int
    size: int
    layout_gen: int
    timestamp: int
    tail: bytes  # 2.16: dstripe, cstripe, compr_type, compr_lvl|chunk_log_bits; else padding
    lmm: Lmm


@dataclass(frozen=True)
class Lcm:
    """A lov_comp_md_v1: the composite header and its entries."""

    magic: int
    size: int
    layout_gen: int
    flags: int
    mirror_count: int
    ec_count: int
    entries: tuple[Lcme, ...]


# --- encoding ------------------------------------------------------------------------------


def _lmm_magic(lay: Layout) -> int:
    """llapi_layout_to_lum(): SPECIFIC with an OST list, V3 with a pool, else V1."""
    if lay.osts:
        return LOV_USER_MAGIC_SPECIFIC
    return LOV_USER_MAGIC_V3 if lay.pool else LOV_USER_MAGIC_V1


def _lmm_size(lay: Layout) -> int:
    return lov_user_md_size(len(lay.osts), _lmm_magic(lay))


def lum_size(layout: Layout | FileLayout) -> int:
    """Bytes `encode(layout)` returns: the size to pass with the buffer to the ioctl or xattr."""
    fl = FileLayout.of(layout)
    if fl.plain is not None:
        return _lmm_size(fl.plain)
    return _LCM.size + sum(_LCME.size + _lmm_size(c.layout) for c in fl.components)


def _check_u32(value: int, what: str) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise LayoutError(f"{what} {value} does not fit in 32 bits")


def _check_pattern(pattern: int) -> None:
    _check_u32(pattern, "lmm_pattern")
    if pattern & ~KNOWN_PATTERN_BITS:
        raise LayoutError(f"unknown lmm_pattern 0x{pattern:X}")


def _check_pool(name: bytes) -> None:
    # Pool names are short identifiers; anything else would break plan files and `lfs` output.
    if not all(0x21 <= b <= 0x7E for b in name):
        raise LayoutError(f"pool name {name!r} holds bytes other than printable ASCII")


def _pack_lmm(buf: bytearray, at: int, lay: Layout) -> None:
    magic = _lmm_magic(lay)
    _check_pattern(lay.pattern)
    count = LOV_ALL_STRIPES if lay.stripe_count == -1 else lay.stripe_count
    offset = LOV_OFFSET_DEFAULT if lay.stripe_offset == -1 else lay.stripe_offset
    _LMM.pack_into(buf, at, magic, lay.pattern, 0, 0, lay.stripe_size, count, offset)
    if magic == LOV_USER_MAGIC_V1:
        return
    pool = lay.pool.encode()
    _check_pool(pool)
    _POOL.pack_into(buf, at + _LMM.size, pool)  # '16s' NUL-pads, as strncpy into the zeroed struct
    for i, ost in enumerate(lay.osts):
        _OBJ.pack_into(buf, at + 48 + _OBJ.size * i, 0, 0, 0, ost)


def encode(layout: Layout | FileLayout) -> bytes:
    """The lov_user_md a create asks for: V1, V3, SPECIFIC, or COMP_V1 when composite."""
    fl = FileLayout.of(layout)
    count = len(fl.components)
    if count > 0xFFFF:
        raise LayoutError(f"{count} components do not fit lcm_entry_count (at most 65535)")
    buf = bytearray(lum_size(fl))
    if fl.plain is not None:
        _pack_lmm(buf, 0, fl.plain)
        return bytes(buf)
    _LCM.pack_into(buf, 0, LOV_USER_MAGIC_COMP_V1, len(buf), 0, 0, count, 0, 0, b"", 0)
    at = _LCM.size + _LCME.size * count  # lcme_offset counts from the header's start (references: l-abi-structs)
    for i, comp in enumerate(fl.components):
        _check_u32(comp.id, "lcme_id")
        _check_u32(comp.flags, "lcme_flags")
        size = _lmm_size(comp.layout)
        _LCME.pack_into(buf, _LCM.size + _LCME.size * i, comp.id, comp.flags, comp.start, comp.end,
                        at, size, 0, 0, b"")
        _pack_lmm(buf, at, comp.layout)
        at += size
    return bytes(buf)


# --- parsing -------------------------------------------------------------------------------


def _where(i: int, count: int) -> str:
    return f"component {i + 1} of {count}: "


def _bad_magic(magic: int) -> str:
    if magic in _UNSUPPORTED:
        return f"the buffer holds {_UNSUPPORTED[magic]}"
    swapped = int.from_bytes(magic.to_bytes(4, "little"), "big")
    if swapped in _NAMES:
        return f"byte-swapped {_NAMES[swapped]} magic 0x{magic:08X}: the buffer is big-endian"
    return f"bad lov_user_md magic 0x{magic:08X} (expected V1 0x0BD10BD0, V3, SPECIFIC or COMP_V1)"


def _parse_pool(raw: bytes) -> str:
    name, nul, _ = raw.partition(b"\0")
    if not nul:
        raise LayoutError("lmm_pool_name is not NUL-terminated")
    _check_pool(name)
    return name.decode("ascii")


def _parse_lmm(buf: bytes) -> Lmm:
    n = len(buf)
    if n < 4:
        raise LayoutError(f"lov_user_md of {n} bytes is shorter than its magic")
    magic = int.from_bytes(buf[:4], "little")
    if magic in (LOV_USER_MAGIC_COMP_V1, LOV_USER_MAGIC_SEL):
        raise LayoutError("nested composite layout inside a component")
    if magic not in _NAMES:
        raise LayoutError(_bad_magic(magic))
    name = _NAMES[magic]
    head = lov_user_md_size(0, magic)
    if n < head:
        raise LayoutError(f"truncated {name} lov_user_md: {n} bytes, its header alone is {head}")
    _, pattern, oi_id, oi_seq, size, count, slot = _LMM.unpack_from(buf)
    pool = "" if magic == LOV_USER_MAGIC_V1 else _parse_pool(buf[32:48])
    rest = n - head
    if rest % _OBJ.size:
        raise LayoutError(f"{rest} bytes after the {name} header are not whole 24-byte objects")
    found = rest // _OBJ.size
    if magic == LOV_USER_MAGIC_SPECIFIC and count == 0:
        raise LayoutError("SPECIFIC layout lists no OSTs (lmm_stripe_count 0)")
    if (found or magic == LOV_USER_MAGIC_SPECIFIC) and found != count:
        raise LayoutError(f"{name} lov_user_md holds {found} objects ({n} bytes) "
                          f"but lmm_stripe_count is {count}")
    objects = tuple(LumObject(idx, gen, oid, seq) for oid, seq, gen, idx in _OBJ.iter_unpack(buf[head:]))
    return Lmm(magic, pattern, oi_id, oi_seq, size, count, slot, pool, objects)


def _parse_lcm(buf: bytes) -> Lcm:
    n = len(buf)
    if n < _LCM.size:
        raise LayoutError(f"truncated composite layout: {n} bytes, its header alone is {_LCM.size}")
    magic, size, gen, flags, count, mirrors, ec_count, _, _ = _LCM.unpack_from(buf)
    if size > n:
        raise LayoutError(f"lcm_size {size} is larger than the buffer ({n} bytes): truncated layout")
    if size < n:
        raise LayoutError(f"{n - size} bytes follow the composite layout's lcm_size {size}")
    if count == 0:
        raise LayoutError("composite layout without components (lcm_entry_count 0)")
    table = _LCM.size + _LCME.size * count
    if table > size:
        raise LayoutError(f"lcm_entry_count {count} needs {table} bytes of entries, lcm_size is {size}")
    entries = []
    for i in range(count):
        cid, cflags, start, end, off, bsize, cgen, stamp, tail = _LCME.unpack_from(buf, _LCM.size + _LCME.size * i)
        where = _where(i, count)
        if bsize == 0:
            raise LayoutError(f"{where}empty blob (lcme_size 0)")
        if off < table:
            raise LayoutError(f"{where}lcme_offset {off} points into the header or entries (they end at {table})")
        if off + bsize > size:
            raise LayoutError(f"{where}blob [{off}, {off + bsize}) lies outside lcm_size {size}")
        try:
            lmm = _parse_lmm(buf[off:off + bsize])
        except LayoutError as e:
            raise LayoutError(f"{where}{e}") from None
        entries.append(Lcme(cid, cflags, start, end, off, bsize, cgen, stamp, tail, lmm))
    ordered = sorted(range(count), key=lambda i: entries[i].offset)
    for a, b in zip(ordered, ordered[1:]):
        if entries[b].offset < entries[a].offset + entries[a].size:
            raise LayoutError(f"the blobs of components {a + 1} and {b + 1} overlap")
    return Lcm(magic, size, gen, flags, mirrors, ec_count, tuple(entries))


def parse(buf: bytes | bytearray | memoryview) -> Lmm | Lcm:
    """The structure of a lov_user_md buffer, every field as stored; LayoutError if malformed."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise LayoutError(f"a lov_user_md is bytes, not {type(buf).__name__}")
    data = bytes(buf)
    if data[:4] in (LOV_USER_MAGIC_COMP_V1.to_bytes(4, "little"), LOV_USER_MAGIC_SEL.to_bytes(4, "little")):
        return _parse_lcm(data)
    return _parse_lmm(data)


# --- decoding ------------------------------------------------------------------------------


def _osts(lmm: Lmm) -> tuple[int, ...]:
    """l_ost_idx of each object; none when every slot is a dummy (an uninstantiated template)."""
    osts = tuple(o.ost_idx for o in lmm.objects)
    return () if all(i == DUMMY_OST for i in osts) else osts


def _slot_is_gen(lmm: Lmm, instantiated: bool) -> bool:
    """Whether the offset slot holds lmm_layout_gen: in a blob read back from an instantiated
    file (objects present, not SPECIFIC, INIT when a component). Otherwise it is the stripe
    offset, also for uninstantiated components (lod_gen_component_ea, 2.16)."""
    return bool(_osts(lmm)) and instantiated and lmm.magic != LOV_USER_MAGIC_SPECIFIC


def _layout(lmm: Lmm, instantiated: bool) -> Layout:
    """The layout of one blob; read back, the objects' l_ost_idx are its OST list."""
    _check_pattern(lmm.pattern)
    count = lmm.stripe_count
    if count == LOV_ALL_STRIPES:
        count = -1
    elif count >= LOV_ALL_STRIPES_WIDE:
        raise LayoutError(f"stripe count 0x{count:04X} ({0x10000 - count}x overstriping over every OST) "
                          "is not supported")
    slot = lmm.offset_or_gen
    offset = -1 if _slot_is_gen(lmm, instantiated) or slot == LOV_OFFSET_DEFAULT else slot
    return Layout(stripe_size=lmm.stripe_size, stripe_count=count, stripe_offset=offset,
                  pool=lmm.pool, osts=_osts(lmm), pattern=lmm.pattern)


def decode(buf: bytes | bytearray | memoryview) -> FileLayout:
    """The layout in a lov_user_md buffer (create request or read back); LayoutError if bad."""
    md = parse(buf)
    if isinstance(md, Lmm):
        return FileLayout(plain=_layout(md, instantiated=True))
    if md.mirror_count:
        raise LayoutError(f"mirrored (FLR) layout with {md.mirror_count + 1} mirrors is not supported")
    if md.ec_count:
        raise LayoutError("erasure-coded layout (lcm_ec_count set) is not supported")
    comps = []
    for i, e in enumerate(md.entries):
        try:
            comps.append(Component(e.start, e.end, _layout(e.lmm, bool(e.flags & LCME_FL_INIT)), e.id, e.flags))
        except LayoutError as err:
            raise LayoutError(f"{_where(i, len(md.entries))}{err}") from None
    return FileLayout(components=tuple(comps))


# --- debugging -----------------------------------------------------------------------------


def _s16(v: int) -> int:
    """A u16 as `lfs` shows it: 0xFFFF (any OST, all OSTs) as -1."""
    return v - 0x10000 if v >= 0x8000 else v


def _describe_lmm(lmm: Lmm, instantiated: bool, indent: str) -> list[str]:
    slot = "lmm_layout_gen" if _slot_is_gen(lmm, instantiated) else "lmm_stripe_offset"
    lines = [
        f"lmm_magic:         0x{lmm.magic:08X} ({_NAMES[lmm.magic]})",
        f"lmm_pattern:       0x{lmm.pattern:x}",
        f"lmm_oi:            {{oi_id: 0x{lmm.oi_id:x}, oi_seq: 0x{lmm.oi_seq:x}}}",
        f"lmm_stripe_size:   {lmm.stripe_size}",
        f"lmm_stripe_count:  {_s16(lmm.stripe_count)}",
        f"{slot + ':':<19}{_s16(lmm.offset_or_gen)}",
    ]
    if lmm.pool:
        lines.append(f"lmm_pool:          {lmm.pool}")
    if lmm.objects:
        lines.append("lmm_objects:")
        lines += [f"- {i}: {{l_ost_idx: {o.ost_idx}, l_ost_gen: {o.ost_gen}, "
                  f"l_ost_oi: {{oi_id: 0x{o.oi_id:x}, oi_seq: 0x{o.oi_seq:x}}}}}"
                  for i, o in enumerate(lmm.objects)]
    return [indent + line for line in lines]


def describe(buf: bytes | bytearray | memoryview) -> str:
    """Every field of a lov_user_md buffer, one per line, in the style of `lfs getstripe -v`."""
    md = parse(buf)
    if isinstance(md, Lmm):
        return "\n".join(_describe_lmm(md, True, ""))
    lines = [
        f"lcm_magic:        0x{md.magic:08X} ({_NAMES[md.magic]})",
        f"lcm_size:         {md.size}",
        f"lcm_layout_gen:   {md.layout_gen}",
        f"lcm_flags:        {md.flags}",
        f"lcm_entry_count:  {len(md.entries)}",
        f"lcm_mirror_count: {md.mirror_count}",
        f"lcm_ec_count:     {md.ec_count}",
        "components:",
    ]
    for e in md.entries:
        end = "EOF" if e.end == LUSTRE_EOF else str(e.end)
        lines += [
            f"- lcme_id:             {e.id}",
            f"  lcme_flags:          0x{e.flags:x}",
            f"  lcme_extent.e_start: {e.start}",
            f"  lcme_extent.e_end:   {end}",
            f"  lcme_offset:         {e.offset}",
            f"  lcme_size:           {e.size}",
            f"  lcme_layout_gen:     {e.layout_gen}",
            f"  lcme_timestamp:      {e.timestamp}",
            f"  lcme_2.16_bytes:     {e.tail.hex()}",
            "  sub_layout:",
        ]
        lines += _describe_lmm(e.lmm, bool(e.flags & LCME_FL_INIT), "    ")
    return "\n".join(lines)
