"""`iez-bench` command lines for IOR-like and HACC-IO-like jobs (docs/iez-bench.md).

The program is C (bench_app/, built into build/bench_app/iez-bench); it is found through
$IEZ_BENCH, then this checkout's build directory, then PATH. `IorJob` and `HaccJob` describe a
job, give its command line and the files it writes with their sizes; `run` runs it and returns
the JSON report. A job through MPI-IO or HDF5 (`api=`) runs under `mpiexec -n RANKS`, whose
ranks are the job's; a POSIX job forks its own. The binary checks the options; its one-line
error comes back as a BenchError.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from iez.artifacts import find_built
from iez.errors import ConfigError, IezError
from iez.units import parse_size

ENV = "IEZ_BENCH"
BUILD_HINT = "build it with `cmake -S . -B build && cmake --build build`"
HACC_RECORD = 38  # bytes a particle: xx yy zz vx vy vz phi (float32), pid (int64), mask (uint16)
HACC_HEADER = 25165824  # HACC-IO's FILE_HEADER_SIZE_MAX, at the start of every file
APIS = ("POSIX", "MPIIO", "HDF5")  # -a; MPIIO and HDF5 run under mpiexec


class BenchError(IezError):
    """iez-bench is missing, or a run of it failed."""


def bench_path() -> str:
    return find_built("the workload program", ENV, "bench_app/iez-bench", error=BenchError, hint=BUILD_HINT)


def _ranks(ranks: int) -> int:
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= 65536:
        raise ConfigError(f"ranks: expected 1 to 65536, got {ranks!r}")
    return ranks


def _api(api: str, collective: bool = False) -> list[str]:
    name = api.upper() if isinstance(api, str) else api
    if name not in APIS:
        raise ConfigError(f"api: one of {', '.join(APIS)}, got {api!r}")
    if collective and name == "POSIX":
        raise ConfigError("collective: collective I/O needs api MPIIO or HDF5")
    return ["-a", name] + ["-c"] * collective


def _phases(write: bool, read: bool, verify: bool) -> list[str]:
    if not (write or read):
        raise ConfigError("a job writes, reads, or both")
    if verify and not read:
        raise ConfigError("verify checks what is read: the job must read")
    return ["-w"] * write + ["-r"] * read + ["--verify"] * verify


@dataclass(frozen=True)
class IorJob:
    """IOR -a API [-F] [-c] -b BLOCK -t TRANSFER -s SEGMENTS -o TEST_FILE, on `ranks` processes.
    Unlike IOR, the files are kept by default (keep=False removes them at the end)."""

    test_file: str
    ranks: int = 1
    block: int | str = "1M"
    transfer: int | str = "256K"
    segments: int = 1
    fpp: bool = False
    write: bool = True
    read: bool = True
    verify: bool = False
    keep: bool = True
    fsync: bool = False
    signature: int = 0
    api: str = "POSIX"  # POSIX, MPIIO or HDF5 (IOR's -a)
    collective: bool = False  # IOR's -c: collective data calls (MPIIO, HDF5)

    def args(self) -> list[str]:
        block, transfer = parse_size(self.block, "block"), parse_size(self.transfer, "transfer")
        if isinstance(self.segments, bool) or not isinstance(self.segments, int) or self.segments < 1:
            raise ConfigError(f"segments: expected a positive count, got {self.segments!r}")
        out = ["--workload", "ior", *_api(self.api, self.collective), "-n", str(_ranks(self.ranks)), "-b", str(block),
               "-t", str(transfer), "-s", str(self.segments), "-o", str(self.test_file)]
        out += ["-F"] * self.fpp + _phases(self.write, self.read, self.verify)
        out += ["-k"] * self.keep + ["-e"] * self.fsync
        return out + (["-G", str(self.signature)] if self.signature else [])

    def files(self) -> dict[str, int]:
        """Each file the job writes (rank order) and the bytes the job puts in it (an HDF5 file
        is larger by HDF5's metadata)."""
        per_rank = parse_size(self.block, "block") * self.segments
        if self.fpp:
            return {f"{self.test_file}.{r:08d}": per_rank for r in range(_ranks(self.ranks))}
        return {str(self.test_file): per_rank * _ranks(self.ranks)}


@dataclass(frozen=True)
class HaccJob:
    """HACC-IO on `ranks` processes: `particles` for every rank, or one count per rank; files
    PATH-Part%08d-of-%08d.data, each a `header` then 38 bytes a particle. Through MPI-IO, a
    file per process is opened on MPI_COMM_SELF, as HACC-IO does."""

    path: str
    particles: int | Sequence[int]
    ranks: int = 1
    fpp: bool = False
    header: int | str = HACC_HEADER
    write: bool = True
    read: bool = True
    verify: bool = False
    fsync: bool = False
    api: str = "POSIX"  # POSIX, MPIIO or HDF5

    def counts(self) -> list[int]:
        n = _ranks(self.ranks)
        counts = [self.particles] * n if isinstance(self.particles, int) else list(self.particles)
        if len(counts) != n:
            raise ConfigError(f"particles: {len(counts)} counts for {n} ranks")
        for c in counts:
            if isinstance(c, bool) or not isinstance(c, int) or c < 0:
                raise ConfigError(f"particles: expected counts >= 0, got {c!r}")
        return counts

    def args(self) -> list[str]:
        counts = self.counts()
        spec = str(counts[0]) if len(set(counts)) == 1 else ",".join(map(str, counts))
        out = ["--workload", "hacc-io", *_api(self.api), "-n", str(len(counts)), "-p", spec,
               "--header-size", str(parse_size(self.header, "header")), "-o", str(self.path)]
        return out + ["-F"] * self.fpp + _phases(self.write, self.read, self.verify) + ["-e"] * self.fsync

    def files(self) -> dict[str, int]:
        """Each file the job writes (rank order) and the bytes the job puts in it."""
        counts, header = self.counts(), parse_size(self.header, "header")
        if self.fpp:
            n = len(counts)
            return {f"{self.path}-Part{r:08d}-of-{n:08d}.data": header + c * HACC_RECORD for r, c in enumerate(counts)}
        return {f"{self.path}-Part{0:08d}-of-{1:08d}.data": header + sum(counts) * HACC_RECORD}


def uses_mpi(job: IorJob | HaccJob) -> bool:
    """The job's ranks are MPI's (api MPIIO or HDF5)."""
    return job.api.upper() != "POSIX"


def command(job: IorJob | HaccJob, json_report: bool = True) -> list[str]:
    """The iez-bench command line of `job` (with --json unless asked not to); `mpiexec -n
    RANKS` before it when the job goes through MPI-IO or HDF5."""
    args = [bench_path(), *job.args(), *(["--json"] if json_report else [])]
    if not uses_mpi(job):
        return args
    mpiexec = shutil.which("mpiexec")
    if not mpiexec:
        raise BenchError(f"api {job.api} runs under mpiexec, which is not installed (apt-get install mpich)")
    return [mpiexec, "-n", str(job.ranks), *args]


def run(job: IorJob | HaccJob, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
        timeout: float | None = None) -> dict[str, Any]:
    """Run `job` and return its JSON report; a failed run raises its one-line error."""
    cmd = command(job)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=None if env is None else dict(env),
                              cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"iez-bench ran longer than {timeout:g} s: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("iez-bench: error: ")]
        why = lines[-1].removeprefix("iez-bench: error: ") if lines else f"exited with status {proc.returncode}"
        raise BenchError(f"iez-bench: {why}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise BenchError(f"iez-bench printed no JSON report: {proc.stdout[-200:]!r}") from None
