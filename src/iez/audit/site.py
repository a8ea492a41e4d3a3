"""The site view of many jobs' advice, kept in constant memory as the jobs stream in: the worst
jobs by simulated time lost, users and applications, bytes on badly striped files by problem,
the OSTCost distribution (docs/references.md#s000-eq7), trends by day, unreadable logs by cause.

`job_row` and `finding_rows` are the flat rows of the Parquet tables; `Site.add` takes one job's
rows (a Dask task's answer, so the client never holds a whole `Advice`). Pure.
"""

from __future__ import annotations

import bisect
import heapq
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from iez.audit.advice import Advice
from iez.audit.findings import KINDS

WORST = 20  # jobs listed by time lost
LISTED_FAILURES = 200  # unreadable logs listed by name; all are counted
FINDINGS_PER_JOB = 100  # finding rows a job sends; its counts cover all of them
# OSTCost bins (upper edges): 1 is perfect balance; the busiest OST k times the mean above.
COST_BINS = (1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, float("inf"))


def cost_labels() -> list[str]:
    los = (1.0, *COST_BINS[:-1])
    return [f"{lo:g}-{hi:g}" if hi != float("inf") else f">{lo:g}" for lo, hi in zip(los, COST_BINS)]


def cost_bin(cost: float) -> str:
    return cost_labels()[bisect.bisect_left(COST_BINS, cost)]


def job_row(adv: Advice) -> dict[str, Any]:
    counts = Counter(x.kind for x in adv.findings)
    bad = {x.path: x.bytes for x in adv.findings}
    return {
        "log": adv.path, "jobid": adv.jobid, "user": adv.user, "app": adv.app, "nprocs": adv.nprocs,
        "start_time": adv.start_time, "day": time.strftime("%Y-%m-%d", time.gmtime(adv.start_time)),
        "has_layout": adv.has_layout, "n_osts": adv.n_osts, "files": len(adv.files),
        "bytes_written": sum(f.facts.write_bytes for f in adv.files),
        "bytes_read": sum(f.facts.read_bytes for f in adv.files),
        "bad_bytes": sum(bad.values()),
        "ost_cost_recorded": adv.ost_cost_recorded, "ost_cost_iez": adv.ost_cost_iez,
        "write_recorded": adv.write_recorded, "read_recorded": adv.read_recorded,
        "write_iez": adv.write_iez, "read_iez": adv.read_iez, "time_lost": adv.time_lost,
        **{f"n_{k.replace('-', '_')}": counts.get(k, 0) for k in KINDS},
    }


def finding_rows(adv: Advice) -> list[dict[str, Any]]:
    found = sorted(adv.findings, key=lambda x: -x.bytes)[:FINDINGS_PER_JOB]
    return [{"log": adv.path, "jobid": adv.jobid, "user": adv.user, "app": adv.app, "file": x.path,
             "kind": x.kind, "bytes": x.bytes, "text": x.text} for x in found]


@dataclass
class Group:
    jobs: int = 0
    time_lost: float = 0.0
    bad_bytes: int = 0
    bytes_written: int = 0


@dataclass
class Site:
    jobs: int = 0
    without_layout: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (log, cause, error), the first ones
    worst: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)  # min-heap on time lost
    users: dict[str, Group] = field(default_factory=lambda: defaultdict(Group))
    apps: dict[str, Group] = field(default_factory=lambda: defaultdict(Group))
    days: dict[str, Group] = field(default_factory=lambda: defaultdict(Group))
    bad_bytes: Counter[str] = field(default_factory=Counter)  # per finding kind
    findings: Counter[str] = field(default_factory=Counter)
    cost_recorded: Counter[str] = field(default_factory=Counter)
    cost_iez: Counter[str] = field(default_factory=Counter)
    time_recorded: float = 0.0
    time_iez: float = 0.0

    def fail(self, log: str, cause: str, error: str) -> None:
        self.failures[cause] += 1
        if len(self.failed) < LISTED_FAILURES:
            self.failed.append((log, cause, error))

    def add(self, row: dict[str, Any], findings: list[dict[str, Any]]) -> None:
        self.jobs += 1
        if not row["has_layout"]:
            self.without_layout += 1
        lost = row["time_lost"] or 0.0
        for key, groups in ((row["user"] or "?", self.users), (row["app"] or "?", self.apps), (row["day"], self.days)):
            g = groups[key]
            g.jobs += 1
            g.time_lost += lost
            g.bad_bytes += row["bad_bytes"]
            g.bytes_written += row["bytes_written"]
        for f in findings:
            self.bad_bytes[f["kind"]] += f["bytes"]
        for k in KINDS:
            self.findings[k] += row[f"n_{k.replace('-', '_')}"]
        if row["has_layout"] and row["ost_cost_recorded"]:
            self.cost_recorded[cost_bin(row["ost_cost_recorded"])] += 1
            self.cost_iez[cost_bin(row["ost_cost_iez"])] += 1
        if row["time_lost"] is not None:
            self.time_recorded += row["write_recorded"] + row["read_recorded"]
            self.time_iez += row["write_iez"] + row["read_iez"]
            item = (lost, self.jobs, row)
            if len(self.worst) < WORST:
                heapq.heappush(self.worst, item)
            elif item[:2] > self.worst[0][:2]:
                heapq.heapreplace(self.worst, item)

    def worst_jobs(self) -> list[dict[str, Any]]:
        return [r for _, _, r in sorted(self.worst, key=lambda t: (-t[0], t[1]))]

    @staticmethod
    def ranked(groups: dict[str, Group], n: int = WORST) -> list[tuple[str, Group]]:
        return sorted(groups.items(), key=lambda kv: (-kv[1].time_lost, -kv[1].bad_bytes, kv[0]))[:n]

    def to_dict(self) -> dict[str, Any]:
        def table(groups: dict[str, Group], n: int = WORST) -> list[dict[str, Any]]:
            return [{"name": k, **vars(g)} for k, g in self.ranked(groups, n)]

        return {
            "jobs": self.jobs, "without_layout": self.without_layout, "failures": dict(self.failures),
            "failed": [{"log": a, "cause": b, "error": c} for a, b, c in self.failed],
            "time_recorded": self.time_recorded, "time_iez": self.time_iez,
            "worst_jobs": self.worst_jobs(), "users": table(self.users), "apps": table(self.apps),
            "days": [{"name": k, **vars(g)} for k, g in sorted(self.days.items())],
            "bad_bytes": dict(self.bad_bytes), "findings": dict(self.findings),
            "ost_cost_recorded": dict(self.cost_recorded), "ost_cost_iez": dict(self.cost_iez),
        }
