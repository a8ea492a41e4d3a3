"""Darshan logs -> FileRecords -> Requests, on the real IOR/VPIC logs pydarshan ships and on the
logs tests/vectors/make_darshan_logs.py rewrote from them (tests/vectors/darshan/)."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iez.trace.darshan import read_log
from iez.trace.ingest import TraceError, ingest

VECTORS = Path(__file__).resolve().parent / "vectors"


def need_log(name: str) -> Path:
    try:
        from darshan.log_utils import get_log_path
    except ImportError:
        pytest.fail("pydarshan is not installed: .venv/bin/pip install darshan")
    p = Path(get_log_path(name))
    if not p.is_file():
        pytest.fail(f"{name} is not shipped with this pydarshan: .venv/bin/pip install 'darshan>=3.4'")
    return p


@pytest.fixture(scope="module")
def badost():
    return read_log(need_log("sample-badost.darshan"))


def test_sample_logs_are_local_files():
    # get_log_path must resolve inside the installed wheel, with no download.
    for name in ("sample-badost.darshan", "sample-goodost.darshan", "sample.darshan"):
        p = need_log(name)
        assert "site-packages/darshan" in str(p) and p.stat().st_size > 1000


def test_badost_fpp_records_match_pydarshan_own_tables(badost):
    import darshan as pd_darshan

    rep = pd_darshan.DarshanReport(str(need_log("sample-badost.darshan")), read_all=False)
    rep.mod_read_all_records("POSIX", dtype="pandas")
    posix = rep.records["POSIX"][0]["counters"]
    rep.mod_read_all_lustre_records(dtype="pandas")
    lustre = rep.records["LUSTRE"][0]["components"]
    assert badost.nprocs == 2048 and badost.jobid == 6265799
    written = {int(r): int(b) for r, b in zip(posix["rank"], posix["POSIX_BYTES_WRITTEN"]) if b > 0}
    osts = {int(r): [int(i) for i in ids] for r, ids in zip(lustre["rank"], lustre["LUSTRE_OST_IDS"])}
    mine = {r.rank: r for r in badost.records}
    assert len(mine) == len(written) == 2048
    for rank, rec in mine.items():
        assert rec.created and rec.api == "posix" and rec.comm_size == 1
        assert rec.bytes_written == written[rank]
        assert list(rec.osts) == osts[rank] and rec.stripe_count == 1 and rec.stripe_size == 1 << 20
        assert rec.layout == f"S=1048576,c=1,o={osts[rank][0]}"
        assert rec.path.endswith(f"ior-posix.out.{rank:08d}")
    # the input deck lives on a DVS mount, not Lustre; the outputs have their LUSTRE records
    assert badost.warnings == ["1 file skipped: not on Lustre (no LUSTRE record, under no Lustre mount)"]
    assert badost.notes == ["2048 files on Lustre by the LUSTRE record"]
    assert badost.decisions == {"lustre_record": 2048, "off_lustre": 1, "files": 2049, "read_only": 1}


def test_badost_ingests_to_one_request_per_rank(badost):
    got = ingest(badost.records, app="ior")
    assert len(got.requests) == 2048
    assert {q.write_bytes for q in got.requests} == {256 << 20}  # 64 segments x 4 MiB (-s 64)
    assert sorted(q.rank for q in got.requests) == list(range(2048))
    assert all(q.observed is not None and len(q.observed.osts()) == 1 for q in got.requests)
    # ior -t 4m: every write 4 MiB, none off Lustre's 1 MiB block (POSIX_FILE_NOT_ALIGNED 0)
    assert {(q.writers, q.transfer_size, q.write_align) for q in got.requests} == {(1, 4 << 20, 1 << 20)}
    assert all(0 <= q.create_time < badost.records[0].close_time - badost.start_time for q in got.requests)


def test_goodost_bytes_follow_the_ior_command_line():
    log = read_log(need_log("sample-goodost.darshan"))
    # ior -t 8m -b 256m -s 4 -F: every process writes its own file of 4 x 256 MiB
    m = re.search(r"-b (\d+)m -s (\d+) -F", log.exe)
    assert m, log.exe
    per_file = int(m.group(1)) * int(m.group(2)) << 20
    got = ingest(log.records, app="ior")
    assert len(got.requests) == log.nprocs == 48
    assert {q.write_bytes for q in got.requests} == {per_file}
    assert {q.comm_size for q in got.requests} == {1}
    assert {(q.writers, q.transfer_size, q.write_align) for q in got.requests} == {(1, 8 << 20, 1 << 20)}


def test_vpic_shared_hdf5_file_is_one_ssf_request():
    log = read_log(need_log("sample.darshan"))
    assert {r.api for r in log.records} == {"posix", "mpiio"}
    [q] = ingest(log.records, app="vpic").requests
    assert q.path.endswith("/vpicio/vpicio.hdf5")
    assert q.comm_size == 2048 and q.api == "mpiio" and q.rank == 0
    posix = next(r for r in log.records if r.api == "posix")
    assert q.write_bytes == posix.bytes_written  # not MPI-IO + POSIX
    assert q.stripe_count == 24 and len(set(q.observed.osts())) == 24
    # the shared records stand for all 2048 ranks; VPIC's collective calls write 128 MiB each
    # (MPIIO_ACCESS1_ACCESS); MPI-IO keeps no offsets, so the alignment is not known
    assert (q.writers, q.transfer_size, q.write_align) == (2048, 128 << 20, 0)
    assert posix.transfer_size == 128 << 20 and posix.write_align == 0  # 16401 accesses off 1 MiB


def truncated(tmp_path: Path, name: str, keep: int) -> Path:
    src = need_log(name).read_bytes()
    out = tmp_path / f"{name}.{keep}"
    out.write_bytes(src[:keep] if keep >= 0 else src[:len(src) + keep])
    return out


@pytest.mark.parametrize("keep", [0, 100, 2000, 150000, -650, -1])
def test_truncated_logs_are_one_line_errors(tmp_path, keep):
    p = truncated(tmp_path, "sample-badost.darshan", keep)
    with pytest.raises(TraceError) as e:
        read_log(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    assert re.search(r"corrupt or truncated|not a readable Darshan log", msg)


def test_corrupted_bytes_are_one_line_errors_not_crashes(tmp_path):
    # Flips in the compressed regions; in-process, several make libdarshan-util abort().
    src = bytearray(need_log("sample-goodost.darshan").read_bytes())
    rng = random.Random(4)
    for i in range(6):
        b = bytearray(src)
        pos = rng.randrange(1200, 3300) if i < 3 else rng.randrange(len(b))
        for k in range(4):
            b[pos + k] ^= 0xFF
        p = tmp_path / f"flip{i}.darshan"
        p.write_bytes(bytes(b))
        with pytest.raises(TraceError, match="corrupt or truncated Darshan log") as e:
            read_log(p)
        assert "\n" not in str(e.value)


def test_not_a_darshan_log(tmp_path):
    p = tmp_path / "x.darshan"
    p.write_text("hello\n" * 100)
    with pytest.raises(TraceError, match="not a readable Darshan log"):
        read_log(p)
    with pytest.raises(TraceError, match="no such Darshan log"):
        read_log(tmp_path / "missing.darshan")


def _counters(sizes, not_aligned=0, block=1 << 20, calls=None):
    c = {"POSIX_FILE_ALIGNMENT": block, "POSIX_FILE_NOT_ALIGNED": not_aligned, "POSIX_READS": 0,
         "POSIX_WRITES": sum(n for _, n in sizes) if calls is None else calls}
    for i, (size, n) in enumerate(sizes + [(0, 0)] * (4 - len(sizes)), 1):
        c[f"POSIX_ACCESS{i}_ACCESS"], c[f"POSIX_ACCESS{i}_COUNT"] = size, n
    return c


@pytest.mark.parametrize("sizes, kw, want", [
    ([(4 << 20, 64)], {}, (4 << 20, 1 << 20)),  # the block bounds the alignment from below only
    ([(3 << 20, 10), (1 << 20, 12)], {}, (1 << 20, 1 << 20)),  # the most common size; 3 MiB is 1 MiB-aligned
    ([(1 << 20, 12), (1000, 1)], {}, (1 << 20, 8)),  # 1000 = 8 x 125
    ([(1 << 20, 12)], {"not_aligned": 1}, (1 << 20, 0)),  # an access off the block: unknown
    ([(1 << 20, 12)], {"calls": 20}, (1 << 20, 0)),  # sizes beyond the four kept: unknown
    ([], {}, (0, 0)),
])
def test_access_facts_from_counters(sizes, kw, want):
    from iez.trace.darshan import _access_facts

    assert _access_facts(_counters(sizes, **kw), "POSIX") == want


def vector(name: str) -> Path:
    p = VECTORS / "darshan" / name
    assert p.is_file(), f"{p} is missing: .venv/bin/python tests/vectors/make_darshan_logs.py"
    return p


def test_a_file_with_a_lustre_record_is_on_lustre_whatever_the_mount_table_says():
    """VPIC's 2 TiB file opened through a project directory that is a symbolic link to Lustre:
    no Lustre mount of the table holds its name, its LUSTRE record says where its stripes are."""
    log = read_log(vector("symlinked-project.darshan"))
    [q] = ingest(log.records, app="e3sm").requests
    assert q.path == "/projects/E3SM/run/vpicio.hdf5"
    assert q.write_bytes == 2199023259968 and q.comm_size == 2048 and q.stripe_count == 24
    assert q.observed is not None and len(set(q.observed.osts())) == 24
    assert log.decisions == {"lustre_record_unmounted": 1, "files": 1, "read_only": 0}
    assert log.warnings == [] and len(log.notes) == 1 and "symbolic link" in log.notes[0]


def test_reads_become_bytes_read_and_the_typical_read():
    """IOR reading back its 48 files: read-only records keep their bytes read and the most common
    access size as read_size; files off Lustre and anonymised names are skipped, and counted."""
    log = read_log(vector("read-only.darshan"))
    assert {(r.created, r.bytes_written, r.bytes_read, r.read_size, r.transfer_size) for r in log.records} == {
        (False, 0, 1 << 30, 8 << 20, 0)}  # -b 256m -s 4 a file, -t 8m
    got = ingest(log.records, app="ior")
    assert got.requests == [] and len(got.reads) == 44
    assert {(q.read_bytes, q.read_size, q.write_bytes) for q in got.reads} == {(1 << 30, 8 << 20, 0)}
    assert all(q.observed is not None for q in got.reads)
    assert log.decisions == {"lustre_record": 44, "off_lustre": 2, "anonymised": 2, "files": 48, "read_only": 48}
    assert log.warnings == ["2 files skipped: not on Lustre (no LUSTRE record, under no Lustre mount)",
                            "2 files skipped: anonymised (hashed) names"]


@pytest.mark.parametrize("name, want", [
    # darshan-convert --obfuscate: hashed names after their mount point, and a hashed executable
    ("noposix.darshan", {"anonymised": 2, "files": 2, "read_only": 1}),
    ("noposixopens.darshan", {"anonymised": 3, "files": 3, "read_only": 1}),
])
def test_anonymised_logs_are_counted_not_imported(name, want):
    log = read_log(need_log(name))
    assert log.records == [] and log.decisions == want
    assert log.warnings == [f"{want['anonymised']} files skipped: anonymised (hashed) names"]


def test_a_log_that_knows_no_lustre_keeps_every_file():
    from iez.trace.darshan import _decide

    # no LUSTRE record and no Lustre mount: the log cannot tell, the file is kept
    assert _decide("/data/out.h5", False, [("/", "ext4"), ("/data", "xfs")], False, False) == "unknown"
    assert _decide("/data/out.h5", False, [("/", "ext4"), ("/lus", "lustre")], True, False) == "off_lustre"
    assert _decide("/lus/p/out.h5", False, [("/", "ext4"), ("/lus", "lustre")], True, False) == "mount"
    # the deepest mount point decides: a DVS mount inside a Lustre path is not Lustre
    assert _decide("/lus/dvs/in", False, [("/lus", "lustre"), ("/lus/dvs", "dvs")], True, False) == "off_lustre"
    assert _decide("/lus/dvs/in", True, [("/lus", "lustre"), ("/lus/dvs", "dvs")], True, False) == (
        "lustre_record_unmounted")
    # a hashed name is one only in a log whose executable is hashed too
    assert _decide("/lus/12345", True, [("/lus", "lustre")], True, True) == "anonymised"
    assert _decide("/lus/12345", True, [("/lus", "lustre")], True, False) == "lustre_record"
    assert _decide("/lus/run/12345", True, [("/lus", "lustre")], True, True) == "lustre_record"
    assert _decide("3710437467", False, [], False, False) == "anonymised"


def test_the_vectors_are_what_their_script_writes(tmp_path):
    """The logs in tests/vectors/darshan come from make_darshan_logs.py: written again, they hold
    the same records."""
    subprocess.run([sys.executable, str(VECTORS / "make_darshan_logs.py"), str(tmp_path)], check=True,
                   capture_output=True, timeout=120)
    kept = sorted(p.name for p in (VECTORS / "darshan").glob("*.darshan"))
    assert kept == sorted(p.name for p in tmp_path.glob("*.darshan")) and len(kept) == 3
    for name in kept:
        a, b = read_log(vector(name)), read_log(tmp_path / name)
        assert (a.records, a.decisions, a.nprocs, a.exe) == (b.records, b.decisions, b.nprocs, b.exe), name
