"""Simulator speed at Spider II scale (docs/references.md#s002-spider): one write phase of N clients x 1 GiB over
1,008 OSTs behind 144 OSSs, each file striped over 4 OSTs (one stream per client and OST object).

Figures, each against a baseline measured in the same run:
- engine wall time / the budget (10 s at 2,048 clients, 60 s at 16,384): <= 1 passes;
- Full / Lazy wall time (network/optim; Full is what iez-sim uses, docs/simulator.md);
- simulated makespan / analytic lower bound (>= 1, near 1 when the OSTs are the limit);
- peak memory of the engine process.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from iez.sim import engine
from iez.sim.bounds import lower_bound
from iez.sim.results import parse

GIB = 1 << 30
N_OSS, PER_OSS = 144, 7  # Spider II: 144 OSSs, 1,008 OSTs
STRIPES = 4
BUDGET = {2048: 10.0, 16384: 60.0}


def description(clients: int, optim: str) -> dict:
    n_osts = N_OSS * PER_OSS
    streams = [[c, (c * STRIPES + k) % n_osts, GIB // STRIPES, -1] for c in range(clients) for k in range(STRIPES)]
    return {
        "format": "iez-sim/1",
        "engine": {"optim": optim},
        "platform": {
            "osses": [{"name": f"oss{s}", "nic_bw": 12.5e9} for s in range(N_OSS)],  # 100 Gb/s
            "osts": [{"index": i, "oss": i // PER_OSS, "read_bw": 1.2e9, "write_bw": 1.0e9} for i in range(n_osts)],
            "clients": [{"name": f"c{k:05d}", "nic_bw": 6.8e9} for k in range(clients)],  # Gemini-class
        },
        "jobs": [{"name": "ckpt", "nodes": list(range(clients)),
                  "phases": [{"kind": "write", "creates": [[c, 1] for c in range(clients)], "streams": streams}]}],
    }


def measure(clients: int, optim: str, wd: Path):
    d = description(clients, optim)
    t0 = time.perf_counter()
    res = parse(engine.run(d, wd / f"{clients}-{optim}"))
    return time.perf_counter() - t0, res, lower_bound(d).seconds


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        for clients in (2048, 16384):
            full_t, full, bound = measure(clients, "Full", wd)
            lazy_t, lazy, _ = measure(clients, "Lazy", wd)
            print(f"{clients} clients x 1 GiB, {N_OSS * PER_OSS} OSTs / {N_OSS} OSSs, {clients * STRIPES} streams:")
            print(f"  engine wall time (Full): {full.wall_seconds:.2f} s = {full.wall_seconds / BUDGET[clients]:.2f}"
                  f" x the {BUDGET[clients]:.0f} s budget (with Python around it: {full_t:.2f} s)")
            print(f"  Full / Lazy wall time: {full.wall_seconds / lazy.wall_seconds:.2f}"
                  f" (Lazy {lazy.wall_seconds:.2f} s; makespans equal: {abs(full.makespan - lazy.makespan) < 1e-6 * full.makespan})")
            print(f"  simulated makespan / lower bound: {full.makespan / bound:.4f} ({full.makespan:.2f} s vs {bound:.2f} s)")
            print(f"  engine peak memory: {full.max_rss_bytes / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
