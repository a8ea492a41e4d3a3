"""The on-disk shape of a profile (docs/liopprof.md) and reading it back.

    OUT/profile.json          hosts, start and stop times, sampling interval, mode
    OUT/<host>/rpctrace.log   the OSS's debug log as text (lctl debug_file), may be .gz
    OUT/<host>/exports.txt    exports/job stats samples: "### iez-sample <epoch>" + get_param dump
    OUT/<host>/params-start.txt, params-stop.txt   get_param dumps at start and stop
    OUT/<host>/iostat.txt     `iostat -x -t 1` output
    OUT/<host>/survey.txt     obdfilter-survey output (optional)
    OUT/<host>/errors.txt     what the services printed on stderr
    OUT/job/                  optional: the job's I/O event logs and layouts.txt (path TAB layout)

Any part may be missing: a directory copied by hand from an OSS with only some of these files
is read as far as it goes, and profile.json is optional (hosts are then the subdirectories).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from iez.cluster import check_host_name
from iez.lustre.parse import Skipped
from iez.lustre.getparam import parse_getparam
from iez.profile import ProfileError

FORMAT = "iez-profile/1"
META = "profile.json"
RPCTRACE, EXPORTS, START, STOP, IOSTAT, SURVEY, ERRORS = (
    "rpctrace.log", "exports.txt", "params-start.txt", "params-stop.txt", "iostat.txt", "survey.txt", "errors.txt")
HOST_FILES = (RPCTRACE, RPCTRACE + ".gz", EXPORTS, START, STOP, IOSTAT, SURVEY)
SAMPLE_MARK = "### iez-sample "
JOB = "job"
LAYOUTS = "layouts.txt"


@dataclass(frozen=True)
class ProfileMeta:
    hosts: tuple[str, ...]
    start: float | None = None
    stop: float | None = None
    interval: float | None = None  # seconds between exports stats samples
    mode: str = "lustre"  # lustre | emulated | copied
    fsname: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for h in self.hosts:  # each becomes a directory under the profile
            check_host_name(h, f"{META} host")

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=2) + "\n"


def write_meta(out: Path, meta: ProfileMeta) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / META).write_text(meta.to_json())


def read_meta(out: Path) -> ProfileMeta:
    p = out / META
    if not p.exists():
        hosts = tuple(sorted(d.name for d in out.iterdir() if d.is_dir() and any((d / f).exists() for f in HOST_FILES)))
        if not hosts:
            raise ProfileError(f"{out} holds no profile: no {META} and no host directory with "
                               f"{', '.join(HOST_FILES[:3])}, ...")
        return ProfileMeta(hosts, mode="copied")
    try:
        doc = json.loads(p.read_text())
        if doc.get("format") != FORMAT:
            raise ValueError(f"format is {doc.get('format')!r}, expected {FORMAT!r}")
        return ProfileMeta(tuple(doc["hosts"]), doc.get("start"), doc.get("stop"), doc.get("interval"),
                           doc.get("mode", "lustre"), doc.get("fsname", ""), tuple(doc.get("notes", ())))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ProfileError(f"cannot read {p}: {e}") from None


def format_sample(t: float, dump: str) -> str:
    return f"{SAMPLE_MARK}{t:.6f}\n{dump}"


def parse_samples(text: str) -> tuple[list[tuple[float, dict[str, str]]], list[Skipped]]:
    """The samples of an exports.txt: [(time, {parameter: value})], in file order."""
    out: list[tuple[float, dict[str, str]]] = []
    skipped: list[Skipped] = []
    cur: tuple[float, int, list[str]] | None = None

    def close() -> None:
        if cur is not None:
            dump = parse_getparam("\n".join(cur[2]))
            skipped.extend(Skipped(cur[1] + s.lineno, s.text, s.reason) for s in dump.skipped)
            out.append((cur[0], dump.values))

    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith(SAMPLE_MARK):
            close()
            try:
                cur = (float(line[len(SAMPLE_MARK):].split()[0]), i, [])
            except (ValueError, IndexError):
                cur = None
                skipped.append(Skipped(i, line, "sample marker without a time"))
        elif cur is not None:
            cur[2].append(line)
        elif line.strip():
            skipped.append(Skipped(i, line, "text before the first sample marker"))
    close()
    return out, skipped


@dataclass(frozen=True)
class HostDir:
    name: str
    path: Path

    def file(self, name: str) -> Path | None:
        p = self.path / name
        return p if p.is_file() else None

    def rpctrace(self) -> Path | None:
        return self.file(RPCTRACE) or self.file(RPCTRACE + ".gz")

    def text(self, name: str) -> str | None:
        p = self.file(name)
        if p is None:
            return None
        try:
            return p.read_text(errors="replace")
        except OSError as e:
            raise ProfileError(f"cannot read {p}: {e.strerror}") from None

    def params(self, name: str) -> tuple[dict[str, str], list[Skipped]]:
        text = self.text(name)
        if text is None:
            return {}, []
        dump = parse_getparam(text)
        return dump.values, dump.skipped


def host_dirs(out: Path, meta: ProfileMeta) -> list[HostDir]:
    return [HostDir(h, out / h) for h in meta.hosts]
