"""LIOPProf logging services (docs/references.md#s003-logging): start and stop them on OSSs, collect what they
recorded into a profile directory (`iez.profile.profiledir`).

On a real OSS (through `iez.profile.remote`): clear the debug log, save the debug mask and
debug_mb, enable rpctrace with a larger buffer, drain it with `lctl debug_daemon`, sample
`iostat -x` every second and the exports/job stats every `interval`, snapshot brw_stats,
obdfilter and OSS service stats at start and stop, optionally run obdfilter-survey first. Stop
undoes all of it, converts the daemon's binary log with `lctl debug_file`, and copies the files.

On an emulated cluster the same directory is produced from the cluster's parameter trees and
from I/O event logs (`DIR/iolog/*.ioev`) through `iez.profile.emulate`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from iez.profile import ProfileError
from iez.profile.profiledir import (ERRORS, EXPORTS, IOSTAT, JOB, LAYOUTS, RPCTRACE, START, STOP, SURVEY, ProfileMeta,
                                    format_sample, read_meta, write_meta)
from iez.profile.remote import Runner, Step

REMOTE_DIR = "/var/tmp/iez-profile"
SNAPSHOT = ("obdfilter.*.stats", "osd-*.*.brw_stats", "ost.OSS.*.stats", "obdfilter.*.exports.*.stats",
            "obdfilter.*.job_stats")
SAMPLED = ("obdfilter.*.exports.*.stats", "obdfilter.*.job_stats")
DEBUG_MB = 1024  # trace buffer; the default (~5 MB per CPU) overflows within seconds with rpctrace
DAEMON_MB = 20480  # cap of the debug_daemon file
SURVEY_ENV = "nobjhi=2 thrhi=16 size=1024 case=disk"
IOLOG = "iolog"  # I/O event logs of an emulated cluster: DIR/iolog/*.ioev
IOSTAT_PID = ".iostat.pid"


def _get_param(patterns: tuple[str, ...]) -> str:
    return "lctl get_param " + " ".join(shlex.quote(p) for p in patterns)


def _sample(d: str) -> str:
    return f'echo "### iez-sample $(date +%s.%N)"; {_get_param(SAMPLED)} 2>>{d}/{ERRORS}'


def start_steps(remote_dir: str, interval: float, survey: bool) -> list[Step]:
    d = shlex.quote(remote_dir)
    steps = [Step("prepare the profile directory and save the debug settings",
                  f"set -e; mkdir -p {d}; cd {d}; rm -f rpctrace.bin {RPCTRACE} {EXPORTS} {IOSTAT} {ERRORS} {STOP}; "
                  "lctl get_param -n debug > debug.saved; lctl get_param -n debug_mb > debug_mb.saved")]
    if survey:
        steps.append(Step("run obdfilter-survey for the OSTs' peak bandwidth (loads the OSTs: run it idle)",
                          f"cd {d}; {SURVEY_ENV} obdfilter-survey > {SURVEY} 2>&1"))
    steps += [
        Step("snapshot brw_stats, obdfilter, exports, job and OSS service stats",
             f"cd {d}; {_get_param(SNAPSHOT)} > {START} 2>>{ERRORS}; true"),
        Step("enable rpctrace in a larger debug buffer, clear old logs, drain with debug_daemon",
             f"set -e; cd {d}; lctl set_param debug_mb={DEBUG_MB}; lctl set_param debug=+rpctrace; lctl clear; "
             f"lctl debug_daemon start {d}/rpctrace.bin {DAEMON_MB}"),
        Step("sample iostat -x every second and the exports/job stats in the background",
             f"cd {d}; S_TIME_FORMAT=ISO nohup iostat -x -t 1 > {IOSTAT} 2>>{ERRORS} < /dev/null & "
             f"echo $! > iostat.pid; nohup sh -c {shlex.quote(f'while :; do {_sample(d)}; sleep {interval:g}; done')} "
             f"> {EXPORTS} 2>>{ERRORS} < /dev/null & echo $! > sampler.pid"),
    ]
    return steps


def stop_steps(remote_dir: str) -> list[Step]:
    d = shlex.quote(remote_dir)
    return [
        Step("stop the samplers and take the last sample and the stop snapshot",
             f"cd {d}; kill $(cat sampler.pid) $(cat iostat.pid) 2>/dev/null; "
             f"{{ {_sample(d)}; }} >> {EXPORTS}; {_get_param(SNAPSHOT)} > {STOP} 2>>{ERRORS}; true"),
        Step("flush the debug buffer, stop debug_daemon, convert its log to text, restore the debug settings",
             f"set -e; cd {d}; lctl debug_daemon stop; lctl debug_file rpctrace.bin {RPCTRACE}; rm -f rpctrace.bin; "
             'lctl set_param debug="$(cat debug.saved)"; lctl set_param debug_mb="$(cat debug_mb.saved)"'),
    ]


def start(runner: Runner, out: Path, interval: float, survey: bool, remote_dir: str = REMOTE_DIR) -> ProfileMeta:
    if interval <= 0:
        raise ProfileError(f"--interval must be positive, got {interval}")
    for step in start_steps(remote_dir, interval, survey):
        runner.run(step)
    meta = ProfileMeta(tuple(runner.hosts), start=time.time(), interval=interval, mode="lustre",
                       notes=(f"remote directory {remote_dir}", f"transport {runner.transport}"))
    if not runner.dry_run:
        write_meta(out, meta)
    return meta


def stop(runner: Runner, out: Path, remote_dir: str = REMOTE_DIR) -> ProfileMeta:
    meta = read_meta(out) if not runner.dry_run else ProfileMeta(tuple(runner.hosts))
    for step in stop_steps(remote_dir):
        runner.run(step)
    for h in runner.hosts:
        runner.fetch(h, remote_dir, out / h)
    meta = replace(meta, stop=time.time())
    if not runner.dry_run:
        write_meta(out, meta)
    return meta


# -- the emulated cluster ---------------------------------------------------------------------

def _tree_dump(cd, host: str, extra: str = "") -> str:
    from iez.lustre.getparam import format_getparam
    from iez.lustre.params import ParamTree

    tree = ParamTree(cd.host_params(host))
    values: dict[str, str] = {}
    for pattern in SNAPSHOT:
        values.update(tree.get(pattern))
    return format_getparam(values) + extra


def start_emulated(cluster_dir: str | Path, out: Path, interval: float, iostat: bool = True) -> ProfileMeta:
    from iez.emulated.clusterdir import open_cluster_dir

    if interval <= 0:
        raise ProfileError(f"--interval must be positive, got {interval}")
    cd = open_cluster_dir(cluster_dir)
    cluster = cd.cluster()
    hosts = tuple(s.name for s in cluster.osses)
    (cd.root / IOLOG).mkdir(exist_ok=True)
    now = time.time()
    for h in hosts:
        (out / h).mkdir(parents=True, exist_ok=True)
        (out / h / START).write_text(_tree_dump(cd, h))
    notes = [f"emulated cluster {cd.root}", f"I/O event logs {cd.root / IOLOG}"]
    if iostat and shutil.which("iostat"):
        with open(out / hosts[0] / IOSTAT, "w") as f:
            p = subprocess.Popen(["iostat", "-x", "-t", "1"], stdout=f, stderr=subprocess.DEVNULL,
                                 env={**os.environ, "S_TIME_FORMAT": "ISO", "LC_ALL": "C"}, start_new_session=True)
        (out / IOSTAT_PID).write_text(f"{p.pid}\n")
        notes.append(f"iostat of this machine's disks (shared by every emulated OSS) in {hosts[0]}/{IOSTAT}")
    meta = ProfileMeta(hosts, start=now, interval=interval, mode="emulated", fsname=cluster.fsname, notes=tuple(notes))
    write_meta(out, meta)
    return meta


def _stop_iostat(out: Path) -> None:
    pidfile = out / IOSTAT_PID
    if not pidfile.exists():
        return
    try:
        os.kill(int(pidfile.read_text()), signal.SIGTERM)
    except (ValueError, ProcessLookupError, PermissionError):
        pass
    pidfile.unlink()


def stop_emulated(cluster_dir: str | Path, out: Path, style: str = "2.13",
                  say: Callable[[str], None] = print) -> ProfileMeta:
    from iez.backend.emulated import EmulatedBackend
    from iez.emulated.clusterdir import open_cluster_dir
    from iez.errors import IezError
    from iez.profile.emulate import debug_log_lines, emulate_rpcs, exports_samples
    from iez.profile.ioevents import SUFFIX, read_event_dir
    from iez.plan import format_layout

    meta = read_meta(out)
    if meta.mode != "emulated" or meta.start is None or meta.interval is None:
        raise ProfileError(f"{out} is not an emulated profile started with `iez profile start --cluster`")
    cd = open_cluster_dir(cluster_dir)
    cluster = cd.cluster()
    _stop_iostat(out)
    stopped = time.time()
    events, skipped = read_event_dir(cd.root / IOLOG)
    events = [e for e in events if meta.start <= e.time <= stopped]
    backend = EmulatedBackend(cd.root)
    layouts = {}
    notes = list(meta.notes)
    for path in sorted({e.path for e in events}):
        try:
            layouts[path] = backend.get_layout(path)
        except IezError as e:
            notes.append(f"events on {path} left out: {e}")
    events = [e for e in events if e.path in layouts]
    if skipped:
        notes.append(f"{len(skipped)} unreadable I/O event line(s), first: {skipped[0]}")
    rpcs = emulate_rpcs(events, layouts, cluster)
    end = max([stopped] + [r.end for r in rpcs])
    n = int((end - meta.start) // meta.interval)
    times = [meta.start + k * meta.interval for k in range(n + 1)] + [end]
    samples = exports_samples(rpcs, cluster, times, meta.start)
    for h in meta.hosts:
        hd = out / h
        hd.mkdir(parents=True, exist_ok=True)
        with open(hd / RPCTRACE, "w") as f:
            f.writelines(line + "\n" for line in debug_log_lines((r for r in rpcs if r.host == h), style))
        (hd / EXPORTS).write_text("".join(format_sample(t, dumps.get(h, "")) for t, dumps in samples))
        (hd / STOP).write_text(_tree_dump(cd, h, samples[-1][1].get(h, "")))
    job = out / JOB
    job.mkdir(exist_ok=True)
    for p in (cd.root / IOLOG).glob(f"*{SUFFIX}"):
        shutil.copy2(p, job / p.name)
    (job / LAYOUTS).write_text("".join(f"{p}\t{format_layout(fl)}\n" for p, fl in layouts.items()))
    say(f"emulated {len(rpcs)} RPCs from {len(events)} I/O events on {len(layouts)} file(s)")
    meta = replace(meta, stop=end, notes=tuple(notes))
    write_meta(out, meta)
    return meta
