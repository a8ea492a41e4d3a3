#!/usr/bin/env python3
"""Write the shared plan examples: tests/vectors/plans/NAME.plan + NAME.json.

Standalone on purpose (it does not import iez): each expectation is written by hand from
docs/plan-format.md, so the vectors check both parsers, iez.plan (Python) and libiez's
plan.c (C, through build/libiez/iez-probe), instead of echoing either.
Run: python3 tests/vectors/plans/make_plan_vectors.py

NAME.json: "about"; "valid"; for a valid plan "entries" (path as version 2 writes it, a
version-1 path's braces doubled -> the layout as iez.plan.format_layout writes it); for an invalid one "line", the line the error is reported
at (0: the file as a whole, such as a bad header or bytes that are not UTF-8); "collread", the
value of that metadata key when the plan gives one.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent
H = "#iez-plan 1\n"
H2 = "#iez-plan 2\n"
OSTS_2000 = ":".join(str((7 * k) % 2000) for k in range(2000))  # a permutation of 0..1999

VECTORS: list[dict] = []


def ok(name: str, about: str, text: str | bytes, entries: dict[str, str], collread: str = "") -> None:
    VECTORS.append(dict(name=name, about=about, text=text, valid=True, entries=entries, collread=collread))


def bad(name: str, about: str, text: str | bytes, line: int) -> None:
    VECTORS.append(dict(name=name, about=about, text=text, valid=False, line=line))


# --- valid --------------------------------------------------------------------------------------

ok("doc_example", "the example of docs/plan-format.md",
   H + "#app=hacc run=3 fsname=iez created=2026-11-22T03:00:00Z\n"
   "/mnt/iez/FPP1-Part00000000-of-00000008.data\tS=100532224,c=8,o=8:13:12:9:7:4:3:5\n"
   "/mnt/iez/ckpt.h5\t0-67108864/S=1048576,c=1;67108864-EOF/S=4194304,c=4,o=1:5:9:13\n",
   {"/mnt/iez/FPP1-Part00000000-of-00000008.data": "S=100532224,c=8,o=8:13:12:9:7:4:3:5",
    "/mnt/iez/ckpt.h5": "0-67108864/S=1048576,c=1;67108864-EOF/S=4194304,c=4,o=1:5:9:13"})
ok("header_only", "a plan with no entries", H, {})
ok("no_final_newline", "the last line needs no newline", H + "/a\tc=2", {"/a": "c=2"})
ok("crlf", "CRLF line ends (universal newlines, as Python's text mode reads the file)",
   "#iez-plan 1\r\n#app=x\r\n/a\tc=1\r\n\r\n/b\tp=flash\r\n", {"/a": "c=1", "/b": "p=flash"})
ok("cr_only", "old Mac line ends, a lone CR", "#iez-plan 1\r/a\tS=65536\r/b\tc=-1\r", {"/a": "S=65536", "/b": "c=-1"})
ok("blank_and_meta", "blank lines anywhere; a # line after the header is metadata, even between entries",
   H + "\n#app=ior\n/a\tc=1\n\n#run=2 note\n#\n/b\tc=2\n\n", {"/a": "c=1", "/b": "c=2"})
ok("meta_collread", "the collread metadata key, lustre or off: the last one given wins",
   H + "#app=ior collread=off\n/a\tc=1\n#collread=lustre run=2\n", {"/a": "c=1"}, collread="lustre")
ok("meta_collread_word", "a word without '=' is free metadata, even one named collread",
   H + "#collread note\n/a\tc=1\n", {"/a": "c=1"})
ok("meta_collread_off", "collread=off", H2 + "#collread=off\n/a.{job}\tc=1\n", {"/a.{job}": "c=1"}, collread="off")
ok("header_whitespace", "the header is split on any whitespace, Unicode included (U+3000, U+00A0)",
   "\u3000#iez-plan\t\u00a01  \n/a\tc=1\n", {"/a": "c=1"})
ok("all_fields", "every field, in any order; defaults are left out when formatted",
   H + "/f1\ti=2,c=4,S=1048576,p=ssd\n"
       "/f2\tS=0,c=0,i=-1,p=\n"
       "/f3\to=5:2:7,S=2097152\n"
       "/f4\tc=3,o=9:8:7,i=8\n"
       "/f5\tc=-1\n"
       "/f6\ti=0\n"
       "/f7\tS=4294901760,c=2000\n",
   {"/f1": "S=1048576,c=4,i=2,p=ssd", "/f2": "c=0", "/f3": "S=2097152,c=3,o=5:2:7",
    "/f4": "c=3,i=8,o=9:8:7", "/f5": "c=-1", "/f6": "i=0", "/f7": "S=4294901760,c=2000"})
ok("leading_zeros_and_minus_zero", "an int may have leading zeros, and -0 is 0",
   H + "/a\tS=0065536,c=-0,o=007:010\n", {"/a": "S=65536,c=2,o=7:10"})
ok("specific_2000", "the largest explicit OST list: 2000 OSTs (LOV_MAX_STRIPE_COUNT)",
   H + f"/wide\tS=1048576,o={OSTS_2000}\n", {"/wide": f"S=1048576,c=2000,o={OSTS_2000}"})
ok("pool_15_bytes", "a 15-byte pool name (LOV_MAXPOOLNAME), and one with '.' and '-' in it",
   H + "/a\tp=fast_nvme_tier0\n/b\tp=a.b-c\n", {"/a": "p=fast_nvme_tier0", "/b": "p=a.b-c"})
ok("pfl", "PFL layouts: one component, a numeric end at LUSTRE_EOF, ends on stripe-size multiples",
   H + "/one\t0-EOF/c=1\n"
       "/num\t0-18446744073709551615/S=1048576\n"
       "/three\t0-1048576/S=1048576,c=1;1048576-1073741824/S=4194304,c=4,p=flash;"
       "1073741824-EOF/S=16777216,c=8,o=0:3:6:9:12:1:4:7\n"
       "/bounded\t0-65536/c=1;65536-131072/S=65536,c=2\n",
   {"/one": "0-EOF/c=1", "/num": "0-EOF/S=1048576",
    "/three": "0-1048576/S=1048576,c=1;1048576-1073741824/S=4194304,c=4,p=flash;"
              "1073741824-EOF/S=16777216,c=8,o=0:3:6:9:12:1:4:7",
    "/bounded": "0-65536/c=1;65536-131072/S=65536,c=2"})
ok("odd_paths", "a path is any bytes but TAB, LF, CR and NUL: spaces, '#', UTF-8, '//' and '..' kept as written",
   H + "/scratch/my run/out #1.dat\tc=1\n/données/résultat-π.h5\tc=2\n//a/../b\tc=3\n/\tc=4\n",
   {"/scratch/my run/out #1.dat": "c=1", "/données/résultat-π.h5": "c=2", "//a/../b": "c=3", "/": "c=4"})
ok("v1_braces_literal", "in version 1 braces are plain bytes of a name (written doubled in version 2)",
   H + "/a/{job}\tc=1\n/a/}{\tc=2\n", {"/a/{{job}}": "c=1", "/a/}}{{": "c=2"})

# --- version 2: run-time fields -----------------------------------------------------------------

ok("v2_fields", "every field: job, array, host, fqdn, rank, date/time formats, random suffixes",
   H2 + "/o/out.{job}\tc=1\n/o/a.{job}_{array}\tc=2\n/o/{host}/x\tc=3\n/o/{fqdn}.log\tc=4\n"
        "/o/r{rank}.h5\tc=5\n/o/d.{date:%Y%m%d}\tc=6\n/o/d.{date:%Y-%m-%d}\tc=7\n/o/t.{time:%H%M%S}\tc=8\n"
        "/o/iso.{date:%Y-%m-%dT%H:%M:%S}\tc=9\n/o/tmp.{rand:6}\tc=10\n/o/.f.dat.{rand:6}\tc=11\n"
        "/o/{rand:1}{rand:64}\tc=12\n/o/x.{date:%H.%M_%S}\tc=13\n",
   {"/o/out.{job}": "c=1", "/o/a.{job}_{array}": "c=2", "/o/{host}/x": "c=3", "/o/{fqdn}.log": "c=4",
    "/o/r{rank}.h5": "c=5", "/o/d.{date:%Y%m%d}": "c=6", "/o/d.{date:%Y-%m-%d}": "c=7", "/o/t.{time:%H%M%S}": "c=8",
    "/o/iso.{date:%Y-%m-%dT%H:%M:%S}": "c=9", "/o/tmp.{rand:6}": "c=10", "/o/.f.dat.{rand:6}": "c=11",
    "/o/{rand:1}{rand:64}": "c=12", "/o/x.{date:%H.%M_%S}": "c=13"})
ok("v2_escapes", "a literal brace is doubled; a version-2 plan with no field at all is fine",
   H2 + "/a/{{b}}\tc=1\n/a/}}{{\tc=2\n/plain\tc=3\n/a/{{{job}}}\tc=4\n",
   {"/a/{{b}}": "c=1", "/a/}}{{": "c=2", "/plain": "c=3", "/a/{{{job}}}": "c=4"})
ok("v2_same_name_other_spelling", "duplicates are by text: two keys that may match the same name are both kept",
   H2 + "/a/x.{date:%H%M%S}\tc=1\n/a/x.{time:%H%M%S}\tc=2\n/a/x.{rand:6}\tc=3\n/a/x.123456\tc=4\n",
   {"/a/x.{date:%H%M%S}": "c=1", "/a/x.{time:%H%M%S}": "c=2", "/a/x.{rand:6}": "c=3", "/a/x.123456": "c=4"})
ok("v2_sixteen_fields", "at most 16 fields in a path", H2 + "/" + "{rand:1}" * 16 + "\tc=1\n", {"/" + "{rand:1}" * 16: "c=1"})
ok("v2_fields_in_directories", "fields in any component, the first included",
   H2 + "/{host}/run-{date:%Y%m%d}/{rank}/f.{rand:8}\tc=1\n", {"/{host}/run-{date:%Y%m%d}/{rank}/f.{rand:8}": "c=1"})

# --- invalid ------------------------------------------------------------------------------------

bad("empty_file", "an empty file has no header", "", 0)
bad("pool_with_equals", "a pool name is letters, digits, '_', '.', '-': no '='", H + "/a\tp=a=b\n", 2)
bad("pool_with_tab", "no blank or control byte in a pool name", H + "/a\tp=\tssd\n", 2)
bad("no_header", "the first line must be the header", "/a\tc=1\n", 0)
bad("bom", "a UTF-8 byte-order mark is not whitespace: the header is wrong", "\ufeff" + H, 0)
bad("header_extra", "the header has exactly two tokens", "#iez-plan 1 extra\n", 0)
bad("version_3", "a version this reader does not know", "#iez-plan 3\n/a\tc=1\n", 0)
bad("version_01", "the version is the token '1', not a number equal to 1", "#iez-plan 01\n", 0)
bad("not_utf8", "a byte that is not UTF-8 anywhere rejects the plan", (H + "/a\tc=1\n/\xff\tc=1\n").encode("latin-1"), 0)
bad("utf8_surrogate", "an encoded surrogate is not UTF-8", H.encode() + b"/\xed\xa0\x80\tc=1\n", 0)
bad("utf8_overlong", "an overlong encoding is not UTF-8", H.encode() + b"/\xc0\xaf\tc=1\n", 0)
bad("relative_path", "plan keys are absolute", H + "/a\tc=1\nrel/b\tc=1\n", 3)
bad("empty_path", "an empty path", H + "\tc=1\n", 2)
bad("nul_in_path", "NUL in a path", H + "/a\0b\tc=1\n", 2)
bad("no_tab", "an entry needs PATH<TAB>LAYOUT", H + "/a c=1\n", 2)
bad("spaces_line", "a line of spaces is not blank", H + "/a\tc=1\n   \n", 3)
bad("meta_collread_on", "collread is lustre or off, nothing else", H + "#app=x\n/a\tc=1\n#app=y collread=on\n", 4)
bad("meta_collread_empty", "collread= needs its value", H + "#collread=\n/a\tc=1\n", 2)
bad("meta_collread_case", "values are lower case", H + "#collread=Lustre\n", 2)
bad("duplicate_path", "a path appears at most once", H + "/a\tc=1\n/b\tc=1\n/a\tc=2\n", 4)
bad("empty_layout", "a layout has at least one field", H + "/a\t\n", 2)
bad("unknown_field", "fields are S, c, i, p, o", H + "/a\tX=1\n", 2)
bad("field_without_value_sign", "a field is KEY=VALUE", H + "/a\tc\n", 2)
bad("empty_field", "no empty field between commas", H + "/a\tc=1,,S=65536\n", 2)
bad("field_twice", "a field at most once per layout", H + "/a\tc=1,c=2\n", 2)
bad("bad_number", "not a number", H + "/a\tc=x\n", 2)
bad("number_with_space", "an int is digits: no spaces (the grammar's int; Python's int() would take it)",
    H + "/a\tc= 1\n", 2)
bad("number_with_plus", "an int is digits: no '+'", H + "/a\tc=+1\n", 2)
bad("number_with_underscore", "an int is digits: no '_'", H + "/a\tS=65_536\n", 2)
bad("stripe_size_not_64k", "a stripe size is a multiple of 64 KiB", H + "/a\tS=1000\n", 2)
bad("stripe_size_4g", "a stripe size is below 4 GiB", H + "/a\tS=4294967296\n", 2)
bad("stripe_size_negative", "a stripe size is not negative", H + "/a\tS=-65536\n", 2)
bad("huge_number", "a number far beyond any field's range", H + "/a\tS=99999999999999999999999\n", 2)
bad("count_2001", "a stripe count is at most 2000", H + "/a\tc=2001\n", 2)
bad("count_minus_2", "a stripe count is at least -1", H + "/a\tc=-2\n", 2)
bad("offset_65535", "a stripe offset is at most 65534", H + "/a\ti=65535\n", 2)
bad("pool_16_bytes", "a pool name is at most 15 bytes", H + "/a\tp=sixteen_bytes_xx\n", 2)
bad("pool_utf8_16_bytes", "the 15-byte limit counts UTF-8 bytes", H + "/a\tp=ééééééééa\n", 2)
bad("ost_repeated", "an OST list does not repeat an OST", H + "/a\to=1:2:1\n", 2)
bad("ost_65535", "an OST index is at most 65534", H + "/a\to=65535\n", 2)
bad("ost_negative", "an OST index is not negative", H + "/a\to=-1\n", 2)
bad("ost_empty_item", "no empty OST between colons", H + "/a\to=1::2\n", 2)
bad("ost_empty_list", "o= needs at least one OST", H + "/a\to=\n", 2)
bad("count_not_list_length", "with o=, c= must equal the list's length", H + "/a\tc=3,o=1:2\n", 2)
bad("count_all_with_list", "with o=, c=-1 is not the list's length", H + "/a\tc=-1,o=1:2\n", 2)
bad("offset_not_in_list", "with o=, i= must be one of the OSTs", H + "/a\ti=5,o=1:2\n", 2)
bad("ost_list_2001", "an OST list longer than 2000", H + "/a\to=" + ":".join(map(str, range(2001))) + "\n", 2)
bad("pfl_not_from_0", "the first component starts at 0", H + "/a\t65536-EOF/c=1\n", 2)
bad("pfl_gap", "components are contiguous", H + "/a\t0-65536/c=1;131072-EOF/c=2\n", 2)
bad("pfl_overlap", "components do not overlap", H + "/a\t0-131072/c=1;65536-EOF/c=2\n", 2)
bad("pfl_empty_extent", "an extent is not empty", H + "/a\t0-0/c=1\n", 2)
bad("pfl_end_not_64k", "a component end is a multiple of 64 KiB", H + "/a\t0-100000/c=1;100000-EOF/c=2\n", 2)
bad("pfl_end_not_stripe_multiple", "a component end is a multiple of its stripe size",
    H + "/a\t0-1048576/S=4194304;1048576-EOF/c=2\n", 2)
bad("pfl_eof_in_middle", "only the last component may end at EOF", H + "/a\t0-EOF/c=1;65536-EOF/c=2\n", 2)
bad("pfl_beyond_eof", "an end above LUSTRE_EOF", H + "/a\t0-18446744073709551616/c=1\n", 2)
bad("pfl_bad_extent", "START-END with numbers (or EOF)", H + "/a\t0-eof/c=1\n", 2)
bad("pfl_negative_end", "a negative end", H + "/a\t0--1/c=1\n", 2)
bad("pfl_no_dash", "a component needs START-END", H + "/a\t0/c=1\n", 2)
bad("pfl_empty_component", "no empty component between semicolons", H + "/a\t0-65536/c=1;;65536-EOF/c=2\n", 2)
bad("pfl_bad_body", "a component body obeys the plain rules", H + "/a\t0-EOF/S=1000\n", 2)
bad("error_late", "the error is reported at its own line, after good ones",
    H + "#app=x\n/a\tc=1\n\n/b\tc=2\r\n/c\tc=3,c=4\n/d\tc=1\n", 6)
bad("v2_unknown_field", "fields are job, array, host, fqdn, rank, date, time, rand", H2 + "/a\tc=1\n/a.{user}\tc=1\n", 3)
bad("v2_lone_open", "a lone '{' opens a field that never closes", H2 + "/a.{job\tc=1\n", 2)
bad("v2_lone_close", "a lone '}' (a literal one is '}}')", H2 + "/a.}b\tc=1\n", 2)
bad("v2_empty_field", "an empty field", H2 + "/a.{}\tc=1\n", 2)
bad("v2_job_with_argument", "known fields take no argument", H2 + "/a.{job:5}\tc=1\n", 2)
bad("v2_job_empty_argument", "not even an empty one", H2 + "/a.{rank:}\tc=1\n", 2)
bad("v2_date_without_format", "date needs a format", H2 + "/a.{date}\tc=1\n", 2)
bad("v2_date_bad_conversion", "conversions are %Y %m %d %H %M %S", H2 + "/a.{date:%Y%j}\tc=1\n", 2)
bad("v2_date_slash", "a field never spans a '/': not even in its format", H2 + "/a.{date:%Y/%m}\tc=1\n", 2)
bad("v2_date_no_conversion", "a format has at least one conversion", H2 + "/a.{date:--}\tc=1\n", 2)
bad("v2_date_percent_at_end", "a '%' ends a format", H2 + "/a.{time:%H%}\tc=1\n", 2)
bad("v2_date_format_33_bytes", "a format is at most 32 bytes", H2 + "/a.{date:%Y" + "-" * 31 + "}\tc=1\n", 2)
bad("v2_rand_0", "a random field is 1 to 64 characters", H2 + "/a.{rand:0}\tc=1\n", 2)
bad("v2_rand_65", "not 65", H2 + "/a.{rand:65}\tc=1\n", 2)
bad("v2_rand_leading_zero", "no leading zero", H2 + "/a.{rand:06}\tc=1\n", 2)
bad("v2_rand_not_number", "a number", H2 + "/a.{rand:six}\tc=1\n", 2)
bad("v2_rand_no_length", "rand needs its length", H2 + "/a.{rand}\tc=1\n", 2)
bad("v2_seventeen_fields", "more than 16 fields", H2 + "/" + "{rand:1}" * 17 + "\tc=1\n", 2)
bad("v2_duplicate_template", "a path with fields appears at most once", H2 + "/a.{job}\tc=1\n/b\tc=1\n/a.{job}\tc=2\n", 4)
bad("v2_duplicate_escaped", "so does one with escapes", H2 + "/a{{b}}\tc=1\n/a{{b}}\tc=2\n", 3)
bad("v2_duplicate_before_bad_line", "a duplicate template before a bad line is the error",
    H2 + "/t.{rand:6}\tc=1\n/t.{rand:6}\tc=1\n/a\tc=x\n", 3)
bad("v2_bad_line_before_duplicate", "a bad line before a duplicate template is the error",
    H2 + "/t.{rand:6}\tc=1\n/a\tc=x\n/t.{rand:6}\tc=1\n", 3)
bad("v2_field_bad_layout", "a templated entry's layout obeys the same rules", H2 + "/a.{job}\tS=1000\n", 2)


def main() -> None:
    for old in OUT.glob("*.plan"):
        old.unlink()
    for old in OUT.glob("*.json"):
        old.unlink()
    for v in VECTORS:
        text = v["text"]
        (OUT / f"{v['name']}.plan").write_bytes(text if isinstance(text, bytes) else text.encode())
        meta = {k: v[k] for k in ("about", "valid", "entries", "line", "collread") if v.get(k) not in (None, "")}
        (OUT / f"{v['name']}.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(VECTORS)} plan vectors to {OUT}")


if __name__ == "__main__":
    main()
