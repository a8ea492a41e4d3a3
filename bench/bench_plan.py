"""Plan lookup with run-time fields (docs/plan-format.md, version 2). Every figure is a ratio
against the literal-only plan of the same size measured in this run.

    python -m bench plan

- load: libiez's parser (iez-probe load) on 100k-entry plans, all literal, a quarter and all of
  them templated ({job} filled in at load; {rand:6}, {date:...} matched by shape).
- lookup: ns per create-time lookup (iez-probe findtime: the iez_plan_find libiez calls), on a
  mix of hits and misses, for the same plans; and how it grows from 10k to 100k templated
  entries against how a literal plan's grows (both: a bigger table in memory; a scan of the
  templates would grow 10x): one probe per field shape, no scan of the entries.
- Python: iez.fields.Matcher on the same plans (report and hit accounting), per lookup.

Runs alternate between plans and the best of each is kept, because the machine may be shared.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console

from iez import plan as P

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "build" / "libiez" / "iez-probe"
N = 100_000
LOOKUPS = 2_000_000
REPEATS = 5
JOB = "8812345"
console = Console(width=150, highlight=False)


def entry(i: int, templated: bool) -> tuple[str, str]:
    """The i-th entry's key and a name it matches (a create of this run)."""
    d = f"/lustre/scratch/bench/job{i % 7}/dir{i % 1000:04d}"
    if not templated:
        return f"{d}/file.{i:07d}.dat", f"{d}/file.{i:07d}.dat"
    kind = i % 3
    if kind == 0:
        return f"{d}/out.{i:07d}.{{job}}", f"{d}/out.{i:07d}.{JOB}"
    if kind == 1:
        sfx = "".join(random.Random(i).choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=6))
        return f"{d}/.ckpt.{i:07d}.h5.{{rand:6}}", f"{d}/.ckpt.{i:07d}.h5.{sfx}"
    return f"{d}/log.{i:07d}.{{date:%Y%m%d}}-{{time:%H%M%S}}", f"{d}/log.{i:07d}.20261124-0{i % 10}1530"


def write(scratch: Path, name: str, n: int, templated_every: int) -> tuple[Path, Path]:
    """A plan of n entries (every templated_every-th templated; 0: none) and the names to look
    up: every entry's name, and as many misses."""
    plan, names = scratch / f"{name}.plan", scratch / f"{name}.names"
    keys, creates = [], []
    for i in range(n):
        k, c = entry(i, bool(templated_every) and i % templated_every == 0)
        keys.append(k)
        creates.append(c)
    rng = random.Random(5)
    misses = [c[:-1] + ("#" if c[-1] != "#" else "%") for c in creates]
    lookups = creates + misses
    rng.shuffle(lookups)
    plan.write_text("#iez-plan 2\n#app=bench\n" + "".join(f"{k}\tS=1048576,c=4,o=1:2:3:4\n" for k in keys))
    names.write_text("\n".join(lookups))
    return plan, names


def probe(*args: str) -> list[str]:
    r = subprocess.run([str(PROBE), *args], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "SLURM_JOB_ID": JOB})
    out = r.stdout.split()
    if not out or out[0] != "OK":
        raise RuntimeError(f"iez-probe {args[0]}: {r.stdout}{r.stderr}")
    return out


def figure(name: str, value: str, ratio: float, base: str) -> None:
    console.print(f"  {name:<48} {value:>14}   ratio {ratio:7.3f} against {base}")


def main() -> None:
    if not PROBE.exists():
        raise RuntimeError(f"{PROBE} is missing: build libiez (cmake --build build)")
    scratch = Path(tempfile.mkdtemp(prefix="iez-bench-plan-"))
    try:
        plans = {"literal": write(scratch, "literal", N, 0), "1/4 templated": write(scratch, "quarter", N, 4),
                 "all templated": write(scratch, "all", N, 1), "10k templated": write(scratch, "small", N // 10, 1),
                 "10k literal": write(scratch, "small-literal", N // 10, 0)}
        load: dict[str, float] = {}
        find: dict[str, float] = {}
        for _ in range(REPEATS):
            for label, (plan, names) in plans.items():
                load[label] = min(load.get(label, 1e9), float(probe("load", str(plan))[2]))
                out = probe("findtime", str(plan), str(LOOKUPS), str(names))
                find[label] = min(find.get(label, 1e9), float(out[2]))
                if int(out[3]) != LOOKUPS // 2:  # the names cycle whole: half of them hit
                    raise RuntimeError(f"{label}: {out[3]} of {LOOKUPS} lookups hit, expected half")
        console.print(f"libiez plan (C), {N // 1000}k entries, {LOOKUPS // 10**6}M lookups, half of them misses")
        for label in plans:
            figure(f"load, {label}", f"{load[label] * 1e3:.1f} ms", load[label] / load["literal"], "literal")
        for label in plans:
            figure(f"lookup, {label}", f"{find[label]:.0f} ns", find[label] / find["literal"], "literal")
        # 10x the entries costs a scan 10x; a table only the memory a bigger table lives in, as literal
        figure("lookup growth 10k -> 100k, templated", f"{find['all templated'] / find['10k templated']:.2f}x",
               find["all templated"] / find["10k templated"] / (find["literal"] / find["10k literal"]),
               "the literal plan's growth (a scan: ~10)")
        python_side(plans)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def python_side(plans: dict[str, tuple[Path, Path]]) -> None:
    console.print("iez.fields.Matcher (Python), per lookup")
    per: dict[str, float] = {}
    for label, (plan, names) in plans.items():
        match = P.load(plan).matcher({"job": JOB})
        lookups = names.read_text().split("\n")[:200_000]
        t0 = time.perf_counter()
        hits = sum(match(n) is not None for n in lookups)
        per[label] = (time.perf_counter() - t0) / len(lookups)
        if not 0.4 < hits / len(lookups) < 0.6:
            raise RuntimeError(f"{label}: {hits} of {len(lookups)} lookups hit, expected half")
    for label in plans:
        figure(f"lookup, {label}", f"{per[label] * 1e9:.0f} ns", per[label] / per["literal"], "literal")


if __name__ == "__main__":
    main()
