"""Whether a placed run's files were placed from its plan, decided from the facts (pure).

A file that exists at the end of the run (a *surviving* file) was placed from the plan when
all three hold:

- the plan has an entry for the name the run created it under (a temporary renamed into place
  is planned under its temporary's name), filled in with the creating process's fields;
- the layout it carries equals that entry's in everything the entry fixes (per component:
  extent, stripe size, stripe count, OSTs in stripe order, pool);
- the run's trace records its create as a plan hit (libiez's own verdict, record by record).

Files the run created and deleted (temporaries: a journal, a scratch file) may miss: they are
counted apart. The run's facts come from `iez.workload.measure`; nothing here reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from iez.layout.layout import FileLayout, Layout
from iez.plan import format_layout


@dataclass(frozen=True)
class Create:
    """One create the run's trace records: the name it was created under, the name it ends
    under (the same unless the trace records a rename), when, libiez's plan verdict, and the
    run-time fields the creating process knew (job, array, host, rank: `iez.fields.KNOWN`)."""

    path: str
    final_path: str
    time: float
    plan_hit: bool | None  # True hit, False miss, None: no plan loaded
    fields: Mapping[str, str] = field(default_factory=dict)


# The plan's layout for a created name, in a process that knew these fields (None: no entry).
Lookup = Callable[[str, Mapping[str, str]], "FileLayout | None"]


@dataclass(frozen=True)
class Missed:
    path: str
    why: str


@dataclass(frozen=True)
class RunVerdict:
    """One placed run of one program."""

    program: str
    job: str
    surviving: int
    placed: int
    missed: tuple[Missed, ...]
    temporaries: int
    temporaries_missed: tuple[str, ...]
    libiez_hits: int  # libiez's own counters over the run's processes, for comparison
    libiez_misses: int


@dataclass
class ProgramResult:
    """A program's placed runs, and the first error of its loop: a failed run stops it; failed
    commands between runs leave the next run without a plan."""

    program: str
    runs: list[RunVerdict] = field(default_factory=list)
    error: str = ""

    @property
    def surviving(self) -> int:
        return sum(r.surviving for r in self.runs)

    @property
    def placed(self) -> int:
        return sum(r.placed for r in self.runs)

    @property
    def missed(self) -> list[Missed]:
        return [m for r in self.runs for m in r.missed]

    @property
    def temporaries(self) -> int:
        return sum(r.temporaries for r in self.runs)

    @property
    def temporaries_missed(self) -> list[str]:
        return [t for r in self.runs for t in r.temporaries_missed]

    @property
    def goal_met(self) -> bool:
        return not self.error and bool(self.runs) and self.placed == self.surviving


def _fixed(planned: Layout, got: Layout) -> list[str]:
    """The fields the planned layout fixes that `got` does not have."""
    diff = []
    if planned.stripe_size and planned.stripe_size != got.stripe_size:
        diff.append("stripe size")
    if planned.stripe_count > 0 and planned.stripe_count != got.stripe_count:
        diff.append("stripe count")
    if planned.osts and planned.osts != got.osts:
        diff.append("OSTs")
    if planned.stripe_offset != -1 and planned.stripe_offset != (got.osts[0] if got.osts else got.stripe_offset):
        diff.append("first OST")
    if planned.pool and planned.pool != got.pool:
        diff.append("pool")
    return diff


def conforms(got: FileLayout, planned: FileLayout) -> bool:
    """`got` is the planned layout: the same components, each with what the plan fixes."""
    pp, gp = planned.parts(), got.parts()
    return len(pp) == len(gp) and all((p.start, p.end) == (g.start, g.end) and not _fixed(p.layout, g.layout)
                                      for p, g in zip(pp, gp))


def last_creates(creates: Iterable[Create]) -> dict[str, Create]:
    """The last create of each final name (a name made again after its first file was deleted
    names the second)."""
    out: dict[str, Create] = {}
    for c in sorted(creates, key=lambda c: c.time):
        out[c.final_path] = c
    return out


def _why(path: str, layout: FileLayout | None, entry: FileLayout | None, create: Create | None) -> str:
    reasons = []
    if entry is None:
        reasons.append("not in the plan")
    elif layout is None:
        reasons.append("has no layout")
    elif not conforms(layout, entry):
        reasons.append(f"layout {format_layout(layout)}, planned {format_layout(entry)}")
    if create is None:
        reasons.append("the trace has no create of it")
    elif create.plan_hit is False:
        reasons.append("the trace records its create as a plan miss")
    elif create.plan_hit is None:
        reasons.append("its create ran without a plan")
    return "; ".join(reasons)


def judge(program: str, job: str, surviving: Mapping[str, FileLayout | None], creates: Sequence[Create],
          plan: Lookup, libiez: tuple[int, int] = (0, 0)) -> RunVerdict:
    """The verdict on one placed run: `surviving` maps each regular file left in the job
    directory to the layout it carries (None: none), `creates` are the trace's creates there,
    `plan` looks a created name up in the run's plan, `libiez` is libiez's (hits, misses)."""
    by_final = last_creates(creates)
    missed: list[Missed] = []
    for path in sorted(surviving):
        create = by_final.get(path)
        entry = plan(create.path, create.fields) if create else plan(path, {})
        why = _why(path, surviving[path], entry, create)
        if why:
            missed.append(Missed(path, why))
    temporaries = sorted({c.path for c in creates if c.final_path not in surviving})
    temp_missed = tuple(p for p in temporaries if any(c.path == p and c.plan_hit is not True for c in creates))
    return RunVerdict(program, job, len(surviving), len(surviving) - len(missed), tuple(missed), len(temporaries),
                      temp_missed, *libiez)


def rate(placed: int, surviving: int) -> str:
    return f"{placed / surviving:.1%}" if surviving else "-"


def summary(results: Sequence[ProgramResult]) -> tuple[int, int]:
    """(placed, surviving) over every placed run measured."""
    return sum(r.placed for r in results), sum(r.surviving for r in results)
