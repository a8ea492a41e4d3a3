"""iez audit at scale: N generated Darshan logs through Dask (docs/audit.md).

The logs are copies of seed logs under Darshan's log names with varied users, applications, job
ids and dates, so the site view has users and days to sum. The seeds: pydarshan's sample logs
(real jobs: IOR file per process, VPIC's shared HDF5 file, an HDF5 IOR, a STDIO job, MACSio, a
DXT-traced Java job) and as many generated ones (`iez.audit.synthetic`: file-per-process and
shared files of random sizes, stripe counts, stripe sizes and OSTs on a 56-OST file system,
written aligned or not).

Figures, each against a baseline measured in the same run:
- logs per second with 1 and 2 LocalCluster workers (started and warmed before the clock), the
  real task (read in pydarshan's child process, advised, simulated twice); the ratio 2 workers / 1
  is the scaling (2 cores: <= 2; the load average is printed, as other work on the cores skews it);
- the client's peak memory over its baseline for 1,000 and for 10,000 logs, the ratio is how it
  grows in N (flat: near 1). The workers answer these from the seed logs' real answers, computed
  once in this run and renamed per log: reading 10,000 logs takes most of an hour on 2 cores, and
  what the client holds depends only on the answers it gets, not on how they were computed.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SAMPLES = ("sample.darshan", "sample-goodost.darshan", "ior_hdf5_example.darshan", "noposix.darshan",
           "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan", "dxt.darshan")
N_OSTS = 56
USERS, APPS = 40, ("vpic", "ior", "hacc", "macsio", "wrf", "lammps", "nek5000", "e3sm")
THROUGHPUT_LOGS = 24
MEMORY_LOGS = (1_000, 10_000)
_ANSWERS: dict[int, dict[str, Any]] = {}  # per worker process: seed -> the real answer of its first copy


def sample_path(name: str) -> Path:
    from darshan.log_utils import get_log_path  # type: ignore[import-untyped]  # ships no type hints

    return Path(get_log_path(name))


def synthetic_job(d: Path, k: int) -> Path:
    """A generated job: random files, sizes and layouts (seeded by k)."""
    from iez.audit.synthetic import SynthFile, write_log

    rng = random.Random(k)
    files = []
    for i in range(rng.randint(1, 16)):
        count = rng.choice((1, 1, 2, 4, 8, 16))
        first = rng.randrange(N_OSTS)
        files.append(SynthFile(
            f"/lustre/job{k}/f{i}", rng.choice((64 << 10, 4 << 20, 256 << 20, 4 << 30)),
            stripe_size=rng.choice((1 << 20, 4 << 20)), osts=tuple((first + s) % N_OSTS for s in range(count)),
            rank=i, shared=rng.random() < 0.3, transfer=rng.choice((64 << 10, 1 << 20, 3 << 20)),
            aligned=rng.random() < 0.7))
    return write_log(d / f"synthetic{k}.darshan", files, jobid=k, nprocs=rng.choice((16, 64, 256)))


def seeds(d: Path) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    return [sample_path(n) for n in SAMPLES] + [synthetic_job(d, k) for k in range(len(SAMPLES))]


def log_name(k: int) -> str:
    """Darshan's log name: <user>_<exe>_id<jobid>_<month>-<day>-<seconds>-<hash>_<n>.darshan."""
    month, day = 1 + k % 12, 1 + (k * 7) % 28
    tag = k * 2654435761 % 2**32
    return f"u{k % USERS:02d}_{APPS[k % len(APPS)]}_id{100000 + k}_{month}-{day}-{k % 86400}-{tag:x}_1"


def make_logs(d: Path, n: int, seed_logs: list[Path]) -> list[Path]:
    """`n` copies of the seed logs, round robin, each under its own name (suffix: its seed)."""
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        s = k % len(seed_logs)
        p = d / f"{log_name(k)}.{s}.darshan"
        shutil.copyfile(seed_logs[s], p)
        out.append(p)
    return out


def answered(path: str, cluster_toml: str = "", simulate: bool = True) -> dict[str, Any]:
    """The real answer of the first copy of the log's seed this worker saw, renamed as the log
    (the memory runs' task)."""
    from iez.audit.advice import user_and_app
    from iez.audit.execute import task

    seed = int(path.rsplit(".", 2)[-2])
    if seed not in _ANSWERS:
        _ANSWERS[seed] = task(path, cluster_toml, simulate)
    a = _ANSWERS[seed]
    if not a["ok"]:
        return {**a, "path": path}
    user, app = user_and_app(path, "")
    job = {**a["job"], "log": path, "user": user, "app": app}
    return {**a, "job": job, "findings": [{**f, "log": path, "user": user, "app": app} for f in a["findings"]]}


class PeakRss:
    """The client process's peak resident memory above its level at start, sampled every 20 ms."""

    def __init__(self) -> None:
        import psutil  # type: ignore[import-untyped]  # comes with distributed

        self.proc = psutil.Process()
        self.base = self.peak = self.proc.memory_info().rss
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> "PeakRss":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    @property
    def grown(self) -> int:
        return self.peak - self.base


def main() -> None:
    from distributed import LocalCluster

    from iez.audit.execute import audit

    with tempfile.TemporaryDirectory(prefix="iez-bench-audit-") as tmp:
        root = Path(tmp)
        seed_logs = seeds(root / "seeds")
        logs = [str(p) for p in make_logs(root / "logs", THROUGHPUT_LOGS, seed_logs)]
        rates = {}
        for workers in (1, 2):
            # The cluster is started and warmed (imports in each worker) outside the timed run.
            with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0",
                              silence_logs=40) as cluster:
                address = cluster.scheduler_address
                audit(logs[:2 * workers], root / f"warm{workers}", scheduler=address)
                t0 = time.perf_counter()
                site = audit(logs, root / f"out{workers}", scheduler=address)
                dt = time.perf_counter() - t0
            assert site.jobs + sum(site.failures.values()) == len(logs)
            rates[workers] = len(logs) / dt
            print(f"{len(logs)} logs, {workers} worker{'s' * (workers > 1)}: {dt:.1f} s, {rates[workers]:.2f} logs/s",
                  flush=True)
        print(f"throughput 2 workers / 1 worker: {rates[2] / rates[1]:.2f} (2 cores: at most 2; load average "
              f"{os.getloadavg()[0]:.1f} while it ran)", flush=True)
        grown = {}
        for n in MEMORY_LOGS:
            paths = [str(p) for p in make_logs(root / f"mem{n}", n, seed_logs)]
            # Started before the sampler, so its threads and imports are in the baseline too.
            with PeakRss() as rss:
                site = audit(iter(paths), root / f"memout{n}", workers=2, fn=answered)
            assert site.jobs + sum(site.failures.values()) == n, site.jobs
            grown[n] = rss.grown
            print(f"{n} logs: client peak memory +{rss.grown / 2**20:.1f} MiB over its {rss.base / 2**20:.0f} MiB "
                  f"(users {len(site.users)}, days {len(site.days)})", flush=True)
            shutil.rmtree(root / f"mem{n}")
        a, b = MEMORY_LOGS
        print(f"client peak growth {b:,} / {a:,} logs: {grown[b] / max(grown[a], 1):.2f} (flat: near 1)")
