"""File-name templates: how the names a job creates change from run to run.

A path splits into literal text and decimal fields: `/lustre/hacc/FPP1-Part00000003-of-00000008.data`
is the template `/lustre/hacc/FPP%d-Part%08d-of-%08d.data` with fields (1, 3, 8). Paths with
the same literal text share a template. Each field of a template is one of two kinds, decided
over every run:

- rank-tied: value = MPI rank + c in every file (IOR's `.%08d`, HACC's `Part%08d`, the `r3`
  of `ckpt_step0010_r3.h5`). It stays with the rank from run to run.
- run-shifted: within a run the values are base + offset, base being the run's smallest value.
  Offsets repeat from run to run (several checkpoints per run: steps 10, 20, 30) and the base
  moves (`FPP1` → `FPP2`, step 10 → 40). The next base continues the run-to-run steps of the
  base when they repeat with some period (constant step: a run or step counter; period 2:
  double-buffered checkpoints A/B), else stays put. A constant field is the case step 0.
  A field that counts the run's ranks or the template's files (HACC's `of-%08d`) is the count
  of the last run, whose files the next run repeats.

Zero padding is kept: a field written with leading zeros anywhere is formatted `%0<width>d`.
A file's *key* (template + rank-tied values + offsets) names its role in every run, so the
predictor can line up the same file across runs and write its next-run name.

Some parts of a name are filled in by the job when it runs and cannot be predicted as values;
they become run-time fields of the plan key (iez.fields, docs/plan-format.md), which libiez fills
in or matches when the file is created (docs/prediction.md):

- `{job}`: a part equal to the run's job id (at least 3 characters), `{host}` / `{fqdn}`: one
  equal to the creating host's name, short or full, each as a whole part (between separators).
- `{date:FMT}`: a digit run (or a dashed/coloned stamp) that differs between runs and reads as a
  date or time of a known shape (`DATES`) in every run.
- `{rand:N}`: the last part of a base name (after `.`, `_` or `-`), of 6 or more letters and
  digits, that differs in every file and run, and not in its digits alone (mkstemp's `XXXXXX`,
  the `mktemp` command's ten, rsync's `.NAME.XXXXXX` temporaries), or that a file renamed later
  carries (a temporary even in one run). A name the trace says ends in N generated characters
  (`Request.name_random`: libiez's mkstemp wrappers, the `mktemp` command) has them as
  `{rand:N}` from one run.

A template field of either kind matches any value, so a run's files under one templated name
are one file of the next run (predicted once, not as a series of names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from iez.fields import MAX_RAND, date_pattern, escape

# A value field: a date stamp with separators, else a digit run; a run-time field ({...}) or an
# escaped brace is literal text.
_FIELD = re.compile(r"(\{\{|\}\}|\{[^{}]*\})|(?<![0-9])([0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T_][0-9]{2}[:-][0-9]{2}[:-][0-9]{2})?"
                    r"|[0-9]{8}[T_-][0-9]{6}|[0-9]{2}:[0-9]{2}:[0-9]{2})(?![0-9])|([0-9]+)")
# Date and time shapes a varying field may be, tried in order (strftime; iez.fields' conversions).
DATES = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d_%H-%M-%S", "%Y%m%dT%H%M%S", "%Y%m%d-%H%M%S", "%Y%m%d_%H%M%S",
         "%Y-%m-%d", "%H:%M:%S", "%Y%m%d%H%M%S", "%Y%m%d%H%M", "%Y%m%d", "%H%M%S")
_YEARS = range(1970, 2100)  # a date's plausible years: an 8-digit counter is no date
_RAND = re.compile(r"(?<=[/._-])[A-Za-z0-9]{6,}$")  # mkstemp's Xs end a base name
_ALNUM = re.compile(r"[A-Za-z0-9]+")
MIN_JOB = 3  # shorter run ids (run 1, 2, ...) are too likely to be other numbers of a name

Key = tuple[tuple[str, ...], tuple[int | str, ...]]  # (template literals, rank-tied values, offsets, fields)


def split(path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Literal parts (one more than fields) and the value strings between them."""
    literals, values, at = [], [], 0
    for m in _FIELD.finditer(path):
        if m.group(1):
            continue
        literals.append(path[at:m.start()])
        values.append(m.group(0))
        at = m.end()
    literals.append(path[at:])
    return tuple(literals), tuple(values)


def date_shape(values: Sequence[str]) -> str:
    """The first of DATES every value reads as, as a `{date:FMT}` field matches it ("" if none)."""
    for fmt in DATES:
        rx = date_pattern(fmt)
        if all(rx.fullmatch(v) for v in values):
            try:
                stamps = [datetime.strptime(v, fmt) for v in values]
            except ValueError:  # February 30th
                continue
            if "%Y" not in fmt or all(t.year in _YEARS for t in stamps):
                return fmt
    return ""


def _whole(text: str, part: str, field: str) -> str:
    """text with every whole occurrence of part (between separators or ends) as field."""
    return re.sub(rf"(?<![A-Za-z0-9]){re.escape(part)}(?![A-Za-z0-9])", field, text) if part else text


def generalise(path: str, job: str = "", host: str = "") -> str:
    """The path as a plan key, the run's job id and the creating host as fields."""
    key = escape(path)
    if len(job) >= MIN_JOB:
        key = _whole(key, escape(job), "{job}")
    if "." in host:
        key = _whole(key, escape(host), "{fqdn}")
    short = host.split(".")[0]
    return _whole(key, escape(short), "{host}") if len(short) >= 2 else key


def random_parts(runs: Sequence[Sequence[tuple[str, bool]]]) -> set[tuple[int, str]]:
    """The (run, key) whose base name ends in a random part: one that differs in every file of
    every run among keys alike but for it and their numbers, in its letters too; or whose file
    was renamed (a temporary)."""
    groups: dict[str, list[tuple[int, str, str, bool]]] = {}
    for r, run in enumerate(runs):
        for key, renamed in run:
            m = _RAND.search(key)
            if m:
                coarse = re.sub(r"[0-9]+", "#", key[:m.start()]) + f"\0{len(m.group())}"
                groups.setdefault(coarse, []).append((r, key, m.group(), renamed))
    out = set()
    for occ in groups.values():
        parts = [p for _, _, p, _ in occ]
        # letters change too: a counter's letters stay (plt000100, plt000200)
        varies = (len({r for r, _, _, _ in occ}) > 1 and len(set(parts)) == len(parts)
                  and len({re.sub(r"[0-9]+", "#", p) for p in parts}) > 1)
        out |= {(r, key) for r, key, _, renamed in occ if varies or renamed}
    return out


def with_random(key: str, known: int = 0) -> str:
    """key with its base name's random part as a field: its last `known` characters when the
    trace says they were generated (left as they are unless letters and digits), else the part
    that looks random."""
    if known:
        tail = key[-known:]
        fits = known <= MAX_RAND and len(key) > known and _ALNUM.fullmatch(tail)
        return key[:-known] + f"{{rand:{known}}}" if fits else key
    m = _RAND.search(key)
    return key[:m.start()] + f"{{rand:{len(m.group())}}}" if m else key


@dataclass(frozen=True)
class Template:
    literals: tuple[str, ...]
    widths: tuple[int, ...]  # zero-padded width of each field, 0 = plain
    # per field: the text it is written as whatever its value ("{date:%Y%m%d}", a stamp that
    # never changed), or "" for a number; () = all numbers
    fixed: tuple[str, ...] = ()

    def render(self, values: Sequence[int | str]) -> str:
        parts = [self.literals[0]]
        for i, (lit, width, v) in enumerate(zip(self.literals[1:], self.widths, values)):
            text = self.fixed[i] if self.fixed and self.fixed[i] else None
            parts.append(text if text is not None else f"{v:0{width}d}" if width else str(v))
            parts.append(lit)
        return "".join(parts)

    def __str__(self) -> str:
        """printf form, as the docs and IOR write it: `testFile.%08d`; run-time fields as written."""
        lits = [lit.replace("%", "%%") for lit in self.literals]
        fixed = self.fixed or ("",) * len(self.widths)
        fields = [f or (f"%0{w}d" if w else "%d") for w, f in zip(self.widths, fixed)]
        return lits[0] + "".join(f + lit for f, lit in zip(fields, lits[1:]))


def width(digits: Sequence[str]) -> int:
    """Zero-padded width of a field from the strings it was written as (0 when never padded)."""
    padded = [len(s) for s in digits if len(s) > 1 and s[0] == "0"]
    return min(padded) if padded else 0


def advance(values: Sequence[int]) -> int:
    """Next value of a run-to-run sequence: repeat its steps if they are periodic, else stay.

    Periods are tried shortest first and must be seen twice in full, except that a single step
    is taken as a constant step (run 1, run 2 → run 3)."""
    if len(values) < 2:
        return values[-1]
    steps = [b - a for a, b in zip(values, values[1:])]
    for period in range(1, max(2, len(steps) // 2 + 1)):
        if all(steps[i] == steps[i - period] for i in range(period, len(steps))):
            nxt = values[-1] + steps[len(steps) - period]
            return nxt if nxt >= 0 else values[-1]  # names hold no negative numbers
    return values[-1]


@dataclass(frozen=True)
class _Shape:
    """What inference learnt about one template."""

    template: Template
    rank_offset: tuple[int | None, ...]  # per field: c when value = rank + c, else None
    bases: tuple[dict[int, int], ...]  # per field: run index -> that run's smallest value
    next_base: tuple[int, ...]


class NameModel:
    """Templates inferred from past runs: keys that line files up across runs, next-run names."""

    def __init__(self, shapes: dict[tuple[str, ...], _Shape], keys: dict[tuple[int, str], str],
                 splits: dict[tuple[int, str], tuple[tuple[str, ...], tuple[str, ...]]]):
        self._shapes = shapes
        self._keys = keys  # (run, path) -> the path as a plan key with run-time fields
        self._splits = splits  # (run, path) -> its plan key split, as inferring split it

    @property
    def templates(self) -> list[Template]:
        return [s.template for s in self._shapes.values()]

    def key(self, run: int, path: str) -> Key:
        """The role of `path` (created in run number `run` of the inferred runs)."""
        parts = self._splits.get((run, path))
        literals, values = parts if parts is not None else split(self._keys.get((run, path), escape(path)))
        shape = self._shapes[literals]
        fixed = shape.template.fixed
        norm = tuple(
            "" if fixed[i] else int(s) if c is not None else int(s) - bases[run]
            for i, (s, c, bases) in enumerate(zip(values, shape.rank_offset, shape.bases))
        )
        return literals, norm

    def next_path(self, key: Key) -> str:
        """The next run's name: a plan key, run-time fields included (iez.fields)."""
        literals, norm = key
        shape = self._shapes[literals]
        values = [v if c is not None or isinstance(v, str) else b + v
                  for v, c, b in zip(norm, shape.rank_offset, shape.next_base)]
        return shape.template.render(values)

    def rank_of(self, key: Key) -> int | None:
        """The rank a rank-tied field names, or None when the name carries no rank."""
        literals, norm = key
        for v, c in zip(norm, self._shapes[literals].rank_offset):
            if c is not None and isinstance(v, int):
                return v - c
        return None


# (path, rank[, job, host, renamed[, generated characters ending the name]])
Created = tuple[str, int] | tuple[str, int, str, str, bool] | tuple[str, int, str, str, bool, int]


def infer(runs: Sequence[Sequence[Created]]) -> NameModel:
    """Name templates from past runs, each a sequence of (path, rank) in create order, or of
    (path, rank, job id, host, renamed later[, name_random]) to find run-time fields."""
    keyed = [[(c[0], c[1], generalise(c[0], *c[2:4]) if len(c) > 2 else escape(c[0]), len(c) > 4 and c[4])
              for c in run] for run in runs]
    known = {(r, c[0]): c[5] for r, run in enumerate(runs) for c in run if len(c) > 5 and c[5] > 0}
    rand = random_parts([[(key, renamed) for _, _, key, renamed in run] for run in keyed])
    keys = {(r, path): with_random(key, known.get((r, path), 0)) if (r, key) in rand or (r, path) in known else key
            for r, run in enumerate(keyed) for path, _, key, _ in run}
    seen: dict[tuple[str, ...], list[tuple[int, tuple[str, ...], int]]] = {}
    splits = {}
    for r, run in enumerate(keyed):
        for path, rank, _, _ in run:
            literals, values = splits[r, path] = split(keys[r, path])
            seen.setdefault(literals, []).append((r, values, rank))
    ranks = [len({c[1] for c in run}) for run in runs]
    return NameModel({lits: _shape(lits, occ, ranks) for lits, occ in seen.items()}, keys, splits)


def _date_field(texts: list[str], occ: list[tuple[int, tuple[str, ...], int]]) -> str:
    """The run-time field a value field is, or "" for a number: "{date:FMT}" when it differs
    between runs and reads as a date every time (a time of digits alone, without a date, only
    when its runs do not step evenly, as a counter would); a stamp that does not vary is written
    as it is."""
    numbers = all(t.isdigit() for t in texts)
    per_run: dict[int, str] = {}
    for (r, _, _), t in zip(occ, texts):
        per_run.setdefault(r, t)
    if len(set(per_run.values())) > 1 and (fmt := date_shape(texts)):
        history = [int(per_run[r]) for r in sorted(per_run)] if numbers else []
        steps = {b - a for a, b in zip(history, history[1:])}
        if "%Y" in fmt or not numbers or len(steps) > 1:  # a stamp with separators is no counter
            return f"{{date:{fmt}}}"
    return "" if numbers else texts[-1]


def _shape(literals: tuple[str, ...], occ: list[tuple[int, tuple[str, ...], int]], ranks: list[int]) -> _Shape:
    files: dict[int, int] = {}
    for r, _, _ in occ:
        files[r] = files.get(r, 0) + 1
    widths: list[int] = []
    offsets: list[int | None] = []
    bases: list[dict[int, int]] = []
    nexts: list[int] = []
    fixed: list[str] = []
    for f in range(len(literals) - 1):
        digits = [d[f] for _, d, _ in occ]
        fixed.append(_date_field(digits, occ))
        if fixed[-1]:
            widths.append(0)
            offsets.append(None)
            bases.append({})
            nexts.append(0)
            continue
        widths.append(width(digits))
        values = [int(s) for s in digits]
        ties = {v - rank for v, (_, _, rank) in zip(values, occ)}
        offsets.append(ties.pop() if len(ties) == 1 else None)
        per_run: dict[int, int] = {}
        for (r, _, _), v in zip(occ, values):
            per_run[r] = min(v, per_run.get(r, v))
        bases.append(per_run)
        counts = all(v == files[r] for (r, _, _), v in zip(occ, values)) or all(
            v == ranks[r] for (r, _, _), v in zip(occ, values)
        )
        history = [per_run[r] for r in sorted(per_run)]
        nexts.append(history[-1] if counts else advance(history))
    return _Shape(Template(literals, tuple(widths), tuple(fixed)), tuple(offsets), tuple(bases), tuple(nexts))


def next_label(labels: Sequence[str]) -> str:
    """The next run's label from the past ones ("3", "4" → "5"; "run-0009" → "run-0010"),
    or "" when they share no template."""
    if not labels:
        return ""
    shapes = {split(lbl)[0] for lbl in labels}
    if len(shapes) != 1:
        return ""
    literals = shapes.pop()
    fields = [split(lbl)[1] for lbl in labels]
    if not all(v.isdigit() for f in fields for v in f):  # a stamp is no counter
        return ""
    template = Template(literals, tuple(width([f[i] for f in fields]) for i in range(len(literals) - 1)))
    return template.render([advance([int(f[i]) for f in fields]) for i in range(len(literals) - 1)])

