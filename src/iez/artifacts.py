"""Where iez's compiled parts are: `$ENV` if set, else this checkout's `build/` tree (the
README commands build there), else installed locations. One lookup for every binary and
library, with one clear error that says how to build what is missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from iez.errors import IezError

BUILD = Path(__file__).resolve().parents[2] / "build"  # the source checkout (editable install)
BUILD_HINT = "build it with `make build` (or `cmake -S . -B build && cmake --build build`)"


def find_built(what: str, env: str, build_rel: str, *, program: bool = True,
               installed: tuple[str, ...] = (), error: type[IezError] = IezError, hint: str = BUILD_HINT) -> str:
    """Path of a built program (found on PATH too) or library (in `installed` dirs)."""
    given = os.environ.get(env)
    if given:
        ok = os.access(given, os.X_OK) if program else os.path.isfile(given)
        if not ok:
            raise error(f"${env} names {given}, which is not {'an executable' if program else 'a file'}")
        return given
    name = Path(build_rel).name
    candidates = [BUILD / build_rel, *(Path(d) / name for d in installed)]
    for c in candidates:
        if c.is_file() and (not program or os.access(c, os.X_OK)):
            return str(c)
    if program and (found := shutil.which(name)):
        return found
    raise error(f"{what} ({name}) is not built: {hint}, or point ${env} at it")
