"""Run-time fields of file names: the part of a name a job fills in when it runs (its job id,
array index, host, rank, a date or time stamp, a random suffix). A plan key of version 2 carries
them (docs/plan-format.md); prediction writes them where names change from run to run
(docs/prediction.md). Pure: the grammar, and which key a created name falls under.

    /scratch/out.{job}.{date:%Y%m%d}    /scratch/.data.h5.{rand:6}    /scratch/{{literal}}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from iez.errors import ConfigError

MAX_FIELDS = 16  # fields in one path, as libiez/src/plan.c
MAX_FMT = 32  # bytes of a date/time format
MAX_RAND = 64  # characters of a random field
MAX_NAME = 4096  # PATH_MAX: a filled-in name longer than this never matches
KNOWN = ("job", "array", "host", "fqdn", "rank")  # fields the creating process knows
# what each variable conversion of a filled-in name matches (ASCII digits and letters only)
_CONV = {"Y": "[0-9]{4}", "m": "(?:0[1-9]|1[0-2])", "d": "(?:0[1-9]|[12][0-9]|3[01])", "H": "(?:[01][0-9]|2[0-3])",
         "M": "[0-5][0-9]", "S": "(?:[0-5][0-9]|60)"}
_FMT = re.compile(r"(?:%[YmdHMS]|[-_.:T])+")
_RAND = re.compile(r"[1-9][0-9]?")
_VARIABLE = ("date", "time", "rand")  # fields matched by shape, not known in advance


@dataclass(frozen=True)
class Field:
    """A run-time field of a path: `{name}` or `{name:arg}` (docs/plan-format.md)."""

    name: str
    arg: str = ""

    def __str__(self) -> str:
        return f"{{{self.name}:{self.arg}}}" if self.arg else f"{{{self.name}}}"


def escape(name: str) -> str:
    """A file's name as a plan key: its braces doubled."""
    return name.replace("{", "{{").replace("}", "}}")


def parse_path(path: str) -> tuple[str | Field, ...]:
    """A version-2 path: its literal text (braces undoubled) and fields, in order."""
    if "{" not in path and "}" not in path:
        return (path,)
    parts: list[str | Field] = []
    lit: list[str] = []
    i, fields = 0, 0
    while i < len(path):
        c = path[i]
        if c not in "{}":
            lit.append(c)
            i += 1
            continue
        if path[i + 1:i + 2] == c:
            lit.append(c)
            i += 2
            continue
        if c == "}":
            raise ConfigError("plan: a lone '}' in a path (write '}}')")
        close = path.find("}", i + 1)
        if close < 0:
            raise ConfigError("plan: a field without its '}' (a literal '{' is '{{')")
        fields += 1
        if fields > MAX_FIELDS:
            raise ConfigError(f"plan: more than {MAX_FIELDS} fields in a path")
        if lit:
            parts.append("".join(lit))
            lit = []
        parts.append(_field(path[i + 1:close]))
        i = close + 1
    if lit:
        parts.append("".join(lit))
    return tuple(parts)


def _field(body: str) -> Field:
    name, colon, arg = body.partition(":")
    if name in KNOWN:
        if colon:
            raise ConfigError(f"plan: field {{{name}}} takes no argument")
    elif name in ("date", "time", "rand"):
        if not colon:
            raise ConfigError(f"plan: field {{{name}}} needs an argument")
        if name == "rand":
            if not _RAND.fullmatch(arg) or int(arg) > MAX_RAND:
                raise ConfigError(f"plan: bad random field length {arg[:40]!r} (1 to {MAX_RAND})")
        elif len(arg.encode()) > MAX_FMT or not _FMT.fullmatch(arg) or "%" not in arg:
            raise ConfigError(f"plan: bad {name} format {arg[:40]!r}")
    else:
        raise ConfigError(f"plan: unknown field {{{name[:40]}}}")
    return Field(name, arg if colon else "")


def templated(path: str) -> bool:
    """The key carries fields (braces aside)."""
    return any(isinstance(p, Field) for p in parse_path(path))


def _date_pieces(fmt: str) -> list[tuple[str, int]]:
    """(regex, bytes) of each conversion and separator of a date/time format."""
    return [(_CONV[c[1]], 4 if c == "%Y" else 2) if c[0] == "%" else (re.escape(c), 1) for c in re.findall(r"%.|[^%]", fmt)]


def date_pattern(fmt: str) -> re.Pattern[str]:
    """What a `{date:FMT}` field matches: fixed-width ASCII digits in range, separators as written."""
    return re.compile("".join(r for r, _ in _date_pieces(fmt)), re.ASCII)


def _pieces(parts: tuple[str | Field, ...], env: Mapping[str, str]) -> list[tuple[str, int]] | None:
    """A key's name in a process with `env`'s fields: (regex, bytes) per piece, None if it can
    never match there (a field unknown to it, a value with a '/', longer than MAX_NAME)."""
    out = []
    for p in parts:
        if isinstance(p, str) or p.name in KNOWN:
            text = p if isinstance(p, str) else env.get(p.name, "")
            if not text or "/" in text and not isinstance(p, str):
                return None
            out.append((re.escape(text), len(text.encode())))
        elif p.name == "rand":
            out.append((f"[A-Za-z0-9]{{{p.arg}}}", int(p.arg)))
        else:
            out += _date_pieces(p.arg)
    return out if sum(n for _, n in out) <= MAX_NAME else None


class Matcher:
    """Which key a created name falls under, as libiez decides it in a process whose known
    fields are `env` (job, array, host, fqdn, rank; docs/plan-format.md): a literal key, or one
    its known fields fill in to the name, first; else the earliest key whose date and random
    fields match. Every field has a fixed width once the known ones are filled in, so a templated
    key is filed under its length and the literal text before its first variable field: a
    lookup tries one bucket per such prefix length, not every key."""

    def __init__(self, keys: Iterable[str], env: Mapping[str, str]):
        self._exact: dict[str, str] = {}
        # name length -> prefix length -> prefix -> (line, regex, key) in key order
        self._var: dict[int, dict[int, dict[str, list[tuple[int, re.Pattern[str], str]]]]] = {}
        for line, key in enumerate(keys):
            if "{" not in key and "}" not in key:
                self._exact.setdefault(key, key)
                continue
            parts = parse_path(key)
            pieces = _pieces(parts, env)
            if pieces is None:
                continue
            if not any(isinstance(p, Field) and p.name in _VARIABLE for p in parts):
                self._exact.setdefault("".join(p if isinstance(p, str) else env[p.name] for p in parts), key)
                continue
            prefix = ""
            for p in parts:
                if isinstance(p, Field) and p.name in _VARIABLE:
                    break
                prefix += p if isinstance(p, str) else env[p.name]
            rx = re.compile("".join(r for r, _ in pieces), re.ASCII)
            size = sum(n for _, n in pieces)
            self._var.setdefault(size, {}).setdefault(len(prefix), {}).setdefault(prefix, []).append((line, rx, key))

    def __call__(self, name: str) -> str | None:
        """The plan key `name` (a created file's absolute path) falls under, or None."""
        hit = self._exact.get(name)
        if hit is not None:
            return hit
        best: tuple[int, str] | None = None
        for plen, bucket in self._var.get(len(name.encode()), {}).items():
            for line, rx, key in bucket.get(name[:plen], ()):
                if (best is None or line < best[0]) and rx.fullmatch(name):
                    best = (line, key)
                    break
        return best[1] if best else None


class Matchers:
    """One set of keys matched for many processes (a trace's): a Matcher per set of the values of
    the fields its keys name (no other field changes what a Matcher does), so that literal keys
    take one Matcher for every process, not one a rank (8,192 files placed from a plan of
    8,192 names: 12 s of CPU, each process's Matcher made over every key)."""

    def __init__(self, keys: Iterable[str]):
        self._keys = list(keys)
        self._named = sorted({p.name for k in self._keys for p in parse_path(k) if isinstance(p, Field)})
        self._by: dict[tuple[str, ...], Matcher] = {}

    def __call__(self, name: str, fields: Mapping[str, str]) -> str | None:
        """The key `name`, created by a process with `fields`, falls under, or None."""
        env = tuple(fields.get(k, "") for k in self._named)
        if env not in self._by:
            self._by[env] = Matcher(self._keys, fields)
        return self._by[env](name)


def process_fields(job: str = "", array: str = "", host: str = "", rank: int | None = None) -> dict[str, str]:
    """A creating process's known fields from what a trace records of it (its job and array
    ids, host name and rank), as libiez filled them in: `host` short, `fqdn` as given."""
    env = {"job": job, "array": array, "fqdn": host, "host": host.split(".")[0] or host,
           "rank": "" if rank is None else str(rank)}
    return {k: v for k, v in env.items() if v}


def fields_of(environ: Mapping[str, str], hostname: str) -> dict[str, str]:
    """A process's known fields from its environment and host name, as libiez reads them
    (iez_plan_env_read): the job and array ids of Slurm, PBS, LSF or Flux, the MPI rank, the
    host name (IEZ_HOST where set) short and full."""
    env = {}
    for name, variables in (("job", ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")),
                            ("array", ("SLURM_ARRAY_TASK_ID", "PBS_ARRAY_INDEX", "PBS_ARRAYID", "LSB_JOBINDEX"))):
        value = next((environ[v] for v in variables if environ.get(v)), "")
        if value:
            env[name] = value
    for v in RANK_VARS:
        text = environ.get(v, "")
        if re.fullmatch(r"\s*[+-]?[0-9]+", text) and 0 <= int(text) <= 2**31 - 1:
            env["rank"] = str(int(text))
            break
    return env | process_fields(host=environ["IEZ_HOST"] if HOST_ENV.fullmatch(environ.get("IEZ_HOST", "")) else hostname)


HOST_ENV = re.compile(r"[A-Za-z0-9._-]{1,63}")  # IEZ_HOST as libiez takes it (iez_host_env)
RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "ALPS_APP_PE")  # IEZ_RANK_VARS


