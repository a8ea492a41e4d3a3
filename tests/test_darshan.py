"""Darshan logs -> FileRecords -> Requests, on the real IOR/VPIC logs pydarshan ships."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from iez.trace.darshan import read_log
from iez.trace.ingest import TraceError, ingest



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
    # the input deck lives on a DVS mount, not Lustre
    assert badost.warnings == ["1 records of files not on a Lustre mount skipped"]


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
