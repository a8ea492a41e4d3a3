"""iez-bench, the workload program (bench_app/, docs/iez-bench.md): real runs in temp dirs.

File names, sizes and the bytes at IOR's offsets (FPP and segment-major SSF), HACC-IO's files
(header, variables in order, values), --verify catching a corrupted byte, one-line error exits,
no process left behind when a rank dies or the launcher is stopped, ranks as libiez records
them, and the Python helper iez.workload.bench."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import BUILD, need_built
from iez.errors import ConfigError
from iez.trace.shard import read_shards
from iez.workload import bench as wb

HEADER_META = 16
VAR_TYPES = [np.float32] * 7 + [np.int64, np.uint16]


def exe() -> str:
    path = BUILD / "bench_app" / "iez-bench"
    need_built(path)
    return str(path)


def bench(*args: str, check: int | None = 0, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([exe(), *args], capture_output=True, text=True, timeout=60, **kw)
    if check is not None:
        assert r.returncode == check, f"rc {r.returncode}: {r.stderr}"
    return r


def report(*args: str, check: int = 0) -> dict:
    r = bench(*args, "--json", check=check)
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


def error_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("iez-bench: error: "), lines[0]
    return lines[0].removeprefix("iez-bench: error: ")


def words(path: Path) -> np.ndarray:
    return np.frombuffer(path.read_bytes(), dtype="<u8")


def ior_expected(offsets: np.ndarray, ranks: np.ndarray, signature: int = 0) -> np.ndarray:
    return ((ranks.astype(np.uint64) << np.uint64(48)) | offsets.astype(np.uint64)) ^ np.uint64(signature)


# -- IOR-like --------------------------------------------------------------------------------

def test_ior_fpp_names_sizes_and_pattern(tmp_path):
    rep = report("-n", "3", "-F", "-b", "64k", "-t", "16k", "-s", "2", "-o", str(tmp_path / "testFile"), "-k")
    names = [f"testFile.{r:08d}" for r in range(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert rep["files"] == [str(tmp_path / n) for n in names]
    assert (rep["mode"], rep["ranks"], rep["aggregate_bytes"]) == ("fpp", 3, 3 * 2 * 65536)
    for rank, name in enumerate(names):
        w = words(tmp_path / name)
        assert w.size * 8 == 2 * 65536
        offsets = np.arange(w.size, dtype=np.uint64) * 8
        assert np.array_equal(w, ior_expected(offsets, np.full(w.size, rank)))
    write, read = rep["phases"]
    assert (write["access"], read["access"]) == ("write", "read")
    for ph in (write, read):
        assert ph["bytes"] == 3 * 2 * 65536 and ph["ops"] == 3 * 2 * 4
        assert 0 < ph["xfer_s"] <= ph["total_s"] and ph["open_s"] <= ph["total_s"]
        assert ph["bw_mib_s"] == pytest.approx(ph["bytes"] / 2**20 / ph["total_s"], rel=1e-3)


def test_ior_ssf_is_segment_major(tmp_path):
    ranks, block, xfer, segs = 4, 32768, 8192, 3
    f = tmp_path / "shared"
    rep = report("-n", str(ranks), "-b", str(block), "-t", str(xfer), "-s", str(segs), "-o", str(f), "-k")
    assert rep["files"] == [str(f)] and rep["mode"] == "ssf"
    assert f.stat().st_size == segs * ranks * block
    w = words(f)
    offsets = np.arange(w.size, dtype=np.uint64) * 8
    owner = (offsets // block) % ranks  # block (seg, rank) sits at (seg*ranks + rank)*block
    assert np.array_equal(w, ior_expected(offsets, owner))
    raw = f.read_bytes()
    for seg in range(segs):
        for rank in range(ranks):
            for k in range(block // xfer):
                off = (seg * ranks + rank) * block + k * xfer
                assert struct.unpack_from("<Q", raw, off)[0] == (rank << 48) | off


def test_ior_removes_files_unless_kept_and_recreates_existing(tmp_path):
    f = tmp_path / "t"
    bench("-n", "2", "-F", "-b", "8k", "-t", "8k", "-o", str(f))
    assert list(tmp_path.iterdir()) == []  # IOR removes its files without -k
    old = tmp_path / "t.00000000"
    old.write_bytes(b"x" * 100000)
    witness = tmp_path / "witness"
    os.link(old, witness)  # holds the old inode, so a new file cannot reuse its number
    bench("-n", "2", "-F", "-b", "8k", "-t", "8k", "-o", str(f), "-k", "-w")
    assert old.stat().st_size == 8192 and old.stat().st_ino != witness.stat().st_ino  # removed, created anew
    assert witness.stat().st_size == 100000
    old.write_bytes(b"x" * 100000)
    bench("-n", "2", "-F", "-b", "8k", "-t", "8k", "-o", str(f), "-k", "-w", "-E")
    assert old.stat().st_size == 100000  # -E writes into the existing file
    assert old.read_bytes()[:8] == struct.pack("<Q", 0)


def test_signature_and_read_only_verify(tmp_path):
    f = str(tmp_path / "sig")
    common = ["-n", "2", "-b", "16k", "-t", "4k", "-o", f, "-k"]
    bench(*common, "-w", "-G", "0x5a5a")
    w = words(Path(f))
    offsets = np.arange(w.size, dtype=np.uint64) * 8
    assert np.array_equal(w, ior_expected(offsets, (offsets // 16384) % 2, 0x5A5A))
    ok = report(*common, "-r", "--verify", "-G", "0x5a5a")
    assert [p["access"] for p in ok["phases"]] == ["read"]
    assert ok["verify"] == {"checked": 32768, "mismatched": 0}
    r = bench(*common, "-r", "--verify", "-G", "0x5a5b", check=3)
    assert error_line(r).startswith("verify: 4096 of 32768 bytes differ")  # bit 0 of every word


def test_verify_catches_one_corrupted_byte(tmp_path):
    f = tmp_path / "ssf"
    common = ["-n", "3", "-b", "16k", "-t", "4k", "-s", "2", "-o", str(f), "-k"]
    bench(*common, "-w")
    bad = 2 * 16384 + 4096 + 3  # segment 0, rank 2, second transfer, byte 3 of a word
    data = bytearray(f.read_bytes())
    expected = data[bad]
    data[bad] ^= 0xFF
    f.write_bytes(bytes(data))
    r = bench(*common, "-r", "--verify", "--json", check=3)
    rep = json.loads(r.stdout)
    assert rep["verify"]["checked"] == 3 * 2 * 16384 and rep["verify"]["mismatched"] == 1
    assert rep["verify"]["first"] == {"rank": 2, "file": str(f), "offset": bad, "expected": expected,
                                      "found": expected ^ 0xFF}
    assert error_line(r) == f"verify: 1 of 98304 bytes differ from what was written; first: rank 2, {f} at offset {bad}"
    text = bench(*common, "-r", "--verify", check=3).stdout
    assert f"verify: 1 of 96 KiB differ; first: rank 2, {f} at offset {bad}" in text


def test_text_report_is_ior_like(tmp_path):
    out = bench("-n", "2", "-b", "1m", "-t", "256k", "-o", str(tmp_path / "f"), "--verify").stdout
    assert "IOR-like workload, api POSIX, 2 ranks (forked), single shared file" in out
    assert "block size         : 1 MiB" in out and "transfer size      : 256 KiB" in out
    assert "aggregate filesize : 2 MiB" in out
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split()[:1] in (["write"], ["read"])}
    assert set(rows) == {"write", "read"} and all(len(r) == 8 and r[3] == "8" for r in rows.values())
    assert "verify: 2 MiB checked, all as written" in out


# -- HACC-IO-like ----------------------------------------------------------------------------

def hacc_values(var: int, first_id: int, count: int, rank: int) -> np.ndarray:
    ids = np.arange(first_id, first_id + count, dtype=np.int64)
    if var < 7:
        return ids.astype(np.float32) + np.float32(0.25) * np.float32(var)
    return ids if var == 7 else np.full(count, rank, dtype=np.uint16)


def check_hacc_block(raw: bytes, off: int, first_id: int, count: int, rank: int) -> int:
    for var, dtype in enumerate(VAR_TYPES):
        got = np.frombuffer(raw, dtype=dtype, count=count, offset=off)
        assert np.array_equal(got.view(f"u{got.itemsize}"), hacc_values(var, first_id, count, rank).view(f"u{got.itemsize}"))
        off += count * np.dtype(dtype).itemsize
    return off


def test_hacc_fpp_files_header_and_variables(tmp_path):
    counts, header = [100, 250, 0, 7], 4096
    rep = report("--workload", "hacc-io", "-n", "4", "-F", "-p", ",".join(map(str, counts)),
                 "--header-size", str(header), "-o", str(tmp_path / "FPP1"))
    names = [f"FPP1-Part{r:08d}-of-00000004.data" for r in range(4)]
    assert sorted(p.name for p in tmp_path.iterdir()) == names and rep["files"] == [str(tmp_path / n) for n in names]
    assert rep["particles"] == counts and rep["record"] == 38
    for rank, name in enumerate(names):
        raw = (tmp_path / name).read_bytes()
        assert len(raw) == header + 38 * counts[rank]
        h = np.frombuffer(raw, dtype="<i8", count=header // 8)
        assert list(h[:9]) == [0, HEADER_META, header, 38, counts[rank], sum(counts), 1, 4, rank]
        assert list(h[HEADER_META:HEADER_META + 2]) == [counts[rank], rank] and not h[HEADER_META + 2:].any()
        end = check_hacc_block(raw, header, sum(counts[:rank]), counts[rank], rank)
        assert end == len(raw)
    write = rep["phases"][0]
    assert write["bytes"] == 4 * header + 38 * sum(counts)
    assert write["ops"] == 4 + 9 * 3  # a header each, nine variables for each rank with particles


def test_hacc_ssf_blocks_follow_the_ranks_before(tmp_path):
    counts = [3, 5, 2]
    rep = report("--workload", "hacc-io", "-n", "3", "-p", "3,5,2", "--header-size", "1024", "-o",
                 str(tmp_path / "ckpt"), "--verify")
    f = tmp_path / "ckpt-Part00000000-of-00000001.data"
    assert rep["files"] == [str(f)] and rep["verify"]["mismatched"] == 0
    raw = f.read_bytes()
    assert len(raw) == 1024 + 38 * 10
    h = np.frombuffer(raw, dtype="<i8", count=128)
    assert list(h[:9]) == [0, 16, 1024, 38, 10, 10, 3, 1, 0]
    assert list(h[16:22]) == [3, 5, 2, 0, 1, 2]
    off = 1024
    for rank, n in enumerate(counts):
        assert off == 1024 + 38 * sum(counts[:rank])
        off = check_hacc_block(raw, off, sum(counts[:rank]), n, rank)


def test_hacc_default_header_and_same_count(tmp_path):
    rep = report("--workload", "hacc-io", "-n", "2", "-F", "-p", "10", "-o", str(tmp_path / "x"), "-w")
    assert rep["header"] == 25165824 and rep["particles"] == [10, 10]
    assert all(os.path.getsize(p) == 25165824 + 380 for p in rep["files"])


@pytest.mark.parametrize("where", ["header", "mask"])
def test_hacc_verify_catches_one_corrupted_byte(tmp_path, where):
    common = ["--workload", "hacc-io", "-n", "2", "-p", "4,6", "--header-size", "512", "-o", str(tmp_path / "c")]
    bench(*common, "-w")
    f = tmp_path / "c-Part00000000-of-00000001.data"
    data = bytearray(f.read_bytes())
    # header word 4 (particles in the file), or rank 1's mask of its particle 2
    bad = 4 * 8 if where == "header" else 512 + 38 * 4 + (7 * 4 + 8) * 6 + 2 * 2
    data[bad] ^= 0x01
    f.write_bytes(bytes(data))
    rep = json.loads(bench(*common, "-r", "--verify", "--json", check=3).stdout)
    assert rep["verify"]["mismatched"] == 1
    assert rep["verify"]["first"]["offset"] == bad
    assert rep["verify"]["first"]["rank"] == (0 if where == "header" else 1)


# -- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, says", [
    (["-t", "100"], "multiple of 8"),
    (["-b", "100k", "-t", "64k"], "multiple of the transfer size"),
    (["-n", "0"], "number of ranks"),
    (["-n", "70000"], "number of ranks"),
    (["-a", "MPIIO"], "POSIX interface only"),
    (["-b", "12q"], "cannot read '12q' as a size"),
    (["-s", "0"], "at least one segment"),
    (["-w", "--verify"], "--verify checks what is read"),
    (["stray"], "unexpected argument 'stray'"),
    (["--bogus"], "unknown option --bogus"),
    (["-b"], "option -b needs a value"),
    (["-p", "5"], "-p is an option of --workload hacc-io"),
    (["--workload", "nope"], "--workload nope"),
    (["--workload", "hacc-io", "-o", "X"], "needs -p"),
    (["--workload", "hacc-io", "-p", "1"], "needs -o"),
    (["--workload", "hacc-io", "-p", "1,2", "-n", "3", "-o", "X"], "2 counts for 3 ranks"),
    (["--workload", "hacc-io", "-p", "1,x", "-n", "2", "-o", "X"], "cannot read '1,x'"),
    (["--workload", "hacc-io", "-p", "1", "-o", "X", "-b", "1m"], "-b is an option of the IOR-like"),
    (["--workload", "hacc-io", "-p", "1", "-n", "4", "-o", "X", "--header-size", "64"], "at least 192 bytes"),
    (["-o", "X" * 5000], "longer than PATH_MAX"),
])
def test_bad_options_are_one_line_and_touch_nothing(tmp_path, args, says):
    r = bench(*args, check=2, cwd=tmp_path)
    assert says in error_line(r) and r.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_help():
    r = bench("--help")
    assert r.stdout.startswith("usage: iez-bench") and "--workload" in r.stdout and r.stderr == ""


def test_refuses_to_run_as_one_of_several_mpi_processes(tmp_path):
    r = bench("-o", str(tmp_path / "f"), check=2, env=dict(os.environ, PMI_SIZE="4"))
    assert error_line(r).startswith("started by an MPI launcher (PMI_SIZE=4) but this build has no MPI")
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_names_file_and_errno(tmp_path):
    f = tmp_path / "no" / "such" / "testFile"
    r = bench("-n", "2", "-F", "-o", str(f), check=1)
    msg = error_line(r)
    assert msg.startswith("rank ") and f"create {f}.0000000" in msg
    assert msg.endswith("No such file or directory (errno 2 ENOENT)")


def test_read_of_missing_file(tmp_path):
    r = bench("-r", "-o", str(tmp_path / "absent"), check=1)
    assert error_line(r) == f"rank 0: open {tmp_path / 'absent'}: No such file or directory (errno 2 ENOENT)"


def test_write_error_names_errno():
    # /dev/full fails every write with ENOSPC; -E -k so nothing is removed (and only files ever are)
    r = bench("-w", "-E", "-k", "-b", "8k", "-t", "8k", "-o", "/dev/full", check=1)
    assert error_line(r) == "rank 0: write /dev/full at offset 0: No space left on device (errno 28 ENOSPC)"
    assert Path("/dev/full").is_char_device()


def test_short_file_on_read(tmp_path):
    f = tmp_path / "short"
    bench("-w", "-k", "-b", "64k", "-t", "16k", "-o", str(f))
    os.truncate(f, 40000)
    r = bench("-r", "-k", "-b", "64k", "-t", "16k", "-o", str(f), check=1)
    assert error_line(r) == f"rank 0: read {f} at offset 40000: the file ends there, 9152 bytes short"


# -- processes -------------------------------------------------------------------------------

def children(pid: int) -> dict[int, str]:
    """pid -> command line of the live processes whose parent is pid."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(d.name)] = cmd
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def blocked_job(tmp_path: Path) -> tuple[subprocess.Popen, dict[int, str]]:
    """Three FPP ranks; rank 1's file is a FIFO, so its open blocks while ranks 0 and 2 write
    their files and wait for it at the next barrier."""
    os.mkfifo(tmp_path / "t.00000001")
    proc = subprocess.Popen([exe(), "-n", "3", "-F", "-b", "8k", "-t", "8k", "-o", str(tmp_path / "t"), "-w"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = [tmp_path / "t.00000000", tmp_path / "t.00000002"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        kids = children(proc.pid)
        if (len(kids) == 3 and all("--fork-rank" in c for c in kids.values())
                and all(f.exists() and f.stat().st_size == 8192 for f in written)):
            return proc, kids
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    pytest.fail(f"iez-bench did not start 3 ranks: {children(proc.pid)}")


def wait_gone(pids, seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


@pytest.mark.parametrize("victim", [0, 1])  # waiting at a barrier; blocked in its open
def test_a_rank_that_dies_stops_the_job(tmp_path, victim):
    proc, kids = blocked_job(tmp_path)
    pid = next(p for p, c in kids.items() if f"--fork-rank {victim}:" in c)
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert err.strip() == f"iez-bench: error: rank {victim} was killed by signal 9 (Killed)"
    assert wait_gone(kids) == []


def test_stopping_the_launcher_reaps_every_rank(tmp_path):
    proc, kids = blocked_job(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip() == "iez-bench: error: stopped by signal 15 (Terminated)"
    assert wait_gone(kids) == []


def test_ranks_die_with_a_killed_launcher(tmp_path):
    proc, kids = blocked_job(tmp_path)
    proc.kill()
    proc.wait(timeout=20)
    assert wait_gone(kids) == []  # PR_SET_PDEATHSIG, and a closed barrier pipe


# -- libiez sees the ranks -------------------------------------------------------------------

@pytest.mark.parametrize("fpp", [True, False])
def test_libiez_records_each_rank(tmp_path, fpp):
    lib = BUILD / "libiez" / "libiez.so"
    need_built(lib)
    traces = tmp_path / "traces"
    traces.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    env = dict(os.environ, LD_PRELOAD=str(lib), IEZ_MODE="trace", IEZ_TRACE_DIR=str(traces), IEZ_APP="ior")
    for k in ("IEZ_RUN", "SLURM_JOB_ID", "PMI_RANK", "IEZ_PLAN", "IEZ_EMULATED"):
        env.pop(k, None)
    job = wb.IorJob(str(data / "testFile"), ranks=4, block="32K", transfer="8K", segments=2, fpp=fpp, read=False)
    rep = wb.run(job, env=env)
    recs = [r for r in read_shards(traces) if r.path.startswith(str(data))]
    assert {r.run for r in recs} and len({r.run for r in recs}) == 1 and {r.app for r in recs} == {"ior"}
    by_rank = {r.rank: r for r in recs}
    assert sorted(by_rank) == [0, 1, 2, 3] and len(recs) == 4
    for rank, r in by_rank.items():
        assert r.bytes_written == 2 * 32768
        if fpp:
            assert (r.path, r.created, r.max_offset) == (f"{data}/testFile.{rank:08d}", True, 2 * 32768)
        else:
            assert r.path == f"{data}/testFile" and r.created == (rank == 0)
            assert r.max_offset == (4 + rank) * 32768 + 32768  # its last block: segment 1
    assert rep["files"] == list(job.files())


# -- the Python helper -----------------------------------------------------------------------

def test_helper_builds_commands_and_knows_the_files(tmp_path):
    ior = wb.IorJob(str(tmp_path / "i"), ranks=3, block="64K", transfer="16K", segments=2, fpp=True, verify=True)
    cmd = wb.command(ior)
    assert cmd[0] == exe() and cmd[-1] == "--json"
    assert cmd[1:] == ["--workload", "ior", "-a", "POSIX", "-n", "3", "-b", "65536", "-t", "16384", "-s", "2",
                       "-o", str(tmp_path / "i"), "-F", "-w", "-r", "--verify", "-k", "--json"]
    rep = wb.run(ior)
    assert rep["verify"]["mismatched"] == 0
    assert {p: os.path.getsize(p) for p in ior.files()} == ior.files() == dict.fromkeys(rep["files"], 131072)

    hacc = wb.HaccJob(str(tmp_path / "h"), particles=[5, 0, 9], ranks=3, header="1K")
    assert "-p" in hacc.args() and hacc.args()[hacc.args().index("-p") + 1] == "5,0,9"
    rep = wb.run(hacc)
    assert {p: os.path.getsize(p) for p in hacc.files()} == hacc.files() == {rep["files"][0]: 1024 + 38 * 14}
    same = wb.HaccJob(str(tmp_path / "s"), particles=4, ranks=2, fpp=True)
    assert same.args()[same.args().index("-p") + 1] == "4"
    assert list(same.files().values()) == [wb.HACC_HEADER + 152] * 2


def test_helper_errors_are_one_line(tmp_path, monkeypatch):
    with pytest.raises(wb.BenchError, match=r"^iez-bench: rank 0: open .*absent: No such file or directory"):
        wb.run(wb.IorJob(str(tmp_path / "absent"), write=False))
    for bad in (wb.IorJob("x", ranks=0), wb.IorJob("x", write=False, read=False), wb.IorJob("x", read=False, verify=True),
                wb.IorJob("x", block="huge"), wb.IorJob("x", segments=0), wb.HaccJob("x", particles=[1, 2], ranks=3),
                wb.HaccJob("x", particles=[-1])):
        with pytest.raises(ConfigError):
            bad.args()
    monkeypatch.setenv("IEZ_BENCH", str(tmp_path / "nothing"))
    with pytest.raises(wb.BenchError, match=r"\$IEZ_BENCH names .*nothing, which is not an executable"):
        wb.bench_path()
    monkeypatch.setenv("IEZ_BENCH", exe())
    assert wb.bench_path() == exe()
