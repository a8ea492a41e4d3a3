"""Where iez's compiled parts are: `$ENV` if set, else this checkout's `build/` tree (the
README commands build there), else where `cmake --install` put them (docs/install.md). One
lookup for every binary and library, with one clear error that says how to build what is
missing."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from iez.errors import IezError

BUILD = Path(__file__).resolve().parents[2] / "build"  # the source checkout (editable install)
BUILD_HINT = "build it with `make build` (or `cmake -S . -B build && cmake --build build`)"
LIBDIR_ENV = "IEZ_LIBDIR"  # a directory of installed libraries (the environment module sets it)
LIB_SUBDIR = "iez"  # cmake/install.cmake: libraries in LIBDIR/iez, programs in bin


def find_built(what: str, env: str, build_rel: str, *, program: bool = True,
               error: type[IezError] = IezError, hint: str = BUILD_HINT) -> str:
    """Path of a built program (found on PATH too) or library: `$env`, `$IEZ_LIBDIR` (libraries),
    the build tree, then the installed places (`installed_dirs`)."""
    given = os.environ.get(env)
    if given:
        ok = os.access(given, os.X_OK) if program else os.path.isfile(given)
        if not ok:
            raise error(f"${env} names {given}, which is not {'an executable' if program else 'a file'}")
        return given
    name = Path(build_rel).name
    libdir = os.environ.get(LIBDIR_ENV)
    first = [Path(libdir) / name] if libdir and not program else []
    candidates = [*first, BUILD / build_rel, *(d / name for d in installed_dirs(program))]
    for c in candidates:
        if c.is_file() and (not program or os.access(c, os.X_OK)):
            return str(c)
    if program and (found := shutil.which(name)):
        return found
    raise error(f"{what} ({name}) is not built: {hint}; or install it (docs/install.md), or point ${env} at it")


def installed_dirs(program: bool) -> list[Path]:
    """Where an install keeps iez's programs (`bin`) or libraries (`LIBDIR/iez`), most specific
    first: the prefix iez.pc names (pkg-config, $PKG_CONFIG_PATH included), this Python's prefix
    (a venv or /opt/iez holding both halves), /usr/local, then /usr with the distribution's
    library directories (lib/x86_64-linux-gnu, lib64, lib)."""
    prefixes = list(dict.fromkeys([sys.prefix, "/usr/local", "/usr"]))
    multiarch = sysconfig.get_config_var("MULTIARCH")
    libdirs = ["lib", *([f"lib/{multiarch}"] if multiarch else []), "lib64"]
    if program:
        found = [_pkgconfig("bindir")] + [Path(p) / "bin" for p in prefixes]
    else:
        found = [_pkgconfig("libdir")] + [Path(p) / d / LIB_SUBDIR for p in prefixes for d in libdirs]
    return [d for d in dict.fromkeys(found) if d is not None]


@functools.cache
def _pkgconfig(variable: str) -> Path | None:
    """A variable of the installed iez.pc, or None without pkg-config or iez.pc."""
    try:
        out = subprocess.run(["pkg-config", f"--variable={variable}", "iez"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.strip()
    return Path(os.path.normpath(value)) if out.returncode == 0 and value else None
