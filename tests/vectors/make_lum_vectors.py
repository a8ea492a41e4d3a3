#!/usr/bin/env python3
"""Write the lov_user_md test vectors: tests/vectors/lum/NAME.bin + NAME.json.

Standalone on purpose: it does not import iez. Every field is written with struct.pack_into at
the offset the tables of lustre-layout-abi.md §2 give, so the vectors check iez.layout.lum and
libiez's C encoder instead of echoing either. Run: python3 tests/vectors/make_lum_vectors.py

Each NAME.json holds: "magic"; "size" (bytes of NAME.bin); "encode" (true: encoding "layout"
must give NAME.bin exactly; false: a read-back buffer that only decodes to "layout");
"layout" in plain terms; "spec", the same layout in the plan grammar (docs/plan-format.md),
which has no words for the "pattern", "id" and "flags" fields; "about".
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent / "lum"

V1, V3, SPECIFIC, COMP_V1 = 0x0BD10BD0, 0x0BD30BD0, 0x0BD50BD0, 0x0BD60BD0
RAID0 = 0x1
INIT = 0x10  # LCME_FL_INIT
EOF = 0xFFFF_FFFF_FFFF_FFFF  # LUSTRE_EOF
DUMMY = 0xFFFF_FFFF  # l_ost_idx of a slot without an object (lod_gen_component_ea)
MiB = 1 << 20


def u16(buf: bytearray, at: int, v: int) -> None:
    struct.pack_into("<H", buf, at, v)


def u32(buf: bytearray, at: int, v: int) -> None:
    struct.pack_into("<I", buf, at, v)


def u64(buf: bytearray, at: int, v: int) -> None:
    struct.pack_into("<Q", buf, at, v)


# --- raw structures -----------------------------------------------------------------------


def lmm(magic, pattern, stripe_size, stripe_count, slot, pool=None, objects=(), oi=(0, 0)):
    """A lov_user_md_v1 (pool None) or _v3 as a dict of raw field values."""
    return dict(magic=magic, pattern=pattern, stripe_size=stripe_size, stripe_count=stripe_count,
                slot=slot, pool=pool, objects=list(objects), oi=oi)


def obj(ost_idx, oi_id=0, oi_seq=0, gen=0):
    return dict(ost_idx=ost_idx, oi_id=oi_id, oi_seq=oi_seq, gen=gen)


def lmm_size(m) -> int:
    return (32 if m["pool"] is None else 48) + 24 * len(m["objects"])


def write_lmm(buf: bytearray, base: int, m) -> None:
    u32(buf, base + 0, m["magic"])  # lmm_magic
    u32(buf, base + 4, m["pattern"])  # lmm_pattern
    u64(buf, base + 8, m["oi"][0])  # lmm_oi.oi.oi_id
    u64(buf, base + 16, m["oi"][1])  # lmm_oi.oi.oi_seq
    u32(buf, base + 24, m["stripe_size"])  # lmm_stripe_size
    u16(buf, base + 28, m["stripe_count"])  # lmm_stripe_count
    u16(buf, base + 30, m["slot"])  # lmm_stripe_offset / lmm_layout_gen
    objects_at = base + 32  # lov_user_md_v1.lmm_objects
    if m["pool"] is not None:
        struct.pack_into("16s", buf, base + 32, m["pool"].encode())  # lmm_pool_name, NUL-padded
        objects_at = base + 48  # lov_user_md_v3.lmm_objects
    for i, o in enumerate(m["objects"]):
        at = objects_at + 24 * i
        u64(buf, at + 0, o["oi_id"])  # l_ost_oi.oi.oi_id
        u64(buf, at + 8, o["oi_seq"])  # l_ost_oi.oi.oi_seq
        u32(buf, at + 16, o["gen"])  # l_ost_gen
        u32(buf, at + 20, o["ost_idx"])  # l_ost_idx


def entry(start, end, blob, id=0, flags=0, layout_gen=0, timestamp=0, tail=b"\0\0\0\0"):
    return dict(start=start, end=end, blob=blob, id=id, flags=flags, layout_gen=layout_gen,
                timestamp=timestamp, tail=tail)


def comp_bytes(entries, layout_gen=0, flags=0, mirror_count=0, ec_count=0) -> tuple[bytes, list[int]]:
    """A lov_comp_md_v1 with blobs packed right after the entry table, as llapi and the MDS do."""
    table = 32 + 48 * len(entries)
    offsets = []
    at = table
    for e in entries:
        offsets.append(at)
        at += lmm_size(e["blob"])
    buf = bytearray(at)
    u32(buf, 0, COMP_V1)  # lcm_magic
    u32(buf, 4, at)  # lcm_size
    u32(buf, 8, layout_gen)  # lcm_layout_gen
    u16(buf, 12, flags)  # lcm_flags
    u16(buf, 14, len(entries))  # lcm_entry_count
    u16(buf, 16, mirror_count)  # lcm_mirror_count
    buf[18] = ec_count  # lcm_ec_count (2.16; padding before)
    for i, (e, off) in enumerate(zip(entries, offsets)):
        base = 32 + 48 * i
        u32(buf, base + 0, e["id"])  # lcme_id
        u32(buf, base + 4, e["flags"])  # lcme_flags
        u64(buf, base + 8, e["start"])  # lcme_extent.e_start
        u64(buf, base + 16, e["end"])  # lcme_extent.e_end
        u32(buf, base + 24, off)  # lcme_offset, from the header's start
        u32(buf, base + 28, lmm_size(e["blob"]))  # lcme_size
        u32(buf, base + 32, e["layout_gen"])  # lcme_layout_gen
        u64(buf, base + 36, e["timestamp"])  # lcme_timestamp
        buf[base + 44:base + 48] = e["tail"]  # 2.16: dstripe, cstripe, compr_type, compr_lvl|bits
        write_lmm(buf, off, e["blob"])
    return bytes(buf), offsets


def plain_bytes(m) -> bytes:
    buf = bytearray(lmm_size(m))
    write_lmm(buf, 0, m)
    return bytes(buf)


# --- layouts in plain terms, and what a create asks for ----------------------------------------


def L(S=0, c=0, i=-1, p="", o=(), pattern=RAID0):
    return dict(stripe_size=S, stripe_count=c or len(o), stripe_offset=i, pool=p, osts=list(o),
                pattern=pattern)


def C(start, end, layout, id=0, flags=0):
    return dict(start=start, end="EOF" if end == EOF else end, id=id, flags=flags, layout=layout)


def request(lay):
    """llapi_layout_to_lum() for one layout (abi.md §4c): SPECIFIC with an OST list, V3 with a
    pool, else V1; count -1 and offset -1 are 0xFFFF; objects carry only l_ost_idx."""
    magic = SPECIFIC if lay["osts"] else V3 if lay["pool"] else V1
    return lmm(magic, lay["pattern"], lay["stripe_size"], lay["stripe_count"] & 0xFFFF,
               lay["stripe_offset"] & 0xFFFF, None if magic == V1 else lay["pool"],
               [obj(i) for i in lay["osts"]])


def request_comp(comps) -> tuple[bytes, list[int]]:
    return comp_bytes([entry(c["start"], EOF if c["end"] == "EOF" else c["end"], request(c["layout"]),
                             c["id"], c["flags"]) for c in comps])


VECTORS: list[dict] = []


def vector(name, about, spec, layout, data, encode=True):
    magic = int.from_bytes(data[:4], "little")
    VECTORS.append(dict(name=name, about=about, magic=f"0x{magic:08X}", size=len(data), encode=encode,
                        spec=spec, layout=layout, data=data))


def plain(name, about, spec, lay):
    vector(name, about, spec, lay, plain_bytes(request(lay)))


def composite(name, about, spec, comps, expect_offsets=None, expect_size=None):
    data, offsets = request_comp(comps)
    assert expect_offsets is None or offsets == expect_offsets, offsets
    assert expect_size is None or len(data) == expect_size, len(data)
    vector(name, about, spec, {"components": comps}, data)


# --- create requests (encode and decode) ---------------------------------------------------

plain("v1_default", "lfs setstripe with no options: RAID0, size and count 0 (fs default), offset 0xFFFF (any OST)",
      "c=0", L())
plain("v1_zeroed", "all zeros but the magic, as a calloc'd struct with only lmm_magic set: pattern 0 "
      "(the MDS makes it RAID0), stripe offset 0 (start on OST0000)",
      "i=0", L(i=0, pattern=0))
plain("v1_size_count_offset", "4 MiB stripes, 4 stripes, starting on OST0003",
      "S=4194304,c=4,i=3", L(S=4 * MiB, c=4, i=3))
plain("v1_count_all", "stripe count -1 (every OST) is 0xFFFF", "S=1048576,c=-1", L(S=MiB, c=-1))
plain("v3_pool", "a pool makes it V3", "S=1048576,c=2,p=flash", L(S=MiB, c=2, p="flash"))
plain("v3_pool_15_bytes", "a 15-byte pool name (LOV_MAXPOOLNAME) fills lmm_pool_name but for its NUL",
      "c=1,i=2,p=fast_nvme_tier0", L(c=1, i=2, p="fast_nvme_tier0"))
plain("specific_1", "an explicit list of one OST", "S=1048576,c=1,o=7", L(S=MiB, o=[7]))
plain("specific_4", "an explicit list of 4 OSTs, in stripe order", "S=1048576,c=4,o=3:7:1:12",
      L(S=MiB, o=[3, 7, 1, 12]))
plain("specific_8", "seed 000 Table II: 8 stripes of 100,532,224 bytes on OSTs 8,13,12,9,7,4,3,5",
      "S=100532224,c=8,o=8:13:12:9:7:4:3:5", L(S=100532224, o=[8, 13, 12, 9, 7, 4, 3, 5]))
OSTS_160 = [(37 * k) % 160 for k in range(160)]  # a permutation of 0..159 (old LOV_MAX_STRIPE_COUNT)
plain("specific_160", "160 OSTs, the old LOV_MAX_STRIPE_COUNT",
      "S=1048576,c=160,o=" + ":".join(map(str, OSTS_160)), L(S=MiB, o=OSTS_160))
plain("specific_pool", "an explicit list within a pool, starting at the list's second OST",
      "S=2097152,c=3,i=1,p=ssd,o=2:1:0", L(S=2 * MiB, i=1, p="ssd", o=[2, 1, 0]))

composite("comp_abi_example", "lustre-layout-abi.md §2: [0,64MiB) 1 stripe any OST, [64MiB,EOF) on OSTs "
          "5,2,7,1; header 32 + 2x48, V1 blob at 128, SPECIFIC blob (144 B) at 160, lcm_size 304",
          "0-67108864/c=1;67108864-EOF/c=4,o=5:2:7:1",
          [C(0, 64 * MiB, L(c=1)), C(64 * MiB, EOF, L(o=[5, 2, 7, 1]))],
          expect_offsets=[128, 160], expect_size=304)
composite("comp_3", "three components: V1, V3 with a pool, SPECIFIC",
          "0-1048576/S=1048576,c=1;1048576-1073741824/S=4194304,c=4,p=flash;"
          "1073741824-EOF/S=16777216,c=8,o=0:3:6:9:12:1:4:7",
          [C(0, MiB, L(S=MiB, c=1)), C(MiB, 1024 * MiB, L(S=4 * MiB, c=4, p="flash")),
           C(1024 * MiB, EOF, L(S=16 * MiB, o=[0, 3, 6, 9, 12, 1, 4, 7]))],
          expect_offsets=[176, 208, 256], expect_size=496)

# --- read back from a real client (decode only) ----------------------------------------------

vector("read_v1", "lustre.lov of a plain file as a client returns it: V1 with lmm_oi, 3 objects "
       "(l_ost_idx 1,2,0; IDIF ids in l_ost_oi), lmm_layout_gen zeroed (LU-2809)",
       "S=1048576,c=3,o=1:2:0", L(S=MiB, o=[1, 2, 0]),
       plain_bytes(lmm(V1, RAID0, MiB, 3, 0, oi=(0x2, 0x200000401),
                       objects=[obj(1, 4), obj(2, 4), obj(0, 5)])), encode=False)
vector("read_v3_layout_gen", "LL_IOC_LOV_GETSTRIPE of a pool file: V3 whose offset slot holds "
       "lmm_layout_gen 3 (not an offset), objects on OSTs 4,5 with FID-on-OST sequences",
       "S=4194304,c=2,p=flash,o=4:5", L(S=4 * MiB, p="flash", o=[4, 5]),
       plain_bytes(lmm(V3, RAID0, 4 * MiB, 2, 3, pool="flash", oi=(0x7, 0x200000402),
                       objects=[obj(4, 0x21, 0x240000400), obj(5, 0x22, 0x280000400)])), encode=False)

data, offsets = comp_bytes([
    entry(0, MiB, lmm(V1, RAID0, MiB, 1, 0, oi=(0x1, 0x200000401), objects=[obj(0, 2)]), id=1, flags=INIT),
    entry(MiB, EOF, lmm(V1, RAID0, MiB, 2, 0, oi=(0x1, 0x200000401), objects=[obj(1, 2), obj(0, 3)]),
          id=2, flags=INIT),
], layout_gen=2)
assert len(data) == 264 and offsets == [128, 184]  # the numbers of the liblustreapi.c comment
vector("read_comp_liblustreapi", "the `lfs getstripe -v` example above lov_dump_comp_v1() in "
       "liblustreapi.c: lcm_size 264, lcm_layout_gen 2, two INIT components (ids 1, 2) at offsets "
       "128/184, sizes 56/80, blobs with objects",
       "0-1048576/S=1048576,c=1,o=0;1048576-EOF/S=1048576,c=2,o=1:0",
       {"components": [C(0, MiB, L(S=MiB, o=[0]), id=1, flags=INIT),
                       C(MiB, EOF, L(S=MiB, o=[1, 0]), id=2, flags=INIT)]},
       data, encode=False)

data, _ = comp_bytes([
    entry(0, MiB, lmm(V1, RAID0, MiB, 1, 1, oi=(0x9, 0x200000401), objects=[obj(3, 0x41, 0x2c0000400)]),
          id=1, flags=INIT, layout_gen=1, tail=b"\x00\x00\x00\x00"),
    entry(MiB, 64 * MiB, lmm(V3, RAID0, 4 * MiB, 4, 5, pool="flash", oi=(0x9, 0x200000401)),
          id=2, flags=0, timestamp=1731800000, tail=b"\x00\x00\x01\x93"),
    entry(64 * MiB, EOF, lmm(V1, RAID0, 16 * MiB, 0xFFFF, 0xFFFF, oi=(0x9, 0x200000401)),
          id=3, flags=0, tail=b"\x00\x00\x02\x3c"),
], layout_gen=4)
vector("read_comp_partial_2_16", "a 2.16-style PFL file with only its first component instantiated: "
       "INIT blob with an object and lmm_layout_gen 1 in the slot; uninstantiated blobs without "
       "objects keep the stripe offset in the slot (5, and 0xFFFF); lcme_timestamp and the 2.16 "
       "compression bytes set (synthesized from the struct definition, not captured)",
       "0-1048576/S=1048576,c=1,o=3;1048576-67108864/S=4194304,c=4,i=5,p=flash;67108864-EOF/S=16777216,c=-1",
       {"components": [C(0, MiB, L(S=MiB, o=[3]), id=1, flags=INIT),
                       C(MiB, 64 * MiB, L(S=4 * MiB, c=4, i=5, p="flash"), id=2),
                       C(64 * MiB, EOF, L(S=16 * MiB, c=-1), id=3)]},
       data, encode=False)

data, _ = comp_bytes([
    entry(0, 4 * MiB, lmm(V1, RAID0, MiB, 2, 0, objects=[obj(6, 0x11), obj(2, 0x12)]), id=1, flags=INIT),
    entry(4 * MiB, 256 * MiB, lmm(V1, RAID0, 4 * MiB, 2, 0xFFFF, objects=[obj(DUMMY), obj(DUMMY)]), id=2),
    entry(256 * MiB, EOF, lmm(V1, RAID0, 4 * MiB, 3, 9, objects=[obj(9), obj(4), obj(1)]), id=3),
], layout_gen=3)
vector("read_comp_templates", "the stored (trusted.lov) form: uninstantiated components keep object "
       "slots, l_ost_idx 0xFFFFFFFF (no list) or the requested OST list, and the stripe offset in "
       "the slot (lod_gen_component_ea)",
       "0-4194304/S=1048576,c=2,o=6:2;4194304-268435456/S=4194304,c=2;268435456-EOF/S=4194304,c=3,i=9,o=9:4:1",
       {"components": [C(0, 4 * MiB, L(S=MiB, o=[6, 2]), id=1, flags=INIT),
                       C(4 * MiB, 256 * MiB, L(S=4 * MiB, c=2), id=2),
                       C(256 * MiB, EOF, L(S=4 * MiB, i=9, o=[9, 4, 1]), id=3)]},
       data, encode=False)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.bin"):
        old.unlink()
    for old in OUT.glob("*.json"):
        old.unlink()
    for v in VECTORS:
        (OUT / f"{v['name']}.bin").write_bytes(v["data"])
        meta = {k: v[k] for k in ("about", "magic", "size", "encode", "spec", "layout")}
        (OUT / f"{v['name']}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {len(VECTORS)} vectors to {OUT}")


if __name__ == "__main__":
    main()
