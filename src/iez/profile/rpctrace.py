"""Reading rpctrace lines from a Lustre debug log, streaming, through the C parser.

The parser is `liopprof/rpctrace.c` (built by CMake into build/liopprof/libliopprof.so), loaded
with ctypes. A pure-Python regex per line reads about 0.3M lines/s; the C parser reads several
million (bench/bench_profile.py), which a 10 GB log needs. Records come back in chunks as numpy
structured arrays (`REC_DTYPE`) whose string fields are ids into `RpcTraceReader.strings`.
Memory is bounded by the chunk size and the number of distinct strings (threads, clients, jobs).

Line formats (docs/references.md#l-fmt-rpctrace): the debug header, then "Handling RPC"/"Handled RPC" in the
2.5-2.12 form, the 2.13+ form with `req@%p` and `:job`, and the 2.5-2.10 "procesed" spelling.
A line that is not a debug line, or an rpctrace line that does not parse, is counted as
malformed (the first 16 are kept), never fatal.
"""

from __future__ import annotations

import ctypes
import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from iez.artifacts import find_built
from iez.lustre.parse import Skipped
from iez.profile import ProfileError

ENV = "IEZ_LIOPPROF_LIB"
BUILD_HINT = "build it with `cmake -S . -B build && cmake --build build`"
CHUNK_BYTES = 8 << 20
MAX_LINE = 1 << 20  # a debug message is at most a page; longer "lines" are dropped as malformed
HANDLING, HANDLED = 1, 2

REC_DTYPE = np.dtype([
    ("t_us", "<i8"), ("xid", "<u8"), ("transno", "<u8"), ("line", "<u8"), ("proc_us", "<i8"), ("total_us", "<i8"),
    ("pname", "<u4"), ("uuid", "<u4"), ("nid", "<u4"), ("job", "<u4"),
    ("cpu", "<i4"), ("thread", "<i4"), ("client_pid", "<i4"), ("ref", "<i4"), ("opc", "<i4"), ("rc", "<i4"),
    ("status", "<i4"), ("kind", "u1"), ("style", "u1"), ("pad", "u1", (2,)),
], align=True)


def library_path() -> Path:
    return Path(find_built("the rpctrace parser", ENV, "liopprof/libliopprof.so", program=False,
                           error=ProfileError, hint=BUILD_HINT))


_LIB: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(str(library_path()))
        lib.lp_new.restype = ctypes.c_void_p
        lib.lp_free.argtypes = [ctypes.c_void_p]
        lib.lp_rec_size.restype = ctypes.c_size_t
        lib.lp_feed.restype = ctypes.c_size_t
        lib.lp_feed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
                                ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        lib.lp_counts.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
        lib.lp_bad.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p,
                               ctypes.c_size_t]
        lib.lp_nstrings.restype = ctypes.c_uint32
        lib.lp_nstrings.argtypes = [ctypes.c_void_p]
        lib.lp_string.restype = ctypes.c_void_p
        lib.lp_string.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_size_t)]
        if lib.lp_rec_size() != REC_DTYPE.itemsize:
            raise ProfileError(f"libliopprof.so record size {lib.lp_rec_size()} != {REC_DTYPE.itemsize}: rebuild it")
        _LIB = lib
    return _LIB


@dataclass(frozen=True)
class LineCounts:
    lines: int
    rpc: int  # rpctrace lines read
    other: int  # debug lines of other messages
    malformed: int
    examples: tuple[Skipped, ...]  # the first malformed lines


class RpcTraceReader:
    """One streaming parse: `chunks(f)` yields record arrays; `strings` maps ids to text."""

    def __init__(self) -> None:
        self._lib = _lib()
        self._p = self._lib.lp_new()
        if not self._p:
            raise ProfileError("out of memory starting the rpctrace parser")
        self.strings: list[str] = [""]

    def close(self) -> None:
        if self._p:
            self._lib.lp_free(self._p)
            self._p = None

    def __enter__(self) -> "RpcTraceReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def _sync_strings(self) -> None:
        n = self._lib.lp_nstrings(self._p)
        size = ctypes.c_size_t()
        for i in range(len(self.strings), n):
            addr = self._lib.lp_string(self._p, i, ctypes.byref(size))
            self.strings.append(ctypes.string_at(addr, size.value).decode("utf-8", "replace"))

    def feed(self, data: bytes, final: bool = False) -> tuple[np.ndarray, int]:
        """Records of the complete lines in `data` (all of it if final), and bytes consumed."""
        cap = len(data) // 96 + 16  # an rpctrace line is longer than 96 bytes
        out = np.empty(cap, REC_DTYPE)
        n = ctypes.c_size_t()
        used = self._lib.lp_feed(self._p, data, len(data), int(final), out.ctypes.data, cap, ctypes.byref(n))
        self._sync_strings()
        return out[: n.value], used

    def chunks(self, f: io.BufferedIOBase, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
        rest = b""
        while True:
            block = f.read(chunk_bytes)
            final = not block
            data = rest + block
            while True:
                recs, used = self.feed(data, final)
                if len(recs):
                    yield recs
                data = data[used:]
                if not final or not data or used == 0:
                    break
            if final:
                return
            if len(data) > MAX_LINE:  # one "line" of many MiB: not a debug log
                self.feed(data + b"\n", final=False)
                data = b""
            rest = data

    def counts(self) -> LineCounts:
        c = (ctypes.c_uint64 * 4)()
        self._lib.lp_counts(self._p, c)
        bad = []
        line = ctypes.c_uint64()
        buf = ctypes.create_string_buffer(256)
        i = 0
        while self._lib.lp_bad(self._p, i, ctypes.byref(line), buf, len(buf)) >= 0:
            bad.append(Skipped(int(line.value), buf.value.decode("utf-8", "replace"), "not an rpctrace debug line"))
            i += 1
        return LineCounts(int(c[0]), int(c[1]), int(c[2]), int(c[3]), tuple(bad))


def open_log(path: str | Path) -> io.BufferedIOBase:
    """A debug log opened for reading; `.gz` logs are decompressed on the fly."""
    p = Path(path)
    try:
        return gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb")
    except OSError as e:
        raise ProfileError(f"cannot read debug log {p}: {e.strerror}") from None


def read_all(path: str | Path) -> tuple[np.ndarray, list[str], LineCounts]:
    """Every record of a (small) log at once: for tests and small files."""
    with RpcTraceReader() as r, open_log(path) as f:
        parts = list(r.chunks(f))
        recs = np.concatenate(parts) if parts else np.empty(0, REC_DTYPE)
        return recs, list(r.strings), r.counts()
