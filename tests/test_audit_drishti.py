"""iez advise against Drishti (drishti-io, hpc-io/drishti-io) on the same Darshan logs: every
striping problem Drishti reports, for a file or for the job, iez advise reports too.

A Drishti striping problem is an insight whose recommendations talk of stripes (stripe size,
count or configuration); each Drishti code maps to the iez findings that name the same problem.
A code not in the map fails the test: a new Drishti insight must be looked at, not passed over."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from iez.audit.job import audit_log
from test_darshan import need_log

# Drishti code -> the iez findings that are the same problem (docs/audit.md, "iez and Drishti").
SAME = {
    "P08": {"straddle"},  # misaligned file requests: writes off the stripe boundaries
    "P18": {"few-osts", "shared-stripes"},  # data imbalance among ranks on a shared file
    "P19": {"few-osts", "shared-stripes"},  # time imbalance (stragglers) on a shared file
    "P21": {"few-osts", "wide-small"},  # write size imbalance among files
    "P22": {"few-osts", "reads-everywhere"},  # read size imbalance among files
}
# pydarshan's logs but example.darshan (sample.darshan again) and dxt.darshan (Drishti 0.8 stops
# with an IndexError on its empty executable name).
LOGS = ("sample.darshan", "sample-badost.darshan", "sample-goodost.darshan", "ior_hdf5_example.darshan",
        "noposix.darshan", "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan")
INSIGHT = re.compile(r"▶ \[([A-Z]\d\d)\]")


def drishti(log: Path) -> list[tuple[str, list[str]]]:
    """Drishti's striping insights on `log`: (code, the files it names)."""
    exe = Path(sys.executable).with_name("drishti")
    if not exe.exists():
        pytest.fail("drishti-io is not installed: .venv/bin/pip install drishti-io")
    proc = subprocess.run([str(exe), "--code", "--path", "--size", "2000", str(log)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocks: list[tuple[str, list[str]]] = []
    for line in proc.stdout.splitlines():
        m = INSIGHT.search(line)
        if m:
            blocks.append((m[1], []))
        elif blocks:
            blocks[-1][1].append(line)
    out = []
    for code, lines in blocks:
        if any("stripe" in ln.lower() for ln in lines if "Consider" in ln):
            out.append((code, sorted({p for ln in lines for p in re.findall(r'"(/[^"]+)"', ln)})))
    return out


def test_the_comparison_sees_drishtis_striping_insights():
    # P08 on VPIC's shared file and P19 on test123.h5: the parser finds what Drishti prints.
    assert ("P19", ["/global/cscratch1/sd/ssnyder/test123.h5"]) in drishti(need_log("ior_hdf5_example.darshan"))


def generated(d: Path) -> Path:
    """A generated job (iez.audit.synthetic) whose shared file is written off the block."""
    from iez.audit.synthetic import SynthFile, write_log

    return write_log(d / "bob_wrf_id91_11-23-200-def_1.darshan", [
        SynthFile("/lustre/wrf/out.nc", 4 << 30, osts=(0, 1), shared=True, transfer=3 << 20, aligned=False),
        SynthFile("/lustre/wrf/restart.nc", 1 << 30, osts=(5,), rank=0, transfer=1 << 20),
    ], jobid=91, nprocs=32)


@pytest.mark.parametrize("name", [*LOGS, "generated"])
def test_iez_reports_every_striping_problem_drishti_reports(name, tmp_path):
    log = generated(tmp_path) if name == "generated" else need_log(name)
    theirs = drishti(log)
    if name == "generated":
        assert [code for code, _ in theirs] == ["P08"]  # the planted problem, seen by Drishti
    got = audit_log(str(log), simulate=False)
    assert got["ok"], got
    adv = got["advice"]
    ours: dict[str, set[str]] = {}
    for x in adv.findings:
        ours.setdefault(x.path, set()).add(x.kind)
    everywhere = {k for kinds in ours.values() for k in kinds}
    for code, files in theirs:
        assert code in SAME, f"Drishti striping insight {code} on {name} has no iez counterpart in SAME"
        if not adv.has_layout:
            # Without LUSTRE records iez shows no layout problem and says why.
            assert any("no LUSTRE records" in n for n in adv.notes), (code, adv.notes)
            continue
        if not files:
            assert SAME[code] & everywhere, (name, code, ours)
        for f in files:
            assert SAME[code] & ours.get(f, set()), (name, code, f, ours.get(f))
