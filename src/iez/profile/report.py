"""`iez profile report`: read a profile directory, run the parsers and the analysis, draw the
pictures and write the HTML page with a text summary of findings."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from iez.errors import IezError
from iez.lustre.brw_stats import parse_brw_stats
from iez.lustre.parse import LustreFormatError, Skipped
from iez.lustre.getparam import split_param_name
from iez.lustre.stats import parse_stats, stats_rates
from iez.lustre.targets import parse_target_name
from iez.profile import ProfileError, analysis, opcodes
from iez.profile.iostat import IostatReport, parse_iostat
from iez.profile.profiledir import (EXPORTS, IOSTAT, JOB, LAYOUTS, START, STOP, SURVEY, HostDir, ProfileMeta,
                                    host_dirs, parse_samples, read_meta)
from iez.profile.rpctrace import LineCounts, RpcTraceReader, open_log
from iez.units import format_size

SOURCE_RPCTRACE = "rpctrace (OSS debug log)"
SOURCE_EXPORTS = "obdfilter.*.exports.*.stats samples"


@dataclass
class Profile:
    meta: ProfileMeta
    bins: analysis.Bins
    rpcs: dict[str, analysis.HostRpcs | None] = field(default_factory=dict)
    lines: dict[str, LineCounts] = field(default_factory=dict)
    exports: dict[str, list[analysis.Interval]] = field(default_factory=dict)
    params: dict[str, tuple[dict[str, str], dict[str, str]]] = field(default_factory=dict)  # host -> (start, stop)
    iostat: dict[str, list[IostatReport]] = field(default_factory=dict)
    survey: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # unreadable lines and files, one line each

    def note(self, host: str, what: str, skipped: list[Skipped]) -> None:
        if skipped:
            self.problems.append(f"{host}: {len(skipped)} unreadable line(s) in {what}, first {skipped[0]}")


def _first_time(hd: HostDir, samples) -> float | None:
    if samples:
        return min(t for t, _ in samples)
    log = hd.rpctrace()
    if log is None:
        return None
    with RpcTraceReader() as r, open_log(log) as f:
        for recs in r.chunks(f, 1 << 16):
            return float(recs["t_us"].min()) / 1e6
    return None


def load_profile(out: Path, bin_width: float | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> Profile:
    """Everything in a profile directory, parsed; `progress(host, done bytes, total bytes)`."""
    if not out.is_dir():
        raise ProfileError(f"{out} is not a directory")
    meta = read_meta(out)
    hds = host_dirs(out, meta)
    samples, skips = {}, {}
    for hd in hds:
        text = hd.text(EXPORTS)
        samples[hd.name], skips[hd.name] = parse_samples(text) if text is not None else ([], [])
    first = [t for hd in hds if (t := _first_time(hd, samples[hd.name])) is not None]
    bins = analysis.choose_bins(meta.start, meta.stop, meta.interval, bin_width, min(first, default=None))
    prof = Profile(meta, bins)
    for hd in hds:
        prof.note(hd.name, EXPORTS, skips[hd.name])
        start, sk1 = hd.params(START)
        stop, sk2 = hd.params(STOP)
        prof.note(hd.name, START, sk1)
        prof.note(hd.name, STOP, sk2)
        prof.params[hd.name] = (start, stop)
        smp = samples[hd.name]
        if len(smp) < 2 and start and stop and meta.start and meta.stop:
            smp = [(meta.start, start), (meta.stop, stop)]  # only the start/stop snapshots
        prof.exports[hd.name] = analysis.export_deltas(smp)
        text = hd.text(IOSTAT)
        if text is not None:
            prof.iostat[hd.name], sk = parse_iostat(text)
            prof.note(hd.name, IOSTAT, sk)
        text = hd.text(SURVEY)
        if text is not None:
            prof.survey[hd.name] = text
        log = hd.rpctrace()
        if log is None:
            prof.rpcs[hd.name] = None
            continue
        agg = analysis.RpcAggregator(hd.name, bins)
        total = log.stat().st_size
        with RpcTraceReader() as r, open(log, "rb") as raw:
            f = open_log(log) if log.suffix == ".gz" else raw
            for recs in r.chunks(f):
                agg.add(recs)
                if progress:
                    progress(hd.name, raw.tell(), total)
            prof.rpcs[hd.name] = agg.result(r.strings)
            prof.lines[hd.name] = c = r.counts()
        if c.malformed:
            prof.problems.append(f"{hd.name}: {c.malformed} malformed line(s) of {c.lines} in the debug log, "
                                 f"first {c.examples[0]}")
    return prof


def _bytes(n: float) -> str:
    """Binary sizes with their unit: 48.0MiB, 512 B."""
    s = format_size(n)
    return s + ("iB" if s[-1].isalpha() else " B")


# -- tables from the start/stop snapshots -------------------------------------------------------

def _targets(values: dict[str, str], suffix: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, text in values.items():
        comps = split_param_name(name)
        if len(comps) == 3 and comps[2] == suffix and (t := parse_target_name(comps[1])) and t[1] == "OST":
            out.setdefault(t[2], text)
    return out


def brw_rows(prof: Profile) -> list[list[str]]:
    """Per OST, from brw_stats at start and stop: RPCs, share of full 1 MiB+ RPCs, share of
    RPCs whose pages were not contiguous on disk (a sign of seeks)."""
    rows = []
    for host, (start, stop) in sorted(prof.params.items()):
        a, b = _targets(start, "brw_stats"), _targets(stop, "brw_stats")
        for ost in sorted(b):
            s0 = parse_brw_stats(a[ost]) if ost in a else None
            s1 = parse_brw_stats(b[ost])

            def delta(hist: str, pred) -> tuple[int, int]:
                h1 = s1.histogram(hist)
                h0 = s0.histogram(hist) if s0 else None
                if h1 is None:
                    return 0, 0
                n = m = 0
                for bk in h1.buckets:
                    old = h0.bucket(bk.label) if h0 else None
                    d = (bk.read + bk.write) - ((old.read + old.write) if old else 0)
                    n += d
                    m += d if pred(bk.value) else 0
                return n, m

            n, full = delta("pages per bulk r/w", lambda v: v >= 256)
            nd, disc = delta("discontiguous blocks", lambda v: v > 0)
            rows.append([analysis.ost_label(ost), host, str(n), f"{100 * full / n:.0f}%" if n else "-",
                         f"{100 * disc / nd:.0f}%" if nd else "-"])
    return rows


def stats_rows(prof: Profile) -> list[list[str]]:
    """Per OST, obdfilter stats between start and stop: read and write bandwidth."""
    rows = []
    for host, (start, stop) in sorted(prof.params.items()):
        a, b = _targets(start, "stats"), _targets(stop, "stats")
        for ost in sorted(set(a) & set(b)):
            try:
                r = stats_rates(parse_stats(a[ost]), parse_stats(b[ost]))
            except LustreFormatError as e:  # snapshots without usable times
                prof.problems.append(f"{host}: obdfilter stats of {analysis.ost_label(ost)}: {e}")
                continue
            rows.append([analysis.ost_label(ost), host, f"{r.read_bps / 2**20:.1f}", f"{r.write_bps / 2**20:.1f}",
                         f"{r.read_ops:.1f}", f"{r.write_ops:.1f}"])
    return rows


# -- findings -------------------------------------------------------------------------------------

def findings(prof: Profile, view: analysis.OstView) -> list[str]:
    """The text summary: one sentence per finding, with its source."""
    out = []
    osts = view.osts()
    for ost in osts:
        c = analysis.concurrency(view, ost)
        if not c.active_bins:
            continue
        label = analysis.ost_label(ost)
        if c.max_clients >= 2:
            out.append(f"{label} served {c.typical_clients} client(s) at once most of the time (up to "
                       f"{c.max_clients}); 2 or more for {100 * c.shared_fraction:.0f}% of its active time; "
                       f"seek risk {c.seek_risk:.2f}.")
        else:
            out.append(f"{label} served one client at a time throughout ({c.active_bins} active bins); seek risk 0.")
    if osts:
        cost = analysis.imbalance(view, osts)
        b = analysis.ost_bytes(view)
        if b and sum(b.values()):
            top = max(b, key=lambda o: b[o])
            out.append(f"OSTCost on RPC bytes over the {len(osts)} OSTs that served this run: {cost:.2f} "
                       f"({analysis.ost_label(top)} moved {100 * b[top] / sum(b.values()):.0f}% of "
                       f"{_bytes(sum(b.values()))}) [{SOURCE_EXPORTS}].")
    for s in analysis.lock_stats(prof.rpcs)[:5]:
        if s.cancels:
            out.append(f"client {s.client}: {s.enqueues} lock enqueues and {s.cancels} cancels "
                       f"({s.contention:.2f} cancels per enqueue) [{SOURCE_RPCTRACE}].")
    unatt = sum(view.unattributed.values())
    if unatt:
        out.append(f"{unatt:.0f} data RPCs could not be tied to an OST (no exports stats for their client).")
    return out


# -- the page ---------------------------------------------------------------------------------------

def _rel_times(prof: Profile, lo: int, hi: int) -> np.ndarray:
    return np.array([prof.bins.center(b) - prof.bins.origin for b in range(lo, hi)])


def write_report(out: Path, html: Path, bin_width: float | None = None,
                 progress: Callable[[str, int, int], None] | None = None, trace: Path | None = None) -> list[str]:
    from iez.report import charts, profile_charts
    from iez.report.html import Page

    prof = load_profile(out, bin_width, progress)
    view = analysis.join(prof.bins, prof.rpcs, prof.exports)
    found = findings(prof, view)
    html.parent.mkdir(parents=True, exist_ok=True)
    stem = html.with_suffix("")

    def png(name: str) -> Path:
        return stem.parent / f"{stem.name}-{name}.png"

    page = Page("LIOPProf: Lustre I/O profile")
    m = prof.meta
    span = f"{m.stop - m.start:.3f} s" if m.start and m.stop else "unknown length"
    page.para(f"{len(m.hosts)} OSS(s): {', '.join(m.hosts)}; {m.mode} profile, {span}; time bins of "
              f"{prof.bins.width:.3g} s" + (f"; exports stats sampled every {m.interval:g} s" if m.interval else "") + ".")
    for n in m.notes:
        page.para(n, note=True)
    page.heading("Findings")
    for f in found or ["No data RPCs were found in this profile."]:
        page.para(f)
    page.heading("Sources")
    page.table(["OSS", "per-OST series", "debug log lines", "rpctrace lines", "malformed", "exports samples"],
               [[h, view.source.get(h, "none"), str(prof.lines[h].lines) if h in prof.lines else "-",
                 str(prof.lines[h].rpc) if h in prof.lines else "-",
                 str(prof.lines[h].malformed) if h in prof.lines else "-", str(len(prof.exports.get(h, [])))]
                for h in m.hosts])
    for p in prof.problems:
        page.para(p, note=True)

    osts = view.osts()
    lo, hi = view.bin_range()
    if osts:
        page.heading("RPCs per OST and client (seed 003 Figs. 4, 5)")
        profile_charts.per_ost_client_bars(png("ost-clients"), "Data RPCs of each client on each OST",
                                           {analysis.ost_label(o): view.per_client(o) for o in osts}, "RPCs")
        page.image(png("ost-clients"), "RPCs per OST and client")
        page.para(f"Counts: {SOURCE_RPCTRACE}; OST of each RPC: {SOURCE_EXPORTS} (see Sources).", note=True)
        page.heading("RPCs over time per OST, stacked by client (seed 003 Figs. 10, 11, 13)")
        panels = {}
        conc_rows = []
        for o in osts:
            clients, mat = view.matrix(o)
            panels[analysis.ost_label(o)] = {c: mat[i] for i, c in enumerate(clients)}
        times = _rel_times(prof, lo, hi)
        profile_charts.stacked_panels(png("ost-timeline"), f"Data RPCs per {prof.bins.width:.3g} s bin", times,
                                      panels, "RPCs per bin")
        page.image(png("ost-timeline"), "RPCs over time per OST")
        conc = [analysis.concurrency(view, o) for o in osts]
        profile_charts.heatmap(png("clients-at-once"), "Clients served at once by each OST",
                               [analysis.ost_label(o) for o in osts], times,
                               np.array([c.clients_per_bin for c in conc]), "clients in the bin")
        page.heading("Clients per OST at once, and seek risk")
        page.image(png("clients-at-once"), "clients per OST at once")
        b = analysis.ost_bytes(view)
        for c in conc:
            conc_rows.append([analysis.ost_label(c.ost), view.ost_host.get(c.ost, "?"), str(c.active_bins),
                              str(c.typical_clients), str(c.max_clients), f"{100 * c.shared_fraction:.0f}%",
                              f"{c.seek_risk:.2f}", _bytes(b.get(c.ost, 0))])
        page.table(["OST", "OSS", "active bins", "usual clients", "max clients", "bins with >= 2", "seek risk",
                    "bytes"], conc_rows)
        page.para("Seek risk: the chance that two consecutive RPCs on an OST come from different clients "
                  "(1 - sum of squared client shares per bin, weighted by RPCs); 0 means one client at a time. "
                  f"Bytes: {SOURCE_EXPORTS}.", note=True)
        page.heading("Load imbalance")
        labels = [analysis.ost_label(o) for o in osts]
        rb = [sum(v[analysis.RB] for (oo, _c), v in view.bytes.items() if oo == o) / 2**20 for o in osts]
        wb = [sum(v[analysis.WB] for (oo, _c), v in view.bytes.items() if oo == o) / 2**20 for o in osts]
        charts.grouped_bars(png("ost-bytes"), f"MiB per OST (OSTCost {analysis.imbalance(view, osts):.2f})", labels,
                            {"read": rb, "write": wb}, "MiB")
        page.image(png("ost-bytes"), "bytes per OST")

    classes = analysis.class_series(prof.rpcs)
    if classes:
        page.heading("RPCs per class and OSS")
        all_bins = [b for d in classes.values() for s in d.values() for b in s]
        clo, chi = (min(all_bins), max(all_bins) + 1) if all_bins else (0, 0)
        panels = {}
        for host, d in classes.items():
            panels[host] = {opcodes.CLASSES[k]: np.array([s.get(b, 0) for b in range(clo, chi)], dtype=float)
                            for k, s in sorted(d.items())}
        profile_charts.stacked_panels(png("classes"), "RPCs per class", _rel_times(prof, clo, chi), panels,
                                      "RPCs per bin")
        page.image(png("classes"), "RPCs per class")
        rows = []
        for host, h in prof.rpcs.items():
            if h is None:
                continue
            per: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
            for (_c, k), v in h.service.items():
                per[k] = [a + b for a, b in zip(per[k], v)]
            for k, (handled, ps, ts) in sorted(per.items()):
                rows.append([host, opcodes.CLASSES[k], f"{int(handled)}", f"{ps / handled:.0f}" if handled else "-",
                             f"{ts / handled:.0f}" if handled else "-"])
        page.table(["OSS", "class", "handled RPCs", "mean us in handler", "mean us since arrival"], rows)
        locks = analysis.lock_stats(prof.rpcs)
        if locks:
            page.heading("Lock traffic per client")
            profile_charts.client_bars(png("locks"), "LDLM enqueues and cancels per client", [s.client for s in locks],
                                       {"enqueue": [s.enqueues for s in locks], "cancel": [s.cancels for s in locks]},
                                       "RPCs")
            page.image(png("locks"), "lock traffic")
            page.table(["client", "enqueues", "cancels", "callbacks", "cancels per enqueue", "mean enqueue us"],
                       [[s.client, str(s.enqueues), str(s.cancels), str(s.callbacks), f"{s.contention:.2f}",
                         f"{s.enqueue_us:.0f}" if s.enqueue_us is not None else "-"] for s in locks])
        jobs: dict[str, int] = defaultdict(int)
        for h in prof.rpcs.values():
            for j, count in (h.jobs if h else {}).items():
                jobs[j] += count
        if any(j != "(none)" for j in jobs):
            page.heading("RPCs per job id")
            page.table(["job", "RPCs"], [[j, str(n)] for j, n in sorted(jobs.items(), key=lambda x: -x[1])[:30]])

    rows = brw_rows(prof)
    if rows:
        page.heading("brw_stats between start and stop")
        page.table(["OST", "OSS", "bulk RPCs", ">= 1 MiB RPCs", "with discontiguous blocks"], rows)
    rows = stats_rows(prof)
    if rows:
        page.heading("obdfilter stats between start and stop")
        page.table(["OST", "OSS", "read MiB/s", "write MiB/s", "read RPC/s", "write RPC/s"], rows)
    _iostat_section(prof, page, png("iostat"))
    for host, text in prof.survey.items():
        page.heading(f"obdfilter-survey on {host}")
        page.para(text[-2000:])
    _files_section(out, prof, page, trace)
    page.write(html)
    return found


def _iostat_section(prof: Profile, page, path: Path) -> None:
    from iez.report import profile_charts

    util: dict[str, tuple[list[float], list[float]]] = {}
    kbs: dict[str, tuple[list[float], list[float]]] = {}
    for host, reports in prof.iostat.items():
        live = [r for r in reports if not r.since_boot]
        for i, r in enumerate(live):
            t = (r.time if r.time is not None else (prof.meta.start or 0) + i) - prof.bins.origin
            for dev, cols in r.devices.items():
                key = f"{host}:{dev}"
                if "%util" in cols:
                    util.setdefault(key, ([], []))
                    util[key][0].append(t)
                    util[key][1].append(cols["%util"])
                kb = (r.kb_per_s(dev, "r") or 0) + (r.kb_per_s(dev, "w") or 0)
                kbs.setdefault(key, ([], []))
                kbs[key][0].append(t)
                kbs[key][1].append(kb / 1024)
    if not util and not kbs:
        return
    busy = sorted(kbs, key=lambda k: -sum(kbs[k][1]))[:6]
    panels = {"%util": {k: (np.array(util[k][0]), np.array(util[k][1])) for k in busy if k in util},
              "MiB/s": {k: (np.array(kbs[k][0]), np.array(kbs[k][1])) for k in busy}}
    profile_charts.lines(path, "Disks (iostat -x, 1 s)", panels, {"%util": "% util", "MiB/s": "read + write MiB/s"})
    page.heading("Disks (iostat)")
    page.image(path, "iostat")


def _files_section(out: Path, prof: Profile, page, trace: Path | None) -> None:
    """The job's files and the OSTs that served them: from a libiez trace (`trace`), else from
    the emulated job's I/O events and layouts."""
    from iez.plan import parse_layout
    from iez.profile.ioevents import read_event_dir

    job = out / JOB
    if trace is not None:
        from iez.trace.shard import read_shards

        table = analysis.records_ost_map(read_shards(trace))
        how = f"libiez trace {trace}: each file's bytes spread over its layout's OSTs"
    elif (job / LAYOUTS).is_file():
        layouts = {}
        for line in (job / LAYOUTS).read_text().splitlines():
            path, _, spec = line.partition("\t")
            try:
                layouts[path] = parse_layout(spec)
            except IezError as e:
                prof.problems.append(f"{LAYOUTS}: {path}: {e}")
        events, _sk = read_event_dir(job)
        m = prof.meta
        events = [e for e in events if (m.start is None or e.time >= m.start) and (m.stop is None or e.time <= m.stop)]
        table = analysis.file_ost_map(events, layouts)
        how = "the job's I/O events and layouts (exact RAID-0 mapping of each call)"
    else:
        return
    page.heading("The job's files and the OSTs that served them")
    page.para(f"From {how}.", note=True)
    rows = []
    for path, per in sorted(table.items()):
        for ost, (r, w) in sorted(per.items()):
            rows.append([path, analysis.ost_label(ost), prof_host(prof, ost), _bytes(r), _bytes(w)])
    page.table(["file", "OST", "OSS", "read", "written"], rows)


def prof_host(prof: Profile, ost: int) -> str:
    """The OSS of an OST as the profile saw it (exports stats names), or '?'."""
    for host, intervals in prof.exports.items():
        if any(o == ost for iv in intervals for (o, _c) in iv.delta):
            return host
    return "?"
