"""Ordinary programs (tar, rsync, cp, sqlite3, h5py, fio, dd, a mktemp job script, mpiexec of
iez-bench) under plain LD_PRELOAD on an emulated cluster, each run three times as a site runs a
job: traced, then placed twice from the plan `iez trace import` / `iez predict` / `iez allocate`
made of the runs before, with a new SLURM_JOB_ID each time. The goal: every file that exists at
the end of a placed run was placed from the plan, decided from the facts (its layout read back
is its plan entry's, and the trace records its create as a plan hit). Temporaries the run
deletes may miss. The runs are real processes; the verdict is `iez.workload.hitrate`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import BUILD, need_built, need_tool

from iez.layout.layout import Component, FileLayout, Layout
from iez.workload.hitrate import Create, conforms, judge
from iez.plan import Plan
from iez.workload.measure import Site, emulated_cluster, measure, plan_lookup
from iez.workload.programs import PROGRAMS, make_inputs

# The module's fixture runs 27 program runs and 54 iez commands, about 90 s of CPU (most of it the
# commands' imports): some 50 s on 2 idle cores, more on a shared machine than the default 300 s.
pytestmark = pytest.mark.timeout(900)

# Files each program leaves in its job directory, every run.
SURVIVING = {"tar": 7, "rsync": 6, "cp": 6, "sqlite3": 1, "h5py": 1, "fio": 1, "dd": 1, "jobscript": 2,
             "mpiexec": 1}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Every program's three runs, two programs at a time on one emulated cluster."""
    need_built(BUILD / "libiez" / "libiez.so", BUILD / "libiez" / "libiez-mpi.so", BUILD / "bench_app" / "iez-bench")
    iez = Path(sys.executable).with_name("iez")
    if not iez.exists():
        pytest.fail("the iez console script is missing: run `make test` (it installs the package)")
    root = tmp_path_factory.mktemp("real")
    with emulated_cluster(root / "emu", (str(iez),)) as emu:
        site = Site(emu, root / "work", make_inputs(root / "inputs"), (str(iez),))
        return {r.program: r for r in measure(site, list(PROGRAMS.values()))}


def test_the_table_is_the_one_the_goal_names():
    assert set(SURVIVING) == set(PROGRAMS)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_surviving_file_of_a_placed_run_was_placed_from_the_plan(measured, name):
    for tool, hint in PROGRAMS[name].tools:
        need_tool(tool, hint)
    result = measured[name]
    assert not result.error, result.error
    assert [v.surviving for v in result.runs] == [SURVIVING[name]] * 2, result.runs
    assert not result.missed, "\n".join(f"{m.path}: {m.why}" for m in result.missed)
    assert result.placed == result.surviving


# The verdict on its own, on facts made by hand.
A = FileLayout(plain=Layout(stripe_size=1 << 20, osts=(3, 7)))
B = FileLayout(plain=Layout(stripe_size=1 << 20, osts=(7, 3)))


def test_a_layout_conforms_in_what_the_plan_fixes():
    assert conforms(A, A) and not conforms(B, A)
    assert conforms(A, FileLayout(plain=Layout(stripe_count=2)))  # the plan left the OSTs to the MDS
    assert not conforms(A, FileLayout(plain=Layout(stripe_size=4 << 20)))
    pfl = FileLayout(components=(Component(0, 1 << 20, Layout(stripe_size=1 << 20, osts=(3,))),
                                 Component(1 << 20, 0xFFFF_FFFF_FFFF_FFFF, Layout(stripe_size=1 << 20, osts=(3, 7)))))
    assert conforms(pfl, pfl) and not conforms(A, pfl) and not conforms(pfl, A)


def test_the_verdict_takes_facts_not_libiez_s_word():
    plan = Plan()
    for key in ("/fs/a.{job}", "/fs/.b.{rand:6}", "/fs/c"):
        plan.add(key, A)
    creates = [Create("/fs/a.42", "/fs/a.42", 1.0, True, {"job": "42"}),  # the job id its process had
               Create("/fs/.b.Xy12Zq", "/fs/b", 2.0, True),  # renamed into place: planned under its temporary
               Create("/fs/c", "/fs/c", 3.0, True),  # libiez says hit, but its layout is not the plan's
               Create("/fs/d", "/fs/d", 4.0, False),
               Create("/fs/d.journal", "/fs/d.journal", 5.0, False)]  # deleted: a temporary, may miss
    v = judge("x", "42", {"/fs/a.42": A, "/fs/b": A, "/fs/c": B, "/fs/d": A, "/fs/e": A}, creates,
              plan_lookup(plan), (5, 1))
    assert (v.surviving, v.placed, v.temporaries, v.temporaries_missed) == (5, 2, 1, ("/fs/d.journal",))
    why = {m.path: m.why for m in v.missed}
    assert why == {"/fs/c": "layout S=1048576,c=2,o=7:3, planned S=1048576,c=2,o=3:7",
                   "/fs/d": "not in the plan; the trace records its create as a plan miss",
                   "/fs/e": "not in the plan; the trace has no create of it"}
