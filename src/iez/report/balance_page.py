"""`iez report -o DIR`: the policy comparison of report/balance.py written as per-OST and per-OSS
charts (docs/references.md#s000-figs7-9, #s000-fig11), report.json and index.html."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from iez.report.balance import CHANGED_COLUMNS, PolicyBalance, changed_rows, report_json, report_rows
from iez.report.charts import Series, utilization_chart
from iez.report.html import Page

CHANGED_SHOWN = 500  # changed layouts listed per policy on the page; report.json has them all


def write_report(outdir: Path, app: str, run: int, rows: Sequence[PolicyBalance]) -> list[Path]:
    """Write the charts, report.json and index.html into `outdir`; the page is the last path."""
    outdir.mkdir(parents=True, exist_ok=True)
    cluster = rows[0].cluster
    osts = cluster.ost_indices()
    osses = [s.name for s in cluster.osses]
    ost_png, oss_png = outdir / "ost_utilization.png", outdir / "oss_utilization.png"
    utilization_chart(ost_png, f"{app} run {run}: per-OST utilization (seed 000 Fig. 7)", [str(i) for i in osts],
                      {r.policy: Series([r.balance.job.ost_util[i] for i in osts],
                                        [r.balance.total.ost_util[i] for i in osts],
                                        r.balance.job.ost_cost, r.balance.total.ost_cost) for r in rows},
                      "OST index", "OSTs")
    utilization_chart(oss_png, f"{app} run {run}: per-OSS utilization (seed 000 Fig. 11)", osses,
                      {r.policy: Series([r.balance.job.oss_util[s] for s in osses],
                                        [r.balance.total.oss_util[s] for s in osses],
                                        r.balance.job.oss_cost, r.balance.total.oss_cost) for r in rows},
                      "OSS", "OSSs")
    (outdir / "report.json").write_text(json.dumps(report_json(app, run, rows), indent=1))
    page = (Page(f"iez report: {app} run {run}")
            .para("OST utilization = bytes on the OST / its capacity. OSTCost = max / mean OST utilization "
                  "over all OSTs (seed 000 eq. 7): 1.000 is perfect balance. 'Job' counts the bytes this run "
                  "places; 'total usage' adds what the OSTs already held.")
            .table(["", *(r.policy for r in rows)], [[m, *vals] for m, vals in report_rows(rows)])
            .heading("Per OST").image(ost_png, "per-OST utilization")
            .heading("Per OSS").image(oss_png, "per-OSS utilization"))
    if any(r.changed for r in rows):
        page = (page.heading("Layouts iez changed")
                .para("Files whose stripe count or size iez chose instead of the one asked for (the user's "
                      "lfs setstripe or the file system's default), and why (docs/layouts.md).")
                .table(list(CHANGED_COLUMNS), changed_rows(rows, CHANGED_SHOWN)))
    return [ost_png, oss_png, outdir / "report.json", page.write(outdir / "index.html")]
