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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

_FIELD = re.compile(r"\d+")

Key = tuple[tuple[str, ...], tuple[int, ...]]  # (template literals, rank-tied values and offsets)


def split(path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Literal parts (one more than fields) and the digit strings between them."""
    return tuple(_FIELD.split(path)), tuple(_FIELD.findall(path))


@dataclass(frozen=True)
class Template:
    literals: tuple[str, ...]
    widths: tuple[int, ...]  # zero-padded width of each field, 0 = plain

    def render(self, values: Sequence[int]) -> str:
        parts = [self.literals[0]]
        for lit, width, v in zip(self.literals[1:], self.widths, values):
            parts.append(f"{v:0{width}d}" if width else str(v))
            parts.append(lit)
        return "".join(parts)

    def __str__(self) -> str:
        """printf form, as the docs and IOR write it: `testFile.%08d`."""
        lits = [lit.replace("%", "%%") for lit in self.literals]
        fields = [f"%0{w}d" if w else "%d" for w in self.widths]
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

    def __init__(self, shapes: dict[tuple[str, ...], _Shape]):
        self._shapes = shapes

    @property
    def templates(self) -> list[Template]:
        return [s.template for s in self._shapes.values()]

    def key(self, run: int, path: str) -> Key:
        """The role of `path` (created in run number `run` of the inferred runs)."""
        literals, digits = split(path)
        shape = self._shapes[literals]
        norm = tuple(
            int(s) if c is not None else int(s) - bases[run]
            for s, c, bases in zip(digits, shape.rank_offset, shape.bases)
        )
        return literals, norm

    def next_path(self, key: Key) -> str:
        literals, norm = key
        shape = self._shapes[literals]
        values = [v if c is not None else b + v for v, c, b in zip(norm, shape.rank_offset, shape.next_base)]
        return shape.template.render(values)

    def rank_of(self, key: Key) -> int | None:
        """The rank a rank-tied field names, or None when the name carries no rank."""
        literals, norm = key
        for v, c in zip(norm, self._shapes[literals].rank_offset):
            if c is not None:
                return v - c
        return None


def infer(runs: Sequence[Sequence[tuple[str, int]]]) -> NameModel:
    """Name templates from past runs, each a sequence of (path, rank) in create order."""
    seen: dict[tuple[str, ...], list[tuple[int, tuple[str, ...], int]]] = {}
    for r, run in enumerate(runs):
        for path, rank in run:
            literals, digits = split(path)
            seen.setdefault(literals, []).append((r, digits, rank))
    ranks = [len({rank for _, rank in run}) for run in runs]
    return NameModel({lits: _shape(lits, occ, ranks) for lits, occ in seen.items()})


def _shape(literals: tuple[str, ...], occ: list[tuple[int, tuple[str, ...], int]], ranks: list[int]) -> _Shape:
    files: dict[int, int] = {}
    for r, _, _ in occ:
        files[r] = files.get(r, 0) + 1
    widths, offsets, bases, nexts = [], [], [], []
    for f in range(len(literals) - 1):
        digits = [d[f] for _, d, _ in occ]
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
    return _Shape(Template(literals, tuple(widths)), tuple(offsets), tuple(bases), tuple(nexts))


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
    template = Template(literals, tuple(width([f[i] for f in fields]) for i in range(len(literals) - 1)))
    return template.render([advance([int(f[i]) for f in fields]) for i in range(len(literals) - 1)])

