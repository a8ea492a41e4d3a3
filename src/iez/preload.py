"""Running a command under libiez: where the library is, which one (libiez-mpi.so for an MPI
job, libiez.so otherwise), the environment it reads (docs/libiez.md), and a child process that
behaves like the command itself (signals passed on, its exit status returned). Used by `iez run`
and the demo."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from iez.artifacts import find_built
from iez.errors import IezError

LIBS = {"posix": "libiez.so", "mpi": "libiez-mpi.so"}
# Launchers that start MPI ranks: with them every rank is an MPI process (srun and flux start
# other programs too, for which libiez-mpi.so works as libiez.so: its MPI wrappers are never
# called and it loads no libmpi).
MPI_LAUNCHERS = frozenset({"mpiexec", "mpirun", "mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich", "mpiexec.openmpi",
                           "mpirun.openmpi", "orterun", "prterun", "srun", "aprun", "jsrun", "flux"})
# Open MPI's launchers pass no environment to remote ranks unless told (-x NAME).
OPENMPI_LAUNCHERS = frozenset({"orterun", "prterun", "mpirun.openmpi", "mpiexec.openmpi"})
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def libiez_path(kind: str = "posix") -> Path:
    """The libiez shared object: $IEZ_LIBIEZ (or $IEZ_LIBIEZ_MPI), else in $IEZ_LIBDIR, the build
    tree or an install (iez.artifacts)."""
    env = "IEZ_LIBIEZ_MPI" if kind == "mpi" else "IEZ_LIBIEZ"
    return Path(find_built("libiez", env, f"libiez/{LIBS[kind]}", program=False))


def _resolve(prog: str, env: Mapping[str, str]) -> Path | None:
    found = shutil.which(prog, path=env.get("PATH", os.defpath)) if "/" not in prog else prog
    return Path(found).resolve() if found else None


def elf_needed(path: str | Path) -> list[str]:
    """The shared libraries an ELF executable names (DT_NEEDED), or [] for anything else (a
    script, a 32-bit or big-endian binary, an unreadable file)."""
    try:
        with open(path, "rb") as f:
            data = f.read(64 << 20)
    except OSError:
        return []
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dynamic = [], None
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 56 > len(data):
            return []
        ptype, _flags, off, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, at)
        if ptype == 1:  # PT_LOAD
            loads.append((vaddr, off, filesz))
        elif ptype == 2:  # PT_DYNAMIC
            dynamic = (off, filesz)
    if dynamic is None:
        return []

    def file_offset(vaddr: int) -> int | None:
        return next((off + vaddr - va for va, off, size in loads if va <= vaddr < va + size), None)

    needed, strtab = [], None
    for at in range(dynamic[0], min(dynamic[0] + dynamic[1], len(data) - 15), 16):
        tag, val = struct.unpack_from("<qQ", data, at)
        if tag == 0:  # DT_NULL
            break
        if tag == 1:  # DT_NEEDED
            needed.append(val)
        elif tag == 5:  # DT_STRTAB
            strtab = file_offset(val)
    if strtab is None:
        return []
    names = []
    for off in needed:
        end = data.find(b"\0", strtab + off)
        if end > 0:
            names.append(data[strtab + off:end].decode("utf-8", "replace"))
    return names


def uses_mpi(argv: Sequence[str], env: Mapping[str, str] = os.environ) -> bool:
    """Whether a command runs MPI ranks: it is an MPI launcher (mpiexec, mpirun, srun, ...), or
    a program that links an MPI library, or parallel HDF5, directly (an MPI singleton). A
    script, or a program that reaches MPI only through other libraries, counts as no MPI."""
    if not argv:
        return False
    if Path(argv[0]).name in MPI_LAUNCHERS:
        return True
    prog = _resolve(argv[0], env)
    return prog is not None and any(_mpi_library(n) for n in elf_needed(prog))


def _mpi_library(name: str) -> bool:
    """libmpi.so.40, libmpich.so.12, or a library built on one (libhdf5_mpich, libhdf5_openmpi)."""
    return name.startswith("libmpi") or "mpich" in name or "openmpi" in name


def launcher_args(argv: Sequence[str], names: Sequence[str], env: Mapping[str, str] = os.environ) -> list[str]:
    """`argv` with what its launcher needs to give the ranks these environment variables: `-x
    NAME` for Open MPI's mpirun (MPICH's mpiexec and srun pass the whole environment)."""
    prog = _resolve(argv[0], env) if argv else None
    if prog is None or (prog.name not in OPENMPI_LAUNCHERS and Path(argv[0]).name not in OPENMPI_LAUNCHERS):
        return list(argv)
    return [argv[0], *(a for n in names for a in ("-x", n)), *argv[1:]]


def preload_env(base: Mapping[str, str], lib: Path, settings: Mapping[str, str | None]) -> dict[str, str]:
    """`base` with libiez first in LD_PRELOAD (other preloads kept) and the IEZ_* settings
    (a None value removes the variable, so a stale IEZ_PLAN cannot leak into a traced run)."""
    env = dict(base)
    others = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if Path(p).name not in LIBS.values()]
    env["LD_PRELOAD"] = " ".join([str(lib), *others])
    for k, v in settings.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run `argv` to completion; signals sent to us go to it. Returns its exit status the way a
    shell reports it (128 + N when it was killed by signal N)."""
    if not argv:
        raise IezError("no command given (usage: iez run --app NAME -- COMMAND ...)")
    try:
        proc = subprocess.Popen(list(argv), env=dict(env))
    except FileNotFoundError:
        raise IezError(f"{argv[0]}: command not found") from None
    except OSError as e:  # not executable, a symlink loop, not a program the kernel runs
        raise IezError(f"{argv[0]}: {e.strerror.lower() if e.strerror else e}") from None
    previous = {s: signal.signal(s, lambda sig, _f: proc.send_signal(sig)) for s in FORWARDED}
    try:
        rc = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return 128 - rc if rc < 0 else rc
