"""libiez's pure core against the Python side: the plan parser (shared vectors in
tests/vectors/plans, and a fuzz test), the lov_user_md encoder (tests/vectors/lum, byte for
byte) and path normalisation. The C side runs as build/libiez/iez-probe."""

from __future__ import annotations

import json
import posixpath
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import BUILD, VECTORS, fuzz_settings
from iez import fields as F
from iez import plan as P
from iez.errors import ConfigError
from iez.layout import lum
from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout

PLANS = VECTORS / "plans"
PLAN_NAMES = sorted(p.stem for p in PLANS.glob("*.plan"))
LUM_NAMES = sorted(p.stem for p in (VECTORS / "lum").glob("*.json"))


def tool(name: str) -> str:
    exe = BUILD / "libiez" / name
    if not exe.exists():
        pytest.fail(f"{exe} is missing: build libiez (cmake -S . -B build && cmake --build build)")
    return str(exe)


def probe(*args: str, asan: bool = False, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([tool("iez-probe-asan" if asan else "iez-probe"), *args], capture_output=True, timeout=60,
                       env={"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1", **(env or {})})
    assert r.returncode in (0, 1, 2) and not r.stderr, f"iez-probe crashed (rc {r.returncode}): {r.stderr[-2000:]!r}"
    return r


def c_plan(path: Path, asan: bool = False) -> tuple[dict[str, tuple[str, str]] | None, str]:
    """(path -> (layout, lum hex), its collread metadata) if the C parser accepts the plan, else
    (None, its error)."""
    out = probe("plan", str(path), asan=asan).stdout.decode("utf-8", "surrogateescape").split("\n")
    if out[0].startswith("ERR "):
        return None, out[0][4:]
    assert out[0].startswith("OK "), out[0]
    entries = {}
    for line in out[1:int(out[0].split()[1]) + 1]:
        path_, rest = line.split("\t", 1)  # a path holds no tab (the plan's separator); a pool name may
        layout, hexbytes = rest.rsplit("\t", 1)
        entries[path_] = (layout, hexbytes)
    return entries, out[0].split(" ", 2)[2]


def line_of(message: str) -> int:
    """The line an error names (SOURCE:LINE: ...), 0 for one about the whole file."""
    m = re.search(r"\.plan:(\d+): ", message)
    return int(m.group(1)) if m else 0


def expected(name: str) -> dict:
    return json.loads((PLANS / f"{name}.json").read_text())


# -- the shared plan vectors ------------------------------------------------------------------

def test_plan_vectors_exist():
    assert len(PLAN_NAMES) > 60
    assert {expected(n)["valid"] for n in PLAN_NAMES} == {True, False}


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_c_parser_on_vector(name):
    want = expected(name)
    got, err = c_plan(PLANS / f"{name}.plan")
    if want["valid"]:
        assert got is not None, err
        assert {p: lay for p, (lay, _) in got.items()} == want["entries"]
        assert err == want.get("collread", "")
    else:
        assert got is None, f"accepted {name}: {want['about']}"
        assert line_of(err) == want["line"], err


@pytest.mark.parametrize("name", PLAN_NAMES)
def test_python_parser_on_vector(name):
    want = expected(name)
    if want["valid"]:
        plan = P.load(PLANS / f"{name}.plan")
        assert {p: P.format_layout(fl) for p, fl in plan.entries.items()} == want["entries"]
        assert plan.meta.get("collread", "") == want.get("collread", "")
    else:
        try:
            P.load(PLANS / f"{name}.plan")
        except ConfigError as e:
            assert line_of(str(e)) == want["line"], str(e)
        else:
            pytest.fail(f"iez.plan accepted {name}.plan: {want['about']} (docs/plan-format.md)")


@pytest.mark.parametrize("name", [n for n in PLAN_NAMES if expected(n)["valid"]])
def test_c_encoder_matches_python_codec_on_every_planned_layout(name):
    got, err = c_plan(PLANS / f"{name}.plan")
    assert got is not None, err
    for path, (_, hexbytes) in got.items():
        assert hexbytes == lum.encode(P.parse_layout(expected(name)["entries"][path])).hex(), path


def test_lookup(tmp_path):
    f = tmp_path / "p.plan"
    f.write_text("#iez-plan 1\n/a/b\tc=2\n/a/b/c\tS=1048576,o=4:2\n/x\t0-EOF/c=1\n")
    out = probe("find", str(f), "/a/b", "/a/b/c", "/a/b/", "/a", "/x", "/nope").stdout.decode().splitlines()
    assert out == ["c=2", "S=1048576,o=4:2", "-", "-", "0-EOF/c=1", "-"]


def test_large_plan_lookup(tmp_path):
    f = tmp_path / "big.plan"
    f.write_text("#iez-plan 1\n" + "".join(f"/fs/d{i % 97}/file.{i:07d}\tS=1048576,c={1 + i % 8}\n"
                                           for i in range(50000)))
    keys = [f"/fs/d{i % 97}/file.{i:07d}" for i in (0, 1, 12345, 49999)] + ["/fs/d0/file.0050000"]
    out = probe("find", str(f), *keys).stdout.decode().splitlines()
    assert out == ["S=1048576,c=1", "S=1048576,c=2", "S=1048576,c=2", "S=1048576,c=8", "-"]
    load = probe("load", str(f)).stdout.decode().split()
    assert load[:2] == ["OK", "50000"]


TEMPLATED = ("#iez-plan 2\n/o/out.{job}\tc=1\n/o/a{array}.r{rank}\tc=2\n/o/{host}.log\tc=3\n/o/{fqdn}.full\tc=4\n"
             "/o/d.{date:%Y%m%d}-{time:%H%M%S}\tc=5\n/o/.f.dat.{rand:6}\tc=6\n/o/x.{rand:6}\tc=7\n"
             "/o/x.{date:%H%M%S}\tc=8\n/o/x.123456\tc=9\n/run-{date:%Y-%m-%d}/f\tc=10\n/o/{{lit}}\tc=11\n"
             "/o/{job}.{job}\tc=12\n/o/out.77\tc=13\n")


@pytest.mark.parametrize("environ", [{"SLURM_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3", "PMI_RANK": "5"},
                                     {"PBS_JOBID": "9.pbs01", "PBS_ARRAY_INDEX": "1", "OMPI_COMM_WORLD_RANK": "0"},
                                     {"FLUX_JOB_ID": "fA9dWqR7", "SLURM_PROCID": "12"}, {},
                                     {"IEZ_HOST": "n07.cluster", "PMI_RANK": "2"}, {"IEZ_HOST": "a/b"}])
def test_templated_lookup_matches_python(tmp_path, environ):
    """libiez fills a plan's known fields from its process (job, array, rank, host) and matches
    date and random fields by shape, as iez.plan's Matcher does: same entry for every name."""
    import socket
    f = tmp_path / "t.plan"
    f.write_text(TEMPLATED)
    env = F.fields_of(environ, socket.gethostname())
    host = env["host"]
    assert (host, env["fqdn"]) == (("n07", "n07.cluster") if "IEZ_HOST" in environ and "/" not in environ["IEZ_HOST"]
                                   else (socket.gethostname().split(".")[0], socket.gethostname()))
    names = ["/o/out.77", "/o/out.78", "/o/out.9.pbs01", "/o/out.fA9dWqR7", "/o/a3.r5", "/o/a1.r0", "/o/a.r12",
             f"/o/{host}.log", f"/o/{env['fqdn']}.full", "/o/d.20261124-235960", "/o/d.20261324-000000",
             "/o/d.20261124-240000", "/o/d.2026112-1000000", "/o/.f.dat.aZ09xY", "/o/.f.dat.aZ0-xY",
             "/o/.f.dat.aZ09xYz", "/o/x.123456", "/o/x.AbCdEf", "/o/x.235959", "/run-2026-02-31/f",
             "/run-2026-2-31/f", "/run-2026-02-31/g", "/o/{lit}", "/o/{{lit}}", "/o/77.77", "/o/x.12/456", "/o/x.é2345"]
    out = probe("find", str(f), *names, env=environ).stdout.decode().splitlines()
    plan = P.loads(TEMPLATED)
    match = plan.matcher(env)
    want = [P.format_layout(plan.entries[k]) if (k := match(n)) else "-" for n in names]
    assert out == want
    hits = dict(zip(names, out))
    assert hits["/o/x.123456"] == "c=9" and hits["/o/x.235959"] == "c=7"  # a literal first, then the earliest line
    assert hits["/o/.f.dat.aZ09xY"] == "c=6" and hits["/o/x.12/456"] == "-" and hits["/o/{lit}"] == "c=11"
    assert (hits["/o/out.77"], hits["/o/77.77"]) == (("c=1", "c=12") if environ.get("SLURM_JOB_ID") else ("c=13", "-"))


PIECES = ["/", "/d", "a", "1", ".", "-", "{job}", "{rank}", "{host}", "{rand:1}", "{rand:2}", "{rand:3}",
          "{date:%m}", "{date:%H%M}", "{time:%d-%S}", "{{", "}}"]
FIELD_ENV = {"SLURM_JOB_ID": "12", "PMI_RANK": "1"}


@st.composite
def plans_and_names(draw) -> tuple[list[str], list[str]]:
    """Keys built of short pieces (fields, separators, literals; many alike, so shapes and
    prefixes collide) and names built of what those keys match, or nearly."""
    keys = draw(st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map(lambda p: "/" + "".join(p)),
                         min_size=1, max_size=12, unique=True))
    fill = {"{job}": "12", "{rank}": "1", "{rand:1}": "x", "{rand:2}": "Q7", "{rand:3}": "a1Z", "{date:%m}": "12",
            "{date:%H%M}": "2359", "{time:%d-%S}": "31-60", "{{": "{", "}}": "}"}
    names = []
    for key in draw(st.lists(st.sampled_from(keys), max_size=12)):
        name = key
        for piece, text in fill.items():
            name = name.replace(piece, draw(st.sampled_from([text, text, "0", "13", "/", "ab", ""])))
        names.append(name)
    return keys, [n for n in names if n.startswith("/") and "\n" not in n] or ["/"]


@pytest.mark.fuzz
@fuzz_settings(150)
@given(case=plans_and_names())
def test_fuzz_templated_lookup(tmp_path_factory, case):
    """Under AddressSanitizer and UBSan, libiez's lookup of any name in any templated plan
    gives the entry iez.fields.Matcher gives, in a process with the same fields."""
    import socket
    keys, names = case
    try:
        for k in keys:
            F.parse_path(k)
    except ConfigError:
        return  # a grammar error: the vectors and the parser fuzzing cover those
    f = tmp_path_factory.mktemp("fuzzfind") / "f.plan"
    f.write_text("#iez-plan 2\n" + "".join(f"{k}\tc={i + 1}\n" for i, k in enumerate(keys)))
    out = probe("find", str(f), *names, asan=True, env=FIELD_ENV).stdout.decode().splitlines()
    match = P.loads(f.read_text()).matcher(F.fields_of(FIELD_ENV, socket.gethostname()))
    assert out == [f"c={keys.index(k) + 1}" if (k := match(n)) else "-" for n in names], (keys, names)


def test_unreadable_plan(tmp_path):
    got, err = c_plan(tmp_path / "missing.plan")
    assert got is None and "cannot read plan" in err and "No such file" in err
    got, err = c_plan(tmp_path)
    assert got is None and "cannot read plan" in err


# -- fuzzing the plan parser --------------------------------------------------------------------

SEEDS = [(PLANS / f"{n}.plan").read_bytes() for n in PLAN_NAMES
         if expected(n)["valid"] and n != "specific_2000"]
ALPHABET = b"\t\n\r /;,=:-#0123456789SciopEOF\x00\xc3\xa9\xff{}%YmdHMjobrand"


@st.composite
def mutated_plans(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "dup_line"]))
        byte = draw(st.sampled_from(list(ALPHABET)) | st.integers(0, 255))
        if kind == "insert":
            data[at:at] = bytes([byte])
        elif kind == "delete" and data:
            del data[min(at, len(data) - 1)]
        elif kind == "replace" and data:
            data[min(at, len(data) - 1)] = byte
        elif kind == "dup_line":
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            data = bytearray(b"\n".join(lines))
    return bytes(data)


@pytest.mark.fuzz
@fuzz_settings(250)
@given(text=mutated_plans())
def test_fuzz_plan_parser(tmp_path_factory, text):
    """Under AddressSanitizer and UBSan, the C parser never crashes, and accepts exactly what
    iez.plan accepts, with the same layouts and collread, or rejects it at the same line."""
    f = tmp_path_factory.mktemp("fuzz") / "f.plan"
    f.write_bytes(text)
    got, err = c_plan(f, asan=True)
    try:
        plan = P.load(f)
    except ConfigError as e:
        assert got is None, f"C accepted what Python rejects ({e})"
        assert line_of(err) == line_of(str(e)), (err, str(e))
        return
    assert got is not None, f"C rejected what Python accepts: {err}"
    assert {p: lay for p, (lay, _) in got.items()} == {p: P.format_layout(fl) for p, fl in plan.entries.items()}
    assert err == plan.meta.get("collread", "")  # and the same metadata key readers act on


# -- the lov_user_md encoder --------------------------------------------------------------------

@pytest.mark.parametrize("name", LUM_NAMES)
def test_c_encoder_on_lum_vector(name):
    meta = json.loads((VECTORS / "lum" / f"{name}.json").read_text())
    data = (VECTORS / "lum" / f"{name}.bin").read_bytes()
    patterns = {c["layout"]["pattern"] for c in meta["layout"].get("components", [])} or {meta["layout"]["pattern"]}
    assert len(patterns) == 1
    out = probe("layout", meta["spec"], str(patterns.pop())).stdout.decode().strip()
    layout, hexbytes = out.split("\t")
    assert layout == P.format_layout(P.parse_layout(meta["spec"]))
    if meta["encode"]:
        assert bytes.fromhex(hexbytes) == data
    else:  # a buffer read back from a client: its layout, asked for at create, encodes as in Python
        assert bytes.fromhex(hexbytes) == lum.encode(P.parse_layout(meta["spec"]))


def test_lum_vectors_exist():
    assert sum(json.loads((VECTORS / "lum" / f"{n}.json").read_text())["encode"] for n in LUM_NAMES) >= 12


def plain_layouts():
    def build(size, count, offset, pool, osts):
        if osts:
            count = len(osts)
            offset = osts[offset % len(osts)] if offset >= 0 else -1
        return Layout(stripe_size=size * 65536, stripe_count=count, stripe_offset=offset, pool=pool, osts=tuple(osts))
    return st.builds(build, st.integers(0, 4096), st.integers(-1, 2000), st.integers(-1, 0xFFFE),
                     st.text("abcxyz_-0123456789", max_size=15),
                     st.lists(st.integers(0, 0xFFFE), max_size=40, unique=True))


@st.composite
def file_layouts(draw):
    if draw(st.booleans()):
        return FileLayout(plain=draw(plain_layouts()))
    ends = sorted(draw(st.sets(st.integers(1, 1 << 20), min_size=1, max_size=5)))
    bounds = [0] + [e * (1 << 22) for e in ends]
    comps = []
    for lo, hi in zip(bounds, bounds[1:] + [LUSTRE_EOF]):
        lay = draw(plain_layouts())
        comps.append(Component(lo, hi, Layout(stripe_size=lay.stripe_size and 1 << 20, stripe_count=lay.stripe_count,
                                              stripe_offset=lay.stripe_offset, pool=lay.pool, osts=lay.osts)))
    return FileLayout(components=tuple(comps))


@settings(max_examples=150, deadline=None)
@given(fl=file_layouts())
def test_c_encoder_matches_python_codec(fl):
    out = probe("layout", P.format_layout(fl)).stdout.decode().strip()
    layout, hexbytes = out.split("\t")
    assert layout == P.format_layout(fl)
    assert hexbytes == lum.encode(fl).hex()


# -- path normalisation -------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(base=st.lists(st.sampled_from(["a", "b c", "é", ".", "..", ""]), max_size=6),
       path=st.lists(st.sampled_from(["x", "y.z", ".", "..", "", "..."]), min_size=1, max_size=8),
       absolute=st.booleans())
def test_path_normalisation(base, path, absolute):
    b = "/" + "/".join(base)
    p = ("/" if absolute else "") + "/".join(path)
    got = probe("path", b, p).stdout.decode().rstrip("\n")
    want = posixpath.normpath(posixpath.join(b, p) if p else b)
    assert got == "/" + want.lstrip("/")
