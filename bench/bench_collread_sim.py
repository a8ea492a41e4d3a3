"""Seed 003's collective-read figures on the simulator (docs/references.md#s003-figs4-5): Wolf
(Figs. 3, 6), Cori (Fig. 7) and Blue Waters (Fig. 8), ROMIO's two-phase read against the
Lustre-aware read, both with their exchange. Every figure is the Lustre-aware read's bandwidth over
ROMIO's at the same process count, measured in the same run, beside the paper's; and the CPU time
the runs took (engine processes included).

    python -m bench collread_sim [--out DIR]    (figures and summary.json per scenario in DIR)

docs/simulator.md ("Reproductions") holds the same numbers; tests/test_sim_collread.py runs only
the Wolf scenario, the two others being 10 runs each.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from iez.sim.scenario import load_scenario, variants
from iez.sim.study import run_all, summarise

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = {  # scenario file -> the paper's number for the Lustre-aware read against ROMIO
    "seed003-collread.toml": "Fig. 6: 2874 MB/s against about half of 3,112 (1.85x)",
    "seed003-fig7.toml": "Fig. 7: 1.34x at 4096 processes",
    "seed003-fig8.toml": "Fig. 8: 2.70x at 4096 processes",
}


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run(name: str, out: Path) -> None:
    doc, base = load_scenario(ROOT / "scenarios" / name)
    t0, c0 = time.perf_counter(), cpu()
    vs = variants(doc, base)
    runs = run_all(vs, out)
    summarise(vs[0].scenario, runs, out)
    wall, spent = time.perf_counter() - t0, cpu() - c0
    bw = {(r.variant.values["variant"], r.variant.values.get("ior.ranks", 192)): r.results.job("ior").read_bw
          for r in runs}
    print(f"{name}: {len(runs)} runs, {spent:.1f} s CPU ({wall:.1f} s wall); paper {SCENARIOS[name]}")
    for ranks in sorted({k for _, k in bw}):
        romio, aware = bw[("romio", ranks)], bw[("lustre", ranks)]
        print(f"  {ranks:>5} processes: ROMIO {romio / 1e6:9.0f} MB/s, Lustre-aware {aware / 1e6:9.0f} MB/s"
              f" = x{aware / romio:.2f}")


def main() -> None:
    args = sys.argv[1:]
    keep = Path(args[args.index("--out") + 1]) if "--out" in args else None
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or Path(tmp)
        for name in SCENARIOS:
            run(name, out / Path(name).stem)
    if keep:
        print(f"figures in {keep}/<scenario>/figure.png")


if __name__ == "__main__":
    main()
