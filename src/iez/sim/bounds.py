"""Analytic lower bounds on a description's makespan: the physical limits any simulation (and any
real run) must respect. No resource moves data faster than its bandwidth, so

- over the whole run: for each OST, OSS NIC, client NIC, LNet router and the fabric, the bytes it
  must carry divided by its bandwidth (an OST's reads and writes also share the device:
  (reads + writes) / max(read_bw, write_bw));
- per job: its submit time plus, phase after phase, the compute time or the same bound for that
  phase's bytes alone (a job's phases run one after another).

Efficiency tables above 1 (an OST faster with more streams) would break the first kind; the
engine's nominal bandwidths are what the bound uses. Pure: dict in, numbers out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class Bound:
    seconds: float
    resource: str  # what sets it, e.g. "OST0003 write", "job ior"


def _io_bound(desc: dict[str, Any], items: Iterable[tuple[dict[str, Any], dict[str, Any]]]) -> Bound:
    """The busiest resource for the streams of the given (job, phase) pairs."""
    p = desc["platform"]
    load: dict[str, float] = defaultdict(float)
    osts = {o["index"]: o for o in p["osts"]}
    mds_work = 0.0
    for job, ph in items:
        write = ph["kind"] == "write"
        for node, ost, n, _obj, *via in ph["streams"]:
            o = osts[ost]
            oss = p["osses"][o["oss"]]["name"]
            client = p["clients"][job["nodes"][node]]
            load[f"OST{ost:04x} {'write' if write else 'read'}"] += n / (o["write_bw"] if write else o["read_bw"])
            load[f"OST{ost:04x} device"] += n / max(o["read_bw"], o["write_bw"])
            load[f"{oss} {'rx' if write else 'tx'}"] += n / p["osses"][o["oss"]]["nic_bw"]
            load[f"{client['name']} {'tx' if write else 'rx'}"] += n / client["nic_bw"]
            router = via[0] if via else client.get("router", -1)
            if router >= 0:
                r = p["routers"][router]
                load[f"{r['name']} {'tx' if write else 'rx'}"] += n / r["bw"]
            if p.get("fabric_bw"):
                load[f"fabric {'up' if write else 'down'}"] += n / p["fabric_bw"]
        rates = p.get("mds", {})
        mds_work += sum(k for _, k in ph.get("creates", [])) / rates.get("create_rate", 20000.0)
        mds_work += sum(k for _, k in ph.get("opens", [])) / rates.get("open_rate", 40000.0)
    load["mds"] = mds_work
    name = max(load, key=load.__getitem__)
    return Bound(load[name], name)


def resource_bound(desc: dict[str, Any]) -> Bound:
    return _io_bound(desc, ((j, ph) for j in desc["jobs"] for ph in j["phases"] if ph["kind"] != "compute"))


def phase_bound(desc: dict[str, Any], job: dict[str, Any], ph: dict[str, Any]) -> Bound:
    """The shortest one I/O phase of a job can take, were it alone on the cluster."""
    return _io_bound(desc, [(job, ph)])


def job_bound(desc: dict[str, Any], job: dict[str, Any]) -> float:
    """The earliest the job can end: submit + its phases one after another."""
    t = float(job.get("submit", 0.0))
    for ph in job["phases"]:
        t += ph["seconds"] if ph["kind"] == "compute" else phase_bound(desc, job, ph).seconds
    return t


def lower_bound(desc: dict[str, Any]) -> Bound:
    best = resource_bound(desc)
    for job in desc["jobs"]:
        t = job_bound(desc, job)
        if t > best.seconds:
            best = Bound(t, f"job {job['name']}")
    return best
