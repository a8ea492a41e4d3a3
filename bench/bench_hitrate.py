"""Plan hit rate of real programs: how many of the files a placed run leaves were placed from the plan.

    python -m bench hitrate

Each program of `iez.workload.programs` (tar, rsync, cp, sqlite3, h5py, fio, dd, a mktemp job
script, mpiexec of iez-bench) runs three times under plain LD_PRELOAD on an emulated cluster:
traced, then placed twice, a new SLURM_JOB_ID each time, the plan made through `iez trace
import`, `iez predict` and `iez allocate` from the runs before (`iez.workload.measure`). Figures:

- per program and overall: files left at the end of the placed runs that were placed from the
  plan (layout read back equals the plan entry's, and the trace records the create as a plan
  hit), against the goal of 100%; the files that missed, and why;
- temporaries the runs created and deleted, and how many of them missed (allowed);
- beside each, the hit rate libiez counts itself over every create (its shard headers), the
  baseline measured in the same runs: where the two differ, libiez's counters alone mislead.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from iez.workload.hitrate import ProgramResult, rate, summary
from iez.workload.measure import Site, emulated_cluster, measure
from iez.workload.programs import PROGRAMS, make_inputs

GOAL = 1.0  # every surviving file placed from the plan
SHOWN_MISSES = 3  # missed files named per program


def _libiez_rate(r: ProgramResult) -> str:
    hits = sum(v.libiez_hits for v in r.runs)
    return rate(hits, hits + sum(v.libiez_misses for v in r.runs))


def table(results: list[ProgramResult]) -> Table:
    t = Table(title="files left by the placed runs (2 a program), placed from the plan")
    for col in ("program", "surviving", "placed", "hit rate", "temporaries (missed)", "libiez's count", "missed, why"):
        t.add_column(col, justify="right" if col in ("surviving", "placed", "hit rate") else "left")
    for r in results:
        missed = [f"{Path(m.path).name}: {m.why}" for m in r.missed]
        shown = missed[:SHOWN_MISSES] + ([f"... {len(missed) - SHOWN_MISSES} more"] if len(missed) > SHOWN_MISSES else [])
        if r.error:
            shown.append(f"error: {r.error}")
        t.add_row(r.program, str(r.surviving), str(r.placed), rate(r.placed, r.surviving),
                  f"{r.temporaries} ({len(r.temporaries_missed)})", _libiez_rate(r), "\n".join(shown))
    return t


def main() -> None:
    console = Console(width=200)
    with tempfile.TemporaryDirectory(prefix="iez-hitrate-") as tmp:
        root = Path(tmp)
        iez = (str(Path(sys.executable).with_name("iez")),)
        t0 = time.perf_counter()
        with emulated_cluster(root / "emu", iez) as emu:
            results = measure(Site(emu, root / "work", make_inputs(root / "inputs"), iez), list(PROGRAMS.values()))
        took = time.perf_counter() - t0
    console.print(table(results))
    placed, surviving = summary(results)
    met = [r.program for r in results if r.goal_met]
    stopped = [r.program for r in results if r.error]
    libiez_hits = sum(v.libiez_hits for r in results for v in r.runs)
    libiez_all = libiez_hits + sum(v.libiez_misses for r in results for v in r.runs)
    print(f"overall: {placed} of {surviving} surviving files placed from the plan ({rate(placed, surviving)}; "
          f"goal {GOAL:.0%}: {'met' if met == list(PROGRAMS) else 'NOT met'}); "
          f"libiez counted {rate(libiez_hits, libiez_all)} of its creates as hits")
    print(f"programs at the goal: {len(met)} of {len(PROGRAMS)} ({', '.join(met) or 'none'}); "
          f"stopped or unplanned: {', '.join(stopped) or 'none'}")
    print(f"{len(PROGRAMS)} programs x 3 runs with the iez commands between them in {took:.0f} s")


if __name__ == "__main__":
    main()
