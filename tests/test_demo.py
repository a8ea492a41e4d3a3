"""`iez demo` (the main job) on one small scenario: real emulated clusters and MDSs, collectors,
the controller, iez-bench under `iez run`, simulator runs; the report, its pictures and its
numbers, and a clean tear-down."""

from __future__ import annotations

import json
import re
import subprocess

from PIL import Image


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
