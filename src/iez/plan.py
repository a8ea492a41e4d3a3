"""The plan file: which layout each file of a run gets. Written by the control plane, loaded
once by libiez into a hash table. The format is specified in docs/plan-format.md; libiez's C
parser (libiez/src/plan.c) implements the same grammar.

    #iez-plan 2
    #app=ior run=2 fsname=iez created=2026-11-22T03:00:00Z
    /mnt/iez/out.00000000<TAB>S=1048576,c=4,o=3:7:1:12
    /mnt/iez/ckpt<TAB>0-67108864/S=1048576,c=1;67108864-EOF/S=4194304,c=4,o=1:5:9:13
    /mnt/iez/log.{job}.{date:%Y%m%d}<TAB>c=1

A plan's keys are paths in version 2's syntax (a literal brace doubled): `escape` turns a
file's name into one, `match` tells which entry a created file falls under.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from iez.errors import ConfigError, LayoutError
from iez.fields import Matcher, escape, parse_path
from iez.files import read_regular, replace_atomically
from iez.layout.layout import LOV_MAX_STRIPE_COUNT, LUSTRE_EOF, Component, FileLayout, Layout
from iez.request import distinct

MAGIC = "#iez-plan"
_INT = re.compile(r"-?[0-9]+")  # the grammar's int: no sign but '-', no spaces, no '_' (int() takes all three)
_POOL = re.compile(r"[A-Za-z0-9_.-]*")  # no separator, blank or control byte can hide in a pool name
VERSION = 2  # the newest this reads and writes; version 1 (no fields) is still read
MAX_PLAN_BYTES = 256 << 20  # as libiez's IEZ_PLAN_MAX_BYTES (libiez/src/plan.h)
_KEYS = {"S": "stripe_size", "c": "stripe_count", "i": "stripe_offset", "p": "pool", "o": "osts"}
# Metadata keys a reader acts on, with their values (docs/plan-format.md); other keys are free.
META_VALUES = {"collread": ("lustre", "off")}


@dataclass(frozen=True)
class PlanEntry:
    path: str
    layout: FileLayout


@dataclass
class Plan:
    entries: dict[str, FileLayout] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, layout: Layout | FileLayout) -> None:
        check_path(path)
        if path in self.entries:
            raise ConfigError(f"plan: {path} is planned twice")
        self.entries[path] = FileLayout.of(layout)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, path: str) -> FileLayout | None:
        return self.entries.get(path)

    def matcher(self, env: Mapping[str, str]) -> Matcher:
        """Which entry a created name falls under in a process with `env`'s fields."""
        return Matcher(self.entries, env)


def check_meta(key: str, value: str) -> None:
    """A metadata word a reader acts on holds one of its values."""
    if key in META_VALUES and value not in META_VALUES[key]:
        raise ConfigError(f"plan: {key}={value} is neither {' nor '.join(META_VALUES[key])}")


NAME_FORBIDDEN = "\t\n\r\0"  # the plan's separators, never in a name


def check_name(path: str) -> None:
    """A file's name as a plan can hold it: absolute, no TAB, LF, CR or NUL."""
    if not path.startswith("/"):
        raise ConfigError(f"plan: path {path!r} is not absolute")
    if any(c in path for c in NAME_FORBIDDEN):
        raise ConfigError(f"plan: path {path!r} holds a tab, newline or NUL")


def names_ok(names: Sequence[str]) -> bool:
    """Whether `check_name` takes every one of `names`: one scan of them all, not a call each
    (an upload's paths)."""
    joined = "".join(names)
    return all(map(str.startswith, names, repeat("/"))) and not any(c in joined for c in NAME_FORBIDDEN)


def check_path(path: str) -> None:
    """A plan key: a name as check_name takes it, in version 2's field grammar (braces doubled)."""
    check_name(path)
    parse_path(path)


def format_plain(lay: Layout) -> str:
    parts = []
    if lay.stripe_size:
        parts.append(f"S={lay.stripe_size}")
    if lay.stripe_count:
        parts.append(f"c={lay.stripe_count}")
    if lay.stripe_offset != -1:
        parts.append(f"i={lay.stripe_offset}")
    if lay.pool:
        parts.append(f"p={lay.pool}")
    if lay.osts:
        parts.append("o=" + ":".join(str(i) for i in lay.osts))
    return ",".join(parts) or "c=0"


def format_layout(fl: Layout | FileLayout) -> str:
    fl = FileLayout.of(fl)
    if fl.plain is not None:
        return format_plain(fl.plain)
    return ";".join(
        f"{c.start}-{'EOF' if c.end == LUSTRE_EOF else c.end}/{format_plain(c.layout)}"
        for c in fl.components
    )


def parse_plain(spec: str) -> Layout:
    kw: dict[str, object] = {}
    for item in spec.split(","):
        key, sep, val = item.partition("=")
        if not sep or key not in _KEYS:
            raise LayoutError(f"bad layout field {item!r} (fields: S, c, i, p, o)")
        name = _KEYS[key]
        if name in kw:
            raise LayoutError(f"layout field {key} given twice")
        if key == "p":
            if not _POOL.fullmatch(val):
                raise LayoutError(f"bad pool name {val!r} (letters, digits, '_', '.', '-')")
            kw[name] = val
        elif key == "o":
            kw[name] = tuple(_int(x, item) for x in val.split(":"))
        else:
            kw[name] = _int(val, item)
    return Layout(**kw)  # type: ignore[arg-type]


def _int(text: str, item: str) -> int:
    if not _INT.fullmatch(text):
        raise LayoutError(f"bad number in layout field {item!r}")
    return int(text)


def parse_layout(spec: str) -> FileLayout:
    if "/" not in spec:
        return FileLayout(plain=parse_plain(spec))
    comps = []
    for part in spec.split(";"):
        ext, sep, body = part.partition("/")
        lo, dash, hi = ext.partition("-")
        if not sep or not dash:
            raise LayoutError(f"bad component {part!r} (expected START-END/FIELDS)")
        if not _INT.fullmatch(lo) or not (hi == "EOF" or _INT.fullmatch(hi)):
            raise LayoutError(f"bad extent in component {part!r}")
        start, end = int(lo), LUSTRE_EOF if hi == "EOF" else int(hi)
        comps.append(Component(start, end, parse_plain(body)))
    return FileLayout(components=tuple(comps))


def dumps(plan: Plan) -> str:
    """Version 1 when no key holds a brace (so older readers take it), else version 2."""
    v2 = any("{" in p or "}" in p for p in plan.entries)
    lines = [f"{MAGIC} {VERSION if v2 else 1}"]
    if plan.meta:
        for k, v in plan.meta.items():
            if any(c in f"{k}{v}" for c in " =\t\n"):
                raise ConfigError(f"plan: metadata {k}={v!r} may not hold spaces, '=' or tabs")
            check_meta(k, v)
        lines.append("#" + " ".join(f"{k}={v}" for k, v in plan.meta.items()))
    lines += [f"{p}\t{format_layout(fl)}" for p, fl in plan.entries.items()]
    return "\n".join(lines) + "\n"


def loads(text: str, source: str = "<plan>") -> Plan:
    lines = text.split("\n")
    head = lines[0].split()
    if len(head) != 2 or head[0] != MAGIC:
        raise ConfigError(f"{source}: not an iez plan (first line must be '{MAGIC} {VERSION}')")
    if head[1] not in ("1", "2"):
        raise ConfigError(f"{source}: plan version {head[1]} is not supported (this iez reads 1 and 2)")
    literal = head[1] == "1"  # version 1 has no fields: its braces are literal
    plan = Plan()
    for no, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        if line.startswith("#"):
            for kv in line[1:].split(" "):
                k, sep, v = kv.partition("=")
                if sep:
                    try:
                        check_meta(k, v)
                    except ConfigError as e:
                        raise ConfigError(f"{source}:{no}: {e}") from None
                    plan.meta[k] = v
            continue
        path, sep, spec = line.partition("\t")
        if not sep:
            raise ConfigError(f"{source}:{no}: expected PATH<TAB>LAYOUT")
        try:
            plan.add(escape(path) if literal else path, parse_layout(spec))
        except (LayoutError, ConfigError) as e:
            raise ConfigError(f"{source}:{no}: {e}") from None
    return plan


def load(path: str | Path) -> Plan:
    p = Path(path)
    raw = read_regular(p, MAX_PLAN_BYTES, "plan")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not an iez plan (not UTF-8 text)") from None
    # lines end as in text mode (universal newlines), the way libiez's parser reads them too
    return loads(text.replace("\r\n", "\n").replace("\r", "\n"), source=str(p))


def save(plan: Plan, path: str | Path) -> None:
    """Write atomically, so a loader never sees half a plan."""
    replace_atomically(path, dumps(plan))


def from_entries(entries: Iterable[PlanEntry], **meta: str) -> Plan:
    plan = Plan(meta={k: str(v) for k, v in meta.items()})
    for e in entries:
        plan.add(e.path, e.layout)
    return plan


def dumps_arrays(meta: Mapping[str, str], paths: Sequence[str], stripe_size: np.ndarray, offsets: np.ndarray,
                 osts: np.ndarray, pools: Sequence[str], pool: np.ndarray,
                 other: Mapping[int, FileLayout] | None = None) -> str:
    """What `dumps` writes for files whose plain layouts are arrays (file i: `stripe_size[i]`,
    OSTs `osts[offsets[i]:offsets[i + 1]]`, pool `pools[pool[i]]`) and files in `other` with
    their layout from there: one join of string pieces, no object per file. Paths are checked as
    `Plan.add` checks them (`check_keys`)."""
    n = len(paths)
    other = other or {}
    # A list (as the database hands paths) is read as it is: every copy touches each path object.
    names = paths if isinstance(paths, list) else paths.tolist() if isinstance(paths, np.ndarray) else list(paths)
    head = dumps(Plan(meta=dict(meta)))  # the header lines, as version 1 (no entries)
    if check_keys(names):
        head = head.replace(f"{MAGIC} 1", f"{MAGIC} {VERSION}", 1)
    # Per file: its path, then its layout's start ("\tS=..,c=..,o=" with the first OST, and "\n"
    # when it is the only one: one string for all files alike, so a single-stripe file is two
    # pieces) and one piece per later stripe (":" + OST, "\n" after the last); a file in
    # `other`: its path and its whole layout.
    stripes = np.diff(offsets)
    ost = osts[offsets[0]:offsets[-1]]
    first = offsets[:-1] - offsets[0]  # each file's first stripe in `ost`
    if other:
        plain = np.ones(n, bool)
        plain[list(other)] = False
        ost = ost[np.repeat(plain, stripes)]
        stripes = np.where(plain, stripes, 0)
        first = np.cumsum(stripes) - stripes
    has = stripes > 0
    if n and has.all():  # as many stripes as files: each file's one stripe is `ost` in turn
        lead = _leads(stripe_size, stripes, pool, ost if len(ost) == n else ost[first], pools)
    else:  # files in `other`, or no file at all (a run that places none, collread)
        first = first[has]
        lead = np.empty(n, dtype=object)
        if len(first):
            lead[has] = _leads(stripe_size[has], stripes[has], pool[has], ost[first], pools)
    for i, fl in other.items():
        lead[i] = f"\t{format_layout(fl)}\n"
    if len(ost) == len(first):  # no later stripes
        lines = _interleaved(head, names, lead)
        del names, lead, stripes, ost, first, has  # not held while the text is joined (the peak of memory)
        return "".join(lines)
    ends = first + stripes[has]
    at = np.concatenate([[1], 1 + np.cumsum(np.maximum(stripes, 1) + 1)])
    pieces = np.empty(int(at[-1]), dtype=object)
    pieces[0] = head
    pieces[at[:-1]] = names
    pieces[at[:-1] + 1] = lead
    # A later stripe's piece, mid-line or at its end.
    key = 2 * ost
    key[ends - 1] += 1
    later = np.ones(len(ost), bool)
    later[first] = False
    slot = np.ones(len(pieces), bool)  # the later stripes' pieces: all but the head and each file's first two
    slot[0] = slot[at[:-1]] = slot[at[:-1] + 1] = False
    pieces[slot] = _ost_texts(int(ost.max()) + 1, ":")[key[later]]
    return "".join(pieces.tolist())


def _interleaved(head: str, names: list[str], lead: np.ndarray) -> list[str]:
    """The pieces of the plan text of files of one piece each after their path: head, then path
    and lead by turns."""
    lines: list[str] = [head] * (2 * len(names) + 1)
    lines[1::2] = names
    lines[2::2] = lead.tolist()
    return lines


def _leads(size: np.ndarray, count: np.ndarray, pool: np.ndarray, first: np.ndarray, pools: Sequence[str]
           ) -> np.ndarray:
    """Per file, its layout's start with its first OST ("\tS=..,c=..,p=..,o=" + OST, and "\n"
    when it has one stripe), each distinct string made once."""
    width = max(len(pools), 1)
    heads, head_of = distinct((size * (LOV_MAX_STRIPE_COUNT + 1) + count) * width + pool)
    top = int(first.max()) + 1
    kind = (head_of.reshape(-1) * top + first) * 2 + (count == 1)
    used, kind = distinct(kind)
    starts = np.array([f"\tS={k // width // (LOV_MAX_STRIPE_COUNT + 1)},c={k // width % (LOV_MAX_STRIPE_COUNT + 1)}"
                       f"{',p=' + pools[k % width] if pools[k % width] else ''},o=" for k in heads.tolist()], dtype=object)
    lead = starts[used // (2 * top)] + _ost_texts(top, "")[used % (2 * top)]
    return lead[kind.reshape(-1)]


@functools.lru_cache(maxsize=4)
def _ost_texts(top: int, lead: str) -> np.ndarray:
    """Indexed by 2 x OST + last: `lead` and the OST's number, with "\n" when it ends its line."""
    return np.array([x for i in range(top) for x in (f"{lead}{i}", f"{lead}{i}\n")], dtype=object)


HASH_WORDS = 32  # 8-byte words of a key hashed when looking for duplicates: its head, and its last word
_MIX = np.uint64(0x9E3779B97F4A7C15)  # an odd multiplier (2^64 / golden ratio) for the words' hash


def check_keys(names: list[str]) -> bool:
    """Check plan keys as `Plan.add` does (the same errors), all at once, and whether any holds a
    brace (version 2). The names are joined once and checked on the bytes; duplicates are found by
    a hash of each key's bytes (a Python call a key, `hash`, costs three times as much), and only
    keys of equal hashes are compared, by a set."""
    n = len(names)
    if not n:
        return False
    text = "\n".join(names)
    try:
        raw = text.encode()
    except UnicodeEncodeError:  # lone surrogates (undecodable names): any one-to-one encoding will do
        raw = text.encode("utf-8", "surrogatepass")
    buf = np.frombuffer(raw, np.uint8)
    # Keys of one length (generated names) are rows of `width` bytes: no search for the newlines.
    width = raw.find(b"\n") + 1 if n > 1 else len(raw) + 1
    if n > 1 and (len(raw) != n * width - 1 or np.count_nonzero(buf == ord("\n")) != n - 1
                  or (buf[width - 1::width] != ord("\n")).any()):
        width = 0
    if width:
        bad = width < 2 or bool((buf[::width] != ord("/")).any())
    else:
        ends = np.append(np.flatnonzero(buf == ord("\n")), len(raw))
        starts = np.concatenate([[0], ends[:-1] + 1])
        bad = len(ends) != n or bool((ends == starts).any()) or bool((buf[starts] != ord("/")).any())
    if bad or b"\t" in raw or b"\r" in raw or b"\0" in raw:
        for p in names:
            check_name(p)
    v2 = b"{" in raw or b"}" in raw
    for p in names if v2 else ():
        parse_path(p)
    if width >= 9 and _rows_rise(raw, n, width):  # generated names, in order: none repeats
        return v2
    if width >= 9:
        h = _row_hashes(raw, n, width)
    else:
        if width:  # keys of one length, shorter than a word
            starts = np.arange(n) * width
            ends = starts + (width - 1)
        h = _key_hashes(raw, starts, ends)
    ranked = np.sort(h)
    equal = ranked[1:] == ranked[:-1]
    if equal.any():
        seen: set[str] = set()
        for i in np.flatnonzero(np.isin(h, ranked[1:][equal])).tolist():
            if names[i] in seen:
                raise ConfigError(f"plan: {names[i]} is planned twice")
            seen.add(names[i])
    return v2


def _rows_rise(raw: bytes, n: int, width: int) -> bool:
    """Whether n keys that each take `width` >= 9 bytes with their separator rise strictly as
    bytes (then no two are equal): their 8-byte words compared as big-endian numbers, the first
    that differs deciding; a word every key shares is passed over."""
    less, tie, told = np.zeros(n - 1, bool), np.ones(n - 1, bool), False
    for k in range(-(-(width - 1) // 8)):
        word = np.ndarray((n,), "<u8", raw, min(8 * k, width - 9), (width,))
        if (word == word[0]).all():
            continue
        word = word.byteswap()  # its value read big-endian: numbers compare as the bytes do
        before, after = word[:-1], word[1:]
        less |= tie & (before < after)
        tie &= before == after
        told = True
    return told and bool(less.all())


def _row_hashes(raw: bytes, n: int, width: int) -> np.ndarray:
    """`_key_hashes` of n keys that each take `width` >= 9 bytes with their separator: each word
    read as a column of rows, not gathered."""
    h = np.full(n, width - 1, np.uint64)
    n_words = min(-(-(width - 1) // 8), HASH_WORDS)
    for k in range(n_words):
        h ^= np.ndarray((n,), "<u8", raw, width - 9 if k == n_words - 1 else 8 * k, (width,))
        h *= _MIX
    return h


def _key_hashes(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each key raw[starts[i]:ends[i]] (none empty): its length and its 8-byte
    words from the start (the last one ending at its end, the first HASH_WORDS - 1 of a longer
    key). Equal keys hash equal wherever they are in `raw`."""
    if len(raw) < 8:
        raw += bytes(8 - len(raw))
    length = ends - starts
    h = length.astype(np.uint64)
    n_words = min(-(-int(length.max()) // 8), HASH_WORDS)
    words = np.ndarray((len(raw) - 7,), "<u8", raw, 0, (1,))  # the word at every byte
    last = np.maximum(ends - 8, 0)
    short = np.flatnonzero(length < 8)
    # A short key's word spans bytes before it (or, at the very start, after it): its own bytes
    # shifted down to the low end, the rest cleared.
    own = ((words[last[short]] >> (8 * (starts - last)[short]).astype(np.uint64))
           & ((np.uint64(1) << (8 * length[short]).astype(np.uint64)) - np.uint64(1)))
    for k in range(n_words):
        w = words[last if k == n_words - 1 else np.minimum(starts + 8 * k, last)]
        w[short] = own
        h ^= w
        h *= _MIX
    return h
