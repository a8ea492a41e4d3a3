"""Running `iez-sim`, the C++ engine (sim/, built by CMake into build/sim/iez-sim).

The engine is found through $IEZ_SIM_ENGINE, then this checkout's build directory, then PATH.
It reads a description file and writes a results file; an engine error comes back as one
IezError line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from iez.artifacts import find_built
from iez.errors import IezError

ENV = "IEZ_SIM_ENGINE"
BUILD_HINT = ("build it with `cmake -S . -B build && cmake --build build` "
              "(SimGrid and nlohmann-json come from `apt-get install libsimgrid-dev nlohmann-json3-dev`)")


class SimError(IezError):
    """The simulator engine is missing or rejected its input."""


def engine_path() -> str:
    return find_built("the simulator engine", ENV, "sim/iez-sim", error=SimError, hint=BUILD_HINT)


def run(description: dict[str, Any], workdir: str | Path, timeout: float | None = None) -> dict[str, Any]:
    """Write `description.json` in `workdir`, run the engine, return the parsed results."""
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    desc = wd / "description.json"
    out = wd / "results.json"
    desc.write_text(json.dumps(description, separators=(",", ":")))
    try:
        proc = subprocess.run([engine_path(), str(desc), "-o", str(out)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SimError(f"the engine ran longer than {timeout:.0f} s on {desc}") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        why = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        raise SimError(why.removeprefix("iez-sim: error: ") or f"the engine exited with {proc.returncode}")
    try:
        return json.loads(out.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise SimError(f"the engine wrote no readable results ({e})") from None
