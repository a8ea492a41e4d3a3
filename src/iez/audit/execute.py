"""Many logs as Dask tasks: an embedded `distributed.LocalCluster` by default (no set-up), or an
existing cluster by its scheduler's address (`dask scheduler` + `dask worker`, or dask-jobqueue's
SLURMCluster: docs/audit.md).

Each task is one log (`task`): read, advised, simulated, and made into its flat rows on the
worker, so what comes back is a few hundred bytes, never the log's records. At most `window`
tasks are in flight: the client submits the next log as each answer arrives, so its memory does
not grow with the number of logs (bench/bench_audit.py measures it).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from iez.audit.job import audit_log
from iez.audit.page import Tables
from iez.audit.site import Site, finding_rows, job_row
from iez.errors import ConfigError

def task(path: str, cluster_toml: str = "", simulate: bool = True) -> dict[str, Any]:
    """One log's answer: {"ok", "job": row, "findings": rows} or the failure of `audit_log`."""
    out = audit_log(path, cluster_toml, simulate)
    if not out["ok"]:
        return out
    adv = out["advice"]
    return {"ok": True, "job": job_row(adv), "findings": finding_rows(adv)}


def expand(specs: Iterable[str]) -> Iterator[str]:
    """Log paths from files, directories (every file below, recursively: a file that is not a
    Darshan log is counted as such) and globs, in the order given; lazily, so a month of logs is never
    listed in memory beyond one directory's names (nor remembered: a log named twice is read twice)."""

    def walk(spec: str) -> Iterator[str]:
        p = Path(spec)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs.sort()
                yield from (str(Path(root) / n) for n in sorted(files))
        elif p.exists():
            yield str(p)
        else:
            matches = sorted(glob.glob(spec, recursive=True))
            if not matches:
                raise ConfigError(f"{spec}: no such file, directory or matching log")
            for m in matches:
                yield from walk(m)

    for spec in specs:
        yield from walk(spec)


def run(paths: Iterable[str], on_answer: Callable[[dict[str, Any]], None], *, scheduler: str = "",
        workers: int = 0, cluster_toml: str = "", simulate: bool = True, window: int = 0,
        fn: Callable[[str, str, bool], dict[str, Any]] = task) -> None:
    """Run `fn` (`task`, or a stand-in with its signature and answers) over `paths` on Dask,
    calling `on_answer` with each answer as it arrives."""
    from distributed import Client, LocalCluster, as_completed

    if scheduler:
        client = Client(scheduler, timeout="20s")
        local = None
    else:
        local = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                             dashboard_address=":0", silence_logs=40)
        client = Client(local)
    try:
        n = max(1, sum(client.nthreads().values()))
        window = window or 4 * n
        it = iter(paths)
        pending = as_completed()
        log_of: dict[Any, str] = {}  # task key -> its log, while in flight

        def submit(path: str) -> None:
            fut = client.submit(fn, path, cluster_toml, simulate, pure=False)
            log_of[fut.key] = path
            pending.add(fut)

        for path in it:
            submit(path)
            if pending.count() >= window:
                break
        for fut in pending:
            path = log_of.pop(fut.key)
            try:
                answer = fut.result()
            except Exception as e:  # a worker lost with the task, or a fault in iez: one line, go on
                why = " ".join(str(e).split())
                answer = {"ok": False, "path": path, "cause": "failed", "error": f"{path}: {type(e).__name__}: {why}"}
            fut.release()
            on_answer(answer)
            nxt = next(it, None)
            if nxt is not None:
                submit(nxt)
    finally:
        client.close()
        if local is not None:
            local.close()


def audit(paths: Iterable[str], out: Path, progress: Callable[[dict[str, Any]], None] = lambda a: None,
          **kw: Any) -> Site:
    """`run` with every answer added to the site view and the Parquet tables in `out`;
    `progress` sees each answer after."""
    out.mkdir(parents=True, exist_ok=True)
    site, tables = Site(), Tables(out)

    def on_answer(a: dict[str, Any]) -> None:
        if a["ok"]:
            site.add(a["job"], a["findings"])
            tables.add("jobs", [a["job"]])
            tables.add("findings", a["findings"])
        else:
            site.fail(a["path"], a["cause"], a["error"])
            tables.add("failures", [{"log": a["path"], "cause": a["cause"], "error": a["error"]}])
        progress(a)

    try:
        run(paths, on_answer, **kw)
    finally:
        tables.close()
    return site
