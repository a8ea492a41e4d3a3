"""iez audit at scale: N generated Darshan logs through Dask (docs/audit.md).

The logs are copies of pydarshan's sample logs (real jobs: IOR file per process, VPIC's shared
HDF5 file, an HDF5 IOR, a STDIO job, MACSio, a DXT-traced Java job) under Darshan's log names
with varied users, applications, job ids and dates, so the site view has users and days to sum.

Figures, each against a baseline measured in the same run:
- logs per second with 1 and 2 LocalCluster workers, the real task (read in pydarshan's child
  process, advised, simulated twice); the ratio 2 workers / 1 is the scaling (2 cores: <= 2);
- the client's peak memory over its baseline for 1,000 and for 10,000 logs, the ratio is how it
  grows in N (flat: near 1). The workers answer these from the seed logs' real answers, computed
  once in this run and renamed per log: reading 10,000 logs takes most of an hour on 2 cores, and
  what the client holds depends only on the answers it gets, not on how they were computed.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SEEDS = ("sample.darshan", "sample-goodost.darshan", "ior_hdf5_example.darshan", "noposix.darshan",
         "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan", "dxt.darshan")
USERS, APPS = 40, ("vpic", "ior", "hacc", "macsio", "wrf", "lammps", "nek5000", "e3sm")
THROUGHPUT_LOGS = 24
MEMORY_LOGS = (1_000, 10_000)
_ANSWERS: dict[str, dict[str, Any]] = {}  # per worker process: seed name -> its real answer


def seed_path(name: str) -> Path:
    from darshan.log_utils import get_log_path  # type: ignore[import-untyped]  # ships no type hints

    return Path(get_log_path(name))


def log_name(k: int) -> str:
    """Darshan's log name: <user>_<exe>_id<jobid>_<month>-<day>-<seconds>-<hash>_<n>.darshan."""
    month, day = 1 + k % 12, 1 + (k * 7) % 28
    tag = k * 2654435761 % 2**32
    return f"u{k % USERS:02d}_{APPS[k % len(APPS)]}_id{100000 + k}_{month}-{day}-{k % 86400}-{tag:x}_1"


def make_logs(d: Path, n: int) -> list[Path]:
    """`n` copies of the seed logs, round robin, each under its own name (suffix: its seed)."""
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        seed = SEEDS[k % len(SEEDS)]
        p = d / f"{log_name(k)}.{SEEDS.index(seed)}.darshan"
        shutil.copyfile(seed_path(seed), p)
        out.append(p)
    return out


def answered(path: str, cluster_toml: str = "", simulate: bool = True) -> dict[str, Any]:
    """The real answer of the log's seed, renamed as the log (the memory runs' task)."""
    from iez.audit.execute import task
    from iez.audit.advice import user_and_app

    seed = SEEDS[int(path.rsplit(".", 2)[-2])]
    if seed not in _ANSWERS:
        _ANSWERS[seed] = task(str(seed_path(seed)), cluster_toml, simulate)
    a = _ANSWERS[seed]
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
    from iez.audit.execute import audit

    with tempfile.TemporaryDirectory(prefix="iez-bench-audit-") as tmp:
        root = Path(tmp)
        logs = [str(p) for p in make_logs(root / "logs", THROUGHPUT_LOGS)]
        rates = {}
        for workers in (1, 2):
            t0 = time.perf_counter()
            site = audit(logs, root / f"out{workers}", workers=workers)
            dt = time.perf_counter() - t0
            assert site.jobs + sum(site.failures.values()) == len(logs)
            rates[workers] = len(logs) / dt
            print(f"{len(logs)} logs, {workers} worker{'s' * (workers > 1)}: {dt:.1f} s, "
                  f"{rates[workers]:.2f} logs/s (LocalCluster start included)")
        print(f"throughput 2 workers / 1 worker: {rates[2] / rates[1]:.2f} (2 cores: at most 2)")
        grown = {}
        for n in MEMORY_LOGS:
            paths = [str(p) for p in make_logs(root / f"mem{n}", n)]
            # Started before the sampler, so its threads and imports are in the baseline too.
            with PeakRss() as rss:
                site = audit(iter(paths), root / f"memout{n}", workers=2, fn=answered)
            assert site.jobs == n, site.jobs
            grown[n] = rss.grown
            print(f"{n} logs: client peak memory +{rss.grown / 2**20:.1f} MiB over its {rss.base / 2**20:.0f} MiB "
                  f"(users {len(site.users)}, days {len(site.days)})")
            shutil.rmtree(root / f"mem{n}")
        a, b = MEMORY_LOGS
        print(f"client peak growth {b:,} / {a:,} logs: {grown[b] / max(grown[a], 1):.2f} (flat: near 1)")
