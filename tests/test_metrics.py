"""Balance metrics (docs/references.md#s000-eq7), the controller's /metrics beside the Lustre exporters', and
the Grafana dashboard against Grafana's schema and /metrics."""

import importlib.util
import json
import re
import time
from pathlib import Path

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard
from prometheus_client.parser import text_string_to_metric_families

from iez.alloc.gate import HostLoad
from iez.cluster import make_cluster
from iez.collect.message import OstReading, StatsMessage, encode
from iez.controller.exposition import Histogram
from iez.controller.service import Controller, Settings
from iez.metrics import balance_report, integer_bound, ost_cost, oss_utilization, ost_utilization
from iez.request import Request

GiB, MiB = 1 << 30, 1 << 20


def test_ost_cost_definition():
    # docs/references.md#s000-figs7-9: max 75%, mean 51.06% -> 1.47
    assert ost_cost({0: 0.75, 1: 0.2712}) == pytest.approx(0.75 / ((0.75 + 0.2712) / 2))
    assert ost_cost({0: 0.0, 1: 0.0}) == 1.0
    assert ost_cost({0: 0.5, 1: 0.5, 2: 0.5}) == 1.0


def test_integer_bound():
    assert integer_bound(512, 15) == pytest.approx(35 / (512 / 15))
    assert round(integer_bound(512, 15), 3) == 1.025
    assert integer_bound(30, 15) == 1.0
    assert integer_bound(32, 15) == pytest.approx(3 / (32 / 15))


def test_utilizations_and_report():
    c = make_cluster(n_oss=3, osts_per_oss=5, ost_size=10 * GiB)
    job = {0: 5 * GiB, 1: 5 * GiB}
    ou = ost_utilization(c, job)
    assert ou[0] == 0.5 and ou[14] == 0.0
    su = oss_utilization(c, job)
    assert su == {"oss0": pytest.approx(0.2), "oss1": 0.0, "oss2": 0.0}
    c2 = c.with_used({i: 5 * GiB for i in range(2, 15)})
    r = balance_report(c2, job)
    assert r.job.ost_cost == pytest.approx(0.5 / (1.0 / 15))
    assert r.total.ost_cost == pytest.approx(1.0)  # job filled the two empty OSTs to the level
    assert r.total.oss_cost == pytest.approx(1.0)


# -- /metrics: names and labels that join with the Lustre exporters' ---------------------------------

ROOT = Path(__file__).resolve().parent.parent
SITE = "site-" + "m" * 27

# The OST families of the Lustre exporters, as their sources define them (docs/references.md#lustre-exporter):
# HPE's lustre_exporter (sources/procfs.go, obdfilter/*) and GSI's fork (capacity in kibibytes);
# every sample is labelled component="ost", target="FSNAME-OSTxxxx".
EXPORTERS = {
    "lustre_capacity_kilobytes": "gauge", "lustre_available_kilobytes": "gauge",
    "lustre_free_kilobytes": "gauge", "lustre_capacity_kibibytes": "gauge",
    "lustre_available_kibibytes": "gauge", "lustre_free_kibibytes": "gauge",
    "lustre_read_bytes_total": "counter", "lustre_write_bytes_total": "counter",
    "lustre_read_samples_total": "counter", "lustre_write_samples_total": "counter",
}
EXPORTER_LABELS = {"component", "target"}
# iez's family -> the exporter family it stands beside (same labels, same type; KiB x 1024 = bytes)
BESIDE = {"iez_capacity_bytes": "lustre_capacity_kilobytes", "iez_available_bytes": "lustre_available_kilobytes",
          "iez_free_bytes": "lustre_free_kilobytes",
          "iez_read_bytes_total": "lustre_read_bytes_total", "iez_write_bytes_total": "lustre_write_bytes_total"}
UNITS = ("_bytes", "_seconds", "_ratio", "_total")  # Prometheus's base units, and counters


@pytest.fixture(scope="module")
def exposed(tmp_path_factory) -> str:
    """/metrics of a controller whose every family has samples: two OSS messages (rates known
    from the second), an MDS message, a trace with plan hits and misses, an allocation timed."""
    c = make_cluster(n_oss=2, osts_per_oss=2, ost_size=GiB, fsname="scratch")
    ctl = Controller(Settings(c, f"sqlite:///{tmp_path_factory.mktemp('db') / 'db'}", gate=None, site_key=SITE))
    now = time.time()
    for seq, (t, rate) in enumerate(((now - 2, None), (now - 1, 4096.0)), start=1):
        for oss, osts in (("oss0", (0, 1)), ("oss1", (2, 3))):
            # oss1's collector sends its OSTs' own byte sums (message version 2), oss0's only rates
            sums = (7 * MiB * seq, 5 * MiB * seq) if oss == "oss1" else (None, None)
            msg = StatsMessage("oss", oss, seq, t, 60.0, oss,
                               {f"scratch-OST{i:04x}": OstReading(1 << 20, (1 << 19) + i, (1 << 19) + i, rate,
                                                                  None if rate is None else 2 * rate, *sums)
                                for i in osts},
                               load=HostLoad(0.25, 0.5))
            assert ctl.on_message(encode(msg, SITE), now) == []
    ctl.on_message(encode(StatsMessage("mds", "mds0", 1, now, 60.0, "mds0"), SITE), now)
    ctl.upload_trace("ior", [Request("/lustre/ior/out.0", 4 << 20, 2)], plan_hits=3, plan_misses=1)
    ctl.latency.setdefault("balanced", Histogram()).observe(0.02)
    try:
        return ctl.metrics().decode()
    finally:
        ctl.close()


def samples_of(text: str) -> dict[str, tuple[str, list]]:
    return {f.name: (f.type, [(s.name, s.labels, s.value) for s in f.samples])
            for f in text_string_to_metric_families(text)}


def test_metrics_join_the_lustre_exporters(exposed):
    fams = samples_of(exposed)
    for name, (kind, samples) in fams.items():
        full = name + "_total" if kind == "counter" else name
        assert full.endswith(UNITS) or name in ("iez_stale", "iez_work_held_back", "iez_allocation_seconds"), full
        assert samples, f"{name} has no sample"
        if {"component", "target"} <= set(samples[0][1]):
            for _, labels, _ in samples:
                pattern = r"scratch-OST[0-9a-f]{4}" if labels["component"] == "ost" else r"(oss|mds)\d+"
                assert re.fullmatch(pattern, labels["target"]), labels
    for ours, theirs in BESIDE.items():
        kind, samples = fams[ours.removesuffix("_total")]
        assert EXPORTERS[theirs] == kind and theirs.startswith("lustre_")
        assert {frozenset(labels) for _, labels, _ in samples} == {frozenset(EXPORTER_LABELS)}
        assert {s[0] for s in samples} == {ours}
    cap = {lab["target"]: v for _, lab, v in fams["iez_capacity_bytes"][1]}
    assert cap == {f"scratch-OST{i:04x}": float(1 << 30) for i in range(4)}  # kbytestotal 1 MiB-KiB x 1024
    written = {lab["target"]: v for _, lab, v in fams["iez_write_bytes"][1]}
    # oss0's OSTs: 2 x 4096 B/s over one 60 s interval; oss1's: the sums its collector last sent
    assert written == {"scratch-OST0000": 2 * 4096.0 * 60, "scratch-OST0001": 2 * 4096.0 * 60,
                       "scratch-OST0002": 10.0 * MiB, "scratch-OST0003": 10.0 * MiB}
    read = {lab["target"]: v for _, lab, v in fams["iez_read_bytes"][1]}
    assert read["scratch-OST0000"] == 4096.0 * 60 and read["scratch-OST0003"] == 14.0 * MiB
    used = {(lab["component"], lab["target"]): v for _, lab, v in fams["iez_used_ratio"][1]}
    assert used[("ost", "scratch-OST0001")] == pytest.approx(1 - ((1 << 19) + 1) / (1 << 20))
    assert ("oss", "oss1") in used
    assert ("iez_plan_files_total", {"app": "ior", "result": "miss"}, 1.0) in fams["iez_plan_files"][1]
    stale = {(lab["component"], lab["target"]): v for _, lab, v in fams["iez_stale"][1]}
    assert stale[("mds", "mds0")] == 0.0 and stale[("oss", "oss0")] == 0.0 and len(stale) == 7


def documented_metrics() -> dict[str, str]:
    """docs/controller.md's metrics table: iez name -> the exporter's name beside it ('' if none)."""
    text = (ROOT / "docs/controller.md").read_text()
    table = text[text.index("| iez metric |"):]
    table = table[:table.index("\n\n")]
    out = {}
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`(iez_\w+)`", cells[0]):
            out[name] = " ".join(re.findall(r"`(lustre_\w+)`", cells[3]))
    return out


def test_docs_list_every_metric_beside_the_exporters(exposed):
    fams = samples_of(exposed)
    names = {n + "_total" if kind == "counter" else n for n, (kind, _) in fams.items()}
    docs = documented_metrics()
    assert set(docs) == names
    for ours, theirs in BESIDE.items():
        assert theirs in docs[ours].split()
    assert {t for v in docs.values() for t in v.split()} <= set(EXPORTERS)


# -- the Grafana dashboard --------------------------------------------------------------------------

GRAFANA = ROOT / "deploy/grafana/iez.json"


def test_grafana_dashboard_fits_grafanas_schema_and_our_metrics(exposed):
    raw = json.loads(GRAFANA.read_text())
    # Grafana's Foundation SDK models are generated from Grafana's schema: a field it does not
    # know is dropped on the way through, a panel kind or value it does not know changes.
    assert json.loads(json.dumps(Dashboard.from_json(raw), cls=JSONEncoder)) == raw
    # the file is what deploy/grafana/build.py makes
    spec = importlib.util.spec_from_file_location("grafana_build", ROOT / "deploy/grafana/build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    assert build.render() == GRAFANA.read_text()
    panels = [p for p in raw["panels"] if p["type"] != "row"]
    assert {p["title"] for p in panels} >= {"OSTCost (1 = balanced, lower is better)", "OST used",
                                            "Plan hits and misses (files per second)"}
    ids = [p["id"] for p in raw["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert 0 <= p["gridPos"]["x"] and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        refs = [t["refId"] for t in p["targets"]]
        assert all(refs) and len(refs) == len(set(refs)), p["title"]
    used = {m for p in panels for t in p["targets"] for m in re.findall(r"\b(iez_\w+|lustre_\w+)", t["expr"])}
    sample_names = {s.name for f in text_string_to_metric_families(exposed) for s in f.samples}
    assert used and used <= sample_names, used - sample_names
