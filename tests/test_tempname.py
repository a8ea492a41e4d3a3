"""libiez's mkstemp family (libiez/src/tempname.c) with real processes on an emulated cluster:
glibc creates these files inside itself, so without the wrappers they were neither placed nor
traced. A C program calling all eight functions behaves as under glibc alone (its own checks:
the template changed in place, mode 0600 less the umask, the flags, EINVAL, errno kept), and
under libiez every file is placed from the plan and traced as created, its record saying how
many characters ending its name were generated (docs/trace-format.md); `sed -i` (mkostemp, then
a rename) keeps its temporary's planned layout; Python's tempfile makes its own names (os.open)."""

from __future__ import annotations

import subprocess
import sys

import test_libiez_emulated as emu
from conftest import BUILD, need_built, need_tool
from iez.trace.ingest import ingest
from test_libiez_emulated import Job, assert_default, assert_planned

cluster, job = emu.cluster, emu.job  # its fixtures: a cluster for this module, a directory a test

PROG = BUILD / "libiez" / "iez-test-tempname"
SPEC = "S=2097152,c=3,o=4:8:2"
FUNCTIONS = ("mkstemp", "mkstemp64", "mkostemp", "mkostemp64", "mkstemps", "mkstemps64", "mkostemps",
             "mkostemps64")
SUFFIXED = {"mkstemps": ".txt", "mkstemps64": "-x", "mkostemps": ".dat"}  # random part not at the end


def plan2(job: Job, entries: dict[str, str]) -> None:
    job.plan({}, text="#iez-plan 2\n#app=test\n" + "".join(f"{job.dir}/{k}\t{v}\n" for k, v in entries.items()))


def created(out: str) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for line in out.splitlines():
        fn, name = line.split(" ", 1)
        names.setdefault(fn, []).append(name)
    return names


def test_glibc_semantics_without_libiez(tmp_path):
    need_built(PROG)
    r = subprocess.run([str(PROG), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    names = created(r.stdout)
    assert set(names) == {*FUNCTIONS, "thread", "child"} and len(names["thread"]) == 100


def test_every_variant_is_placed_and_traced_as_generated(job):
    need_built(PROG)
    plan2(job, {f"{fn}.{{rand:6}}{SUFFIXED.get(fn, '')}": SPEC for fn in FUNCTIONS} | {"thr.{rand:6}": "c=2,o=5:6"})
    r = job.run([str(PROG), str(job.dir)])  # the program's own checks of glibc's semantics pass
    names = created(r.stdout)
    assert set(names) == {*FUNCTIONS, "thread", "child"}
    for fn in FUNCTIONS:
        assert_planned(job, names[fn][0].rsplit("/", 1)[1], SPEC)
    assert len(set(names["thread"])) == 100
    for name in names["thread"]:
        assert_planned(job, name.rsplit("/", 1)[1], "c=2,o=5:6")
    assert_default(job, names["child"][0].rsplit("/", 1)[1])  # a fork child's: not in the plan
    recs = {r.path: r for r in job.trace().records}
    for fn, (name,) in [(fn, names[fn]) for fn in FUNCTIONS] + [("child", names["child"])]:
        rec = recs[name]
        assert rec.created and rec.bytes_written == 1000, rec
        assert rec.name_random == (0 if fn in SUFFIXED else 6), (fn, rec)
        assert rec.plan_hit is (fn != "child"), (fn, rec)
    assert {recs[n].name_random for n in names["thread"]} == {6}
    assert all(recs[n].plan_hit for n in names["thread"])
    # no file was made but the ones the program names (a retry leaves nothing behind)
    made = {p.name for p in job.dir.iterdir()}
    assert made == {n.rsplit("/", 1)[1] for ns in names.values() for n in ns}


def test_one_traced_run_predicts_the_random_part(job):
    """The record's count becomes the request's name_random, and prediction's {rand:6} from a
    single run: the plan names the next run's file whatever its six characters."""
    need_built(PROG)
    job.run([str(PROG), str(job.dir)])
    requests = {q.path: q for q in ingest(job.trace().records).requests}
    from iez.predict.names import infer

    for q in requests.values():
        base = q.path.rsplit("/", 1)[1]
        want = 0 if base.split(".")[0] in SUFFIXED else 6
        assert q.name_random == want, q
    model = infer([[(q.path, q.rank, "", "", False, q.name_random) for q in requests.values()]])
    keys = {model.next_path(model.key(0, p)) for p in requests}
    assert f"{job.dir}/mkstemp.{{rand:6}}" in keys and f"{job.dir}/thr.{{rand:6}}" in keys
    assert f"{job.dir}/child.{{rand:6}}" in keys


def test_sed_in_place_keeps_the_layout_of_its_temporary(job):
    """GNU sed -i writes DIR/sedXXXXXX with glibc's mkostemp and renames it over the file."""
    sed = need_tool("sed", "apt-get install sed")
    job.path("data.txt").write_text("a\n" * 1000)
    plan2(job, {"sed{rand:6}": SPEC})
    job.run([sed, "-i", "s/a/b/", "data.txt"])
    assert job.path("data.txt").read_text() == "b\n" * 1000
    assert_planned(job, "data.txt", SPEC)
    (rec,) = [r for r in job.trace().records if r.created]
    assert rec.path.startswith(f"{job.dir}/sed") and rec.name_random == 6 and rec.plan_hit
    assert rec.renamed_to == str(job.path("data.txt")) and rec.bytes_written == 2000


def test_python_tempfile_makes_its_own_names(job):
    """Python's tempfile draws its names itself and creates with os.open (O_EXCL): traced as
    created through the open wrapper, with no generated part known (its names hold '_', which
    a random field does not match)."""
    code = ("import tempfile, os\n"
            "fd, name = tempfile.mkstemp(dir='.', prefix='py.')\n"
            "os.write(fd, b'x' * 10); os.close(fd); print(name)\n")
    r = job.run([sys.executable, "-c", code])
    name = r.stdout.strip()
    (rec,) = [r for r in job.trace().records if r.created]
    assert rec.path == name and rec.bytes_written == 10 and rec.name_random == 0


def test_a_bad_template_is_refused_as_by_glibc_and_not_traced(job):
    code = ("import ctypes, ctypes.util, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "t = ctypes.create_string_buffer(b'bad.XXXXX')\n"
            "r = libc.mkstemp(t)\n"
            "print(r, ctypes.get_errno(), t.value.decode())\n"
            "ok = ctypes.create_string_buffer(b'ok.XXXXXX')\n"
            "print(libc.mkstemp(ok) >= 0, ok.value.decode())\n")
    r = job.run([sys.executable, "-c", code])
    bad, ok = r.stdout.splitlines()
    assert bad.split() == ["-1", "22", "bad.XXXXX"]  # EINVAL, the template untouched
    assert ok.startswith("True ok.") and ok != "True ok.XXXXXX"
    assert [(r.path, r.name_random) for r in job.trace().records if r.created] == [(str(job.path(ok[5:])), 6)]
