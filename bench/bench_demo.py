"""How long `make demo` takes, against the time README.md states for it.

Runs `iez demo` (what `make demo` runs after set-up) and `iez demo --quick` as real processes,
each into a fresh directory, and prints for each:
- wall time / the README's stated minutes (<= 1: the README holds on this machine);
- CPU time of the demo and everything it started (user + system), and that CPU over the
  machine's cores: the wall time an otherwise idle machine could not go below;
- the load average before and after, since other work on the machine stretches the wall time.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
# the README's sentences that state the run times
STATED = {"": r"What `make demo` shows\*\* \(about (\d+) minutes on 2 cores",
          "--quick": r"`iez demo --quick`[^.]*?about (\d+) minutes"}


def stated_minutes(flag: str) -> float:
    m = re.search(STATED[flag], README.read_text())
    if not m:
        raise RuntimeError(f"README.md states no run time for iez demo {flag} (pattern {STATED[flag]!r})")
    return float(m.group(1))


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(flag: str, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `iez demo` (its children included: the MDS, collectors,
    controller, iez run and iez-bench all end before it does)."""
    iez = Path(sys.executable).with_name("iez")
    cpu0, t0 = children_cpu(), time.perf_counter()
    proc = subprocess.run([str(iez), "demo", "-o", str(out), *([flag] if flag else [])],
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"iez demo {flag} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return wall, cpu


def main() -> None:
    cores = os.cpu_count() or 1
    for flag in ("--quick", ""):
        stated = stated_minutes(flag)
        load0 = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu = run(flag, Path(tmp) / "demo")
        print(f"iez demo {flag or '(all scenarios)'}: wall {wall / 60:.1f} min = {wall / 60 / stated:.2f} x the "
              f"README's {stated:.0f} min; CPU {cpu / 60:.1f} min, over {cores} cores at least "
              f"{cpu / cores / 60:.1f} min; load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after",
              flush=True)


if __name__ == "__main__":
    main()
