"""Ordinary programs a site runs under libiez, as a table: how each runs in a job directory and
what it needs. Each writes its files the way real jobs do: under names it chooses at run time
(a job id, `mkstemp`'s six random characters, rsync's `.NAME.XXXXXX` temporaries renamed into
place, sqlite's journal), through a shell redirect another program writes into, from forked
helpers and from MPI ranks under `mpiexec`. `iez.workload.measure` runs them traced and placed.

A program's steps run one after the other in its job directory (the current directory), with
`SLURM_JOB_ID` set to the job's id. In a step, `{inputs}` is the directory `make_inputs` filled,
`{python}` the Python that runs iez (with h5py) and `{bench}` the built iez-bench. The programs
and their arguments are plain data: nothing here runs them.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

APT = "apt-get install"


@dataclass(frozen=True)
class Program:
    name: str  # also the application name the trace is imported under
    what: str  # one line: what the program does with files
    steps: tuple[tuple[str, ...], ...]  # argv templates, run in order in the job directory
    tools: tuple[tuple[str, str], ...] = ()  # (program on PATH, how to install it)
    modules: tuple[tuple[str, str], ...] = ()  # (Python module {python} imports, how to install it)

    def argv(self, step: tuple[str, ...], inputs: Path, python: str, bench: str) -> list[str]:
        fields = {"{inputs}": str(inputs), "{python}": python, "{bench}": bench}
        out = []
        for arg in step:
            for key, value in fields.items():
                arg = arg.replace(key, value)
            out.append(arg)
        return out

    @property
    def uses_bench(self) -> bool:
        return any("{bench}" in arg for step in self.steps for arg in step)


# One transaction of 64 rows of 4 KiB: sqlite writes its rollback journal (results.db-journal)
# and deletes it at each commit.
SQLITE_SCRIPT = """PRAGMA journal_mode=DELETE;
CREATE TABLE samples(k INTEGER PRIMARY KEY, v BLOB);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64)
INSERT INTO samples(v) SELECT randomblob(4096) FROM n;
COMMIT;"""

H5PY_SCRIPT = """import h5py, numpy
with h5py.File("fields.h5", "w") as f:
    f.create_dataset("density", data=numpy.arange(1 << 16, dtype="f8"))
    f.attrs["step"] = 1"""

# A batch job script: a scratch file from mktemp that it deletes, a result under mktemp's random
# name that it keeps, and the job's output through a redirect that another program writes.
JOB_SCRIPT = """set -e
scratch=$(mktemp -p . scratch.XXXXXX)
head -c 200000 /dev/urandom > "$scratch"
result=$(mktemp -p . result.XXXXXX)
sort "$scratch" > "$result"
head -c 300000 /dev/zero > out.$SLURM_JOB_ID
rm -f "$scratch"
"""

PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("tar", "extracts an archive (a tree of directories and files), then archives the tree",
            (("tar", "-xf", "{inputs}/tree.tar"), ("tar", "-cf", "tree.tar", "tree")),
            tools=(("tar", f"{APT} tar"),)),
    Program("rsync", "copies a tree: each file written as .NAME.XXXXXX, then renamed",
            (("rsync", "-a", "{inputs}/tree/", "tree/"),), tools=(("rsync", f"{APT} rsync"),)),
    Program("cp", "copies a tree (cp -r)", (("cp", "-r", "{inputs}/tree", "tree"),),
            tools=(("cp", f"{APT} coreutils"),)),
    Program("sqlite3", "a database written in one transaction, with its rollback journal",
            (("sqlite3", "results.db", SQLITE_SCRIPT),), tools=(("sqlite3", f"{APT} sqlite3"),)),
    Program("h5py", "a Python script writing an HDF5 file through h5py's own HDF5",
            (("{python}", "-c", H5PY_SCRIPT),), modules=(("h5py", "pip install h5py (the venv's test extra)"),)),
    Program("fio", "a sequential write job (its file is created by fio, written by its job process)",
            (("fio", "--name=seqwrite", "--rw=write", "--bs=64k", "--size=1m", "--ioengine=psync",
              "--directory=.", "--output=/dev/null"),), tools=(("fio", f"{APT} fio"),)),
    Program("dd", "one file from /dev/zero", (("dd", "if=/dev/zero", "of=zeros.bin", "bs=64k", "count=16",
                                               "status=none"),), tools=(("dd", f"{APT} coreutils"),)),
    Program("jobscript", "a batch script: mktemp files (one deleted), output to out.$SLURM_JOB_ID by a redirect",
            (("bash", "-c", JOB_SCRIPT),), tools=(("bash", f"{APT} bash"), ("mktemp", f"{APT} coreutils"))),
    Program("mpiexec", "mpiexec -n 2 of iez-bench's IOR-like shared file through collective MPI-IO",
            (("mpiexec", "-n", "2", "{bench}", "-a", "MPIIO", "-c", "-b", "512k", "-t", "128k", "-w", "-k",
              "-o", "testFile"),), tools=(("mpiexec", f"{APT} mpich"),)),
)}

# The input tree: sizes differ, one name carries a date (a fixed one: it is the same every run).
TREE = {"README": 1200, "data/part-001.bin": 65536, "data/part-002.bin": 300000, "data/part-003.bin": 1 << 20,
        "data/index.json": 0, "logs/2026-11-23.log": 5000}


def make_inputs(directory: Path) -> Path:
    """Fill `directory` with the programs' inputs: `tree/` and the same tree as `tree.tar`."""
    tree = directory / "tree"
    for rel, size in TREE.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(sorted(TREE)).encode() if rel.endswith(".json") else bytes(i % 251 for i in range(size))
        path.write_bytes(data)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(tree, arcname="tree")
    (directory / "tree.tar").write_bytes(buf.getvalue())
    return directory
