"""The job's write and read times on the simulator (`iez.sim`, the iez-sim engine), once with
the layouts the log recorded and once with iez's, on the same cluster model.

The workload is the log's records as `iez.sim.trace` makes any trace into a job (each rank's
bytes one contiguous run, one write phase, then one read phase). Files iez gives no layout
(read only) keep the recorded one in both runs; a file the log has no layout for gets the same
round-robin OSTs in both, so only the layouts iez changes differ between the two runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from iez.audit.advice import Advice
from iez.cluster import Cluster
from iez.layout.layout import FileLayout, Layout
from iez.plan import parse_layout
from iez.sim import description, engine
from iez.sim.results import JobResult, parse
from iez.sim.scenario import Access, JobEntry, Scenario, SimParams
from iez.sim.trace import workload_from_records
from iez.sim.workload import Pattern, Workload
from iez.trace.record import FileRecord

JOB = "job"


def _seconds(j: JobResult, kind: str) -> float:
    return sum(p.end - p.start for p in j.phases if p.kind == kind)


def _run(scn: Scenario, wl: Workload, layouts: dict[str, FileLayout], workdir: Path) -> tuple[float, float]:
    res = parse(engine.run(description.build(scn, [wl], layouts), workdir))
    j = res.job(JOB)
    return _seconds(j, "write"), _seconds(j, "read")


def simulate(adv: Advice, records: tuple[FileRecord, ...], cluster: Cluster) -> None:
    """Fill `adv`'s four simulated times (no-op for advice without layout figures)."""
    if not adv.has_layout or not adv.n_osts:
        return
    wl = workload_from_records(records, JOB)
    osts = cluster.ost_indices()
    mine = {f.facts.path: f for f in adv.files}
    recorded: dict[str, FileLayout] = {}
    iez: dict[str, FileLayout] = {}
    for k, spec in enumerate(wl.files):
        f = mine.get(spec.path)
        if f is not None and f.recorded:
            recorded[spec.path] = parse_layout(f.recorded)
        else:
            count = max(1, min(spec.stripe_count, len(osts)))
            recorded[spec.path] = FileLayout(plain=Layout(stripe_size=spec.stripe_size, osts=tuple(
                osts[(k * count + s) % len(osts)] for s in range(count))))
        iez[spec.path] = parse_layout(f.iez) if f is not None and f.iez else recorded[spec.path]
    scn = Scenario(title=adv.path, cluster=cluster, sim=SimParams(), access=Access(),
                   jobs=(JobEntry(pattern=Pattern(name=JOB, kind="darshan")),))
    with tempfile.TemporaryDirectory(prefix="iez-audit-") as tmp:
        adv.write_recorded, adv.read_recorded = _run(scn, wl, recorded, Path(tmp) / "recorded")
        adv.write_iez, adv.read_iez = _run(scn, wl, iez, Path(tmp) / "iez")
