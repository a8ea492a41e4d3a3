"""The lustre-side runner: every command LIOPProf runs on an OSS goes through here.

A step is a POSIX shell script run on each OSS. Transports: `local` (this machine), `ssh` (one
`ssh -o BatchMode=yes HOST` per host, in parallel) and `pdsh` (one `pdsh -S -w HOSTS` for many
hosts, as LIOPProf collects, docs/references.md#s003-collection). `auto` picks local when every host is this machine,
else pdsh for several hosts when installed, else ssh. Files come back with scp (or a local
copy). `dry_run` prints every command instead of running it.

Root is needed on an OSS for `lctl set_param debug`, `debug_mb`, `debug_daemon` and reading
the stats under /sys/kernel/debug; it is stated in each step and checked locally (euid), and
`sudo` prefixes `sudo -n` where the caller is not root.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from iez.cluster import check_host_name
from iez.profile import ProfileError

TRANSPORTS = ("auto", "local", "ssh", "pdsh")
LOCAL_NAMES = {"local", "localhost", "127.0.0.1"}
TIMEOUT = 600.0  # seconds for one step (obdfilter-survey can take minutes)


@dataclass(frozen=True)
class Step:
    what: str  # one line saying what the step does
    script: str  # POSIX sh
    root: bool = True


@dataclass(frozen=True)
class Result:
    host: str
    rc: int
    stdout: str
    stderr: str


def is_local(host: str) -> bool:
    return host in LOCAL_NAMES or host in {socket.gethostname(), socket.getfqdn()}


class Runner:
    def __init__(self, hosts: list[str], transport: str = "auto", dry_run: bool = False, sudo: bool = False,
                 say: Callable[[str], None] = print) -> None:
        if not hosts:
            raise ProfileError("no OSS given: name them with --oss HOST[,HOST...] (or `local`)")
        if transport not in TRANSPORTS:
            raise ProfileError(f"unknown transport {transport!r} (one of {', '.join(TRANSPORTS)})")
        for h in hosts:  # each is an ssh/pdsh argument (never an option) and a directory of the profile
            check_host_name(h, "--oss host")
        self.hosts, self.dry_run, self.sudo, self.say = hosts, dry_run, sudo, say
        self.transport = self._choose(transport)

    def _choose(self, transport: str) -> str:
        if transport == "auto":
            if all(is_local(h) for h in self.hosts):
                return "local"
            transport = "pdsh" if len(self.hosts) > 1 and shutil.which("pdsh") else "ssh"
        if transport != "local" and not self.dry_run and not shutil.which(transport):
            raise ProfileError(f"{transport} is not installed: install it, or run `iez profile start --oss local` on "
                               "each OSS and copy its directory into OUT/<host>/ (docs/liopprof.md)")
        if transport == "local" and not all(is_local(h) for h in self.hosts):
            raise ProfileError(f"transport local cannot reach {', '.join(h for h in self.hosts if not is_local(h))}")
        return transport

    def _wrap(self, step: Step) -> str:
        """The shell command line that runs the script on one host."""
        cmd = f"sh -c {shlex.quote(step.script)}"
        return f"sudo -n {cmd}" if step.root and self.sudo else cmd

    def commands(self, step: Step) -> list[tuple[list[str], list[str]]]:
        """(argv, hosts it covers) of every process the step starts."""
        cmd = self._wrap(step)
        if self.transport == "local":
            return [(["sh", "-c", cmd], list(self.hosts))]
        if self.transport == "pdsh":
            return [(["pdsh", "-S", "-w", ",".join(self.hosts), cmd], list(self.hosts))]
        return [(["ssh", "-o", "BatchMode=yes", h, cmd], [h]) for h in self.hosts]

    def run(self, step: Step, check: bool = True) -> list[Result]:
        need = " (needs root on the OSS)" if step.root else ""
        cmds = self.commands(step)
        if self.dry_run:
            self.say(f"# {step.what}{need}")
            for argv, _ in cmds:
                self.say(shlex.join(argv))
            return [Result(h, 0, "", "") for h in self.hosts]
        if step.root and self.transport == "local" and os.geteuid() != 0 and not self.sudo:
            raise ProfileError(f"{step.what} needs root on the OSS (lctl set_param, debug_daemon): "
                               "run as root or pass --sudo")

        def one(item: tuple[list[str], list[str]]) -> list[Result]:
            argv, hosts = item
            try:
                p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                return [Result(h, 124, "", f"timed out after {TIMEOUT:.0f} s") for h in hosts]
            except OSError as e:
                return [Result(h, 127, "", e.strerror or str(e)) for h in hosts]
            return [Result(h, p.returncode, p.stdout, p.stderr) for h in hosts]

        with ThreadPoolExecutor(max_workers=min(16, len(cmds))) as pool:
            results = [r for rs in pool.map(one, cmds) for r in rs]
        bad = [r for r in results if r.rc != 0]
        if check and bad:
            r = bad[0]
            why = (r.stderr.strip().splitlines() or [f"exit {r.rc}"])[-1]
            more = f" (and {len(bad) - 1} more host(s))" if len(bad) > 1 else ""
            raise ProfileError(f"{step.what} failed on {r.host}: {why}{more}")
        return results

    def fetch(self, host: str, remote_dir: str, local_dir: Path) -> None:
        """Copy the files of remote_dir on host into local_dir."""
        argv = ["scp", "-q", "-r", "-o", "BatchMode=yes", f"{host}:{remote_dir}/*", str(local_dir)]
        if self.dry_run:
            self.say(f"# collect {host}'s files")
            self.say(f"cp -r {shlex.quote(remote_dir)}/. {shlex.quote(str(local_dir))}" if self.transport == "local"
                     else shlex.join(argv))
            return
        local_dir.mkdir(parents=True, exist_ok=True)
        if self.transport == "local":
            src = Path(remote_dir)
            if src.resolve() != local_dir.resolve():
                shutil.copytree(src, local_dir, dirs_exist_ok=True)
            return
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
        if p.returncode != 0:
            why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            raise ProfileError(f"cannot copy {host}:{remote_dir}: {why}")
