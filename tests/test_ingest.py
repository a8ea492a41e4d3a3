"""Trace ingestion: per-process FileRecords -> one Request per created file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iez.layout.layout import FileLayout, Layout
from iez.plan import parse_layout
from iez.trace.ingest import TraceError, ingest
from iez.trace.record import FileRecord

T0 = 1_700_000_000.0


def fpp(n: int = 8, size: int = 803405824, count: int = 8) -> list[FileRecord]:
    """HACC-I/O FPP as libiez records it: rank r creates and writes its own part file."""
    return [FileRecord(path=f"/mnt/iez/FPP1-Part{r:08d}-of-{n:08d}.data", app="hacc", run="7", rank=r,
                       created=True, bytes_written=size, stripe_count=count, stripe_size=1 << 20,
                       osts=tuple((r + k) % 15 for k in range(count)),
                       layout=f"S=1048576,c={count},o=" + ":".join(str((r + k) % 15) for k in range(count)),
                       open_time=T0 + 0.5 + 0.01 * (n - r), close_time=T0 + 9)
            for r in range(n)]


def test_fpp_gives_one_request_per_file_with_table_i_columns():
    got = ingest(fpp())
    assert len(got.requests) == 8 and got.not_created == 0
    # ordered by create time: rank 7 opened first here
    assert [q.rank for q in got.requests] == list(range(7, -1, -1))
    q = got.requests[-1]
    assert (q.path, q.write_bytes, q.stripe_count, q.rank) == (
        "/mnt/iez/FPP1-Part00000000-of-00000008.data", 803405824, 8, 0)
    assert (q.app, q.run, q.comm_size, q.api) == ("hacc", "7", 1, "posix")
    assert q.create_time == pytest.approx(0.07, abs=1e-6)  # 0.08 after rank 7, the first open
    assert q.observed == parse_layout("S=1048576,c=8,o=0:1:2:3:4:5:6:7")


def test_app_and_run_override_what_records_say():
    q = ingest(fpp(2), app="other", run="3").requests[0]
    assert (q.app, q.run) == ("other", "3")


def test_shared_file_sums_bytes_over_ranks_and_counts_the_communicator():
    recs = [FileRecord(path="/mnt/iez/ssf", rank=r, created=(r == 2), bytes_written=1000 + r,
                       open_time=T0 + r, stripe_count=4) for r in range(4)]
    [q] = ingest(recs).requests
    assert q.write_bytes == 4006
    assert q.comm_size == 4  # no MPI-IO record, but four ranks wrote it
    assert q.rank == 2 and q.create_time == 2.0
    assert q.stripe_count == 4 and q.observed is None


def test_stacked_layers_are_not_counted_twice():
    recs = []
    for r in range(4):
        recs.append(FileRecord(path="/mnt/iez/ssf.h5", rank=r, api="mpiio", created=True, bytes_written=250,
                               comm_size=4, open_time=T0))
        # collective buffering: only two aggregators reach POSIX, with all the bytes
        if r < 2:
            recs.append(FileRecord(path="/mnt/iez/ssf.h5", rank=r, api="posix", created=r == 0,
                                   bytes_written=500, open_time=T0))
    [q] = ingest(recs).requests
    assert q.write_bytes == 1000 and q.api == "mpiio" and q.comm_size == 4 and q.rank == 0


MiB = 1 << 20


def test_write_facts_of_a_collective_shared_file():
    """IOR-like: four ranks write 1 MiB MPI-IO calls at 1 MiB boundaries; ROMIO's two aggregators
    write 16 MiB beneath. The layout serves the application's calls: 4 writers, 1 MiB, 1 MiB."""
    recs = [FileRecord(path="/mnt/iez/ior", rank=r, pid=100 + r, api="mpiio", created=r == 0, comm_size=4,
                       bytes_written=64 * MiB, transfer_size=MiB, write_align=MiB, open_time=T0) for r in range(4)]
    recs += [FileRecord(path="/mnt/iez/ior", rank=r, pid=100 + r, bytes_written=128 * MiB, transfer_size=16 * MiB,
                        write_align=16 * MiB, open_time=T0) for r in range(2)]
    [q] = ingest(recs).requests
    assert (q.writers, q.transfer_size, q.write_align) == (4, MiB, MiB)


def test_write_facts_take_the_common_size_and_the_least_alignment():
    """Rank 0 also wrote an unaligned 8 KiB header: the transfer size stays the ranks' common
    4 MiB, the alignment falls to the header's; a rank that only read is no writer."""
    recs = [FileRecord(path="/mnt/iez/ssf", rank=r, pid=r, created=r == 0, bytes_written=1 << 30,
                       transfer_size=4 * MiB, write_align=4 * MiB, open_time=T0) for r in range(1, 6)]
    recs += [FileRecord(path="/mnt/iez/ssf", rank=0, pid=0, created=True, bytes_written=1 << 30,
                        transfer_size=8 * MiB, write_align=8, open_time=T0),
             FileRecord(path="/mnt/iez/ssf", rank=6, pid=6, bytes_read=100, open_time=T0)]
    [q] = ingest(recs).requests
    assert (q.writers, q.transfer_size, q.write_align) == (6, 4 * MiB, 8)


def test_write_facts_unknown_and_processes_counted():
    # a fork child of rank 0 writing too is one more writer; nothing known of the writes
    recs = [FileRecord(path="/mnt/iez/a", pid=p, created=p == 1, bytes_written=10, open_time=T0) for p in (1, 2)]
    # MPI-IO under a view of MPI_INT: the size is known, not where the calls started
    recs += [FileRecord(path="/mnt/iez/b", rank=r, api="mpiio", created=r == 0, bytes_written=10,
                        transfer_size=4096, open_time=T0) for r in range(3)]
    # Darshan's shared record stands for every rank; nothing written: no writer
    recs += [FileRecord(path="/mnt/iez/c", created=True, bytes_written=5, writers=512, open_time=T0),
             FileRecord(path="/mnt/iez/d", created=True, open_time=T0)]
    got = {q.path[-1]: (q.writers, q.transfer_size, q.write_align) for q in ingest(recs).requests}
    assert got == {"a": (2, 0, 0), "b": (3, 4096, 0), "c": (512, 0, 0), "d": (0, 0, 0)}


def test_files_not_created_by_the_run_are_counted_not_requested():
    recs = fpp(2) + [FileRecord(path="/mnt/iez/input.deck", bytes_read=4096, open_time=T0),
                     FileRecord(path="/mnt/iez/log", bytes_written=10, open_time=T0)]  # appended to
    got = ingest(recs)
    assert len(got.requests) == 2 and got.not_created == 2


def test_read_only_files_are_reads():
    """Files the run read but did not create are Ingested.reads: read bytes as write bytes are
    counted (the largest layer total), the readers' common largest read, the first reader's host;
    a file also written in place keeps its bytes."""
    recs = [FileRecord(path="/mnt/iez/deck", rank=r, pid=r, host=f"n{r}", bytes_read=MiB, read_size=MiB,
                       open_time=T0 + r) for r in range(3)]
    recs += [FileRecord(path="/mnt/iez/deck", rank=0, pid=0, api="mpiio", bytes_read=3 * MiB, read_size=4 * MiB,
                        open_time=T0),
             FileRecord(path="/mnt/iez/db", bytes_read=10, bytes_written=4, read_size=16, open_time=T0 + 5)]
    got = ingest(fpp(1) + recs)
    assert len(got.requests) == 1 and got.not_created == 2
    assert [(q.path, q.read_bytes, q.read_size, q.write_bytes, q.host) for q in got.reads] == [
        ("/mnt/iez/deck", 3 * MiB, 4 * MiB, 0, "n0"), ("/mnt/iez/db", 10, 16, 4, "")]


def test_writer_segments_of_the_layer_that_knows_them():
    """MPI-IO's calls tell each rank's extents (one block each) where ROMIO's aggregated POSIX
    writes beneath do not; a layer with a record that does not know stays out; 0 when none knows."""
    recs = [FileRecord(path="/mnt/iez/ssf", rank=r, pid=r, api="mpiio", created=r == 0, bytes_written=MiB,
                       writer_segments=1, open_time=T0) for r in range(4)]
    recs += [FileRecord(path="/mnt/iez/ssf", rank=r, pid=r, bytes_written=2 * MiB, writer_segments=9,
                        open_time=T0) for r in range(2)]
    recs += [FileRecord(path="/mnt/iez/seg", pid=p, created=p == 0, bytes_written=10, writer_segments=3 + p,
                        open_time=T0) for p in range(2)]
    recs += [FileRecord(path="/mnt/iez/shared-ptr", rank=r, api="mpiio", created=r == 0, bytes_written=10,
                        writer_segments=0 if r else 2, open_time=T0) for r in range(2)]
    # HACC-IO: rank 0 writes the header apart from its block; the writers' most common count wins
    recs += [FileRecord(path="/mnt/iez/hacc", rank=r, pid=r, created=r == 0, bytes_written=MiB,
                        writer_segments=2 if r == 0 else 1, open_time=T0) for r in range(4)]
    got = {q.path.rsplit("/", 1)[1]: q.writer_segments for q in ingest(recs).requests}
    assert got == {"ssf": 1, "seg": 4, "shared-ptr": 0, "hacc": 1}


def test_final_path_from_renames():
    recs = [FileRecord(path="/mnt/iez/.out.Xy12ab", created=True, bytes_written=5, renamed_to="/mnt/iez/out",
                       open_time=T0), FileRecord(path="/mnt/iez/kept", created=True, open_time=T0)]
    assert {q.path: q.final_path for q in ingest(recs).requests} == {"/mnt/iez/.out.Xy12ab": "/mnt/iez/out",
                                                                     "/mnt/iez/kept": ""}


def test_generated_name_parts_from_mkstemp_and_the_mktemp_command():
    """The wrappers' count is kept; a name the `mktemp` command created has its last part
    (after '.', '-', '_', or the whole base name) of 3 or more letters and digits generated;
    other programs' names, or a writer that did not create the file, say nothing."""
    def rec(path, program, n=0, created=True):
        return FileRecord(path=path, created=created, program=program, name_random=n, open_time=T0)
    recs = [rec("/s/a.Xy12ab", "app", 6), rec("/s/tmp.Qz81kLm0Pq", "mktemp"), rec("/s/job-ab1", "mktemp"),
            rec("/s/XyZ123", "mktemp"), rec("/s/x.Ab", "mktemp"), rec("/s/run.a_b-c.Q", "mktemp"),
            rec("/s/out.Qz81kLm0Pq", "cat"), rec("/s/tmp.Qz81kLm0Pq", "sh", created=False)]
    got = {q.path: q.name_random for q in ingest(recs).requests}
    assert got == {"/s/a.Xy12ab": 6, "/s/tmp.Qz81kLm0Pq": 10, "/s/job-ab1": 3, "/s/XyZ123": 6, "/s/x.Ab": 0,
                   "/s/run.a_b-c.Q": 0, "/s/out.Qz81kLm0Pq": 0}


def test_a_created_empty_file_is_still_a_request():
    [q] = ingest([FileRecord(path="/mnt/iez/empty", created=True, open_time=T0)]).requests
    assert q.write_bytes == 0 and q.stripe_count == 1


def test_observed_layout_from_osts_when_no_layout_string():
    rec = FileRecord(path="/mnt/iez/f", created=True, bytes_written=5, stripe_size=1 << 20, osts=(3, 4))
    [q] = ingest([rec]).requests
    assert q.observed == FileLayout(plain=Layout(stripe_size=1 << 20, osts=(3, 4)))
    assert q.stripe_count == 2


def test_pfl_layout_and_pool_are_kept():
    spec = "0-67108864/S=1048576,c=1,p=fast,o=2;67108864-EOF/S=4194304,c=2,p=fast,o=1:5"
    [q] = ingest([FileRecord(path="/mnt/iez/ckpt", created=True, layout=spec)]).requests
    assert q.observed == parse_layout(spec) and q.pool == "fast" and q.stripe_count == 1


def test_plan_hits_and_misses_are_counted_per_created_file():
    recs = fpp(4)
    recs = [r if r.rank % 2 else FileRecord(**{**r.__dict__, "plan_hit": r.rank == 0}) for r in recs]
    got = ingest(recs)
    assert (got.plan_hits, got.plan_misses) == (1, 1)


def test_empty_trace_gives_nothing():
    got = ingest([])
    assert got.requests == [] and got.not_created == 0


@pytest.mark.parametrize("rec, msg", [
    (FileRecord(path="rel/file", created=True), "relative path"),
    (FileRecord(path="/mnt/x", created=True, layout="S=12345"), "/mnt/x: bad layout"),
    (FileRecord(path="/mnt/x", created=True, layout="c=2,o=1:1"), "/mnt/x: bad layout"),
    (FileRecord(path="/mnt/x", created=True, api="nfs4"), "unknown API 'nfs4'"),
    (FileRecord(path="/mnt/x", created=True, bytes_written=-5), "negative"),
    (FileRecord(path="/mnt/x", created=True, bytes_written=5, transfer_size=-1), "negative"),
    (FileRecord(path="/mnt/x", created=True, bytes_read=-1), "negative"),
    (FileRecord(path="/mnt/x", created=True, bytes_written=5, writer_segments=-2), "negative"),
])
def test_bad_records_are_one_line_errors(rec, msg):
    with pytest.raises(TraceError, match=msg) as e:
        ingest([rec])
    assert "\n" not in str(e.value)


records = st.builds(
    FileRecord,
    path=st.sampled_from([f"/mnt/iez/f{i}" for i in range(6)]),
    rank=st.integers(0, 7),
    created=st.booleans(),
    bytes_written=st.integers(0, 1 << 40),
    open_time=st.floats(T0, T0 + 100),
    comm_size=st.integers(1, 16),
)


@given(st.lists(records, max_size=40))
def test_bytes_are_conserved_for_one_layer(recs):
    got = ingest(recs)
    created = {r.path for r in recs if r.created}
    assert {q.path for q in got.requests} == created
    assert got.not_created == len({r.path for r in recs}) - len(created)
    for q in got.requests:
        mine = [r for r in recs if r.path == q.path]
        assert q.write_bytes == sum(r.bytes_written for r in mine)
        assert q.comm_size >= len({r.rank for r in mine})
        assert q.rank == min(r.rank for r in mine if r.created)
        assert 0.0 <= q.create_time <= 100.0
