"""Darshan logs written from plain data, for the audit's tests and benchmark: jobs of any size,
layout and writing pattern, where pydarshan's sample logs are a handful of fixed jobs.

Written through libdarshan-util, the C library in pydarshan's wheel, with its own log writer
(create, job, exe, mounts, name records, then each module's records, the order darshan-runtime
writes a log in), so the logs are in the library's current format. pydarshan declares none of
the writer's functions, so this declares the few it calls, and packs the records as
darshan-log-format.h lays them out: POSIX records (bytes, ranks, access sizes, alignment),
MPI-IO records (opens, reads and writes, collective or independent, and bytes) and LUSTRE records (version 2: 32 bytes of id, rank, components and stripes, then each component's
seven counters and pool name, then the OST ids).
"""

from __future__ import annotations

import glob
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POSIX_MOD, MPIIO_MOD, LUSTRE_MOD = 1, 2, 8  # darshan_module_id
POSIX_VER, MPIIO_VER, LUSTRE_VER = 4, 3, 2  # DARSHAN_POSIX_VER, DARSHAN_MPIIO_VER, DARSHAN_LUSTRE_VER (darshan 3.4+)
ZLIB = 0  # DARSHAN_ZLIB_COMP
MNT_LEN = 3015  # struct darshan_mnt_info: char mnt_type[3015], mnt_path[3015]
POOL_LEN = 16
BLOCK = 1 << 20  # POSIX_FILE_ALIGNMENT Darshan records on Lustre
REF_SIZE, NEXT_AT = 64, 24  # struct darshan_name_record_ref: name_record*, then uthash's handle (next at +16)
_CDEF = """
void *darshan_log_create(const char *name, int comp_type, int partial_flag);
int darshan_log_put_job(void *fd, void *job);
int darshan_log_put_exe(void *fd, char *buf);
int darshan_log_put_mounts(void *fd, void *mnt_data_array, int count);
int darshan_log_put_namehash(void *fd, void *hash);
int darshan_log_put_mod(void *fd, int mod_id, void *mod_buf, int mod_buf_sz, int ver);
void darshan_log_close(void *fd);
"""
_lib: tuple[Any, Any] | None = None


@dataclass(frozen=True)
class SynthFile:
    """One file of a synthetic job: written (and read) by rank `rank`, or by every rank of the
    job as one shared record; in `transfer`-byte calls, on the file system's block or not."""

    path: str
    bytes: int
    stripe_size: int = 1 << 20
    osts: tuple[int, ...] = (0,)  # () = no LUSTRE record
    rank: int = 0
    shared: bool = False
    transfer: int = 1 << 20
    aligned: bool = True
    read_bytes: int = 0
    mpiio: str = ""  # "collective" or "independent": also an MPI-IO record of such calls ("" = none)


def _library() -> tuple[Any, Any]:
    global _lib
    if _lib is None:
        from cffi import FFI  # type: ignore[import-untyped]  # pydarshan's dependency; no type hints

        import darshan  # type: ignore[import-untyped]  # ships no type hints

        base = Path(darshan.__file__).parent.parent
        found = sorted(glob.glob(str(base / "darshan.libs" / "libdarshan-util*.so*")))
        if not found:
            raise RuntimeError(f"libdarshan-util is not in {base / 'darshan.libs'} (pydarshan's wheel)")
        ffi = FFI()
        ffi.cdef(_CDEF)
        _lib = (ffi, ffi.dlopen(found[0]))
    return _lib


def record_id(path: str) -> int:
    return int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "little")


def _posix(f: SynthFile, names: list[str], fnames: list[str], nprocs: int) -> bytes:
    c = [0] * len(names)
    fc = [0.0] * len(fnames)
    ix = {n: i for i, n in enumerate(names)}
    fx = {n: i for i, n in enumerate(fnames)}
    writes = -(-f.bytes // f.transfer) if f.bytes else 0
    reads = -(-f.read_bytes // f.transfer) if f.read_bytes else 0
    for name, v in (("POSIX_OPENS", nprocs if f.shared else 1), ("POSIX_WRITES", writes), ("POSIX_READS", reads),
                    ("POSIX_BYTES_WRITTEN", f.bytes), ("POSIX_BYTES_READ", f.read_bytes),
                    ("POSIX_MAX_BYTE_WRITTEN", f.bytes - 1), ("POSIX_MAX_BYTE_READ", f.read_bytes - 1),
                    ("POSIX_ACCESS1_ACCESS", f.transfer), ("POSIX_ACCESS1_COUNT", writes + reads),
                    ("POSIX_FILE_ALIGNMENT", BLOCK), ("POSIX_MEM_ALIGNMENT", 8),
                    ("POSIX_FILE_NOT_ALIGNED", 0 if f.aligned else writes + reads)):
        c[ix[name]] = v
    seconds = 1.0 + (f.bytes + f.read_bytes) / 1e9
    for name, t in (("POSIX_F_OPEN_START_TIMESTAMP", 0.5), ("POSIX_F_WRITE_START_TIMESTAMP", 1.0),
                    ("POSIX_F_WRITE_END_TIMESTAMP", seconds), ("POSIX_F_CLOSE_END_TIMESTAMP", seconds + 0.1),
                    ("POSIX_F_OPEN_END_TIMESTAMP", 0.6), ("POSIX_F_CLOSE_START_TIMESTAMP", seconds)):
        fc[fx[name]] = t
    rank = -1 if f.shared else f.rank
    return struct.pack(f"<Qq{len(c)}q{len(fc)}d", record_id(f.path), rank, *c, *fc)


def _mpiio(f: SynthFile, names: list[str], fnames: list[str], nprocs: int) -> bytes:
    """The file's MPI-IO record: its bytes in `transfer`-byte calls of the kind `f.mpiio` says."""
    c = [0] * len(names)
    fc = [0.0] * len(fnames)
    ix = {n: i for i, n in enumerate(names)}
    kind = "COLL" if f.mpiio == "collective" else "INDEP"
    opens = nprocs if f.shared else 1
    for name, v in ((f"MPIIO_{kind}_OPENS", opens), (f"MPIIO_{kind}_READS", -(-f.read_bytes // f.transfer)),
                    (f"MPIIO_{kind}_WRITES", -(-f.bytes // f.transfer)), ("MPIIO_BYTES_READ", f.read_bytes),
                    ("MPIIO_BYTES_WRITTEN", f.bytes)):
        c[ix[name]] = v
    fc[fnames.index("MPIIO_F_OPEN_START_TIMESTAMP")] = 0.5
    fc[fnames.index("MPIIO_F_CLOSE_END_TIMESTAMP")] = 1.1 + (f.bytes + f.read_bytes) / 1e9
    return struct.pack(f"<Qq{len(c)}q{len(fc)}d", record_id(f.path), -1 if f.shared else f.rank, *c, *fc)


def _lustre(f: SynthFile) -> bytes:
    rank = -1 if f.shared else f.rank
    comp = struct.pack("<7q", f.stripe_size, len(f.osts), 0, 0, 0, -1, 0) + b"\0" * POOL_LEN
    return struct.pack("<Qqqq", record_id(f.path), rank, 1, len(f.osts)) + comp + \
        struct.pack(f"<{len(f.osts)}q", *f.osts)


def write_log(path: Path, files: list[SynthFile], *, jobid: int = 1, nprocs: int = 1, uid: int = 1000,
              start: int = 1_700_000_000, exe: str = "/apps/ior -w", mount: str = "/lustre") -> Path:
    """A Darshan log at `path` of a job that wrote `files` (absolute paths under `mount`)."""
    from darshan.backend import cffi_backend  # type: ignore[import-untyped]

    ffi, lib = _library()
    names = cffi_backend.counter_names("POSIX")
    fnames = cffi_backend.counter_names("POSIX", fcnts=True)
    path.unlink(missing_ok=True)
    fd = lib.darshan_log_create(str(path).encode(), ZLIB, 0)
    if fd == ffi.NULL:
        raise OSError(f"{path}: libdarshan-util could not create the log")
    keep = []  # buffers the library reads until close
    try:
        end = start + 10
        meta = b"lib_ver=3.5.0\nh=romio_no_indep_rw=true;cb_nodes=4\n"
        job = ffi.new("char[]", struct.pack("<7q", uid, start, 0, end, 0, nprocs, jobid) + meta.ljust(1024, b"\0"))
        exe_buf = ffi.new("char[]", exe.encode())
        mnt = ffi.new("char[]", b"lustre".ljust(MNT_LEN, b"\0") + mount.encode().ljust(MNT_LEN, b"\0"))
        refs = [ffi.new("char[]", REF_SIZE) for _ in files]
        for k, f in enumerate(files):
            rec = ffi.new("char[]", struct.pack("<Q", record_id(f.path)) + f.path.encode() + b"\0")
            keep.append(rec)
            ffi.cast("void **", refs[k])[0] = rec
            ffi.cast("void **", refs[k] + NEXT_AT)[0] = refs[k + 1] if k + 1 < len(files) else ffi.NULL
        posix = ffi.new("char[]", b"".join(_posix(f, names, fnames, nprocs) for f in files))
        lustre = ffi.new("char[]", b"".join(_lustre(f) for f in files if f.osts))
        steps = [lib.darshan_log_put_job(fd, job), lib.darshan_log_put_exe(fd, exe_buf),
                 lib.darshan_log_put_mounts(fd, mnt, 1),
                 lib.darshan_log_put_namehash(fd, refs[0] if refs else ffi.NULL),
                 lib.darshan_log_put_mod(fd, POSIX_MOD, posix, len(posix) - 1, POSIX_VER)]
        if any(f.mpiio for f in files):
            mpiio = ffi.new("char[]", b"".join(_mpiio(f, cffi_backend.counter_names("MPI-IO"),
                                                      cffi_backend.counter_names("MPI-IO", fcnts=True), nprocs)
                                               for f in files if f.mpiio))
            steps.append(lib.darshan_log_put_mod(fd, MPIIO_MOD, mpiio, len(mpiio) - 1, MPIIO_VER))
        if any(f.osts for f in files):
            steps.append(lib.darshan_log_put_mod(fd, LUSTRE_MOD, lustre, len(lustre) - 1, LUSTRE_VER))
        if any(s < 0 for s in steps):
            raise OSError(f"{path}: libdarshan-util failed writing the log (steps {steps})")
    finally:
        lib.darshan_log_close(fd)
    os.chmod(path, 0o644)
    return path
