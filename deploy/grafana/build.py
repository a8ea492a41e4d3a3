"""Writes deploy/grafana/iez.json, the Grafana dashboard of the controller's /metrics, with
Grafana's own Foundation SDK (grafana-foundation-sdk, generated from Grafana's schema):

    .venv/bin/python deploy/grafana/build.py

Panels: balance (OSTCost of OSTs and OSSs), per-OST usage and write/read rates, OSS load,
plans (hits and misses per application, allocation latency, work done and held back) and
staleness. tests/test_metrics.py checks the file against the SDK's models and every metric its
queries use against a real controller's /metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import BigValueGraphMode, VizOrientation
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUT = Path(__file__).with_name("iez.json")
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
FS = 'fsname=~"$fsname"'


def query(expr: str, legend: str, ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).datasource(DS).legend_format(legend).ref_id(ref)


def build() -> dashboard.Dashboard:
    d = (dashboard.Dashboard("iez: Lustre balance and plans")
         .uid("iez-controller")
         .tags(["iez", "lustre"])
         .refresh("30s")
         .time("now-6h", "now")
         .timezone("browser")
         .description("The iez controller's /metrics: OST balance, per-OST load, plans (docs/controller.md).")
         .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
         .with_variable(dashboard.QueryVariable("fsname").label("file system").datasource(DS)
                        .query("label_values(iez_ost_cost_ratio, fsname)")))
    d = d.with_row(dashboard.Row("Balance"))
    d = d.with_panel(stat.Panel().title("OSTCost (1 = balanced, lower is better)").datasource(DS)
                     .with_target(query(f"iez_ost_cost_ratio{{{FS}}}", "OSTs"))
                     .with_target(query(f"iez_oss_cost_ratio{{{FS}}}", "OSSs", "B"))
                     .decimals(3).graph_mode(BigValueGraphMode.AREA).height(6).span(8))
    d = d.with_panel(timeseries.Panel().title("OSTCost over time").datasource(DS)
                     .with_target(query(f"iez_ost_cost_ratio{{{FS}}}", "OSTCost {{fsname}}"))
                     .with_target(query(f"iez_oss_cost_ratio{{{FS}}}", "OSS cost {{fsname}}", "B"))
                     .min(1).height(6).span(16))
    d = d.with_row(dashboard.Row("Per-OST load"))
    d = d.with_panel(bargauge.Panel().title("OST used").datasource(DS).unit("percentunit").min(0).max(1)
                     .with_target(query('iez_used_ratio{component="ost"}', "{{target}}"))
                     .orientation(VizOrientation.VERTICAL).height(8).span(24))
    d = d.with_panel(timeseries.Panel().title("OST write rate").datasource(DS).unit("Bps")
                     .with_target(query('rate(iez_write_bytes_total{component="ost"}[$__rate_interval])',
                                        "{{target}}"))
                     .height(8).span(12))
    d = d.with_panel(timeseries.Panel().title("OST read rate").datasource(DS).unit("Bps")
                     .with_target(query('rate(iez_read_bytes_total{component="ost"}[$__rate_interval])',
                                        "{{target}}"))
                     .height(8).span(12))
    d = d.with_panel(timeseries.Panel().title("OSS load per core and memory used").datasource(DS)
                     .unit("percentunit")
                     .with_target(query('iez_cpu_load_ratio{component="oss"}', "{{target}} load"))
                     .with_target(query('iez_memory_used_ratio{component="oss"}', "{{target}} memory", "B"))
                     .height(8).span(12))
    d = d.with_panel(stat.Panel().title("Targets without fresh statistics").datasource(DS)
                     .with_target(query("sum by (component) (iez_stale)", "{{component}}"))
                     .height(8).span(12))
    d = d.with_row(dashboard.Row("Plans"))
    d = d.with_panel(timeseries.Panel().title("Plan hits and misses (files per second)").datasource(DS)
                     .with_target(query("sum by (app, result) (rate(iez_plan_files_total[$__rate_interval]))",
                                        "{{app}} {{result}}"))
                     .height(8).span(12))
    d = d.with_panel(timeseries.Panel().title("Allocation latency (p95)").datasource(DS).unit("s")
                     .with_target(query("histogram_quantile(0.95, sum by (le, policy) "
                                        "(rate(iez_allocation_seconds_bucket[$__rate_interval])))", "{{policy}}"))
                     .height(8).span(12))
    d = d.with_panel(timeseries.Panel().title("Predictions and allocations").datasource(DS)
                     .with_target(query("sum by (kind, result) (increase(iez_work_total[$__rate_interval]))",
                                        "{{kind}} {{result}}"))
                     .with_target(query("iez_work_held_back", "held back", "B"))
                     .height(8).span(12))
    d = d.with_panel(timeseries.Panel().title("Collector messages").datasource(DS)
                     .with_target(query("sum by (result) (rate(iez_collector_messages_total[$__rate_interval]))",
                                        "{{result}}"))
                     .height(8).span(12))
    return d


def render() -> str:
    model = build().build()
    for n, panel in enumerate(model.panels or [], start=1):  # Grafana links and repeats panels by id
        panel.id_val = n
    return json.dumps(model, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
