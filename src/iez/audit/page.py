"""What `iez advise` and `iez audit` write: HTML pages with PNG figures (`iez.report`'s page
builder and charts, the style of `iez report`), the site's Parquet tables (pyarrow, written in
batches as the jobs arrive), and the JSON documents of `--json`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iez.audit.advice import Advice
from iez.audit.findings import KINDS, TITLES
from iez.audit.site import Site, cost_labels
from iez.layout.raid0 import bytes_per_ost
from iez.plan import parse_layout
from iez.report.charts import grouped_bars
from iez.report.html import Page
from iez.units import format_size

GIB = 1 << 30
BATCH = 1000  # rows per Parquet row group
# The two sides, named as the demo names them so the charts colour them alike (report.charts):
# "default" is what the job got (the user's or the file system's layouts), "iez" what iez plans.
RECORDED, IEZ = "default", "iez"
LEGEND = f"{RECORDED}: the layouts the log recorded; {IEZ}: iez's layouts for the same files."


def _scale(values: list[int]) -> tuple[float, str]:
    big = max(values, default=0)
    return (GIB, "GiB") if big >= GIB else (1 << 20, "MiB")


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _per_ost(adv: Advice, which: str) -> dict[int, int]:
    on: dict[int, int] = {}
    for f in adv.files:
        text = f.recorded if which == "recorded" else f.iez
        if text and f.facts.write_bytes:
            for ost, b in bytes_per_ost(parse_layout(text), f.facts.write_bytes).items():
                on[ost] = on.get(ost, 0) + b
    return on


def advice_page(adv: Advice, out: Path) -> Path:
    """`out`/index.html with per-OST bytes and simulated times (recorded vs iez) and the files."""
    out.mkdir(parents=True, exist_ok=True)
    page = Page(f"iez advise: job {adv.jobid} ({adv.app or adv.exe or adv.path})")
    page.para(f"log {adv.path}; user {adv.user or '?'}; {adv.nprocs} processes; {len(adv.files)} files")
    for n in adv.notes:
        page.para(n, note=True)
    if adv.has_layout:
        page.heading("Balance and time")
        page.table(["", "recorded layouts", "iez's layouts"], [
            ["OSTCost (max/mean bytes per OST, 1 = balanced)", f"{adv.ost_cost_recorded:.2f}", f"{adv.ost_cost_iez:.2f}"],
            ["simulated write time (s)", _secs(adv.write_recorded), _secs(adv.write_iez)],
            ["simulated read time (s)", _secs(adv.read_recorded), _secs(adv.read_iez)],
        ])
        rec, iez = _per_ost(adv, "recorded"), _per_ost(adv, "iez")
        osts = sorted(set(rec) | set(iez) | set(range(adv.n_osts)))
        png = out / "osts.png"
        unit, name = _scale([*rec.values(), *iez.values()])
        grouped_bars(png, f"Job {adv.jobid}: bytes written per OST", [str(o) for o in osts],
                     {RECORDED: [rec.get(o, 0) / unit for o in osts], IEZ: [iez.get(o, 0) / unit for o in osts]},
                     name)
        page.image(png, "bytes per OST, recorded and iez").para(LEGEND, note=True)
        if adv.time_lost is not None:
            png = out / "times.png"
            grouped_bars(png, f"Job {adv.jobid}: simulated I/O time", ["write", "read"],
                         {RECORDED: [adv.write_recorded or 0.0, adv.read_recorded or 0.0],
                          IEZ: [adv.write_iez or 0.0, adv.read_iez or 0.0]}, "seconds")
            page.image(png, "simulated write and read time, recorded and iez")
    else:
        page.para("No layout figures: the log has no LUSTRE records.", note=True)
    found = adv.findings
    page.heading(f"Problems ({len(found)})")
    if found:
        page.table(["file", "problem", "bytes", "evidence"],
                   [[x.path, TITLES[x.kind], format_size(x.bytes), x.text] for x in found[:500]])
    else:
        page.para("None of the known striping problems.")
    page.heading("Files")
    page.table(["file", "written", "read", "writers", "recorded layout", "iez's layout", "why"],
               [[f.facts.path, format_size(f.facts.write_bytes), format_size(f.facts.read_bytes),
                 str(f.facts.writers), f.recorded or "-", f.iez or "-", f.why]
                for f in sorted(adv.files, key=lambda f: -f.facts.write_bytes)[:500]])
    if len(adv.files) > 500:
        page.para(f"{len(adv.files) - 500} smaller files not listed.", note=True)
    return page.write(out / "index.html")


def site_page(site: Site, out: Path) -> Path:
    """`out`/index.html: the site view with its figures."""
    out.mkdir(parents=True, exist_ok=True)
    page = Page("iez audit: the site's Darshan logs")
    failed = sum(site.failures.values())
    page.para(f"{site.jobs} jobs advised, {site.without_layout} of them without LUSTRE records; "
              f"{failed} logs could not be read.")
    if site.time_recorded:
        page.para(f"Simulated I/O time of all jobs: {site.time_recorded:.4g} s with their layouts, "
                  f"{site.time_iez:.4g} s with iez's ({site.time_recorded - site.time_iez:.4g} s lost).")
    worst = site.worst_jobs()
    if worst:
        png = out / "worst_jobs.png"
        grouped_bars(png, "Worst jobs: simulated I/O time, recorded vs iez's layouts",
                     [f"{r['jobid']} {r['app']}"[:30] for r in worst],
                     {RECORDED: [(r["write_recorded"] or 0) + (r["read_recorded"] or 0) for r in worst],
                      IEZ: [(r["write_iez"] or 0) + (r["read_iez"] or 0) for r in worst]}, "seconds")
        page.heading("Worst jobs by simulated time lost").image(png, "worst jobs").para(LEGEND, note=True)
        page.table(["job", "user", "app", "day", "time lost (s)", "OSTCost recorded", "OSTCost iez", "log"],
                   [[str(r["jobid"]), r["user"], r["app"], r["day"], _secs(r["time_lost"]),
                     f"{r['ost_cost_recorded']:.2f}", f"{r['ost_cost_iez']:.2f}", r["log"]] for r in worst])
    for title, groups in (("Users", site.users), ("Applications", site.apps)):
        page.heading(f"{title} by simulated time lost")
        page.table(["name", "jobs", "time lost (s)", "bytes on badly striped files", "bytes written"],
                   [[k, str(g.jobs), _secs(g.time_lost), format_size(g.bad_bytes), format_size(g.bytes_written)]
                    for k, g in site.ranked(groups)])
    png = out / "problems.png"
    unit, name = _scale(list(site.bad_bytes.values()))
    grouped_bars(png, "Bytes on badly striped files, by problem", [TITLES[k] for k in KINDS],
                 {RECORDED: [site.bad_bytes.get(k, 0) / unit for k in KINDS]}, name)
    page.heading("Bytes on badly striped files").image(png, "bytes by problem")
    page.table(["problem", "files", "bytes"],
               [[TITLES[k], str(site.findings[k]), format_size(site.bad_bytes.get(k, 0))] for k in KINDS])
    labels = cost_labels()
    png = out / "ost_cost.png"
    grouped_bars(png, "Jobs by OSTCost (max/mean bytes per OST; 1 = balanced)", labels,
                 {RECORDED: [site.cost_recorded.get(b, 0) for b in labels],
                  IEZ: [site.cost_iez.get(b, 0) for b in labels]}, "jobs")
    page.heading("OSTCost distribution").image(png, "OSTCost distribution")
    days = sorted(site.days.items())
    if days:
        png = out / "days.png"
        grouped_bars(png, "By day: simulated time lost (s)", [d for d, _ in days],
                     {"time lost": [g.time_lost for _, g in days]}, "seconds")
        page.heading("Trends by day").image(png, "time lost by day")
        page.table(["day", "jobs", "time lost (s)", "bytes on badly striped files"],
                   [[d, str(g.jobs), _secs(g.time_lost), format_size(g.bad_bytes)] for d, g in days])
    page.heading(f"Logs that could not be read ({failed})")
    if failed:
        page.table(["cause", "logs"], [[c, str(n)] for c, n in sorted(site.failures.items())])
        page.table(["log", "cause", "error"], [list(t) for t in site.failed])
    return page.write(out / "index.html")


class Tables:
    """jobs.parquet, findings.parquet and failures.parquet in `out`, appended in row groups."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.rows: dict[str, list[dict[str, Any]]] = {"jobs": [], "findings": [], "failures": []}
        self.writers: dict[str, Any] = {}

    def add(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.rows[table].extend(rows)
        if len(self.rows[table]) >= BATCH:
            self._flush(table)

    def _flush(self, table: str) -> None:
        import pyarrow as pa  # type: ignore[import-untyped]  # ships no type hints
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        rows = self.rows[table]
        if not rows:
            return
        t = pa.Table.from_pylist(rows)
        w = self.writers.get(table)
        if w is None:
            # A column all None in the first batch (times of jobs not simulated) is a float column.
            schema = pa.schema([pa.field(f.name, pa.float64() if pa.types.is_null(f.type) else f.type)
                                for f in t.schema])
            w = self.writers[table] = pq.ParquetWriter(self.out / f"{table}.parquet", schema)
        w.write_table(t.cast(w.schema))
        rows.clear()

    def close(self) -> list[Path]:
        for table in self.rows:
            self._flush(table)
        for w in self.writers.values():
            w.close()
        return [self.out / f"{t}.parquet" for t in self.writers]
