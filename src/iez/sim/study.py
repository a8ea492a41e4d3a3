"""One scenario, all its runs: build, simulate, compare, summarise.

For each variant (sweep combination x named variant) this writes `<out>/<label>/description.json`
and `results.json`, and the run's plots; then `<out>/summary.json` (every run's per-job metrics,
the lower bound, the comparisons against the seed's numbers) and `<out>/figure.png`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from iez.cluster import Cluster, Snapshot
from iez.layout.layout import FileLayout
from iez.sim import description, engine, plot
from iez.sim.bounds import lower_bound
from iez.sim.kinds import build
from iez.sim.placement import Cache, View, place
from iez.sim.results import Results, parse
from iez.sim.scenario import Compare, Scenario, Variant
from iez.sim.workload import Workload


@dataclass(frozen=True)
class Run:
    variant: Variant
    description: dict[str, Any]
    results: Results
    bound: float
    bound_resource: str


def workloads(scn: Scenario) -> list[Workload]:
    return [build(entry.pattern, entry.source_path) for entry in scn.jobs]


# Live views already simulated, by the engine description they ran, with their cluster (`live_view`'s `seen`).
Views = dict[str, tuple[Cluster, Snapshot]]


def live_view(scn: Scenario, wls: list[Workload], workdir: Path, seen: Views | None = None) -> View:
    """What iez's controller would read while the files placed so far are written: their jobs run
    alone on the engine (the others' nodes kept, so every stream takes its route), and each OST's
    write and read rates are its bytes over the time it was busy, as a collector's rate over the
    background's run (docs/simulator.md, "Scenario files": the live view). `seen`: views kept across
    calls (a scenario's runs): every policy but Lustre's is given the same background, simulated once."""
    def view(layouts: dict[str, FileLayout]) -> Snapshot:
        busy = [wl if wl.files and all(f.path in layouts for f in wl.files) else replace(wl, phases=())
                for wl in wls]
        desc = description.build(scn, busy, layouts)
        desc["jobs"] = [j for j in desc["jobs"] if j["phases"]]
        key = json.dumps(desc, sort_keys=True)
        if seen is not None and key in seen and seen[key][0] == scn.cluster:
            return seen[key][1]
        snap = Snapshot.from_cluster(scn.cluster)
        if desc["jobs"]:
            snap = _rates(snap, desc, workdir)
        if seen is not None:
            seen[key] = (scn.cluster, snap)
        return snap

    return view


def _rates(snap: Snapshot, desc: dict[str, Any], workdir: Path) -> Snapshot:
    """`snap` with each OST's write and read rates over the time the engine run of `desc` kept it busy."""
    for o in parse(engine.run(desc, workdir)).osts:
        if o.busy > 0:
            i = int(o.name)
            snap = snap.with_ost(replace(snap.osts[i], write_bps=o.bytes_written / o.busy,
                                         read_bps=o.bytes_read / o.busy))
    return snap


def simulate(v: Variant, workdir: Path, cache: Cache | None = None, views: Views | None = None) -> Run:
    """One run; `cache` and `views` keep placements and live views for the scenario's other runs
    (`place`, `live_view`)."""
    scn = v.scenario
    wls = workloads(scn)
    layouts = place(scn.cluster, list(zip(scn.jobs, wls)), cache=cache,
                    view=live_view(scn, wls, workdir / "live-view", views))
    desc = description.build(scn, wls, layouts)
    res = parse(engine.run(desc, workdir))
    b = lower_bound(desc)
    return Run(v, desc, res, b.seconds, b.resource)


def slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,-]+", "_", label) or "run"


def run_all(variants: list[Variant], out: Path, progress: Callable[[str], None] = lambda s: None,
            cache: Cache | None = None, views: Views | None = None) -> list[Run]:
    """Every variant's run; placements and live views are shared through `cache` and `views` (one
    each for the calls of one scenario)."""
    runs = []
    cache = {} if cache is None else cache
    views = {} if views is None else views
    for v in variants:
        progress(v.label)
        wd = out / slug(v.label)
        r = simulate(v, wd, cache, views)
        plot.run_plots(r.results, wd)
        runs.append(r)
    return runs


def row(r: Run) -> dict[str, Any]:
    return {
        "label": r.variant.label, "values": r.variant.values, "makespan": r.results.makespan,
        "lower_bound": r.bound, "bound_resource": r.bound_resource,
        "wall_seconds": r.results.wall_seconds,
        "jobs": [{k: v for k, v in asdict(j).items() if k != "phases"} for j in r.results.jobs],
    }


def _matches(values: dict[str, Any], want: dict[str, Any]) -> bool:
    return all(values.get(k) == v for k, v in want.items())


def compare(c: Compare, runs: list[Run]) -> dict[str, Any]:
    """test/base - 1 (docs/references.md#s002-improvement, as a fraction) for every pair of runs
    that differ only in the compared keys. A `job` key in base or test picks that side's job, so
    different jobs can be compared (Instance2 against Instance0, docs/references.md#s004-fig2);
    otherwise each job is compared with itself (or only `c.job`)."""
    want_b = {k: v for k, v in c.base.items() if k != "job"}
    want_t = {k: v for k, v in c.test.items() if k != "job"}
    job_b, job_t = str(c.base.get("job", c.job)), str(c.test.get("job", c.job))
    keys = set(want_b) | set(want_t)
    pairs: list[dict[str, Any]] = []
    for b in runs:
        if not _matches(b.variant.values, want_b):
            continue
        rest = {k: v for k, v in b.variant.values.items() if k not in keys}
        for t in runs:
            if _matches(t.variant.values, want_t) and {k: v for k, v in t.variant.values.items()
                                                        if k not in keys} == rest:
                for jb in b.results.jobs:
                    if job_b and jb.name != job_b:
                        continue
                    try:
                        jt = t.results.job(job_t or jb.name)
                    except Exception:
                        continue
                    base, test = jb.metric(c.metric), jt.metric(c.metric)
                    if base > 0:
                        who = jb.name if jt.name == jb.name else f"{jt.name} vs {jb.name}"
                        pairs.append({"where": rest, "job": who, "base": base, "test": test,
                                      "change": test / base - 1})
    changes: list[float] = [p["change"] for p in pairs]
    return {"label": c.label or f"{c.metric}: {c.test} vs {c.base}", "metric": c.metric, "seed": c.seed,
            "min": min(changes) if changes else None, "max": max(changes) if changes else None,
            "pairs": pairs}


def compare_line(c: dict[str, Any]) -> str:
    """One comparison of `compare` in words: the simulated change beside the seed's claim."""
    if c["min"] is None:
        ours = "n/a"
    elif abs(c["max"] - c["min"]) < 0.005:
        ours = f"{c['min']:+.0%}"
    else:
        ours = f"{c['min']:+.0%} .. {c['max']:+.0%}"
    return f"{c['label']}: simulated {ours}" + (f"; seed: {c['seed']}" if c["seed"] else "")


def summarise(scn: Scenario, runs: list[Run], out: Path) -> dict[str, Any]:
    compares = [compare(c, runs) for c in scn.compares]
    summary = {
        "title": scn.title, "notes": scn.notes,
        "runs": [row(r) for r in runs],
        "compare": compares,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    # The figure carries the seed's numbers beside ours, so it stands on its own.
    plot.study_figure(scn.figure, runs, out / "figure.png", footer=[compare_line(c) for c in compares])
    return summary
