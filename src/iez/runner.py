"""`iez run`: the client flow of seed 000 (§III, Summary) around one job.

1. Ask the controller for the plan of the application's coming run.
   - none (first run, or the last one missed more than half its files): trace this run;
   - ready: place with it (libiez `IEZ_MODE=trace,place`, `IEZ_PLAN`), and trace, to count
     hits and misses;
   - still being made after `wait` seconds, or planning failed: trace only.
2. Run the command under libiez, passing signals on and returning its exit status.
3. Upload the trace and the miss counts, so the controller predicts and plans the next run.

The job never fails because of iez: an unreachable controller, a missing libiez or a failed
upload is a warning, and the command runs unchanged (no LD_PRELOAD) when there is nothing to do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from iez.errors import IezError
from iez.preload import launcher_args, libiez_path, preload_env, run_command, uses_mpi


@dataclass(frozen=True)
class RunOptions:
    app: str
    command: tuple[str, ...]
    controller: str | None = None  # URL; default $IEZ_CONTROLLER or http://127.0.0.1:8760
    wait: float = 30.0  # seconds to wait for a plan still being made
    emulated: str | None = None  # cluster dir for IEZ_EMULATED (default: inherited)
    trace_dir: str | None = None  # keep the trace here instead of a temporary dir
    log: str | None = None  # IEZ_LOG for libiez's diagnostics


@dataclass
class RunReport:
    rc: int
    mode: str  # "trace", "trace,place" or "unchanged"
    run: int | None = None
    uploaded: dict | None = None
    warnings: list[str] = field(default_factory=list)


def run(opts: RunOptions, warn: Callable[[str], None], env: Mapping[str, str] = os.environ) -> RunReport:
    from iez.controller.client import ControllerClient, ControllerError

    warnings: list[str] = []

    def note(msg: str) -> None:
        warnings.append(msg)
        warn(msg)

    if not opts.command:
        raise IezError("no command given (usage: iez run --app NAME -- COMMAND ...)")
    try:
        client = ControllerClient.from_env(opts.controller)
        reply = client.fetch_plan(opts.app, wait=opts.wait)
    except ControllerError as e:
        note(f"{e}; running the command unchanged")
        return RunReport(run_command(opts.command, env), "unchanged", warnings=warnings)
    try:
        lib = _library(opts.command, env, note)
    except IezError as e:
        note(f"{e}; running the command unchanged")
        client.close()
        return RunReport(run_command(opts.command, env), "unchanged", warnings=warnings)

    keep = opts.trace_dir is not None
    work = Path(tempfile.mkdtemp(prefix=f"iez-run-{opts.app}-"))
    trace = Path(opts.trace_dir) if keep else work / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    settings: dict[str, str | None] = {"IEZ_APP": opts.app, "IEZ_TRACE_DIR": str(trace), "IEZ_MODE": "trace",
                                       "IEZ_PLAN": None}
    if reply.status == "ready":
        plan = work / "plan"
        plan.write_text(reply.text)
        settings.update(IEZ_MODE="trace,place", IEZ_PLAN=str(plan))
    elif reply.status in ("pending", "failed"):
        note(f"no plan for {opts.app} ({reply.status}: {reply.reason}); tracing this run without placement")
    if opts.emulated:
        settings["IEZ_EMULATED"] = str(Path(opts.emulated).absolute())
    if opts.log:
        settings["IEZ_LOG"] = opts.log
    report = RunReport(0, settings["IEZ_MODE"] or "trace", reply.run, warnings=warnings)
    try:
        command = launcher_args(opts.command, ["LD_PRELOAD", *(k for k, v in settings.items() if v is not None)], env)
        report.rc = run_command(command, preload_env(env, lib, settings))
        try:
            report.uploaded = client.upload_trace(opts.app, trace, run=reply.run if reply.status == "ready" else None)
        except IezError as e:
            if not keep:  # keep what was traced, so it can be uploaded by hand
                saved = Path(tempfile.mkdtemp(prefix=f"iez-trace-{opts.app}-", dir=os.environ.get("TMPDIR")))
                shutil.copytree(trace, saved, dirs_exist_ok=True)
                trace = saved
            note(f"trace not uploaded ({e}); it is in {trace}: iez trace import {trace} --app {opts.app}")
    finally:
        client.close()
        shutil.rmtree(work, ignore_errors=True)
    return report


def _library(command: Sequence[str], env: Mapping[str, str], note: Callable[[str], None]) -> Path:
    """libiez-mpi.so for an MPI job (an MPI launcher, or a program linking libmpi), else
    libiez.so; an MPI job without libiez-mpi.so is still traced at the POSIX layer."""
    if uses_mpi(command, env):
        try:
            return libiez_path("mpi")
        except IezError as e:
            note(f"{e}; MPI-IO and HDF5 are not traced or placed, POSIX I/O is")
    return libiez_path()


def command_of(argv: Sequence[str]) -> tuple[str, ...]:
    """The command after `--` (argparse leaves the separator in a REMAINDER list)."""
    cmd = list(argv)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return tuple(cmd)
