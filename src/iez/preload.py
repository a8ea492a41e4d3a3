"""Running a command under libiez: where the library is, the environment it reads
(docs/libiez.md), and a child process that behaves like the command itself (signals passed on,
its exit status returned). Used by `iez run` and the demo."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from iez.artifacts import find_built
from iez.errors import IezError

LIBS = {"posix": "libiez.so", "mpi": "libiez-mpi.so"}
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def libiez_path(kind: str = "posix") -> Path:
    """The libiez shared object: $IEZ_LIBIEZ (or $IEZ_LIBIEZ_MPI), else the build tree."""
    env = "IEZ_LIBIEZ_MPI" if kind == "mpi" else "IEZ_LIBIEZ"
    return Path(find_built("libiez", env, f"libiez/{LIBS[kind]}", program=False,
                           installed=("/usr/local/lib/iez", "/usr/lib/iez")))


def preload_env(base: Mapping[str, str], lib: Path, settings: Mapping[str, str | None]) -> dict[str, str]:
    """`base` with libiez first in LD_PRELOAD (other preloads kept) and the IEZ_* settings
    (a None value removes the variable, so a stale IEZ_PLAN cannot leak into a traced run)."""
    env = dict(base)
    others = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if Path(p).name not in LIBS.values()]
    env["LD_PRELOAD"] = " ".join([str(lib), *others])
    for k, v in settings.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run `argv` to completion; signals sent to us go to it. Returns its exit status the way a
    shell reports it (128 + N when it was killed by signal N)."""
    if not argv:
        raise IezError("no command given (usage: iez run --app NAME -- COMMAND ...)")
    try:
        proc = subprocess.Popen(list(argv), env=dict(env))
    except FileNotFoundError:
        raise IezError(f"{argv[0]}: command not found") from None
    except PermissionError:
        raise IezError(f"{argv[0]}: permission denied") from None
    previous = {s: signal.signal(s, lambda sig, _f: proc.send_signal(sig)) for s in FORWARDED}
    try:
        rc = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return 128 - rc if rc < 0 else rc
