"""The lov_user_md codec against the byte vectors of tests/vectors/lum/ (written field by field by
tests/vectors/make_lum_vectors.py, without iez), malformed buffers, round trips and a fuzz."""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import VECTORS
from iez.errors import LayoutError
from iez.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.layout import lum
from iez.plan import format_layout, parse_layout

MiB = 1 << 20
LUM_DIR = VECTORS / "lum"


def _load() -> dict[str, tuple[dict, bytes]]:
    out = {p.stem: (json.loads(p.read_text()), p.with_suffix(".bin").read_bytes())
           for p in sorted(LUM_DIR.glob("*.json"))}
    if len(out) < 18:
        raise RuntimeError(f"expected the lov_user_md vectors in {LUM_DIR}: run tests/vectors/make_lum_vectors.py")
    return out


VEC = _load()
ENCODABLE = [n for n, (meta, _) in VEC.items() if meta["encode"]]


def _layout(d: dict) -> Layout:
    return Layout(stripe_size=d["stripe_size"], stripe_count=d["stripe_count"], stripe_offset=d["stripe_offset"],
                  pool=d["pool"], osts=tuple(d["osts"]), pattern=d["pattern"])


def expected(meta: dict) -> FileLayout:
    lay = meta["layout"]
    if "components" not in lay:
        return FileLayout(plain=_layout(lay))
    return FileLayout(components=tuple(
        Component(c["start"], LUSTRE_EOF if c["end"] == "EOF" else c["end"], _layout(c["layout"]), c["id"], c["flags"])
        for c in lay["components"]))


def _as_spec(fl: FileLayout, like: FileLayout) -> FileLayout:
    """`fl` with the pattern, ids and flags of `like`: the fields a plan spec has no words for."""
    if fl.plain is not None:
        return FileLayout(plain=replace(fl.plain, pattern=like.plain.pattern))
    return FileLayout(components=tuple(
        replace(c, id=o.id, flags=o.flags, layout=replace(c.layout, pattern=o.layout.pattern))
        for c, o in zip(fl.components, like.components)))


# --- vectors --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VEC))
def test_vector_decodes_to_its_layout(name):
    meta, data = VEC[name]
    assert len(data) == meta["size"]
    assert data[:4] == int(meta["magic"], 16).to_bytes(4, "little")
    assert lum.decode(data) == expected(meta)


@pytest.mark.parametrize("name", ENCODABLE)
def test_vector_encodes_byte_exact(name):
    meta, data = VEC[name]
    assert lum.encode(expected(meta)) == data
    assert lum.lum_size(expected(meta)) == len(data)


@pytest.mark.parametrize("name", sorted(VEC))
def test_vector_spec_is_the_same_layout(name):
    meta, _ = VEC[name]
    want = expected(meta)
    assert format_layout(want) == meta["spec"]
    assert _as_spec(parse_layout(meta["spec"]), want) == want


def test_vectors_cover_every_create_form():
    magics = {VEC[n][0]["magic"] for n in ENCODABLE}
    assert magics == {"0x0BD10BD0", "0x0BD30BD0", "0x0BD50BD0", "0x0BD60BD0"}
    assert {len(VEC[n][0]["layout"].get("osts", [])) for n in ENCODABLE} >= {1, 4, 8, 160}


def test_abi_worked_example_offsets():
    _, data = VEC["comp_abi_example"]
    assert struct.unpack_from("<IIIHH", data) == (lum.LOV_USER_MAGIC_COMP_V1, 304, 0, 0, 2)
    assert struct.unpack_from("<II", data, 32 + 24) == (128, 32)
    assert struct.unpack_from("<II", data, 32 + 48 + 24) == (160, 144)
    text = lum.describe(data)
    assert "lcm_size:         304" in text and "lcme_offset:         160" in text
    assert "- 3: {l_ost_idx: 1," in text


def test_plain_plan_layout_encodes_as_plain_and_one_component_as_composite():
    plain = parse_layout("S=1048576,c=2")
    assert lum.encode(plain)[:4] == lum.LOV_USER_MAGIC_V1.to_bytes(4, "little")
    one = FileLayout(components=(Component(0, LUSTRE_EOF, plain.plain),))
    data = lum.encode(one)
    assert data[:4] == lum.LOV_USER_MAGIC_COMP_V1.to_bytes(4, "little") and len(data) == 32 + 48 + 32
    assert lum.decode(data) == one


def test_counts_and_offsets_minus_one_are_0xffff():
    data = lum.encode(Layout(stripe_count=-1, stripe_offset=-1))
    assert struct.unpack_from("<HH", data, 28) == (0xFFFF, 0xFFFF)


def test_read_back_layout_gen_is_not_an_offset():
    meta, data = VEC["read_v3_layout_gen"]
    assert struct.unpack_from("<H", data, 30) == (3,)
    got = lum.decode(data).plain
    assert got.stripe_offset == -1 and got.osts == (4, 5)
    assert "lmm_layout_gen:    3" in lum.describe(data)
    # re-encoding a read-back layout asks for the same OSTs again, as SPECIFIC
    again = lum.encode(lum.decode(data))
    assert again[:4] == lum.LOV_USER_MAGIC_SPECIFIC.to_bytes(4, "little")
    assert lum.decode(again) == expected(meta)


def test_describe_shows_read_back_fields():
    text = lum.describe(VEC["read_comp_liblustreapi"][1])
    assert "lcm_layout_gen:   2" in text and "lcme_flags:          0x10" in text
    assert "l_ost_oi: {oi_id: 0x3, oi_seq: 0x0}" in text
    assert "lmm_oi:            {oi_id: 0x1, oi_seq: 0x200000401}" in text


# --- malformed buffers ----------------------------------------------------------------------


def _v1(size=MiB, count=1, slot=0xFFFF, pattern=1, magic=lum.LOV_USER_MAGIC_V1) -> bytearray:
    return bytearray(struct.pack("<IIQQIHH", magic, pattern, 0, 0, size, count, slot))


def _v3(pool: bytes, count=0, osts=(), magic=lum.LOV_USER_MAGIC_V3, slot=0xFFFF) -> bytearray:
    buf = _v1(count=count, magic=magic, slot=slot) + struct.pack("<16s", pool)
    for i in osts:
        buf += struct.pack("<QQII", 0, 0, 0, i)
    return buf


def _with(data: bytes, at: int, fmt: str, *values) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, at, *values)
    return bytes(buf)


ABI = VEC["comp_abi_example"][1]  # entries at 32 and 80; blobs at 128 (V1) and 160 (SPECIFIC)
E2 = 32 + 48  # second entry

MALFORMED = {
    "empty": (b"", "shorter than its magic"),
    "three bytes": (b"\xd0\x0b\xd1", "shorter than its magic"),
    "bad magic": (struct.pack("<I", 0xDEADBEEF) + bytes(28), "bad lov_user_md magic 0xDEADBEEF"),
    "big-endian": (struct.pack(">I", lum.LOV_USER_MAGIC_V1) + bytes(28), "byte-swapped V1 magic"),
    "foreign": (struct.pack("<I", 0x0BD70BD0) + bytes(28), "foreign layout"),
    "directory": (struct.pack("<I", 0x0CD30CD0) + bytes(28), "directory striping"),
    "truncated V1 header": (bytes(_v1())[:31], "truncated V1 lov_user_md: 31 bytes"),
    "truncated V3 header": (bytes(_v3(b"flash"))[:40], "truncated V3 lov_user_md: 40 bytes"),
    "partial object": (bytes(_v1(count=1)) + bytes(10), "not whole 24-byte objects"),
    "objects but count differs": (bytes(_v1(count=2)) + bytes(72), "holds 3 objects (104 bytes) but lmm_stripe_count is 2"),
    "object count overflows": (bytes(_v3(b"", 10, [1, 2, 3], lum.LOV_USER_MAGIC_SPECIFIC)), "holds 3 objects"),
    "specific without osts": (bytes(_v3(b"", 0, [], lum.LOV_USER_MAGIC_SPECIFIC)), "lists no OSTs"),
    "stripe size not 64K": (bytes(_v1(size=1000)), "stripe size 1000 is not a multiple of 64 KiB"),
    "stripe count too big": (bytes(_v1(count=3000)), "stripe count 3000 out of range"),
    "wide overstriping": (bytes(_v1(count=0xFFFE)), "overstriping over every OST"),
    "offset not in list": (bytes(_v3(b"", 2, [4, 5], lum.LOV_USER_MAGIC_SPECIFIC, slot=3)), "not in the OST list"),
    "duplicate osts": (bytes(_v3(b"", 2, [4, 4], lum.LOV_USER_MAGIC_SPECIFIC)), "repeats an OST"),
    "ost index too big": (bytes(_v3(b"", 1, [70000], lum.LOV_USER_MAGIC_SPECIFIC)), "OST index out of range"),
    "partly dummy objects": (bytes(_v1(count=2)) + struct.pack("<QQII", 0, 0, 0, 1) + struct.pack("<QQII", 0, 0, 0, 0xFFFFFFFF),
                             "OST index out of range"),
    "unknown pattern": (bytes(_v1(pattern=0x1000)), "unknown lmm_pattern 0x1000"),
    "pool without NUL": (bytes(_v3(b"abcdefghijklmnop")), "not NUL-terminated"),
    "pool not printable": (bytes(_v3(b"fl\x01sh")), "printable ASCII"),
    "composite truncated header": (ABI[:20], "truncated composite layout: 20 bytes"),
    "lcm_size beyond buffer": (ABI[:300], "lcm_size 304 is larger than the buffer (300 bytes)"),
    "bytes after lcm_size": (ABI + bytes(8), "8 bytes follow"),
    "no entries": (_with(ABI, 14, "<H", 0), "without components"),
    "entries beyond lcm_size": (_with(ABI, 14, "<H", 7), "lcm_entry_count 7 needs 368 bytes"),
    "entry offset outside": (_with(ABI, E2 + 24, "<I", 200), "blob [200, 344) lies outside lcm_size 304"),
    "entry offset huge": (_with(ABI, E2 + 24, "<I", 0xFFFFFFF0), "lies outside lcm_size 304"),
    "entry offset into table": (_with(ABI, E2 + 24, "<I", 64), "lcme_offset 64 points into the header"),
    "zero-size entry": (_with(ABI, E2 + 28, "<I", 0), "component 2 of 2: empty blob"),
    "overlapping entries": (_with(ABI, 32 + 24, "<II", 160, 144), "blobs of components 1 and 2 overlap"),
    "blob size cuts objects": (_with(ABI, E2 + 28, "<I", 120), "component 2 of 2: SPECIFIC lov_user_md holds 3 objects"),
    "nested composite": (_with(ABI, 128, "<I", lum.LOV_USER_MAGIC_COMP_V1), "component 1 of 2: nested composite"),
    "mirrored": (_with(ABI, 16, "<H", 1), "mirrored (FLR) layout with 2 mirrors"),
    "erasure coded": (_with(ABI, 18, "<B", 2), "erasure-coded"),
    "extents not contiguous": (_with(ABI, E2 + 8, "<Q", 128 * MiB), "not contiguous"),
    "empty extent": (_with(ABI, 32 + 8, "<QQ", 64 * MiB, 64 * MiB), "component 1 of 2: bad component extent"),
    "component stripe size": (_with(ABI, 128 + 24, "<I", 4096), "component 1 of 2: stripe size 4096"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_buffer_is_one_clear_error(name):
    data, message = MALFORMED[name]
    with pytest.raises(LayoutError) as err:
        lum.decode(data)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_decode_rejects_what_is_not_bytes():
    with pytest.raises(LayoutError, match="bytes, not str"):
        lum.decode("\xd0\x0b\xd1\x0b")


def test_decode_accepts_bytearray_and_memoryview():
    _, data = VEC["specific_4"]
    assert lum.decode(bytearray(data)) == lum.decode(memoryview(data)) == lum.decode(data)


@pytest.mark.parametrize("layout, message", [
    (FileLayout(components=(Component(0, LUSTRE_EOF, Layout(), id=1 << 32),)), "lcme_id 4294967296"),
    (FileLayout(components=(Component(0, LUSTRE_EOF, Layout(), flags=-1),)), "lcme_flags -1"),
    (Layout(pattern=0x4000), "unknown lmm_pattern 0x4000"),
    (Layout(pool="fl sh"), "printable ASCII"),
])
def test_encode_rejects_what_lustre_cannot_hold(layout, message):
    with pytest.raises(LayoutError, match=message):
        lum.encode(layout)


# --- round trips ----------------------------------------------------------------------------

POOLS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=0, max_size=15)
FLAGS = st.sampled_from([0, lum.LCME_FL_INIT, 0x2, 0x4, 0x6, 0x400, 0x40])


@st.composite
def layouts(draw, stripe_size=None) -> Layout:
    size = draw(st.integers(0, 4095)) * 65536 if stripe_size is None else stripe_size
    pattern = draw(st.sampled_from([0, 1, 1, 0x201, 0x100]))
    pool = draw(POOLS)
    if draw(st.booleans()):
        osts = draw(st.lists(st.integers(0, 0xFFFE), min_size=1, max_size=40, unique=not pattern & 0x200))
        offset = draw(st.sampled_from([-1, *osts]))
        return Layout(stripe_size=size, stripe_offset=offset, pool=pool, osts=tuple(osts), pattern=pattern)
    count = draw(st.integers(-1, 2000))
    offset = draw(st.integers(-1, 0xFFFE))
    return Layout(stripe_size=size, stripe_count=count, stripe_offset=offset, pool=pool, pattern=pattern)


@st.composite
def file_layouts(draw) -> FileLayout:
    if draw(st.booleans()):
        return FileLayout(plain=draw(layouts()))
    comps, start = [], 0
    for last in [False] * draw(st.integers(0, 4)) + [True]:
        size = draw(st.integers(1, 256)) * 65536
        lay = draw(layouts(stripe_size=draw(st.sampled_from([0, size]))))
        end = LUSTRE_EOF if last and draw(st.booleans()) else (start // size + draw(st.integers(1, 64))) * size
        comps.append(Component(start, end, lay, id=draw(st.integers(0, 0xFFFFFFFF)), flags=draw(FLAGS)))
        start = end
    return FileLayout(components=tuple(comps))


@settings(max_examples=300, deadline=None)
@given(file_layouts())
def test_round_trip(fl):
    data = lum.encode(fl)
    assert len(data) == lum.lum_size(fl)
    assert lum.decode(data) == fl
    assert lum.describe(data)


# --- fuzz -------------------------------------------------------------------------------------


def _decodes_or_layout_error(data: bytes) -> None:
    """The fuzz property: a LayoutError, or a layout that survives its own round trip."""
    try:
        fl = lum.decode(data)
    except LayoutError as e:
        assert "\n" not in str(e)
        return
    assert lum.decode(lum.encode(fl)) == fl
    lum.describe(data)


BOUNDARY = st.sampled_from([0, 1, 2, 23, 24, 31, 32, 47, 48, 128, 0x7FFF, 0xFFDF, 0xFFE0, 0xFFFE, 0xFFFF,
                            0x10000, 0x0BD10BD0, 0x0BD30BD0, 0x0BD50BD0, 0x0BD60BD0, 0x7FFFFFFF, 0xFFFFFFFF])


@st.composite
def mutated_vectors(draw) -> bytes:
    buf = bytearray(VEC[draw(st.sampled_from(sorted(VEC)))][1])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["byte", "u16", "u32", "cut", "grow"]))
        if kind == "cut":
            del buf[draw(st.integers(0, len(buf))):]
        elif kind == "grow":
            buf += draw(st.binary(min_size=1, max_size=64))
        elif len(buf) >= 4:
            width = {"byte": 1, "u16": 2, "u32": 4}[kind]
            at = draw(st.integers(0, (len(buf) - width) // width)) * width
            value = draw(BOUNDARY if kind != "byte" else st.integers(0, 255)) & ((1 << 8 * width) - 1)
            buf[at:at + width] = value.to_bytes(width, "little")
    return bytes(buf)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_vectors())
def test_fuzz_mutated_vectors(data):
    _decodes_or_layout_error(data)


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.binary(max_size=600),
    st.sampled_from([lum.LOV_USER_MAGIC_V1, lum.LOV_USER_MAGIC_V3, lum.LOV_USER_MAGIC_SPECIFIC,
                     lum.LOV_USER_MAGIC_COMP_V1, lum.LOV_USER_MAGIC_SEL])
    .flatmap(lambda m: st.binary(max_size=400).map(lambda rest: m.to_bytes(4, "little") + rest)),
))
def test_fuzz_random_bytes(data):
    _decodes_or_layout_error(data)
