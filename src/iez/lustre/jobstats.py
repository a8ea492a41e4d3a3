"""`obdfilter.*.job_stats` / `mdt.*.job_stats` (lprocfs_jobstats_seq_show; the repository's Lustre notes
give only where the file is: docs/references.md#l-not-in-notes).

A YAML list, one entry per job, read here by a small tolerant reader (no YAML dependency):
    job_stats:
    - job_id:          24                     2.15+: quoted with \\xHH escapes when needed
      snapshot_time:   1510782606             2.10: seconds; 2.15+: "<s>.<ns> secs.nsecs"
      start_time:      ...                    2.15+ (with elapsed_time)
      read_bytes:      { samples: 0, unit: bytes, min: 0, max: 0, sum: 0 }
      getattr:         { samples: 0, unit:  reqs }
    2.14+ counters add ", sumsq: N" and may end with ", hist: { 4K: 1, 1M: 3 }".
A job's snapshot_time is when it was last updated, not when the file was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iez.lustre.parse import Skipped, Times, parse_time_line
from iez.lustre.stats import Counter

_JOB = re.compile(r"^-\s+job_id:\s*(.*?)\s*$")
_FIELD = re.compile(r"^\s+(\w+):\s*(.*?)\s*$")
_ESCAPE = re.compile(r"\\x([0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class JobStats:
    job_id: str
    times: Times
    counters: tuple[Counter, ...]

    def counter(self, name: str) -> Counter | None:
        return next((c for c in self.counters if c.name == name), None)


@dataclass(frozen=True)
class JobStatsFile:
    jobs: tuple[JobStats, ...]
    skipped: tuple[Skipped, ...] = ()

    def job(self, job_id: str) -> JobStats | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)


def parse_job_stats(text: str) -> JobStatsFile:
    jobs: list[JobStats] = []
    skipped: list[Skipped] = []
    job_id: str | None = None
    fields: dict[str, int] = {}
    counters: list[Counter] = []

    def close() -> None:
        if job_id is not None:
            jobs.append(JobStats(job_id, Times.of(fields), tuple(counters)))

    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.strip() == "job_stats:":
            continue
        m = _JOB.match(line)
        if m:
            close()
            job_id, fields, counters = _job_id(m.group(1)), {}, []
            continue
        m = _FIELD.match(line) if job_id is not None else None
        if m is None:
            skipped.append(Skipped(i, line, "not a job_stats line"))
            continue
        t = parse_time_line(line)
        if t is not None:
            fields[t[0]] = t[1]
            continue
        try:
            counters.append(_counter(m.group(1), _flow_map(m.group(2))))
        except ValueError as e:
            skipped.append(Skipped(i, line, str(e)))
    close()
    return JobStatsFile(tuple(jobs), tuple(skipped))


def _job_id(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        data = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), raw[1:-1])
        return data.encode("latin-1").decode("utf-8", "replace")
    return raw


def _counter(name: str, m: dict) -> Counter:
    def num(key: str) -> int | None:
        v = m.get(key)
        if v is not None and not isinstance(v, int):
            raise ValueError(f"{key} is not a number")
        return v

    count = num("samples")
    if count is None:
        raise ValueError("counter without samples")
    hist = m.get("hist", {})
    if not isinstance(hist, dict) or not all(isinstance(v, int) for v in hist.values()):
        raise ValueError("hist is not a map of counts")
    return Counter(name, count, str(m.get("unit", "")), num("min"), num("max"), num("sum"),
                   num("sumsq"), tuple(hist.items()))


_TOKEN = re.compile(r"\s*([{},:]|[^\s{},:]+)")
_PUNCT = {"{", "}", ",", ":"}


def _flow_map(text: str) -> dict:
    """A YAML flow map of plain scalars, possibly nested: `{ a: 1, b: x, h: { 1K: 2 } }`."""
    tokens = _TOKEN.findall(text)
    if not tokens or tokens[0] != "{":
        raise ValueError("expected a { ... } counter")
    value, end = _map(tokens, 1)
    if end != len(tokens):
        raise ValueError("text after the closing }")
    return value


def _map(tokens: list[str], i: int) -> tuple[dict, int]:
    out: dict = {}
    while i < len(tokens) and tokens[i] != "}":
        if i + 2 >= len(tokens) or tokens[i] in _PUNCT or tokens[i + 1] != ":":
            raise ValueError("malformed { key: value } map")
        key, i = tokens[i], i + 2
        if tokens[i] == "{":
            out[key], i = _map(tokens, i + 1)
        elif tokens[i] in _PUNCT:
            raise ValueError(f"no value for {key}")
        else:
            v = tokens[i]
            out[key], i = (int(v) if re.fullmatch(r"-?\d+", v) else v), i + 1
        if i < len(tokens) and tokens[i] == ",":
            i += 1
    if i >= len(tokens):
        raise ValueError("unclosed {")
    return out, i + 1
