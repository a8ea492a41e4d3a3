"""The engine's results (docs/simulator.md, "Results format") as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iez.errors import IezError

FORMAT = "iez-sim-results/1"


class ResultsError(IezError):
    """A results file that is not iez-sim's."""


@dataclass(frozen=True)
class PhaseResult:
    kind: str
    label: str
    start: float
    end: float
    bytes: float
    bandwidth: float
    token_wait: float
    exchange: float = 0.0  # seconds of a collective read's exchange, inside start..end


@dataclass(frozen=True)
class JobResult:
    name: str
    submit: float
    start: float
    end: float
    end_to_end: float
    makespan: float
    token_wait: float
    write_bytes: float
    write_bw: float
    read_bytes: float
    read_bw: float
    phases: tuple[PhaseResult, ...]

    def metric(self, name: str) -> float:
        return float(getattr(self, name))


@dataclass(frozen=True)
class TargetResult:
    """An OST (name = its index as text), an OSS, or the MDS."""

    name: str
    bytes_written: float
    bytes_read: float
    busy: float
    streams: tuple[tuple[float, int], ...]  # (time, open streams from then on)


@dataclass(frozen=True)
class Results:
    makespan: float
    wall_seconds: float
    max_rss_bytes: int
    optim: str
    jobs: tuple[JobResult, ...]
    osts: tuple[TargetResult, ...]
    osses: tuple[TargetResult, ...]
    mds_ops: float
    mds_busy: float

    def job(self, name: str) -> JobResult:
        for j in self.jobs:
            if j.name == name:
                return j
        raise ResultsError(f"no job {name!r} in the results")


def parse(doc: dict[str, Any]) -> Results:
    try:
        if doc.get("format") != FORMAT:
            raise ResultsError(f"not an iez-sim results document (format {doc.get('format')!r})")
        eng = doc["engine"]
        return Results(
            makespan=float(doc["makespan"]), wall_seconds=float(eng["wall_seconds"]),
            max_rss_bytes=int(eng["max_rss_bytes"]), optim=str(eng["optim"]),
            jobs=tuple(_job(j) for j in doc["jobs"]),
            osts=tuple(_target(str(o["index"]), o) for o in doc["osts"]),
            osses=tuple(_target(o["name"], o) for o in doc["osses"]),
            mds_ops=float(doc["mds"]["ops"]), mds_busy=float(doc["mds"]["busy"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ResultsError(f"malformed iez-sim results ({type(e).__name__}: {e})") from None


def _job(j: dict[str, Any]) -> JobResult:
    phases = tuple(PhaseResult(p["kind"], p["label"], float(p["start"]), float(p["end"]), float(p["bytes"]),
                               float(p["bandwidth"]), float(p["token_wait"]), float(p.get("exchange", 0.0)))
                   for p in j["phases"])
    return JobResult(name=j["name"], submit=float(j["submit"]), start=float(j["start"]), end=float(j["end"]),
                     end_to_end=float(j["end_to_end"]), makespan=float(j["makespan"]),
                     token_wait=float(j["token_wait"]), write_bytes=float(j["write_bytes"]),
                     write_bw=float(j["write_bw"]), read_bytes=float(j["read_bytes"]),
                     read_bw=float(j["read_bw"]), phases=phases)


def _target(name: str, t: dict[str, Any]) -> TargetResult:
    return TargetResult(name=name, bytes_written=float(t["bytes_written"]), bytes_read=float(t["bytes_read"]),
                        busy=float(t["busy"]), streams=tuple((float(a), int(b)) for a, b in t["streams"]))
