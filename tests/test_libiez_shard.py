"""libiez's trace shards (docs/trace-format.md): nothing lost when a traced process is killed,
and a damaged or truncated shard read as far as it is intact, with one warning line. The
shards are written by real processes under LD_PRELOAD (tracing only, no cluster needed)."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
import warnings
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import BUILD
from iez.errors import IezError
from iez.trace.shard import REC_FIXED, ShardWarning, read_trace, read_shard, read_shards

LIB = BUILD / "libiez" / "libiez.so"
CHUNK = 128 << 10
MiB = 1 << 20


def env(traces: Path, **extra: str) -> dict[str, str]:
    if not LIB.exists():
        pytest.fail(f"{LIB} is missing: build libiez (cmake -S . -B build && cmake --build build)")
    e = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
    e.update(LD_PRELOAD=str(LIB), IEZ_TRACE_DIR=str(traces), IEZ_APP="shardtest", IEZ_RUN="9", **extra)
    return e


def traced_python(tmp_path: Path, script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-B", "-c", script, *args], env=env(tmp_path / "traces"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


WRITE_FILES = ("import os, sys\n"
               "for i, n in enumerate(sys.argv[1:]):\n"
               "    with open(n, 'wb') as f:\n"
               "        f.write(b'z' * (1000 * (i + 1)))\n")


def one_shard(tmp_path: Path) -> Path:
    (shard,) = (tmp_path / "traces").glob("*.shard")
    return shard


def record_offsets(data: bytes) -> list[int]:
    """Offsets of the records of a healthy shard, walking their sizes (from the header's size)."""
    out, off = [], struct.unpack_from("<I", data, 12)[0]
    while off + 8 <= len(data):
        magic, size = struct.unpack_from("<II", data, off)
        if magic == 0 and size == 0:
            off = (off // CHUNK + 1) * CHUNK
            continue
        out.append(off)
        off += size
    return out


def paths(records) -> list[str]:
    return sorted(Path(r.path).name for r in records)


def test_header_and_records(tmp_path):
    traced_python(tmp_path, WRITE_FILES, "a", "b", "c")
    (shard,) = read_trace(tmp_path / "traces").shards
    assert (shard.app, shard.run, shard.rank, shard.clean_exit, shard.plan) == ("shardtest", "9", 0, True, "none")
    assert shard.pid > 0 and shard.start_time <= shard.end_time <= time.time()
    assert shard.warning is None
    recs = {Path(r.path).name: r for r in shard.records}
    assert {n: (r.bytes_written, r.max_offset, r.created) for n, r in recs.items()} == {
        "a": (1000, 1000, True), "b": (2000, 2000, True), "c": (3000, 3000, True)}
    assert all(r.pid == shard.pid and r.host == shard.host and r.layout == "" for r in recs.values())
    # the shard is cut after its last record at exit
    data = one_shard(tmp_path).read_bytes()
    last = record_offsets(data)[-1]
    assert len(data) == last + struct.unpack_from("<I", data, last + 4)[0]


WRITE_FACTS = ("import os, threading\n"
               "MiB = 1 << 20\n"
               "fd = os.open('blocks', os.O_WRONLY | os.O_CREAT, 0o644)\n"
               "for k in range(4):\n"
               "    os.write(fd, b'b' * MiB)\n"  # at the file position
               "os.pwrite(fd, b'p' * MiB, 8 * MiB)\n"
               "os.close(fd)\n"
               "fd = os.open('unaligned', os.O_WRONLY | os.O_CREAT, 0o644)\n"
               "os.pwrite(fd, b'b' * MiB, 0)\n"
               "os.pwrite(fd, b'u' * 1000, 4 * MiB)\n"
               "os.close(fd)\n"
               "fd = os.open('threads', os.O_WRONLY | os.O_CREAT, 0o644)\n"
               "def part(i):\n"
               "    for j in range(8):\n"
               "        os.pwrite(fd, b't' * 65536, (i * 8 + j) * 65536)\n"
               "ts = [threading.Thread(target=part, args=(i,)) for i in range(4)]\n"
               "[t.start() for t in ts]\n"
               "[t.join() for t in ts]\n"
               "os.pwrite(fd, b's' * 4096, 3 * 4096)\n"
               "fd = os.open('read-only', os.O_RDWR | os.O_CREAT, 0o644)\n")


def test_write_facts(tmp_path):
    """Each record keeps the largest power of two dividing every write's offset and size, and its
    largest write rounded up to a power of two (docs/trace-format.md): 1 MiB blocks at 1 MiB
    boundaries give 1 MiB and 1 MiB; one 1000-byte write at 4 MiB drops the alignment to 8
    (1000 = 8 x 125); writes from four threads at once are all counted."""
    traced_python(tmp_path, WRITE_FACTS)
    recs = {Path(r.path).name: r for r in read_shards(tmp_path / "traces") if r.path.startswith(str(tmp_path))}
    facts = {n: (r.write_align, r.transfer_size) for n, r in recs.items()}
    assert facts == {"blocks": (MiB, MiB), "unaligned": (8, MiB), "threads": (4096, 65536), "read-only": (0, 0)}
    # Python's buffered file hands its 1000 bytes to one write(2) at 0
    traced_python(tmp_path, WRITE_FILES, "k")
    (k,) = [r for r in read_shards(tmp_path / "traces") if r.path.endswith("/k")]
    assert (k.write_align, k.transfer_size) == (8, 1024)


def as_version(data: bytes, version: int) -> bytes:
    """A version 3 shard rewritten as version 1 or 2 wrote it: a 512-byte header whose bytes
    360-456 are reserved, 64-byte record heads (the record CRC covers the same bytes)."""
    head = bytearray(data[:512])
    head[8:16] = struct.pack("<II", version, 512)
    head[360:456] = bytes(96)
    head[456:460] = struct.pack("<I", zlib.crc32(bytes(head[:456])))
    out = bytearray(head)
    for off in record_offsets(data):
        size = struct.unpack_from("<I", data, off + 4)[0]
        rec = bytearray(data[off:off + 64] + data[off + REC_FIXED:off + size])
        rec[4:8] = struct.pack("<I", size - (REC_FIXED - 64))
        if version == 1:
            rec[18:20] = b"\0\0"
        out += rec
    return bytes(out)


def test_version_1_and_2_shards_still_read(tmp_path):
    """Shards of format versions 1 (bytes 18-19 reserved, zero, under the record's CRC) and 2
    (512-byte header, 64-byte records) read with what they lack unknown; a version this iez
    does not know is refused in one line."""
    traced_python(tmp_path, WRITE_FACTS)
    shard = one_shard(tmp_path)
    data = shard.read_bytes()
    new = {Path(r.path).name: r for r in read_shard(shard).records}
    assert new["blocks"].writer_segments == 2  # four writes in a row, then one at 8 MiB
    for version, lost in ((2, {}), (1, {"write_align": 0, "transfer_size": 0})):
        shard.write_bytes(as_version(data, version))
        old = read_shard(shard)
        assert old.warning is None and old.program == "" and old.job_id == ""
        assert {Path(r.path).name: r for r in old.records} == {
            n: replace(r, writer_segments=0, read_size=0, program="", **lost) for n, r in new.items()}
    head = bytearray(data)
    head[8:12] = struct.pack("<I", 4)
    shard.write_bytes(bytes(head))
    assert read_shard(shard).warning.endswith("trace shard version 4 is not supported (this iez reads 1 to 3)")


def test_killed_process_loses_nothing(tmp_path):
    """Written bytes are in the shard the moment they are written: SIGKILL after writing (no
    close, no exit handler) keeps them."""
    script = ("import os, signal\n"
              "fd = os.open('victim', os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "os.write(fd, b'v' * 12345)\n"
              "os.pwrite(fd, b'w' * 10, 50000)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = traced_python(tmp_path, script, check=False)
    assert r.returncode == -signal.SIGKILL
    (shard,) = read_trace(tmp_path / "traces").shards
    assert not shard.clean_exit and shard.end_time == 0.0 and shard.warning is None
    (rec,) = [r for r in shard.records if r.path.endswith("/victim")]
    assert (rec.bytes_written, rec.max_offset, rec.created, rec.close_time) == (12355, 50010, True, 0.0)


def test_live_shard_is_readable(tmp_path):
    """A shard can be read while its process still runs and writes."""
    script = ("import os, sys, time\n"
              "fd = os.open('live', os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "os.write(fd, b'l' * 4096)\n"
              "print('ready', flush=True)\n"
              "sys.stdin.readline()\n"
              "os.write(fd, b'l' * 4096)\n")
    p = subprocess.Popen([sys.executable, "-B", "-c", script], env=env(tmp_path / "traces"), cwd=tmp_path,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        (rec,) = [r for r in read_shards(tmp_path / "traces") if r.path.endswith("/live")]
        assert rec.bytes_written == 4096 and rec.close_time == 0.0
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
    (rec,) = [r for r in read_shards(tmp_path / "traces") if r.path.endswith("/live")]
    assert rec.bytes_written == 8192 and rec.close_time > 0


def test_many_files_span_chunks(tmp_path):
    """3000 records fill several 128 KiB chunks; every one is read back."""
    creates = BUILD / "libiez" / "iez-test-creates"
    out = tmp_path / "many"
    out.mkdir()
    r = subprocess.run([str(creates), str(out), "3000", "open"], env=env(tmp_path / "traces"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    recs = [x for x in read_shards(tmp_path / "traces") if x.path.startswith(str(out))]
    assert len(recs) == 3001 and len({x.path for x in recs}) == 3001 and all(x.created for x in recs)
    assert one_shard(tmp_path).stat().st_size > 2 * CHUNK


def damaged(tmp_path: Path, damage) -> tuple[list[str], list[str]]:
    """Trace three files, damage the shard, read it: (file names read, warnings)."""
    traced_python(tmp_path, WRITE_FILES, "a", "b", "c")
    shard = one_shard(tmp_path)
    data = bytearray(shard.read_bytes())
    damage(data, record_offsets(bytes(data)))
    shard.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = read_shards(tmp_path / "traces")
    ws = [str(w.message) for w in caught if issubclass(w.category, ShardWarning)]
    return paths(recs), ws


def test_garbled_record_is_skipped(tmp_path):
    def flip(data, offs):
        data[offs[1] + REC_FIXED + 6] ^= 0x55  # a byte of the second record's path: its CRC no longer holds
    names, ws = damaged(tmp_path, flip)
    assert names == ["a", "c"]
    assert len(ws) == 1 and "damaged record" in ws[0] and "read 2 intact records" in ws[0]


def test_garbled_size_is_skipped(tmp_path):
    def size(data, offs):
        data[offs[0] + 4:offs[0] + 8] = struct.pack("<I", 0xFFFF0)
    names, ws = damaged(tmp_path, size)
    assert names == ["b", "c"] and len(ws) == 1


def test_truncated_shard(tmp_path):
    def cut(data, offs):
        del data[offs[2] + 30:]
    names, ws = damaged(tmp_path, cut)
    assert names == ["a", "b"]
    assert len(ws) == 1 and "truncated" in ws[0]


def test_unpublished_record_is_skipped_silently(tmp_path):
    """A record whose magic was never written (the process died while filling it) is not an
    error: it is stepped over by its size."""
    def unpublish(data, offs):
        data[offs[1]:offs[1] + 4] = b"\0\0\0\0"
    names, ws = damaged(tmp_path, unpublish)
    assert names == ["a", "c"] and ws == []


def test_bad_header_and_foreign_files(tmp_path):
    traced_python(tmp_path, WRITE_FILES, "a")
    traces = tmp_path / "traces"
    good = one_shard(tmp_path)
    (traces / "junk.shard").write_bytes(b"not a shard at all" * 40)
    bad = traces / "copy.shard"
    data = bytearray(good.read_bytes())
    data[40] ^= 1  # inside the app name: the header's CRC fails
    bad.write_bytes(bytes(data))
    trace = read_trace(traces)
    assert paths(trace.records) == ["a"]
    assert sorted(w.split(": ", 1)[1] for w in trace.warnings) == [
        "not a libiez trace shard (bad magic or shorter than its header)",
        "the shard's header is damaged; its records cannot be attributed"]


def test_trace_show_cli(tmp_path, iez_cmd):
    traced_python(tmp_path, WRITE_FILES, "a", "b")
    traces = tmp_path / "traces"
    data = bytearray(one_shard(tmp_path).read_bytes())
    second = record_offsets(bytes(data))[1]
    data[second + REC_FIXED + 6] ^= 1
    one_shard(tmp_path).write_bytes(bytes(data))
    r = subprocess.run(iez_cmd + ["trace", "show", str(traces)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert len(r.stderr.splitlines()) == 1, r.stderr
    (warning,) = r.stderr.splitlines()
    assert warning.startswith("iez: warning: ") and "damaged record" in warning
    assert "app shardtest run 9: 1 processes, 1 files; no plan" in r.stdout
    assert str(tmp_path / "a") in r.stdout and str(tmp_path / "b") not in r.stdout
    r = subprocess.run(iez_cmd + ["trace", "show", "--json", str(traces)], capture_output=True, text=True, timeout=60)
    doc = json.loads(r.stdout)
    assert [x["path"] for x in doc["records"]] == [str(tmp_path / "a")]
    assert doc["records"][0]["bytes_written"] == 1000 and doc["runs"][0]["needs_retrace"] is False
    r = subprocess.run(iez_cmd + ["trace", "show", str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == f"iez: error: {tmp_path / 'nowhere'}: no such trace directory"


def test_unreadable_shard_is_one_error(tmp_path):
    with pytest.raises(IezError, match="cannot read trace shard"):
        read_shard(tmp_path / "missing.shard")


def test_exec_keeps_the_first_image_records(tmp_path):
    """exec replaces the process image: what it traced before stays in its shard, and the new
    image (same pid) gets a shard of its own."""
    script = ("import os\n"
              "fd = os.open('before', os.O_WRONLY | os.O_CREAT, 0o644)\n"
              "os.write(fd, b'b' * 777)\n"
              "os.execv('/bin/sh', ['sh', '-c', 'printf 1234 > after'])\n")
    traced_python(tmp_path, script)
    trace = read_trace(tmp_path / "traces")
    assert len(trace.shards) == 2 and len({s.pid for s in trace.shards}) == 1
    byname = {Path(r.path).name: r for r in trace.records if r.path.startswith(str(tmp_path))}
    assert (byname["before"].bytes_written, byname["before"].close_time) == (777, 0.0)
    assert byname["after"].bytes_written == 4 and byname["after"].created


def test_inherited_output_file(tmp_path):
    """A process started with its output redirected to a file traces that file from its first
    instruction (the shard is written by libiez's constructor)."""
    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        r = subprocess.run(["sh", "-c", "printf hello; printf ' world'"], env=env(tmp_path / "traces"), stdout=f,
                           timeout=60)
    assert r.returncode == 0
    trace = read_trace(tmp_path / "traces")
    assert trace.warnings == []
    (rec,) = [r for r in trace.records if r.path == str(out)]
    assert (rec.bytes_written, rec.max_offset, rec.created) == (11, 11, False)
