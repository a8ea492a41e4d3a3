"""`iez demo` (the main job) on small scenarios: real emulated clusters and MDSs, collectors,
the controller, iez-bench under `iez run`, simulator runs; the report, its pictures and its
numbers, and a clean tear-down. One of seed 000's scenarios (the paper's stripe counts kept), and
the shared-file scenario placed with the automatic layout (docs/layouts.md)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess

import pytest
from PIL import Image

from iez.demo.experiment import rpc_bound


def test_demo_one_scenario(tmp_path, iez_cmd, subenv):
    out = tmp_path / "demo"
    r = subprocess.run(iez_cmd + ["demo", "-o", str(out), "--scale", "256", "--only", "IOR FPP 16 procs c=4"],
                       capture_output=True, text=True, timeout=600, env=subenv)
    assert r.returncode == 0, r.stderr
    assert "IOR FPP 16 procs c=4" in r.stdout and "Report:" in r.stdout
    assert "scaled down 256x" in r.stdout
    data = json.loads((out / "demo.json").read_text())
    runs = {s["cluster"]: s["runs"] for s in data["scenarios"]}
    assert set(runs) == {"empty", "drifted"}
    for state, rr in runs.items():
        d, i = rr["default"], rr["iez"]
        # every byte written is found on the OSTs (64 files x 4 stripes of the scaled job)
        assert sum(d["job_bytes"].values()) >= 16 * (2 << 30) // 256
        # iez never balances the job's own bytes worse than Lustre's allocator, and is never
        # simulated slower (it keeps within Lustre RR's time)
        assert i["ost_cost"] <= d["ost_cost"] + 1e-9, state
        # the second run was placed by libiez from the controller's plan, every file of it
        assert (i["plan_hits"], i["plan_misses"]) == (16, 0), state
        # seed 000's scenarios keep the paper's stripe counts: iez chooses OSTs and stripe sizes only
        assert d["stripes"] == i["stripes"] == 16 * 4, state
        assert i["sim"]["write_bw"] >= 0.99 * d["sim"]["write_bw"], state
    assert runs["drifted"]["iez"]["total_ost_cost"] < runs["drifted"]["default"]["total_ost_cost"]
    # what it found comes first, in the run's own numbers; every line fits 100 columns (the report's
    # path is as long as it is)
    assert r.stdout.index("What it found") < r.stdout.index("On the paper's testbed, empty")
    flat = " ".join(r.stdout.split())
    assert data["headline"] and all(" ".join(h.split()) in flat for h in data["headline"])
    d, i = runs["drifted"]["default"]["sim"], runs["drifted"]["iez"]["sim"]
    gain = f"{i['write_bw'] / d['write_bw'] - 1:+.0%}"
    assert f"ran {gain} to {gain} faster" in data["headline"][0]
    assert "lower is better" in r.stdout and "…" not in r.stdout  # no cell cut short
    assert max(len(x) for x in r.stdout.splitlines() if not x.startswith("Report:")) <= 100
    page = (out / "index.html").read_text()
    pngs = re.findall(r'src="([^"]+\.png)"', page)
    assert len(pngs) == 3 + 2 * 2  # the summary charts, then each cluster's per-OST and per-OSS, folded
    assert page.count("<details>") == 2 and page.index("<details>") > page.index(pngs[2])
    for name in pngs:
        with Image.open(out / name) as im:
            assert im.size[0] > 500 and im.size[1] > 300
    # tear-down leaves nothing running: no MDS, collector or controller of this demo
    for c in ("empty", "drifted"):
        assert not (out / c / "cluster" / "run" / "mds.pid").exists()
    ps = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True)
    assert ps.stdout == ""


def test_demo_shared_file_spread_by_the_automatic_layout(tmp_path, iez_cmd, subenv):
    """IOR's shared file, traced where the directory's default layout (one stripe) puts it, on one
    OST: the worst OSTCost there is; the next run, placed with iez's automatic layout, spreads it
    to the best its bytes allow in 1 MiB stripes and is simulated many times faster."""
    out = tmp_path / "demo"
    r = subprocess.run(iez_cmd + ["demo", "-o", str(out), "--scale", "256", "--only", "layout auto"],
                       capture_output=True, text=True, timeout=600, env=subenv)
    assert r.returncode == 0, r.stderr
    assert "Report:" in r.stdout and "2 scenarios" in r.stdout
    data = json.loads((out / "demo.json").read_text())
    assert sorted(s["cluster"] for s in data["scenarios"]) == ["drifted", "empty"]
    for s in data["scenarios"]:
        assert (s["layout"], s["files"], s["stripes"], s["bytes"]) == ("auto", 1, 1, (4 << 30) // 256)
        d, i = s["runs"]["default"], s["runs"]["iez"]
        assert d["ost_cost"] == pytest.approx(15), s["cluster"]  # the whole file on one of 15 OSTs
        assert s["bound"] == rpc_bound(s["bytes"], 15)
        assert i["ost_cost"] <= 1.1 * s["bound"], s["cluster"]
        assert (i["plan_hits"], i["plan_misses"]) == (1, 0), s["cluster"]
        assert d["stripes"] == 1 and i["stripes"] > 1, s["cluster"]
        assert i["sim"]["write_bw"] > 5 * d["sim"]["write_bw"], s["cluster"]
        assert i["sim"]["read_bw"] > 5 * d["sim"]["read_bw"], s["cluster"]
    assert "layout auto" in (out / "index.html").read_text()
    ps = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True)
    assert ps.stdout == ""


# --- the report on outcomes built from real parts (the cluster model, balance_report, layouts) ---

def _outcomes(gains: dict[str, float]):
    """Every demo scenario on both clusters: the default's job bytes piled on the first OSTs, iez's
    spread over all, simulated write rates `1000 MB/s x (1 + gains[state])` for iez."""
    from iez.demo.experiment import Outcome, Run, clusters, demo_scenarios, DemoOptions
    from iez.demo.simulate import SimRates
    from iez.layout.layout import FileLayout, Layout
    from iez.metrics import balance_report

    models = clusters(DemoOptions(scale=256))
    out = []
    for state, cluster in models.items():
        n = len(cluster.osts)
        for k, (sc, mode) in enumerate(demo_scenarios()):
            runs = {}
            for side, used in (("default", 1 + k % 4), ("iez", n)):
                job = {i: (1 << 20) if i < used else 0 for i in range(n)}
                bw = 1e9 * (1 + (gains[state] if side == "iez" else 0) * (k + 1) / 13)
                runs[side] = Run(job_bytes=job, report=balance_report(cluster, job), seconds=1.0,
                                 layouts={r.path: FileLayout.of(Layout(stripe_count=used, stripe_size=1 << 20,
                                                                       osts=tuple(range(used))))
                                          for r in sc.requests},
                                 rates=SimRates(bw, bw, 1.0, 1, 1, 1.0, "OST0000 write", bw, bw),
                                 plan_hits=len(sc.requests) if side == "iez" else None, plan_misses=0)
            out.append(Outcome(state, sc, len(sc.requests), sum(r.stripe_count for r in sc.requests), 1, 1.0,
                               runs, layout=mode))
    return models, out


def test_headline_is_computed_from_the_results():
    from iez.demo import report
    from iez.demo.experiment import DemoOptions

    opts = DemoOptions()
    _, out = _outcomes({"drifted": 0.5, "empty": 0.1})
    lines = report.headline(out, opts)
    assert lines[0].startswith("On a cluster drifted out of balance (each OST 10%-40% full")
    kept = [oc for oc in out if oc.state == "drifted" and oc.layout == "keep"]
    gains = sorted(oc.runs["iez"].rates.write_bw / oc.runs["default"].rates.write_bw - 1 for oc in kept)
    assert f"{gains[0]:+.0%} to {gains[-1]:+.0%} faster" in lines[0]
    assert f"faster in {len(kept)} of {len(kept)} workloads)" in lines[0]
    medians = [statistics.median(oc.runs[k].report.job.ost_cost for oc in kept) for k in ("default", "iez")]
    assert f"a median {medians[0]:.2f}x the average OST's share" in lines[0] and f"{medians[1]:.2f}x when" in lines[0]
    assert "IOR, HACC-I/O, file per process, shared file, two applications at once" in lines[0]
    assert lines[1].startswith("On the empty cluster")
    assert any("shared file on 1 of 15 OSTs" in x and "over 15" in x for x in lines)
    hits = sum(len(oc.scenario.requests) for oc in out)
    assert lines[-1] == f"libiez placed {hits} of {hits} files of the second runs from the controller's plans."
    # other results, other words
    _, slower = _outcomes({"drifted": -0.2, "empty": 0.1})
    assert "faster in 0 of 12 workloads, slower in 12)" in report.headline(slower, opts)[0]


def test_terminal_output_fits_100_columns_with_a_legend():
    from rich.console import Console

    from iez.demo import report
    from iez.demo.experiment import DemoOptions

    models, out = _outcomes({"drifted": 0.44, "empty": 0.11})
    console = Console(width=report.WIDTH, record=True, file=open("/dev/null", "w"))
    report.print_results(console, models, out, DemoOptions())
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 100, max(lines, key=len)
    assert "lower is better" in text and "…" not in text  # no cell cut short
    # one line a scenario: every name whole on its own line, never folded into a second
    for oc in out:
        assert sum(x.startswith(oc.scenario.name + " ") for x in lines) == 2, oc.scenario.name  # once per cluster


def test_page_leads_with_the_headline_and_folds_each_scenario(tmp_path, monkeypatch):
    """The page: headline, then two or three summary figures before any <details>; each scenario's
    figures folded; OSTs labelled 0-14 as lfs df numbers them (the charts are drawn for real)."""
    from iez.demo import report
    from iez.demo.experiment import DemoOptions

    models, out = _outcomes({"drifted": 0.3, "empty": 0.05})
    out = [oc for oc in out if "IOR FPP 8 procs c=8" in oc.scenario.name or "layout auto" in oc.scenario.name]
    labels = []
    real = report.utilization_chart
    monkeypatch.setattr(report, "utilization_chart",
                        lambda path, title, lab, *a: (labels.append(lab), real(path, title, lab, *a)))
    page = report.write(DemoOptions(out=tmp_path), models, out).read_text()
    first_fold = page.index("<details>")
    assert page.index("What it found") < page.index(report.headline(out, DemoOptions())[0][:40]) < first_fold
    lead = re.findall(r'src="([^"]+\.png)"', page[:first_fold])
    assert 2 <= len(lead) <= 3, lead
    assert page.count("<details>") == len(out)
    assert re.findall(r'src="([^"]+\.png)"', page[first_fold:]) == [
        f"{oc.state}-{re.sub(r'[^a-z0-9]+', '-', oc.scenario.name.lower()).strip('-')}-{k}.png"
        for oc in out for k in ("ost", "oss")]
    ost_labels = [lab for lab in labels if len(lab) == 15]
    assert ost_labels and all(lab == [str(i) for i in range(15)] for lab in ost_labels)
    assert "lower is better" in page and "numbered 0-14" in page
    # as a browser shows it: the summary charts load, the folded figures take no room
    from PIL import Image
    from test_audit_page import not_blank, screenshot

    got = screenshot(tmp_path / "index.html", tmp_path / "shot.png")
    shown = {src: width for src, width in got["images"]}
    assert all(shown[src] > 500 for src in lead), got["images"]
    not_blank(tmp_path / "shot.png")
    with Image.open(tmp_path / "shot.png") as im:
        assert im.size[1] < 4000, im.size  # 1280 px wide: the three charts, tables and notes, folds closed


def test_a_scenario_too_big_for_the_drifted_cluster_runs_halved(tmp_path):
    """Seed 000's 64 GiB shared file does not fit the drifted cluster's OSTs at 8 stripes: the demo
    runs the largest half size that does, named by its size and saying why, never a blank row."""
    from iez.backend.emulated import EmulatedBackend
    from iez.demo.experiment import DemoOptions, clusters, demo_scenarios, fits, fitted, jobs_for
    from iez.emulated.clusterdir import init_cluster_dir

    models = clusters(DemoOptions())
    by_name = {s.name: s for s, _ in demo_scenarios()}
    for state, want in (("empty", "IOR SSF 32 procs 64 GiB c=8"), ("drifted", "IOR SSF 32 procs 32 GiB c=8")):
        cd = init_cluster_dir(tmp_path / state, models[state])
        backend = EmulatedBackend(cd.root)
        got, why = fitted(by_name["IOR SSF 32 procs 64 GiB c=8"], 32, models[state], backend, "balanced", "keep",
                          cd.fs)
        assert got.name == want, state
        assert sum(r.write_bytes for r in got.requests) == int(want.split()[4]) << 30
        assert (why.startswith("does not fit: ENOSPC") if state == "drifted" else why == ""), why
        assert fits([r for j in jobs_for(got, 32, cd.fs) for r in j.requests()], models[state], backend,
                    "balanced", "keep") == ""
