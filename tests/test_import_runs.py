"""One run, many programs: libiez shards of real processes under plain LD_PRELOAD (mpiexec and
the program it starts, a job script and its commands) imported as one run of the launched
program (iez.pipeline.load_trace); truly different runs still refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import BUILD, need_built, need_tool

from iez.db import Database
from iez.pipeline import LAUNCHERS, launched_program, load_trace
from iez.trace.ingest import TraceError

LIB = BUILD / "libiez" / "libiez.so"
BENCH = BUILD / "bench_app" / "iez-bench"

# A job script as a batch system runs one: its output file opened by the shell, a program between.
JOB = """\
echo "job start" > "$1/job.out"
"$2" -n 2 -F -w -k -b 64k -t 16k -o "$1/testFile" >> "$1/job.out"
echo "job done" >> "$1/job.out"
"""


def preloaded(subenv: dict, traces: Path, **extra: str) -> dict[str, str]:
    """The environment of a plain LD_PRELOAD run, as docs/libiez.md shows it: no IEZ_APP, no IEZ_RUN."""
    need_built(LIB, BENCH)
    traces.mkdir(exist_ok=True)
    env = {k: v for k, v in subenv.items() if k not in ("IEZ_APP", "IEZ_RUN", "SLURM_JOB_ID", "IEZ_PLAN")}
    return {**env, "IEZ_TRACE_DIR": str(traces), "LD_PRELOAD": str(LIB), **extra}


def job_script(subenv: dict, tmp_path: Path, **extra: str) -> Path:
    script = tmp_path / "job.sh"
    script.write_text(JOB)
    traces = tmp_path / "traces"
    subprocess.run(["bash", str(script), str(tmp_path), str(BENCH)], env=preloaded(subenv, traces, **extra),
                   check=True, capture_output=True, timeout=60)
    return traces


def test_mpiexec_and_its_ranks_are_one_run_of_the_program(subenv, tmp_path):
    mpiexec = need_tool("mpiexec", "apt-get install mpich")
    traces = tmp_path / "traces"
    with open(tmp_path / "job.out", "wb") as out:  # the job's output, as a batch system keeps it: mpiexec writes it
        subprocess.run([mpiexec, "-n", "2", str(BENCH), "-F", "-w", "-k", "-b", "64k", "-t", "16k", "-o",
                        str(tmp_path / "testFile")], env=preloaded(subenv, traces, IEZ_RUN="job7"),
                       check=True, stdout=out, stderr=subprocess.STDOUT, timeout=60)
    t = load_trace(traces)
    assert t.app == "iez-bench" and t.label == "job7" and t.source == "libiez"
    assert t.meta["programs"]["iez-bench"] == 2 and t.meta["programs"]["mpiexec"] == 1
    assert t.nprocs == sum(t.meta["programs"].values())
    # (in create order, which the ranks race for; MPICH's /dev/shm segments are not the job's files)
    assert sorted((q.path, q.write_bytes, q.app) for q in t.ingested.requests) == [
        (str(tmp_path / f"testFile.{r:08d}"), 64 << 10, "iez-bench") for r in range(2)]
    [note] = t.notes
    assert note.startswith("run job7: merged the processes of") and "into one run of iez-bench" in note
    assert "mpiexec (1 process, " in note and "launcher" in note
    assert load_trace(traces, "ior").app == "ior"  # --app names it


def test_a_job_script_is_one_run_named_after_the_program_it_runs(subenv, tmp_path, iez_cmd):
    traces = job_script(subenv, tmp_path)
    t = load_trace(traces)
    assert t.app == "iez-bench" and set(t.meta["programs"]) == {"bash", "iez-bench"}
    made = {q.path: q for q in t.ingested.requests}
    assert set(made) == {str(tmp_path / "job.out"), *(str(tmp_path / f"testFile.{r:08d}") for r in range(2))}
    # the shell created the job's output, both programs wrote it: every byte on disk is counted
    assert made[str(tmp_path / "job.out")].write_bytes == (tmp_path / "job.out").stat().st_size > 20
    # the run id libiez made (the first process's pid) is every process's: no IEZ_RUN needed
    assert t.label.isdigit()
    # imported without --app, stored as the program with the note said
    url = f"sqlite:///{tmp_path / 'iez.db'}"
    p = subprocess.run([*iez_cmd, "trace", "import", str(traces), "--db", url], capture_output=True, text=True,
                       env=subenv, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "iez-bench: imported" in p.stdout and "merged the processes of 2 programs" in p.stdout
    with Database(url) as db, db.begin() as tx:
        [info] = tx.runs("iez-bench")
        assert (info.n_traced, info.label, info.meta["notes"]) == (3, t.label, t.notes)


def test_iez_app_names_the_run_and_its_children(subenv, tmp_path):
    t = load_trace(job_script(subenv, tmp_path, IEZ_APP="nightly"))
    assert t.app == "nightly" and {q.app for q in t.ingested.requests} == {"nightly"}


def test_truly_different_runs_are_still_refused(subenv, tmp_path):
    traces = job_script(subenv, tmp_path)
    job_script(subenv, tmp_path)  # the same job again: another run id, into the same directory
    with pytest.raises(TraceError, match=r"holds shards of 2 runs \(\d+ \(bash, iez-bench\), \d+ \(bash, "
                                         r"iez-bench\)\): give each run's shards as their own directory"):
        load_trace(traces)


def test_a_run_that_created_and_read_nothing_says_what_it_found(subenv, tmp_path):
    log = tmp_path / "existing.log"
    log.write_text("before\n")
    traces = tmp_path / "traces"
    subprocess.run(["bash", "-c", f"echo more >> {log}; : > /dev/null"], env=preloaded(subenv, traces),
                   check=True, timeout=60)
    with pytest.raises(TraceError) as e:
        load_trace(traces)
    assert str(e.value) == (f"{traces}: nothing to import: the run created no file and read none "
                            "(1 files only written in place, 0 only opened)")


READER = """
import sys
with open(sys.argv[1], "rb") as f:
    while f.read(1 << 20):
        pass
"""


def test_a_run_that_only_read_imports_its_reads(subenv, tmp_path, iez_cmd):
    """A real process reading a file on the (emulated) Lustre under plain LD_PRELOAD: no file
    created, its read is imported and stored, and the import says there is nothing to place."""
    emu, traces, url = tmp_path / "emu", tmp_path / "traces", f"sqlite:///{tmp_path / 'iez.db'}"
    subprocess.run([*iez_cmd, "emulate", "init", str(emu)], check=True, env=subenv, capture_output=True)
    subprocess.run([*iez_cmd, "emulate", "up", str(emu)], check=True, env=subenv, capture_output=True)
    try:
        data = emu / "fs" / "input.dat"
        data.write_bytes(os.urandom(3 << 20))
        subprocess.run(["python3", "-c", READER, str(data)], check=True, timeout=60,
                       env=preloaded(subenv, traces, IEZ_EMULATED=str(emu), IEZ_RUN="train1"))
    finally:
        subprocess.run([*iez_cmd, "emulate", "down", str(emu)], env=subenv, capture_output=True)
    t = load_trace(traces, "dlio")
    assert t.ingested.requests == []
    assert [(q.path, q.read_bytes, q.read_size, q.write_bytes) for q in t.ingested.reads] == [
        (str(data), 3 << 20, 1 << 20, 0)]
    p = subprocess.run([*iez_cmd, "trace", "import", str(traces), "--app", "dlio", "--db", url], capture_output=True,
                       text=True, env=subenv, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "run 1: read 1 files and created none: no layout to choose, no plan to make" in p.stdout
    with Database(url) as db, db.begin() as tx:
        assert [(q.path, q.read_bytes) for q in tx.run_reads("dlio", 1)] == [(str(data), 3 << 20)]
        assert tx.traced_runs("dlio") == []


@pytest.mark.parametrize("programs, written, want", [
    ({"mpiexec": 1, "hydra_pmi_proxy": 1, "ior": 4}, {"mpiexec": 536, "ior": 1 << 30}, "ior"),
    ({"srun": 1, "bash": 2, "python3": 1}, {"bash": 10}, "python3"),  # not a launcher, though it wrote nothing
    ({"sh": 1, "hacc": 2, "h5dump": 1}, {"hacc": 100, "h5dump": 1000}, "h5dump"),  # the most bytes
    ({"a": 1, "b": 3}, {}, "b"),  # then the most processes
    ({"b": 1, "a": 1}, {}, "a"),  # then the name, for the same answer every time
    ({"bash": 1, "timeout": 1}, {"bash": 7}, "bash"),  # launchers only: the one that wrote
])
def test_the_launched_program_names_the_run(programs, written, want):
    assert launched_program(written, programs) == want


def test_the_launchers_are_the_documented_ones():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "trace-format.md").read_text()
    missing = sorted(name for name in LAUNCHERS if f"`{name}`" not in doc)
    assert missing == [], f"docs/trace-format.md does not list {missing}"
    assert {"mpiexec", "mpirun", "hydra_pmi_proxy", "srun", "orted", "prted", "sh", "bash", "dash", "env", "time",
            "timeout", "nohup"} <= LAUNCHERS
    assert os.path.basename(str(BENCH)) not in LAUNCHERS
