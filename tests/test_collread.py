"""The Lustre-aware collective read under libiez-mpi (docs/references.md#s003-figs4-5;
docs/libiez.md, "Lustre-aware collective read"). Real MPI programs under MPICH's mpiexec on an
emulated cluster of 16 OSTs: the seeded fuzzer (tests/c/collread_fuzz.c) compares what libiez's
read delivers with the file's bytes and with MPICH's own collective read, for random views,
sizes, offsets and layouts of 1 to 15 OSTs with 1 to 16 ranks; the I/O event log shows one client
per OST with it and several with MPICH's; a view it cannot serve falls back, logged."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, need_built
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.layout import lum
from iez.errors import LayoutError
from iez.layout.layout import LUSTRE_EOF
from iez.layout.raid0 import ost_of_offset
from iez.plan import parse_layout
from iez.profile import analysis
from iez.profile.ioevents import read_event_dir
from iez.profile.report import load_profile
from test_split_writing import Job

LIBDIR = BUILD / "libiez"
MPILIB, FUZZ, IOR = LIBDIR / "libiez-mpi.so", LIBDIR / "iez-test-collread", LIBDIR / "iez-test-collread-ior"
DECODE = LIBDIR / "iez-test-lum_decode"
BENCH = BUILD / "bench_app" / "iez-bench"
# layouts of 1 to 15 OSTs: plain, with explicit OST lists, and PFL (docs/plan-format.md)
LAYOUTS = [
    "S=65536,c=1",
    "S=65536,c=15",
    "S=131072,c=4,o=3:9:12:0",
    "S=65536,c=7",
    "0-524288/S=65536,c=2;524288-EOF/S=196608,c=5",
    "S=262144,c=3,o=14:1:7",
]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    need_built(MPILIB, FUZZ, IOR, BENCH)
    with running_cluster(tmp_path_factory.mktemp("collread") / "emu", make_cluster(4, 4), seed=3) as cd:
        yield cd


def run(job: Job, n: int, argv: list, collread: str = "lustre") -> str:
    """argv under mpiexec with n ranks, libiez-mpi and IEZ_COLLREAD=collread; one client NID
    per rank in the I/O event log."""
    return job.mpi(n, argv, IEZ_COLLREAD=collread, IEZ_NID="10.0.0.%r@tcp")


@pytest.fixture
def job(emu, tmp_path):
    return Job(emu, tmp_path, tmp_path.name)


# (ranks, seed, iterations, files): one rank, fewer ranks than OSTs, more, and 16; oversubscribed
# on a small machine, so the larger jobs read fewer times (a few seconds each)
@pytest.mark.parametrize("ranks,seed,iterations,nfiles",
                         [(1, 11, 40, 3), (2, 12, 25, 3), (3, 13, 10, 2), (5, 14, 5, 2), (16, 16, 2, 1)])
def test_fuzzed_reads_equal_the_file_and_mpichs_read(job, ranks, seed, iterations, nfiles):
    specs = [LAYOUTS[(seed + i) % len(LAYOUTS)] for i in range(nfiles)]
    job.plan({f"f{i}": spec for i, spec in enumerate(specs)})
    files = [job.path(f"f{i}") for i in range(nfiles)]
    out = run(job, ranks, [FUZZ, seed, iterations, *files])
    assert f"collread fuzz: {ranks * nfiles * iterations} reads" in out
    # every read went through libiez's path: nothing fell back
    assert "MPI's own read" not in job.log(), job.log()
    for f, spec in zip(files, specs):  # on the planned layouts
        got = lum.decode(os.getxattr(f, "user.lustre.lov"))
        assert [c.layout.stripe_count for c in got.components] == \
            [c.layout.stripe_count for c in parse_layout(spec).components]


def test_the_profile_shows_one_client_per_ost_with_iez_and_several_with_mpich(tmp_path, iez_cmd):
    """Seed 003's interleaved collective read, in small (3 ranks, block = transfer = stripe: rank r
    reads stripe 3s + r, so each OST serves every rank), of two files on OSTs of their own, one
    read by MPICH, one by iez, under one `iez profile` of a fresh emulated cluster."""
    with running_cluster(tmp_path / "emu", make_cluster(4, 4), seed=3) as cd:
        job = Job(cd, tmp_path, "j")
        job.plan({"mpich": "S=65536,c=2,o=0:1", "iez": "S=65536,c=2,o=2:3"})
        for name in ("mpich", "iez"):
            job.mpi(3, [IOR, job.path(name), 65536, 8, "write"])
        out = tmp_path / "prof"
        iez = [*iez_cmd, "profile"]
        subprocess.run([*iez, "start", "--cluster", cd.root, "--out", out, "--interval", "0.05"], check=True)
        for name, collread in (("mpich", "off"), ("iez", "lustre")):
            got = job.mpi(3, [IOR, job.path(name), 65536, 8, "read"], IEZ_COLLREAD=collread,
                          IEZ_IOLOG=str(cd.root / "iolog"), IEZ_NID="10.0.0.%r@tcp")
            assert "read 1572864 bytes" in got
        subprocess.run([*iez, "stop", "--cluster", cd.root, "--out", out], check=True)
    report = subprocess.run([*iez, "report", out, "-o", out / "report.html"], check=True, capture_output=True,
                            text=True).stdout
    prof = load_profile(out)
    view = analysis.join(prof.bins, prof.rpcs, prof.exports)
    clients = {o: view.per_client(o) for o in view.osts()}
    # MPICH: ROMIO reads the contiguous blocks independently: each OST serves all 3 ranks
    # (docs/references.md#s003-figs4-5, Fig. 4)
    assert [len(clients[o]) for o in (0, 1)] == [3, 3]
    # iez: one aggregator per OST reads all of that OST's stripes (Fig. 5), as the report says
    assert [len(clients[o]) for o in (2, 3)] == [1, 1] and clients[2].keys() != clients[3].keys()
    assert report.count("served one client at a time") == 2, report


def readers_per_ost(log_dir: Path, path: Path) -> dict[int, set[str]]:
    """From the I/O event log: the client NIDs that read each OST of path, stripe by stripe."""
    layout = lum.decode(os.getxattr(path, "user.lustre.lov"))
    size = layout.plain.stripe_size
    events, skipped = read_event_dir(log_dir)
    assert not skipped
    out: dict[int, set[str]] = {}
    for e in events:
        if e.op == "read" and e.path == str(path):
            for stripe in range(e.offset // size, (e.offset + e.length - 1) // size + 1):
                out.setdefault(ost_of_offset(layout, stripe * size), set()).add(e.nid)
    return out


@pytest.mark.parametrize("workload", [
    ["-b", "192k", "-t", "64k", "-s", "3"],  # IOR-like: a shared file, three segments
    ["--workload", "hacc-io", "-p", "3000,20000,0,9000,7", "--header-size", "65536"],  # HACC-IO-like
])
def test_iez_bench_reads_back_collectively_one_client_per_ost(job, workload):
    """iez-bench -r: collective reads of what a collective write put in the file, byte-checked
    (--verify), served by libiez's read: each OST read by one client."""
    name = "hacc" if "hacc-io" in workload else "ior"
    target = job.path(name + "-Part00000000-of-00000001.data" if name == "hacc" else name)
    job.plan({target.name: "S=65536,c=3"})
    bench = [BENCH, "-a", "MPIIO", "-c", *workload, "-k", "-o", job.path(name)]
    job.mpi(5, [*bench, "-w"], IEZ_COLLREAD="off")
    out = job.mpi(5, [*bench, "-r", "--verify"], IEZ_COLLREAD="lustre", IEZ_NID="10.0.0.%r@tcp",
                  IEZ_IOLOG=str(job.tmp / "reads"))
    assert "all as written" in out
    assert "MPI's own read" not in job.log(), job.log()
    per_ost = readers_per_ost(job.tmp / "reads", target)
    assert len(per_ost) == 3 and all(len(nids) == 1 for nids in per_ost.values()), per_ost


def test_a_file_off_lustre_falls_back_to_mpichs_read_logged(job, tmp_path):
    """Outside the cluster's fs/ the layout is unknown: every rank takes MPICH's read, which
    reads the right bytes, and the log says why once."""
    f = tmp_path / "plain"
    job.mpi(3, [IOR, f, 65536, 2, "write"])
    assert "read 393216 bytes" in run(job, 3, [IOR, f, 65536, 2, "read"])
    assert job.log().count("is not on Lustre, or its layout is not one it serves: MPI's own read") == 1


def test_one_rank_that_cannot_be_served_takes_every_rank_to_mpichs_read(job):
    """Rank 0's view is in external32, which the new read does not serve: the refusal reaches
    every rank in the first exchange and all of them make MPICH's read (no rank waits alone)."""
    job.plan({"f": "S=65536,c=3"})
    job.mpi(4, [IOR, job.path("f"), 65536, 3, "write"])
    assert "read 786432 bytes" in run(job, 4, [IOR, job.path("f"), 65536, 3, "mixed"])
    assert job.log().count("a view, type or file it cannot serve") == 4  # once in each process


def test_libiez_decodes_every_lov_user_md_vector_as_python_does():
    """The layouts the new read works from (lum.c's iez_lum_decode, real Lustre's read-back forms
    included) against iez.layout.lum.decode on tests/vectors/lum."""
    need_built(DECODE)
    vectors = sorted((Path(__file__).parent / "vectors" / "lum").glob("*.bin"))
    assert len(vectors) >= 15
    for v in vectors:
        got = subprocess.run([DECODE, v], capture_output=True, text=True, check=True).stdout.splitlines()
        try:
            want = lum.decode(v.read_bytes())
        except LayoutError:
            assert got == ["invalid"], v.name
            continue
        lines = []
        for start, stop, lay in [(c.start, c.end, c.layout) for c in want.components] or [(0, LUSTRE_EOF, want.plain)]:
            count = len(lay.osts) if lay.stripe_count == -1 and lay.osts else lay.stripe_count
            known = lay.osts and len(lay.osts) == count
            osts = ",".join(map(str, lay.osts)) if known else "-"
            end = -1 if stop == LUSTRE_EOF else stop
            lines.append(f"{start} {end} {lay.stripe_size} {count} {lay.pattern} {osts}")
        assert got == lines, v.name
