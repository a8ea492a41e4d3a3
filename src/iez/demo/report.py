"""The demo's outputs: a headline computed from the run's results, a table that fits a 100-column
terminal, PNGs in the style of seed 000's per-OST and per-OSS figures (docs/references.md#s000-figs7-9,
#s000-fig11), summary charts, and one HTML page that
leads with the headline and the summary charts and folds the per-scenario ones."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from iez.cluster import Cluster
from iez.demo.experiment import KEEP, DemoOptions, Outcome, Run, slug
from iez.report.charts import Series, grouped_bars, utilization_chart
from iez.report.html import Page

WIDTH = 100  # columns of the demo's terminal output; tests render the tables at this width

SCOPE = ("Everything ran as real processes on this machine: an emulated Lustre cluster with its MDS "
         "(Lustre's own LOD allocator), one statistics collector per OSS and one on the MDS over ZeroMQ, "
         "and the iez controller (SQLite). Each scenario's workload program (iez-bench) ran twice through "
         "`iez run`: first traced, with Lustre's default layouts; then placed by libiez with the plan the "
         "controller predicted and allocated from the trace and the live statistics. Usage is measured "
         "from the OSSs' parameter trees. Rates come from the SimGrid simulator run on the layouts each "
         "file really got, with the seed-000 testbed's hardware (one disk cannot show bandwidth effects).")

# seed 000's OSTCost (docs/references.md#s000-eq7: max / mean OST utilization), said in plain words
LEGEND = "OSTCost: the busiest OST's bytes / the average OST's (1.00 = even; lower is better)."
COLUMNS_NOTE = "a→b: Lustre default→iez. job: its own bytes; all data: all on the OSTs; MB/s, gain: simulated."

BASELINE_NOTE = ("Where our default differs from the paper's: the default here is Lustre's own allocator, "
                 "reproduced from the LOD source (RR with OSS interleaving and precession, QoS when free space "
                 "differs by more than 17%). On an empty cluster, RR spreads equal files almost perfectly "
                 "(OSTCost 1.025 for 64 files x 8 stripes on 15 OSTs, the integer bound), so it cannot show the "
                 "paper's 1.47, which came from their testbed's state and history. The gap opens when the "
                 "cluster has drifted: Lustre then switches to QoS, weighted random by free space, and iez's "
                 "global view evens out the total usage.")


LAYOUT_NOTE = ("Seed 000's scenarios keep the paper's stripe counts: iez chooses their OSTs and stripe sizes. "
               "The scenarios marked 'layout auto' show what the layout itself does (docs/layouts.md): the job's "
               "directory asks for one stripe, the file system's default, as real jobs' shared files have it, so "
               "Lustre leaves the shared file on one OST (job OSTCost 15, the worst there is on 15 OSTs, and one "
               "disk's bandwidth); the controller places the next run with the automatic layout, its stripe count "
               "and size from the file's bytes, its writers and the cluster. Their bound is the best any layout "
               "of whole 1 MiB stripes can give the job's bytes.")

STATE_TITLE = {"empty": "the paper's testbed, empty",
               "drifted": "the same testbed drifted out of balance (OSTs {lo:.0%}-{hi:.0%} full before the job)"}
SIDES = ("default", "iez")


def state_title(state: str, opts: DemoOptions) -> str:
    return STATE_TITLE[state].format(lo=opts.drift[0], hi=opts.drift[1])


def _arrow(a: float, b: float, fmt: str) -> str:
    return f"{a:{fmt}}→{b:{fmt}}"


def _gain(oc: Outcome, which: str) -> float | None:
    """iez's simulated rate over the default's, minus one (+0.40 is 40% faster)."""
    d, i = oc.runs["default"].rates, oc.runs["iez"].rates
    if d is None or i is None or not getattr(d, which):
        return None
    return getattr(i, which) / getattr(d, which) - 1


def _pct(g: float | None) -> str:
    """+40%, or 14.7x from twice as fast on (a percentage of thousands reads badly)."""
    if g is None:
        return "-"
    return f"{g + 1:.1f}x" if g >= 1 else f"{g * 100:+.0f}%"


def _paper(oc: Outcome) -> str:
    return _arrow(*oc.scenario.paper, ".2f") if oc.scenario.paper else ""


def _placed(run: Run) -> str:
    return "-" if run.plan_hits is None or run.plan_misses is None else f"{run.plan_hits}/{run.plan_hits + run.plan_misses}"


def _write_rates(oc: Outcome) -> str:
    d, i = oc.runs["default"].rates, oc.runs["iez"].rates
    return "-" if d is None or i is None else _arrow(d.write_bw / 1e6, i.write_bw / 1e6, ".0f")


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Outcome], str]
    terminal: bool = True  # False: on the HTML page only


COLUMNS = (
    Column("workload", lambda oc: oc.scenario.name),
    Column("OSTCost\njob", lambda oc: _arrow(oc.runs["default"].report.job.ost_cost, oc.runs["iez"].report.job.ost_cost,
                                             ".2f")),
    Column("OSTCost\nall data", lambda oc: _arrow(oc.runs["default"].report.total.ost_cost,
                                                  oc.runs["iez"].report.total.ost_cost, ".2f")),
    Column("best\npossible", lambda oc: f"{oc.bound:.2f}" if oc.bound else "-", terminal=False),
    Column("OSSCost\njob", lambda oc: _arrow(oc.runs["default"].report.job.oss_cost, oc.runs["iez"].report.job.oss_cost,
                                             ".2f"), terminal=False),
    Column("write\nMB/s", _write_rates),
    Column("write\ngain", lambda oc: _pct(_gain(oc, "write_bw"))),
    Column("read\ngain", lambda oc: _pct(_gain(oc, "read_bw"))),
    Column("files placed\nfrom plan", lambda oc: _placed(oc.runs["iez"]), terminal=False),
    Column("paper\nOSTCost", _paper),
)


def rows(outcomes: Sequence[Outcome], terminal: bool = False) -> tuple[list[str], list[list[str]]]:
    """The header and one row per scenario; `terminal`: the columns that fit WIDTH."""
    cols = [c for c in COLUMNS if c.terminal or not terminal]
    return [c.header for c in cols], [[c.cell(oc) for c in cols] for oc in outcomes]


def replaced_notes(outcomes: Sequence[Outcome]) -> list[str]:
    return [f"{oc.scenario.name}: {oc.replaced}" for oc in outcomes if oc.replaced]


def console_table(outcomes: Sequence[Outcome], title: str) -> Table:
    header, body = rows(outcomes, terminal=True)
    t = Table(title=f"On {title}", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0, 0, 1), pad_edge=False)
    for i, h in enumerate(header):
        t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
    for r in body:
        t.add_row(*r)
    return t


def print_results(console: Console, models: dict[str, Cluster], outcomes: Sequence[Outcome],
                  opts: DemoOptions) -> None:
    """What `iez demo` prints at the end: the headline, one table per cluster and the legend."""
    console.print("\n[bold]What it found[/bold]")
    for line in headline(outcomes, opts):
        console.print(f"- {line}", highlight=False)
    for state in models:
        mine = [oc for oc in outcomes if oc.state == state]
        console.print(console_table(mine, state_title(state, opts)))
        for note in replaced_notes(mine):
            console.print(f"  {note}", highlight=False)
    console.print(LEGEND, highlight=False)
    console.print(COLUMNS_NOTE, highlight=False)


def _ost_spread(run: Run) -> int:
    return len({o for fl in run.layouts.values() for c in fl.parts() for o in c.layout.osts})


def _workload_kinds(outcomes: Sequence[Outcome]) -> str:
    reqs = [r for oc in outcomes for r in oc.scenario.requests]
    kinds = [name for name, has in (("IOR", any(r.app == "ior" for r in reqs)),
                                    ("HACC-I/O", any((r.app or "").startswith("hacc") for r in reqs)),
                                    ("file per process", any(r.comm_size == 1 for r in reqs)),
                                    ("shared file", any(r.comm_size > 1 for r in reqs)),
                                    ("two applications at once",
                                     any(len({r.app for r in oc.scenario.requests}) > 1 for oc in outcomes)))
             if has]
    return ", ".join(kinds)


def _balance_sentence(state: str, mine: Sequence[Outcome], opts: DemoOptions) -> str:
    gains = [g for g in (_gain(oc, "write_bw") for oc in mine) if g is not None]
    busiest = {k: statistics.median(oc.runs[k].report.job.ost_cost for oc in mine) for k in SIDES}
    where = ("On a cluster drifted out of balance (each OST {lo:.0%}-{hi:.0%} full with other users' data)"
             if state == "drifted" else "On the empty cluster").format(lo=opts.drift[0], hi=opts.drift[1])
    s = (f"{where}, the busiest OST got a median {busiest['default']:.2f}x the average OST's share of each "
         f"job's bytes under Lustre's default placement, and {busiest['iez']:.2f}x when iez placed the same "
         "jobs' next runs")
    if not gains:
        return s + "."
    same, slower = sum(abs(g) <= 0.005 for g in gains), sum(g < -0.005 for g in gains)
    tally = ", ".join([f"faster in {len(gains) - same - slower} of {len(gains)} workloads"]
                      + [f"{word} in {n}" for word, n in (("unchanged", same), ("slower", slower)) if n])
    return (s + f". Their simulated writes ran {min(gains):+.0%} to {max(gains):+.0%} faster (median "
            f"{statistics.median(gains):+.0%}; {tally}): {_workload_kinds(mine)}.")


def _layout_sentence(oc: Outcome) -> str:
    d, i = oc.runs["default"], oc.runs["iez"]
    s = (f"{oc.scenario.name} ({oc.state} cluster): Lustre left the shared file on {_ost_spread(d)} of "
         f"{len(d.report.job.ost_util)} OSTs (its directory's default); iez's automatic layout spread the next "
         f"run over {_ost_spread(i)}")
    if d.rates is None or i.rates is None:
        return s + "."
    return s + (f": simulated writes {d.rates.write_bw / 1e6:.0f} -> {i.rates.write_bw / 1e6:.0f} MB/s "
                f"({i.rates.write_bw / d.rates.write_bw:.1f}x).")


def headline(outcomes: Sequence[Outcome], opts: DemoOptions) -> list[str]:
    """What the run found, in sentences a site admin reads in a minute, computed from its results:
    the drifted cluster first (where placement matters), then the empty one, the layouts iez
    chose for shared files, and how many files the plans placed."""
    out = []
    states = sorted({oc.state for oc in outcomes}, key=lambda s: s != "drifted")
    for state in states:
        mine = [oc for oc in outcomes if oc.state == state and oc.layout == KEEP]
        if mine:
            out.append(_balance_sentence(state, mine, opts))
    out += [_layout_sentence(oc) for oc in outcomes if oc.layout != KEEP and oc.state == states[0]]
    hits = sum(oc.runs["iez"].plan_hits or 0 for oc in outcomes)
    asked = hits + sum(oc.runs["iez"].plan_misses or 0 for oc in outcomes)
    out.append(f"libiez placed {hits} of {asked} files of the second runs from the controller's plans.")
    return out


def _summary_charts(out: Path, opts: DemoOptions, outcomes: Sequence[Outcome]) -> list[tuple[Path, str]]:
    """The page's two or three leading figures: the drifted cluster's simulated write rates and
    OSTCost, and the empty cluster's OSTCost beside the paper's."""
    charts = []
    for state in ("drifted", "empty"):
        mine = [oc for oc in outcomes if oc.state == state]
        if not mine:
            continue
        names = [oc.scenario.name for oc in mine]
        if state == "drifted":
            rates = out / "write-rates-drifted.png"
            grouped_bars(rates, "Simulated write rate on the drifted cluster: Lustre default vs iez (higher is "
                         "better; seed-000 testbed hardware, the paper's sizes)", names,
                         {k: [r.write_bw / 1e6 if (r := oc.runs[k].rates) else 0.0 for oc in mine]
                          for k in SIDES}, "MB/s")
            charts.append((rates, "simulated write rates, drifted cluster"))
        cost = out / f"ostcost-{state}.png"
        which = "total" if state == "drifted" else "job"
        if state == "empty":  # beside the paper's figures: its scenarios only (a 15 would flatten the axis)
            mine = [oc for oc in mine if oc.layout == KEEP] or mine
            names = [oc.scenario.name for oc in mine]
        grouped_bars(cost, f"OSTCost of {'all data on the OSTs' if which == 'total' else 'the job'}, {state} "
                     "cluster: Lustre default vs iez (lower is better; 1.0 is even)"
                     + (" - markers: seed 000's figures" if state == "empty" else ""), names,
                     {k: [getattr(oc.runs[k].report, which).ost_cost for oc in mine] for k in SIDES},
                     "OSTCost (busiest OST / average OST)",
                     reference={"default": [oc.scenario.paper[0] if oc.scenario.paper else None for oc in mine],
                                "iez": [oc.scenario.paper[1] if oc.scenario.paper else None for oc in mine]}
                     if state == "empty" else None,
                     baseline=1.0)
        charts.append((cost, f"OSTCost, {state} cluster"))
    return charts


def _scenario_figures(out: Path, oc: Outcome, cluster: Cluster) -> Page:
    """The scenario's per-OST and per-OSS utilization (#s000-figs7-9, #s000-fig11), OSTs numbered as
    Lustre numbers them (0-based, as `iez df` and /metrics show them)."""
    osts = cluster.ost_indices()
    osses = [s.name for s in cluster.osses]
    name = f"{oc.state}-{slug(oc.scenario.name)}"
    series = {k: Series([run.report.job.ost_util[i] for i in osts], [run.report.total.ost_util[i] for i in osts],
                        run.report.job.ost_cost, run.report.total.ost_cost) for k, run in oc.runs.items()}
    ost_png = out / f"{name}-ost.png"
    utilization_chart(ost_png, f"{oc.state} cluster, {oc.scenario.name}: per OST (cf. seed 000 {oc.scenario.source})",
                      [str(i) for i in osts], series, "OST index (as lfs df numbers them)", "OSTs")
    oss_series = {k: Series([run.report.job.oss_util[s] for s in osses], [run.report.total.oss_util[s] for s in osses],
                            run.report.job.oss_cost, run.report.total.oss_cost) for k, run in oc.runs.items()}
    oss_png = out / f"{name}-oss.png"
    utilization_chart(oss_png, f"{oc.state} cluster, {oc.scenario.name}: per OSS (cf. seed 000 Fig. 11)",
                      osses, oss_series, "OSS", "OSSs")
    return Page("").image(ost_png, f"{oc.scenario.name} per OST").image(oss_png, f"{oc.scenario.name} per OSS")


def _scenario_json(oc: Outcome) -> dict[str, object]:
    return {"cluster": oc.state, "name": oc.scenario.name, "layout": oc.layout, "files": oc.files,
            "stripes": oc.stripes, "bytes": oc.bytes, "bound": oc.bound, "paper": oc.scenario.paper,
            "replaced": oc.replaced,
            "runs": {k: {"plan_hits": r.plan_hits, "plan_misses": r.plan_misses,
                         "ost_cost": r.report.job.ost_cost, "oss_cost": r.report.job.oss_cost,
                         "total_ost_cost": r.report.total.ost_cost,
                         "job_bytes": r.job_bytes, "seconds": r.seconds,
                         "stripes": sum(len(c.layout.osts) for fl in r.layouts.values() for c in fl.parts()),
                         "osts": _ost_spread(r),
                         "sim": None if r.rates is None else {
                             "write_bw": r.rates.write_bw, "read_bw": r.rates.read_bw,
                             "makespan": r.rates.makespan, "bound": r.rates.bound}}
                     for k, r in oc.runs.items()}}


def write(opts: DemoOptions, models: dict[str, Cluster], outcomes: Sequence[Outcome]) -> Path:
    out = opts.out
    cluster = models["empty"]
    osts = cluster.ost_indices()
    osses = [s.name for s in cluster.osses]
    page = Page("iez demo: balanced placement on an emulated Lustre cluster (seed 000 §IV)")
    page.heading("What it found")
    for line in headline(outcomes, opts):
        page.para(line)
    for png, alt in _summary_charts(out, opts, outcomes):
        page.image(png, alt)
    page.para(f"{LEGEND} {COLUMNS_NOTE}")
    for state in models:
        mine = [oc for oc in outcomes if oc.state == state]
        if not mine:
            continue
        page.heading(f"On {state_title(state, opts)}")
        page.table(*rows(mine))
        for note in replaced_notes(mine):
            page.para(note, note=True)
    page.heading("How it ran")
    page.para(SCOPE)
    page.para(f"Testbed: 1 MDS, {len(osses)} OSSs x {len(osts) // len(osses)} OSTs, numbered {osts[0]}-{osts[-1]} "
              f"as Lustre numbers them (seed 000 §II-D numbers them from 1). Data is "
              f"scaled down {opts.scale}x: each OST holds {cluster.osts[0].capacity >> 20} MiB instead of "
              f"10 GiB and every file is {opts.scale}x smaller; the default stripe size is "
              f"{cluster.default_stripe_size >> 10} KiB instead of 1 MiB. Utilization and OSTCost are ratios, "
              "so they compare with the paper's.", note=True)
    page.para("OST utilization = bytes on an OST / its capacity. OSTCost = max / mean over all 15 OSTs; "
              "1.00 is perfect balance. 'job' counts the bytes the job wrote (the paper's figures), 'all data' "
              "everything on the OSTs afterwards. 'best possible' is the best any placement can do when every "
              "stripe holds the same bytes: ceil(k/n)/(k/n) for k stripes on n OSTs. iez can beat it, because its "
              "Method II stripe size leaves each file's last stripe short and iez puts the short ones on "
              "the OSTs that hold the most stripes.")
    page.para(BASELINE_NOTE, note=True)
    page.para(LAYOUT_NOTE, note=True)
    page.heading("Each scenario")
    for state in models:
        mine = [oc for oc in outcomes if oc.state == state]
        for oc in mine:
            page.details(f"{oc.scenario.name} ({state} cluster): per OST and per OSS", _scenario_figures(out, oc, cluster))
    data = {"scale": opts.scale, "policy": opts.policy, "seed": opts.seed, "drift": opts.drift,
            "headline": headline(outcomes, opts), "scenarios": [_scenario_json(oc) for oc in outcomes]}
    (out / "demo.json").write_text(json.dumps(data, indent=1))
    return page.write(out / "index.html")
