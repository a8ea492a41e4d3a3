#!/usr/bin/env python3
"""Write the Darshan test logs: tests/vectors/darshan/NAME.darshan.

Each is a real log that pydarshan ships, rewritten by libdarshan-util (the C library inside the
pydarshan wheel: darshan_log_create and the darshan_log_put_* calls darshan-convert uses) into
what a site's log looks like: files renamed, their LUSTRE records dropped, their writes turned
into reads. The records are the library's own structures, read back and written out record by
record, so the logs are real Darshan logs of the current format, not crafted bytes.
Run: .venv/bin/python tests/vectors/make_darshan_logs.py [OUTDIR]

- symlinked-project.darshan: VPIC-IO's 2 TiB shared HDF5 file (sample.darshan) as opened through
  a project directory that is a symbolic link to Lustre (Theta's /projects): its path is under
  no Lustre mount of the log's mount table ("/" is rootfs), but its LUSTRE record says where its
  48 stripes are.
- read-only.darshan: the 48-process IOR of sample-goodost.darshan reading its files back (every
  POSIX write counter moved to its read counterpart): 44 files on Lustre with their LUSTRE
  records; 2 moved to /home without one (off Lustre); 2 with anonymised names (a bare hash, as
  darshan-convert --obfuscate leaves a name outside every mount).
- off-lustre.darshan: the same IOR written to /home, no LUSTRE record at all: nothing to import.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

OUT = Path(__file__).resolve().parent / "darshan"

# libdarshan-util's writing calls and the structures they take (darshan-logutils.h), beyond the
# reading ones pydarshan declares. A name-hash entry is a uthash element; only its `next` link
# (the table's insertion order) is walked here.
CDEF = """
typedef struct UT_hash_handle { void *tbl; void *prev; void *next; void *hh_prev; void *hh_next;
                                void *key; unsigned keylen; unsigned hashv; } UT_hash_handle;
struct darshan_name_record_ref { void *name_record; UT_hash_handle hlink; };
struct darshan_mod_logutil_funcs { int (*log_get_record)(void *, void **); int (*log_put_record)(void *, void *); };
extern struct darshan_mod_logutil_funcs *mod_logutils[];
void *darshan_log_create(const char *, int, int);
int darshan_log_put_job(void *, struct darshan_job *);
int darshan_log_put_exe(void *, char *);
int darshan_log_put_mounts(void *, struct darshan_mnt_info *, int);
int darshan_log_put_namehash(void *, struct darshan_name_record_ref *);
"""
ZLIB = 0  # enum darshan_comp_type: DARSHAN_ZLIB_COMP

Rename = Callable[[str], str]  # a file's new name ("" = keep it)
Keep = Callable[[str, str], bool]  # (module, file name) -> write this record
Patch = Callable[[str, Any], None]  # (module, record) -> change its counters in place


def _lib() -> tuple[Any, Any]:
    from darshan.backend import cffi_backend as be

    if not hasattr(be.libdutil, "darshan_log_create"):  # declared once per process
        be.ffi.cdef(CDEF)
    return be.ffi, be.libdutil


def rewrite(src: str, dst: Path, rename: Rename, keep: Keep, patch: Patch) -> None:
    """Copy the log `src` to `dst`, renaming, dropping and changing records on the way."""
    ffi, lib = _lib()
    log = lib.darshan_log_open(src.encode())
    job = ffi.new("struct darshan_job *")
    exe = ffi.new("char[]", 4096)
    mounts, nmounts = ffi.new("struct darshan_mnt_info **"), ffi.new("int *")
    names = ffi.new("struct darshan_name_record_ref **")
    if (not log or lib.darshan_log_get_job(log, job) or lib.darshan_log_get_exe(log, exe)
            or lib.darshan_log_get_mounts(log, mounts, nmounts) or lib.darshan_log_get_namehash(log, names)):
        raise SystemExit(f"{src}: not a readable Darshan log")
    by_id: dict[int, str] = {}
    buffers = []  # the new name records, alive until the log is written
    ref = names[0]
    while ref != ffi.NULL:
        rid = ffi.cast("uint64_t *", ref.name_record)[0]
        name = ffi.string(ffi.cast("char *", ref.name_record) + 8).decode()
        new = rename(name)
        if new:
            rec = ffi.new("char[]", 8 + len(new) + 1)  # darshan_name_record: id, then the name
            ffi.cast("uint64_t *", rec)[0] = rid
            ffi.memmove(rec + 8, new.encode(), len(new))
            buffers.append(rec)
            ref.name_record = rec
        by_id[rid] = new or name
        ref = ffi.cast("struct darshan_name_record_ref *", ref.hlink.next)
    mods, nmods = ffi.new("struct darshan_mod_info **"), ffi.new("int *")
    lib.darshan_log_get_modules(log, mods, nmods)
    dst.unlink(missing_ok=True)
    out = lib.darshan_log_create(str(dst).encode(), ZLIB, 0)
    if (not out or lib.darshan_log_put_job(out, job) or lib.darshan_log_put_exe(out, exe)
            or lib.darshan_log_put_mounts(out, mounts[0], nmounts[0]) or lib.darshan_log_put_namehash(out, names[0])):
        raise SystemExit(f"{dst}: cannot write")
    for mod in sorted((mods[0][i] for i in range(nmods[0])), key=lambda m: m.idx):  # regions in module order
        name = ffi.string(mod.name).decode()
        struct_type = _struct(name)
        while True:
            buf = ffi.new("void **")
            got = lib.darshan_log_get_record(log, mod.idx, buf)
            if got < 0:
                raise SystemExit(f"{src}: damaged module {name}")
            if got == 0:
                break
            rec = ffi.cast(struct_type, buf[0])
            if keep(name, by_id.get(rec.base_rec.id, "")):
                patch(name, rec)
                if lib.mod_logutils[mod.idx].log_put_record(out, buf[0]) < 0:
                    raise SystemExit(f"{dst}: cannot write a {name} record")
            lib.darshan_free(buf[0])
    lib.darshan_log_close(out)
    lib.darshan_log_close(log)


def _struct(module: str) -> str:
    from darshan.backend import cffi_backend as be

    return be._structdefs[module][:-1]  # "struct darshan_posix_file *"


def reads_not_writes(module: str, rec: Any) -> None:
    """A POSIX record whose writes become reads: IOR's read phase of the same files."""
    if module != "POSIX":
        return
    from darshan.backend import cffi_backend as be

    for values, names in ((rec.counters, be.counter_names(module)), (rec.fcounters, be.fcounter_names(module))):
        at = {n: i for i, n in enumerate(names)}
        for name, i in at.items():
            read = name.replace("WRITTEN", "READ").replace("WRITE", "READ")
            if read != name and read in at:
                values[at[read]] = values[i]
                values[i] = 0


def main(out: Path) -> None:
    from darshan.log_utils import get_log_path

    out.mkdir(parents=True, exist_ok=True)
    vpic = "/scratch2/scratchdirs/glock/tokioabc-s.4478544/vpicio/"
    rewrite(get_log_path("sample.darshan"), out / "symlinked-project.darshan",
            lambda n: n.replace(vpic, "/projects/E3SM/run/") if n.startswith(vpic) else "",
            lambda m, n: True, lambda m, r: None)

    def ior(name: str) -> int:
        return int(name.rsplit(".", 1)[1]) if "/testFile." in name else -1

    def read_name(name: str) -> str:
        i = ior(name)
        return f"/home/glock/testFile.{i:08d}" if i in (44, 45) else f"{3710437467 + i}" if i in (46, 47) else ""

    rewrite(get_log_path("sample-goodost.darshan"), out / "read-only.darshan", read_name,
            lambda m, n: m != "LUSTRE" or n.startswith("/scratch1/"), reads_not_writes)
    rewrite(get_log_path("sample-goodost.darshan"), out / "off-lustre.darshan",
            lambda n: n.replace("/scratch1/scratchdirs/", "/home/") if n.startswith("/scratch1/") else "",
            lambda m, n: m != "LUSTRE", lambda m, r: None)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
