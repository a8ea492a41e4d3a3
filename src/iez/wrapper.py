"""`iez run`: the iez paper's client flow (docs/references.md#s000-fig4, §III "Summary") around
one job.

1. Ask the controller for the plan of the application's coming run.
   - none (first run, or the last one missed more than half its files): trace this run;
   - ready: place with it (libiez `IEZ_MODE=trace,place`, `IEZ_PLAN`), and trace, to count
     hits and misses;
   - still being made after `wait` seconds, or planning failed: trace only.
2. Run the command under libiez, passing signals on and returning its exit status.
3. Upload the trace and the miss counts, so the controller predicts and plans the next run.

The job never fails because of iez. Only what the user gave wrong before anything starts (no
command, an application name the controller would refuse) is an error (exit 2, nothing ran).
Anything else on iez's side (controller unreachable or answering nonsense, no libiez, an
unwritable trace or temporary directory, a failed upload) is one warning line: before the job,
the command then runs unchanged (no LD_PRELOAD); after it, the job's exit status is kept and the
trace is kept with the command that retries the upload.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from iez.errors import IezError, one_line
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


@dataclass
class _Prepared:
    """Everything the traced (or placed) run needs, made before the job starts."""

    client: Any  # ControllerClient
    reply: Any  # PlanReply
    lib: Path
    work: Path  # temporary: the plan, and the trace unless --trace-dir
    trace: Path
    settings: dict[str, str | None]
    command: list[str]  # with what its MPI launcher needs to pass the settings on


def run(opts: RunOptions, warn: Callable[[str], None], env: Mapping[str, str] = os.environ) -> RunReport:
    warnings: list[str] = []

    def note(msg: str) -> None:
        warnings.append(msg)
        warn(msg)

    if not opts.command:
        raise IezError("no command given (usage: iez run --app NAME -- COMMAND ...)")
    check_app(opts.app)
    try:
        prep = _prepare(opts, env, note)
    except Exception as e:  # noqa: BLE001 - iez's failure, whatever it is, must not stop the job
        note(f"{one_line(e)}; running the command unchanged")
        return RunReport(run_command(opts.command, env), "unchanged", warnings=warnings)
    settings, reply, trace = prep.settings, prep.reply, prep.trace
    report = RunReport(0, settings["IEZ_MODE"] or "trace", reply.run, warnings=warnings)
    try:
        report.rc = run_command(prep.command, preload_env(env, prep.lib, settings))
        run_no = reply.run if reply.status == "ready" else None
        try:
            report.uploaded = prep.client.upload_trace(opts.app, trace, run=run_no)
        except Exception as e:  # noqa: BLE001 - the job has run: keep its status and its trace
            kept = trace if opts.trace_dir is not None else _keep(trace, opts.app)
            note(f"trace not uploaded ({one_line(e)}); " + (
                f"it is in {kept}; retry with: {upload_command(kept, opts.app, prep.client.url, run_no)}"
                if kept else "and it could not be kept"))
    finally:
        prep.client.close()
        shutil.rmtree(prep.work, ignore_errors=True)
    return report


def _prepare(opts: RunOptions, env: Mapping[str, str], note: Callable[[str], None]) -> _Prepared:
    from iez.controller.api_client import ControllerClient

    client = ControllerClient.from_env(opts.controller)
    try:
        reply = client.fetch_plan(opts.app, wait=opts.wait)
        lib = _library(opts.command, env, note)
        work = Path(tempfile.mkdtemp(prefix=f"iez-run-{opts.app}-"))
    except BaseException:
        client.close()
        raise
    try:
        trace = Path(opts.trace_dir) if opts.trace_dir is not None else work / "trace"
        trace.mkdir(parents=True, exist_ok=True)
        settings: dict[str, str | None] = {"IEZ_APP": opts.app, "IEZ_TRACE_DIR": str(trace.absolute()),
                                           "IEZ_MODE": "trace", "IEZ_PLAN": None}
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
        command = launcher_args(opts.command, ["LD_PRELOAD", *(k for k, v in settings.items() if v is not None)], env)
    except BaseException:
        client.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return _Prepared(client, reply, lib, work, trace, settings, command)


def check_app(app: str) -> str:
    """`app` if the controller would take it as an application name (iez.db.check_app_name);
    else a one-line IezError, before anything starts. Without the control plane installed
    there is nothing to check it against: the command will run unchanged."""
    try:
        from iez.db import check_app_name
    except ImportError:
        return app
    return check_app_name(app)


def upload_command(trace: Path, app: str, url: str, run: int | None) -> str:
    """The command that uploads a kept trace to the controller, as `iez run` would have."""
    cmd = ["iez", "trace", "upload", str(trace), "--app", app, "--controller", url]
    return shlex.join(cmd + (["--run", str(run)] if run is not None else []))


def _keep(trace: Path, app: str) -> Path | None:
    """A copy of a trace that lives in the run's temporary directory, which is about to go."""
    try:
        saved = Path(tempfile.mkdtemp(prefix=f"iez-trace-{app}-"))
        shutil.copytree(trace, saved, dirs_exist_ok=True)
    except OSError:
        return None
    return saved


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
