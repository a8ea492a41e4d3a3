"""The demo's outputs: the OSTCost table beside the paper's figures, PNGs in the style of seed
000 Figs. 7 and 11, a summary chart, and one HTML page that shows them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from rich.table import Table

from iez.cluster import Cluster
from iez.demo.experiment import DemoOptions, Outcome, slug
from iez.report.charts import Series, grouped_bars, utilization_chart
from iez.report.html import Page

SCOPE = ("Everything ran as real processes on this machine: an emulated Lustre cluster with its MDS "
         "(Lustre's own LOD allocator), one statistics collector per OSS and one on the MDS over ZeroMQ, "
         "and the iez controller (SQLite). Each scenario's workload program (iez-bench) ran twice through "
         "`iez run`: first traced, with Lustre's default layouts; then placed by libiez with the plan the "
         "controller predicted and allocated from the trace and the live statistics. Usage is measured "
         "from the OSSs' parameter trees. Rates come from the SimGrid simulator run on the layouts each "
         "file really got, with the seed-000 testbed's hardware (one disk cannot show bandwidth effects).")


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


def _paper(oc: Outcome) -> str:
    return f"{oc.scenario.paper[0]:.2f} -> {oc.scenario.paper[1]:.2f}" if oc.scenario.paper else "-"


def rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    out = []
    for oc in outcomes:
        if oc.skipped:
            out.append([oc.scenario.name, str(oc.files)] + ["-"] * (len(HEADER) - 3) + [_paper(oc)])
            continue
        d, i = oc.runs["default"].report, oc.runs["iez"].report
        out.append([oc.scenario.name, str(oc.files), f"{d.job.ost_cost:.3f}", f"{i.job.ost_cost:.3f}",
                    f"{oc.bound:.3f}" if oc.bound else "-", f"{d.total.ost_cost:.3f}", f"{i.total.ost_cost:.3f}",
                    f"{d.job.oss_cost:.3f}", f"{i.job.oss_cost:.3f}", _rate(oc, "write_bw"), _rate(oc, "read_bw"),
                    _placed(oc.runs["iez"]), _paper(oc)])
    return out


def _placed(run) -> str:
    if run.plan_hits is None:
        return "-"
    return f"{run.plan_hits}/{run.plan_hits + run.plan_misses}"


def _rate(oc: Outcome, which: str) -> str:
    """Simulated MB/s, default -> iez, and the change."""
    d, i = oc.runs["default"].rates, oc.runs["iez"].rates
    if d is None or i is None:
        return "-"
    a, b = getattr(d, which) / 1e6, getattr(i, which) / 1e6
    return f"{a:.0f} -> {b:.0f} ({(b / a - 1) * 100:+.0f}%)"


HEADER = ["scenario", "files", "job: default", "job: iez", "bound", "total: default", "total: iez",
          "OSS: default", "OSS: iez", "sim write MB/s", "sim read MB/s", "placed from plan", "paper RR -> iez"]
STATE_TITLE = {"empty": "the paper's testbed, empty",
               "drifted": "the same testbed drifted out of balance (OSTs {lo:.0%}-{hi:.0%} full before the job)"}


def state_title(state: str, opts: DemoOptions) -> str:
    return STATE_TITLE[state].format(lo=opts.drift[0], hi=opts.drift[1])


def skipped_notes(outcomes: Sequence[Outcome]) -> list[str]:
    return [f"{oc.scenario.name}: {oc.skipped}" for oc in outcomes if oc.skipped]


def console_table(outcomes: Sequence[Outcome], title: str) -> Table:
    t = Table(title=f"OSTCost on {title}", caption="job: of the job's bytes (seed 000 eq. 7); total: of all "
              "data on the OSTs; bound: best possible if all stripes were equal (layout auto: best for the job's "
              "bytes in 1 MiB stripes); "
              "sim: simulated rates of these layouts on the seed-000 testbed's hardware, at the paper's sizes")
    keep = [i for i, h in enumerate(HEADER) if not h.startswith("OSS")]  # OSSCost: in the HTML report
    for i in keep:
        t.add_column(HEADER[i], justify="left" if i == 0 else "right", overflow="fold")
    for r in rows(outcomes):
        t.add_row(*(r[i] for i in keep))
    return t


def write(opts: DemoOptions, models: dict[str, Cluster], outcomes: Sequence[Outcome]) -> Path:
    out = opts.out
    cluster = models["empty"]
    osts = cluster.ost_indices()
    osses = [s.name for s in cluster.osses]
    page = Page("iez demo: balanced placement on an emulated Lustre cluster (seed 000 §IV)")
    page.para(SCOPE)
    page.para(f"Testbed: 1 MDS, {len(osses)} OSSs x {len(osts) // len(osses)} OSTs (seed 000 §II-D). Data is "
              f"scaled down {opts.scale}x: each OST holds {cluster.osts[0].capacity >> 20} MiB instead of "
              f"10 GiB and every file is {opts.scale}x smaller; the default stripe size is "
              f"{cluster.default_stripe_size >> 10} KiB instead of 1 MiB. Utilization and OSTCost are ratios, "
              "so they compare with the paper's.", note=True)
    page.para("OST utilization = bytes on an OST / its capacity. OSTCost = max / mean over all 15 OSTs; "
              "1.000 is perfect balance. 'job' counts the bytes the job wrote (the paper's figures), 'total' "
              "everything on the OSTs afterwards. 'bound' is the best any placement can do when every stripe "
              "holds the same bytes: ceil(k/n)/(k/n) for k stripes on n OSTs. iez can beat it, because its "
              "Method II stripe size leaves each file's last stripe short and iez puts the short ones on "
              "the OSTs that hold the most stripes.")
    page.para(BASELINE_NOTE, note=True)
    page.para(LAYOUT_NOTE, note=True)
    scenarios: list[dict[str, object]] = []
    data = {"scale": opts.scale, "policy": opts.policy, "seed": opts.seed, "drift": opts.drift, "scenarios": scenarios}
    for state in models:
        mine = [oc for oc in outcomes if oc.state == state]
        if not mine:
            continue
        page.heading(f"On {state_title(state, opts)}")
        page.table(HEADER, rows(mine))
        for note in skipped_notes(mine):
            page.para(note, note=True)
        mine = [oc for oc in mine if not oc.skipped]
        summary = out / f"ostcost-{state}.png"
        which = "job" if state == "empty" else "total"
        grouped_bars(summary, f"OSTCost of the {which} bytes, {state} cluster: Lustre default vs iez"
                     + (" (black ticks: seed 000)" if state == "empty" else ""),
                     [oc.scenario.name for oc in mine],
                     {k: [getattr(oc.runs[k].report, which).ost_cost for oc in mine] for k in ("default", "iez")},
                     "OSTCost (1.0 = balanced)",
                     reference={"default": [oc.scenario.paper[0] if oc.scenario.paper else None for oc in mine],
                                "iez": [oc.scenario.paper[1] if oc.scenario.paper else None for oc in mine]}
                     if state == "empty" else None,
                     baseline=1.0)
        page.image(summary, f"OSTCost, {state} cluster")
        rates = out / f"rates-{state}.png"
        grouped_bars(rates, f"Simulated write and read rates, {state} cluster: Lustre default vs iez "
                     "(seed-000 testbed hardware, paper's sizes)",
                     [f"{oc.scenario.name} ({rw})" for oc in mine for rw in ("write", "read")],
                     {k: [getattr(oc.runs[k].rates, f"{rw}_bw") / 1e6 for oc in mine for rw in ("write", "read")]
                      for k in ("default", "iez")}, "MB/s")
        page.image(rates, f"simulated rates, {state} cluster")
    for oc in outcomes:
        if oc.skipped:
            scenarios.append({"cluster": oc.state, "name": oc.scenario.name, "skipped": oc.skipped})
            continue
        name = f"{oc.state}-{slug(oc.scenario.name)}"
        series = {k: Series([run.report.job.ost_util[i] for i in osts], [run.report.total.ost_util[i] for i in osts],
                            run.report.job.ost_cost, run.report.total.ost_cost) for k, run in oc.runs.items()}
        ost_png = out / f"{name}-ost.png"
        utilization_chart(ost_png, f"{oc.state} cluster, {oc.scenario.name}: per OST (cf. seed 000 {oc.scenario.source})",
                          [str(i + 1) for i in osts], series, "OST (numbered 1-15 as in the paper)", "OSTs")
        oss_series = {k: Series([run.report.job.oss_util[s] for s in osses], [run.report.total.oss_util[s] for s in osses],
                                run.report.job.oss_cost, run.report.total.oss_cost) for k, run in oc.runs.items()}
        oss_png = out / f"{name}-oss.png"
        utilization_chart(oss_png, f"{oc.state} cluster, {oc.scenario.name}: per OSS (cf. seed 000 Fig. 11)",
                          osses, oss_series, "OSS", "OSSs")
        page.heading(f"{oc.scenario.name} ({oc.state} cluster)", 3).image(ost_png, f"{oc.scenario.name} per OST").image(oss_png, f"{oc.scenario.name} per OSS")
        scenarios.append({"cluster": oc.state, "name": oc.scenario.name, "layout": oc.layout, "files": oc.files,
                          "stripes": oc.stripes, "bytes": oc.bytes, "bound": oc.bound, "paper": oc.scenario.paper,
                          "runs": {k: {"plan_hits": r.plan_hits, "plan_misses": r.plan_misses,
                                       "ost_cost": r.report.job.ost_cost, "oss_cost": r.report.job.oss_cost,
                                       "total_ost_cost": r.report.total.ost_cost,
                                       "job_bytes": r.job_bytes, "seconds": r.seconds,
                                       "stripes": sum(len(c.layout.osts) for fl in r.layouts.values()
                                                      for c in fl.parts()),
                                       "sim": None if r.rates is None else {
                                           "write_bw": r.rates.write_bw, "read_bw": r.rates.read_bw,
                                           "makespan": r.rates.makespan, "bound": r.rates.bound}}
                                   for k, r in oc.runs.items()}})
    (out / "demo.json").write_text(json.dumps(data, indent=1))
    return page.write(out / "index.html")
