"""LIOPProf's rpctrace parser speed (budget: >= 1M lines/s on one core, bounded
memory).

A debug log of 2M rpctrace lines (Handling and Handled, Lustre 2.13+ and 2.5 forms, 64 clients,
3 OSSs' worth of threads, emulated by `iez.profile.emulate`) is written once; then, each against
baselines measured in the same run on the same file:
- parse only (C parser through ctypes, records into numpy) and parse + aggregate (what
  `iez profile report` does per host), in lines/s;
- / a plain Python `for line in f: pass` loop and / `wc -l` (lower is slower than the baseline);
- the extra resident memory of the streaming parse (it must not grow with the file).
"""

from __future__ import annotations

import resource
import subprocess
import tempfile
import time
from pathlib import Path

from iez.cluster import make_cluster
from iez.layout.layout import Layout
from iez.profile.analysis import Bins, RpcAggregator
from iez.profile.emulate import debug_log_lines, emulate_rpcs
from iez.profile.ioevents import IoEvent
from iez.profile.rpctrace import RpcTraceReader

LINES = 2_000_000
MiB = 1 << 20


def make_log(path: Path) -> int:
    cluster = make_cluster(3, 4, 1 << 40, "bench")
    lay = Layout(stripe_size=MiB, osts=tuple(range(12)))
    events = [IoEvent(1.7e9 + k * 1e-3, "read", "/fs/ssf", (k * 64 + c) * MiB, MiB, f"10.0.{c // 250}.{c % 250}@o2ib",
                      1000 + c, f"job.{c % 4}") for k in range(40) for c in range(64)]
    rpcs = emulate_rpcs(events, {"/fs/ssf": lay}, cluster)
    block = [line + "\n" for style in ("2.13", "2.5") for line in debug_log_lines(rpcs, style)]
    n = 0
    with open(path, "w") as f:
        while n < LINES:
            take = block[: LINES - n]
            f.writelines(take)
            n += len(take)
    return n


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "rpctrace.log"
        n = make_log(log)
        size = log.stat().st_size

        def python_loop() -> None:
            with open(log, "rb") as f:
                for _line in f:
                    pass

        def parse(aggregate: bool) -> None:
            agg = RpcAggregator("oss0", Bins(1.7e9, 1.0))
            with RpcTraceReader() as r, open(log, "rb") as f:
                for recs in r.chunks(f):
                    if aggregate:
                        agg.add(recs)
                if aggregate:
                    agg.result(r.strings)
                assert r.counts().rpc == n, r.counts()

        timed(python_loop)  # warm the page cache
        t_loop = timed(python_loop)
        t_wc = timed(lambda: subprocess.run(["wc", "-l", str(log)], check=True, capture_output=True))
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_parse = timed(lambda: parse(False))
        t_agg = timed(lambda: parse(True))
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"debug log: {n:,} rpctrace lines, {size / MiB:.0f} MiB")
        for what, t in (("parse", t_parse), ("parse + aggregate", t_agg)):
            print(f"  {what}: {n / t / 1e6:.2f} M lines/s ({size / t / MiB:.0f} MiB/s) = {t_loop / t:.2f} x a Python "
                  f"`for line in f` loop ({n / t_loop / 1e6:.2f} M lines/s), {t_wc / t:.2f} x `wc -l` "
                  f"({n / t_wc / 1e6:.1f} M lines/s); target >= 1 M lines/s: {'met' if n / t >= 1e6 else 'MISSED'}")
        print(f"  peak resident memory grew by {(rss1 - rss0) / 1024:.0f} MiB while parsing {size / MiB:.0f} MiB "
              "(chunks of 8 MiB)")


if __name__ == "__main__":
    main()
