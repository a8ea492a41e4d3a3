"""Split writing under libiez-mpi (docs/references.md#s001-hierarchical; docs/libiez.md, "Split
writing"): a shared file the plan lays out hierarchically is opened with ROMIO hints that give
each PFL component its own collective-buffering aggregator. Real MPI programs under MPICH's
mpiexec on an emulated cluster: the hints MPI_File_get_info reports, the user's hints kept, no
hints for other files or when they cannot be built, and a collective iez-bench run whose data are
byte-identical to a run without iez, whose layout is the plan's, and whose aggregators (seen in
the I/O event log, IEZ_IOLOG) each write inside one component only, from one create."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, need_built, need_tool
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.layout import lum
from iez.layout.layout import LUSTRE_EOF
from iez.plan import parse_layout
from iez.profile.ioevents import read_event_dir
from iez.trace.shard import read_trace

LIBDIR = BUILD / "libiez"
MPILIB, HINTS = LIBDIR / "libiez-mpi.so", LIBDIR / "iez-test-split-hints"
BENCH = BUILD / "bench_app" / "iez-bench"
MiB = 1 << 20
RANKS, BLOCK = 4, 4 * MiB
# four writers of 4 MiB on 8 OSTs: one component per writer, two OSTs each (docs/layouts.md)
HIERARCHICAL = ";".join(f"{g * BLOCK}-{(g + 1) * BLOCK if g < 3 else 'EOF'}/S=2097152,c=2,o={g}:{g + 4}"
                        for g in range(4))


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    need_built(MPILIB, HINTS, BENCH)
    with running_cluster(tmp_path_factory.mktemp("split") / "emu", make_cluster(4, 4), seed=7) as cd:
        yield cd


class Job:
    """One test's directory on the cluster, its plan, libiez log, traces and I/O event logs."""

    def __init__(self, emu, tmp: Path, name: str):
        self.root, self.tmp = emu.root, tmp
        self.dir = emu.fs / name
        self.dir.mkdir()

    def path(self, name: str) -> Path:
        return self.dir / name

    def plan(self, entries: dict[str, str]) -> None:
        (self.tmp / "plan").write_text("#iez-plan 1\n#app=split\n" +
                                       "".join(f"{self.path(n)}\t{s}\n" for n, s in entries.items()))

    def env(self, iez: bool = True, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
        if iez:
            env.update(LD_PRELOAD=str(MPILIB), IEZ_EMULATED=str(self.root), IEZ_MODE="trace,place", IEZ_APP="split",
                       IEZ_LOG=str(self.tmp / "libiez.log"), IEZ_TRACE_DIR=str(self.tmp / "traces"),
                       IEZ_IOLOG=str(self.tmp / "iolog"), IEZ_PLAN=str(self.tmp / "plan"))
        env.update(extra)
        return env

    def mpi(self, n: int, argv: list, iez: bool = True, **extra: str) -> str:
        args = [need_tool("mpiexec", "apt-get install mpich"), "-n", str(n), *map(str, argv)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=180, env=self.env(iez, **extra), cwd=self.dir)
        assert r.returncode == 0, f"{args}: {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r.stdout

    def hints(self, name: str, *user: str, n: int = RANKS, iez: bool = True, write: int = 0,
              **extra: str) -> dict[str, str]:
        """The hints MPI keeps for `name` opened by n ranks with the user's hints KEY=VALUE (each
        rank writing `write` bytes collectively after its predecessors')."""
        argv = [HINTS, *(a for h in user for a in ("--hint", h)), "--bytes", write, self.path(name)]
        out = self.mpi(n, argv, iez, **extra)
        return dict(line.split("=", 1) for line in out.splitlines())

    def log(self) -> str:
        p = self.tmp / "libiez.log"
        return p.read_text() if p.exists() else ""


@pytest.fixture
def job(emu, tmp_path, request):
    return Job(emu, tmp_path, tmp_path.name)


def test_a_hierarchical_file_is_opened_with_one_aggregator_per_component(job):
    job.plan({"h": HIERARCHICAL})
    got = job.hints("h")
    # 4 components of 2 stripes of 2 MiB: four aggregators (ROMIO lists them), all four on this
    # one host, domains aligned to the stripe, two-phase forced, 16 MiB: four rounds of 2 stripes
    assert (got["cb_nodes"], got["romio_aggregator_list"].split()) == ("4", ["0", "1", "2", "3"])
    assert (got["striping_unit"], got["romio_cb_write"], got["cb_config_list"]) == ("2097152", "enable", "*:4")
    assert got["cb_buffer_size"] == str(16 * MiB)
    assert "UFS" in got["romio_filesystem_type"]  # the generic driver: no striping_factor, no romio_lustre_*
    assert lum.decode(os.getxattr(job.path("h"), "user.lustre.lov")).components[3].end == LUSTRE_EOF
    # fewer ranks than components: each aggregator takes two whole components
    job.path("h").unlink()
    got = job.hints("h", n=2)
    assert (got["cb_nodes"], got["cb_config_list"], got["striping_unit"]) == ("2", "*:2", "2097152")


def test_other_files_get_none_of_the_hints(job):
    job.plan({"plain": "c=4,S=1048576", "pfl": "0-4194304/S=1048576,c=1;4194304-EOF/S=1048576,c=4"})
    alone = job.hints("alone", iez=False)  # MPI without libiez
    assert alone["cb_nodes"] == "1" and "striping_unit" not in alone
    for name in ("plain", "pfl", "unplanned"):
        assert job.hints(name) == alone, name
    assert parse_layout("c=4,S=1048576").plain.stripe_count == 4
    # a hierarchical file opened by one rank (MPI_COMM_WORLD of 1) is not shared: no hints
    job.plan({"h": HIERARCHICAL})
    assert job.hints("h", n=1) == job.hints("alone1", n=1, iez=False)


def test_the_applications_hints_win(job):
    job.plan({"h": HIERARCHICAL})
    got = job.hints("h", "cb_nodes=2", "cb_config_list=*:2", "romio_cb_write=disable", "cb_buffer_size=1048576")
    assert (got["cb_nodes"], got["cb_config_list"], got["romio_cb_write"], got["cb_buffer_size"]) == \
        ("2", "*:2", "disable", "1048576")
    assert got["striping_unit"] == "2097152"  # only added where the application said nothing
    # its own cb_nodes alone: iez does not widen the host's aggregators behind its back either
    job.path("h").unlink()
    got = job.hints("h", "cb_nodes=3")
    assert (got["cb_config_list"], got["cb_nodes"]) == ("*:1", "1")


def test_a_romio_hints_file_wins_too(job):
    # ROMIO takes hints added to the MPI_Info over its ROMIO_HINTS file's: iez leaves the file's keys alone
    job.plan({"h": HIERARCHICAL})
    hints = job.tmp / "romio-hints"
    hints.write_text("cb_nodes 2\n  romio_cb_write disable\n")
    got = job.hints("h", ROMIO_HINTS=str(hints))
    # the file's cb_nodes under ROMIO's one aggregator per host, as an application's own (above)
    assert (got["cb_nodes"], got["cb_config_list"], got["romio_cb_write"]) == ("1", "*:1", "disable")
    assert got["striping_unit"] == "2097152"  # keys the file does not set are still added


@pytest.mark.parametrize("spec", [
    # the components' stripe sizes differ: not one hierarchical layout
    "0-4194304/S=2097152,c=2,o=0:4;4194304-EOF/S=1048576,c=2,o=1:5",
    # 7 components, 4 ranks: no whole number of components per aggregator
    ";".join(f"{g * 2 * MiB}-{(g + 1) * 2 * MiB if g < 6 else 'EOF'}/S=1048576,c=2,o={g}:{g + 8}" for g in range(7)),
    # no OST lists: a PFL template, not subsets
    "0-8388608/S=2097152,c=2;8388608-EOF/S=2097152,c=2",
])
def test_no_hints_when_they_cannot_be_built(job, spec):
    parse_layout(spec)  # a valid plan entry all the same
    job.plan({"f": spec})
    assert job.hints("f") == job.hints("alone", iez=False)
    assert "split writing" not in job.log()


def test_a_rejected_plan_adds_no_hints(job):
    (job.tmp / "plan").write_text(f"#iez-plan 1\n{job.path('h')}\t{HIERARCHICAL};garbage\n")
    assert job.hints("h") == job.hints("alone", iez=False)
    assert "plan rejected" in job.log()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def writers(job: Job, path: Path) -> dict[int, list[tuple[int, int]]]:
    """The (offset, end) of each process's writes to path, from the I/O event log."""
    events, skipped = read_event_dir(job.tmp / "iolog")
    assert not skipped
    out: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        if e.op == "write" and e.path == str(path) and e.length:
            out.setdefault(e.pid, []).append((e.offset, e.offset + e.length))
    return out


def test_collective_iez_bench_writes_each_component_from_one_aggregator(job, tmp_path):
    job.plan({"ior": HIERARCHICAL})
    bench = [BENCH, "-a", "MPIIO", "-c", "-b", "4m", "-t", "1m", "-s", "1", "-k", "-w", "-o"]
    job.mpi(RANKS, [*bench, job.path("ior")])
    job.mpi(RANKS, [*bench, tmp_path / "ref"], iez=False)  # the same run without iez, off the cluster
    f = job.path("ior")
    assert f.stat().st_size == RANKS * BLOCK and digest(f) == digest(tmp_path / "ref")
    got = lum.decode(os.getxattr(f, "user.lustre.lov"))
    assert [(c.start, c.end, c.layout.osts) for c in got.components] == \
        [(c.start, c.end, c.layout.osts) for c in parse_layout(HIERARCHICAL).components]
    # four aggregators, each writing its component's 4 MiB and nothing else
    by_pid = writers(job, f)
    assert len(by_pid) == RANKS
    spans = sorted((min(a for a, _ in w), max(b for _, b in w), sum(b - a for a, b in w)) for w in by_pid.values())
    assert spans == [(g * BLOCK, (g + 1) * BLOCK, BLOCK) for g in range(RANKS)]
    # one create: rank 0's, with the plan's layout; the other ranks only open the file
    recs = [r for r in read_trace(job.tmp / "traces").records if r.path == str(f)]
    assert {r.rank for r in recs} == set(range(RANKS))
    assert [(r.rank, r.api) for r in recs if r.created] == [(0, "mpiio")]


def test_without_the_hints_one_aggregator_writes_every_component(job):
    """What the hints change. ROMIO writes IOR's contiguous blocks without two-phase unless told
    to; told to (romio_cb_write=enable, the application's hint) but without iez's hints, its one
    aggregator per host writes all four components. With them, each component has its own."""
    job.plan({"with": HIERARCHICAL, "without": HIERARCHICAL})
    job.hints("with", write=BLOCK)
    job.hints("without", n=1)  # rank 0 alone creates it with the plan's layout: no hints apply
    assert len(lum.decode(os.getxattr(job.path("without"), "user.lustre.lov")).components) == 4
    got = job.hints("without", "romio_cb_write=enable", write=BLOCK)
    assert (got["cb_nodes"], got["striping_unit"] if "striping_unit" in got else None) == ("1", None)
    (only,) = writers(job, job.path("without")).values()
    assert (min(a for a, _ in only), max(b for _, b in only)) == (0, RANKS * BLOCK)
    spans = sorted((min(a for a, _ in w), max(b for _, b in w)) for w in writers(job, job.path("with")).values())
    assert spans == [(g * BLOCK, (g + 1) * BLOCK) for g in range(RANKS)]


H5MPI = LIBDIR / "iez-test-h5-mpi"


def data_writes(job: Job, path: Path) -> dict[int, list[tuple[int, int]]]:
    """The collective data writes (HDF5's metadata: small writes below its first 2 KiB left out)."""
    return {pid: [(a, b) for a, b in w if b - a >= 64 << 10] for pid, w in writers(job, path).items()}


def component_of(spec: str, a: int, b: int) -> int | None:
    """The one component of spec holding all of [a, b), or None."""
    for g, c in enumerate(parse_layout(spec).components):
        if c.start <= a and (c.end == LUSTRE_EOF or b <= c.end):
            return g
    return None


def test_parallel_hdf5_gets_the_hints_too(job, tmp_path):
    """Parallel H5Fcreate places the file (rank 0 creates it from the plan) before HDF5's own
    MPI_File_open finds it existing: that open still gets the hints, and HDF5's collective write
    of four 4 MiB slices (after its 2 KiB of metadata) has each aggregator inside one component."""
    need_built(H5MPI)
    job.plan({"h.h5": HIERARCHICAL})
    job.mpi(RANKS, [H5MPI, job.path("h.h5"), BLOCK])
    job.mpi(RANKS, [H5MPI, tmp_path / "ref.h5", BLOCK], iez=False)
    f, ref = job.path("h.h5"), tmp_path / "ref.h5"
    # the data after HDF5's metadata are the bytes of a run without iez (the metadata hold a time)
    assert f.stat().st_size == ref.stat().st_size > RANKS * BLOCK
    assert f.read_bytes()[2048:] == ref.read_bytes()[2048:]
    assert len(lum.decode(os.getxattr(f, "user.lustre.lov")).components) == 4
    by_pid = data_writes(job, f)
    assert sorted(component_of(HIERARCHICAL, min(a for a, _ in w), max(b for _, b in w))
                  for w in by_pid.values() if w) == [0, 1, 2, 3]
    assert sum(b - a for w in by_pid.values() for a, b in w) == RANKS * BLOCK


COLLWRITE = LIBDIR / "iez-test-collwrite"
KiB = 1 << 10


def subsets(groups: int, comp: int, size: int, count: int) -> str:
    """A hierarchical layout: `groups` components of `comp` bytes (the last to EOF), each of
    `count` stripes of `size` bytes on its own OSTs."""
    return ";".join(f"{g * comp}-{(g + 1) * comp if g < groups - 1 else 'EOF'}/S={size},c={count},o=" +
                    ":".join(str(g * count + i) for i in range(count)) for g in range(groups))


FUZZED = [subsets(4, 512 * KiB, 65536, 2), subsets(5, 256 * KiB, 131072, 3), subsets(3, 1 << 20, 65536, 4)]


# (ranks, seed, iterations): one rank (MPI's own write: nothing to aggregate), fewer ranks than
# components, as many, more, and 16 oversubscribed on a small machine (fewer writes, seconds each)
@pytest.mark.parametrize("ranks,seed,iterations,nfiles", [(1, 31, 20, 2), (2, 32, 12, 2), (3, 33, 10, 2),
                                                          (5, 34, 6, 2), (16, 36, 3, 1)])
def test_fuzzed_aggregated_writes_equal_mpichs_and_stay_in_their_components(job, ranks, seed, iterations, nfiles):
    need_built(COLLWRITE)
    specs = [FUZZED[(seed + i) % len(FUZZED)] for i in range(nfiles)]
    job.plan({f"f{i}": spec for i, spec in enumerate(specs)})
    files = [job.path(f"f{i}") for i in range(nfiles)]
    (job.tmp / "ref").mkdir()
    # libiez aggregates with two ranks or more, and never writes a byte no rank wrote (MPICH may:
    # its two-phase write fills a hole past EOF from its buffer)
    holes = ["--zero-holes"] if ranks > 1 else []
    out = job.mpi(ranks, [COLLWRITE, *holes, seed, iterations, job.tmp / "ref", *files], IEZ_SPLIT="aggregate")
    assert f"collwrite fuzz: {ranks * nfiles * iterations} writes" in out
    assert "MPI's own write" not in job.log(), job.log()
    for f, spec in zip(files, specs):
        comps = parse_layout(spec).components
        assert len(lum.decode(os.getxattr(f, "user.lustre.lov")).components) == len(comps)
        by_pid = writers(job, f)
        if ranks == 1:  # MPI's own write; nothing of libiez's
            assert len(by_pid) <= 1
            continue
        # every write inside one component, every component written by one aggregator, and,
        # with a rank for each component, every aggregator inside one component
        owner: dict[int, set[int]] = {}
        for pid, spans in by_pid.items():
            for a, b in spans:
                g = component_of(spec, a, b)
                assert g is not None, (pid, a, b)
                owner.setdefault(g, set()).add(pid)
        assert all(len(pids) == 1 for pids in owner.values()), owner
        if ranks >= len(comps):
            assert all(len({component_of(spec, a, b) for a, b in spans}) == 1 for spans in by_pid.values())


@pytest.mark.parametrize("mode", ["aggregate", "hints", "off"])
def test_the_split_modes_on_iez_bench_and_parallel_hdf5(job, tmp_path, mode):
    """IEZ_SPLIT: libiez's own aggregation, ROMIO's hints, or neither, on IOR's collective shared
    file and on parallel HDF5's: the same bytes as without iez each time; with aggregation or the
    hints each data write inside one component, four components from four writers; with neither,
    HDF5's slices, after its 2 KiB of metadata, straddle them (IOR's blocks are the components:
    ROMIO writes them independently, one per rank)."""
    need_built(H5MPI)
    job.plan({"ior": HIERARCHICAL, "h.h5": HIERARCHICAL})
    bench = [BENCH, "-a", "MPIIO", "-c", "-b", "4m", "-t", "1m", "-s", "1", "-k", "-w", "-o"]
    job.mpi(RANKS, [*bench, job.path("ior")], IEZ_SPLIT=mode)
    job.mpi(RANKS, [*bench, tmp_path / "ref"], iez=False)
    job.mpi(RANKS, [H5MPI, job.path("h.h5"), BLOCK], IEZ_SPLIT=mode)
    job.mpi(RANKS, [H5MPI, tmp_path / "ref.h5", BLOCK], iez=False)
    assert digest(job.path("ior")) == digest(tmp_path / "ref")
    assert job.path("h.h5").read_bytes()[2048:] == (tmp_path / "ref.h5").read_bytes()[2048:]
    assert "MPI's own write" not in job.log(), job.log()
    for f in (job.path("ior"), job.path("h.h5")):
        spans = [s for w in data_writes(job, f).values() for s in w]
        comps = [component_of(HIERARCHICAL, min(a for a, _ in w), max(b for _, b in w))
                 for w in data_writes(job, f).values() if w]
        if mode == "off":
            assert f.name == "ior" or any(component_of(HIERARCHICAL, a, b) is None for a, b in spans), f
        else:
            assert sorted(comps) == [0, 1, 2, 3], (f, comps)


def test_a_view_one_rank_cannot_have_served_takes_every_rank_to_mpichs_write(job):
    """Rank 0's contiguous views are darrays (the same bytes), which libiez does not flatten: its
    refusal reaches every rank in the first exchange, all of them make MPICH's write (no rank
    waits alone), the bytes are still MPICH's, and each process logs it once."""
    need_built(COLLWRITE)
    job.plan({"f0": FUZZED[0]})
    (job.tmp / "ref").mkdir()
    out = job.mpi(3, [COLLWRITE, "--darray", 41, 8, job.tmp / "ref", job.path("f0")], IEZ_SPLIT="aggregate")
    assert "collwrite fuzz: 24 writes" in out
    assert job.log().count("a view, type or file it cannot serve") == 3
    assert "MPI's own write" in job.log()
