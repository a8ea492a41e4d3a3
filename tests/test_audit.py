"""iez advise and iez audit on the Darshan logs pydarshan ships and on damaged files: the
findings, iez's layouts, OSTCost and simulated times of one job; the site view over a directory
on an embedded Dask LocalCluster; bad logs counted per cause, never a traceback."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from iez.audit.advice import Job, advise
from iez.audit.findings import FileFacts, findings
from iez.audit.job import audit_log
from iez.layout.raid0 import bytes_per_ost
from iez.plan import parse_layout
from iez.trace.darshan import read_log
from iez.trace.ingest import TraceError
from test_darshan import need_log

MIB = 1 << 20
LOGS = ("sample.darshan", "sample-badost.darshan", "sample-goodost.darshan", "ior_hdf5_example.darshan",
        "dxt.darshan", "noposix.darshan")


pytestmark = pytest.mark.usefixtures("eng")  # the engine is built (tests/plugins/sim_engine.py)


@pytest.fixture(scope="module")
def advised() -> dict:
    out = {}
    for name in ("ior_hdf5_example.darshan", "sample.darshan", "dxt.darshan"):
        got = audit_log(str(need_log(name)))
        assert got["ok"], got
        out[name] = got["advice"]
    return out


def bad_logs(d: Path) -> dict[str, str]:
    """A damaged file of each kind, named as logs are, and its cause."""
    good = need_log("sample-badost.darshan").read_bytes()
    flipped = bytearray(need_log("sample-goodost.darshan").read_bytes())
    flipped[1500:1504] = b"\xff\xff\xff\xff"
    files = {"empty.darshan": (b"", "empty"), "text.darshan": (b"hello\n" * 100, "not-darshan"),
             "cut.darshan": (good[:150000], "truncated"), "flipped.darshan": (bytes(flipped), "corrupt")}
    for name, (data, _) in files.items():
        (d / name).write_bytes(data)
    return {name: cause for name, (_, cause) in files.items()}


def test_shared_file_on_one_ost_of_107(advised):
    adv = advised["ior_hdf5_example.darshan"]
    [f] = adv.files
    assert f.facts.path.endswith("/test123.h5") and f.facts.writers == 4 and f.facts.stripe_count == 1
    kinds = {x.kind for x in f.findings}
    assert {"few-osts", "straddle"} <= kinds
    # All written bytes on one OST of the 107 the log names: max / mean = 107.
    assert adv.n_osts == 107 and adv.ost_cost_recorded == pytest.approx(107)
    assert f.iez_count >= 2 * f.facts.stripe_count and adv.ost_cost_iez < adv.ost_cost_recorded / 2
    assert adv.write_iez < adv.write_recorded and adv.read_iez < adv.read_recorded
    assert adv.time_lost > 0


def test_vpic_shared_file_writes_off_the_block(advised):
    adv = advised["sample.darshan"]
    [f] = [f for f in adv.files if f.facts.path.endswith("vpicio.hdf5")]
    assert f.facts.misaligned and f.facts.writers == 2048 and f.facts.stripe_count == 24
    assert [x.kind for x in f.findings] == ["straddle"]
    assert f.iez and f.why  # iez's layout and its reason
    assert adv.write_iez <= adv.write_recorded * (1 + 1e-6)


def test_recorded_ostcost_is_max_over_mean_bytes_per_ost():
    log = read_log(need_log("sample-badost.darshan"))
    adv = advise(Job(log.path, log.jobid, log.nprocs, log.start_time, log.exe, tuple(log.records)))
    on = Counter()
    for r in log.records:
        on[r.osts[0]] += r.bytes_written  # FPP, one stripe each
    n = max(on) + 1
    assert adv.n_osts == n
    assert adv.ost_cost_recorded == pytest.approx(max(on.values()) / (sum(on.values()) / n))
    assert adv.findings == []  # one writer a file, 4 MiB writes aligned on 1 MiB stripes
    iez_on = Counter()
    for f in adv.files:
        for ost, b in bytes_per_ost(parse_layout(f.iez), f.facts.write_bytes).items():
            iez_on[ost] += b
    assert sum(iez_on.values()) == sum(on.values())
    assert adv.ost_cost_iez == pytest.approx(max(iez_on.values()) / (sum(iez_on.values()) / n))


def test_log_without_lustre_records_says_so(advised):
    adv = advised["dxt.darshan"]
    assert not adv.has_layout and adv.n_osts == 0 and adv.files
    assert any("no LUSTRE records" in n for n in adv.notes)
    assert adv.findings == [] and adv.time_lost is None and adv.write_recorded is None


@pytest.mark.parametrize("facts, iez_count, kinds", [
    (FileFacts("/a", write_bytes=64 << 30, writers=64, transfer_size=MIB, write_align=MIB, stripe_count=1,
               stripe_size=MIB), 32, {"few-osts"}),
    (FileFacts("/a", write_bytes=64 << 30, writers=64, transfer_size=MIB, write_align=MIB, stripe_count=17,
               stripe_size=MIB), 32, set()),  # 17 of 32: more than half
    (FileFacts("/a", write_bytes=3 * MIB, writers=1, transfer_size=MIB, write_align=MIB, stripe_count=8,
               stripe_size=MIB), 3, {"wide-small"}),
    (FileFacts("/a", write_bytes=1 << 30, writers=1, transfer_size=3 * 512 << 10, write_align=512 << 10,
               stripe_count=4, stripe_size=MIB), 4, {"straddle"}),  # 1.5 MiB writes on 1 MiB stripes
    (FileFacts("/a", write_bytes=1 << 30, writers=1, transfer_size=4 * MIB, write_align=MIB,
               stripe_count=4, stripe_size=MIB), 4, set()),
    (FileFacts("/a", write_bytes=1 << 30, writers=1, transfer_size=4 * MIB, misaligned=True,
               stripe_count=4, stripe_size=MIB), 4, {"straddle"}),
    (FileFacts("/a", write_bytes=64 * MIB, writers=256, transfer_size=256 << 10, write_align=256 << 10,
               stripe_count=64, stripe_size=4 * MIB), 64, {"shared-stripes"}),
    (FileFacts("/a", read_bytes=64 << 30, readers=64, stripe_count=8, stripe_size=MIB), 0, {"reads-everywhere"}),
    (FileFacts("/a", read_bytes=4 << 20, readers=64, stripe_count=8, stripe_size=MIB), 0, set()),
    (FileFacts("/a", write_bytes=64 << 30, writers=64, stripe_count=0), 32, set()),  # no layout: no finding
])
def test_findings_rules(facts, iez_count, kinds):
    assert {x.kind for x in findings(facts, iez_count)} == kinds


def test_advise_cli_json_and_page(iez_cmd, subenv, tmp_path):
    out = tmp_path / "page"
    proc = subprocess.run([*iez_cmd, "advise", str(need_log("ior_hdf5_example.darshan")), "--json", "-o", str(out)],
                          capture_output=True, text=True, env=subenv, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["jobid"] == 32324925 and doc["has_layout"] and doc["time_lost"] > 0
    assert {x["kind"] for f in doc["files"] for x in f["findings"]} >= {"few-osts", "straddle"}
    assert json.loads((out / "advice.json").read_text()) == doc
    assert {p.name for p in out.iterdir()} >= {"index.html", "osts.png", "times.png"}
    assert "shared file on too few OSTs" in (out / "index.html").read_text()


@pytest.mark.parametrize("name", ["empty.darshan", "text.darshan", "cut.darshan", "flipped.darshan"])
def test_advise_bad_log_is_one_error_line(iez_cmd, subenv, tmp_path, name):
    bad_logs(tmp_path)
    proc = subprocess.run([*iez_cmd, "advise", str(tmp_path / name)], capture_output=True, text=True, env=subenv,
                          timeout=120)
    assert proc.returncode == TraceError.exit_code and proc.stdout == ""  # the log must change: 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_audit_directory_on_embedded_dask(iez_cmd, subenv, tmp_path):
    import pyarrow.parquet as pq

    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    for name in LOGS:
        (logs / "sub" / name).write_bytes(need_log(name).read_bytes())
    causes = bad_logs(logs)
    out = tmp_path / "out"
    proc = subprocess.run([*iez_cmd, "audit", str(logs), "-o", str(out), "--workers", "2", "--json", "-v"],
                          capture_output=True, text=True, env=subenv, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["jobs"] == len(LOGS)
    assert doc["failures"] == dict(Counter(causes.values()))
    skipped = [ln for ln in proc.stderr.splitlines() if ln.startswith("iez: skipped:")]
    assert sorted(ln.rsplit("[", 1)[1].rstrip("]") for ln in skipped) == sorted(causes.values())
    assert doc["findings"]["few-osts"] >= 1 and doc["findings"]["straddle"] >= 2
    assert doc["worst_jobs"][0]["jobid"] in (32324925, 6265799) and doc["worst_jobs"][0]["time_lost"] > 0
    jobs = pq.read_table(out / "jobs.parquet").to_pylist()
    assert sorted(r["jobid"] for r in jobs) == sorted(read_log(need_log(n)).jobid for n in LOGS)
    assert doc["without_layout"] == sum(not r["has_layout"] for r in jobs)
    layout = {Path(r["log"]).name: r["has_layout"] for r in jobs}
    assert not layout["dxt.darshan"] and layout["sample.darshan"] and layout["ior_hdf5_example.darshan"]
    assert sum(r["time_lost"] or 0 for r in jobs) == pytest.approx(doc["time_recorded"] - doc["time_iez"])
    fails = pq.read_table(out / "failures.parquet").to_pylist()
    assert {Path(r["log"]).name: r["cause"] for r in fails} == causes
    found = pq.read_table(out / "findings.parquet").to_pylist()
    assert Counter(r["kind"] for r in found) == Counter({k: v for k, v in doc["findings"].items() if v})
    html = (out / "index.html").read_text()
    for png in ("worst_jobs.png", "problems.png", "ost_cost.png", "days.png"):
        assert (out / png).stat().st_size > 5000 and png in html


def generated_job(d: Path) -> Path:
    """A job with one file per problem, and one file with none (iez.audit.synthetic)."""
    from iez.audit.synthetic import SynthFile, write_log

    files = [
        SynthFile("/lustre/run/ckpt.h5", 8 << 30, osts=(3,), shared=True, transfer=4 * MIB),  # few-osts
        *(SynthFile(f"/lustre/run/small.{i}", 256 << 10, osts=tuple(range(8)), rank=i, transfer=64 << 10)
          for i in range(4)),  # wide-small
        SynthFile("/lustre/run/odd.dat", 1 << 30, osts=(4, 5, 6, 7), rank=1, transfer=3 * 512 << 10),  # straddle
        SynthFile("/lustre/run/tiny-shared.dat", 8 * MIB, stripe_size=4 * MIB, osts=(8, 9), shared=True,
                  transfer=64 << 10),  # shared-stripes: 64 writers of 128 KiB on 4 MiB stripes
        SynthFile("/lustre/run/input.dat", 0, osts=tuple(range(15, -1, -1)), shared=True,
                  read_bytes=64 << 30),  # reads-everywhere: 64 readers of 1 GiB over 16 stripes
        SynthFile("/lustre/run/fine.dat", 256 * MIB, osts=(10,), rank=2, transfer=4 * MIB),
    ]
    return write_log(d / "alice_sim_id77_11-23-100-abc_1.darshan", files, jobid=77, nprocs=64)


def test_advise_on_a_generated_log_finds_each_planted_problem(tmp_path):
    got = audit_log(str(generated_job(tmp_path)))
    assert got["ok"], got
    adv = got["advice"]
    assert (adv.user, adv.app, adv.jobid, adv.nprocs, adv.n_osts) == ("alice", "sim", 77, 64, 16)
    kinds = {f.facts.path.rsplit("/", 1)[1]: {x.kind for x in f.findings} for f in adv.files}
    assert kinds == {"ckpt.h5": {"few-osts"}, **{f"small.{i}": {"wide-small"} for i in range(4)},
                     "odd.dat": {"straddle"}, "tiny-shared.dat": {"shared-stripes"},
                     "input.dat": {"reads-everywhere"}, "fine.dat": set()}
    ckpt = next(f for f in adv.files if f.facts.path.endswith("ckpt.h5"))
    assert ckpt.iez_count >= 8 and ckpt.facts.writers == 64
    assert adv.ost_cost_iez < adv.ost_cost_recorded
    assert adv.write_iez < adv.write_recorded and adv.read_iez == pytest.approx(adv.read_recorded)


def test_generated_log_without_lustre_records(tmp_path):
    from iez.audit.synthetic import SynthFile, write_log

    p = write_log(tmp_path / "nolustre.darshan", [SynthFile("/lustre/a", 1 << 30, osts=(), shared=True)], nprocs=8)
    got = audit_log(str(p))
    assert got["ok"]
    adv = got["advice"]
    assert not adv.has_layout and [f.facts.write_bytes for f in adv.files] == [1 << 30]
    assert any("no LUSTRE records" in n for n in adv.notes) and adv.write_recorded is None


def test_cluster_file_sets_the_osts(tmp_path):
    from conftest import ROOT

    log = str(need_log("sample-goodost.darshan"))
    wide = audit_log(log, (ROOT / "scenarios" / "seed001-cluster46.toml").read_text(), simulate=False)["advice"]
    own = audit_log(log, simulate=False)["advice"]
    assert (own.n_osts, wide.n_osts) == (24, 46)
    # The same bytes on the same OSTs: OSTCost scales with the OSTs counted (max / mean).
    assert wide.ost_cost_recorded == pytest.approx(own.ost_cost_recorded * 46 / 24)
    small = audit_log(log, (ROOT / "scenarios" / "seed000-testbed.toml").read_text(), simulate=False)["advice"]
    assert not small.has_layout and any("does not have" in n for n in small.notes)


def test_a_failed_task_is_one_failure_not_the_end(tmp_path):
    from iez.audit.execute import audit

    def flaky(path: str, cluster_toml: str, simulate: bool) -> dict:
        if path.endswith("bad"):
            raise RuntimeError("worker fault\nwith a second line")
        return {"ok": False, "path": path, "cause": "empty", "error": f"{path}: empty file"}

    paths = [f"/logs/{k}" for k in range(5)] + ["/logs/bad"] + [f"/logs/{k}" for k in range(5, 9)]
    seen = []
    site = audit(paths, tmp_path, seen.append, workers=1, fn=flaky, window=3)
    assert sorted(a["path"] for a in seen) == sorted(paths)
    assert site.failures == {"empty": 9, "failed": 1}
    [failed] = [a for a in seen if a["cause"] == "failed"]
    assert failed["error"] == "/logs/bad: RuntimeError: worker fault with a second line"
