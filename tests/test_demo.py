"""`iez demo` (the main job) on small scenarios: real emulated clusters and MDSs, collectors,
the controller, iez-bench under `iez run`, simulator runs; the report, its pictures and its
numbers, and a clean tear-down. One of seed 000's scenarios (the paper's stripe counts kept), and
the shared-file scenario placed with the automatic layout (docs/layouts.md)."""

from __future__ import annotations

import json
import re
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
    page = (out / "index.html").read_text()
    pngs = re.findall(r'src="([^"]+\.png)"', page)
    assert len(pngs) >= 6
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
