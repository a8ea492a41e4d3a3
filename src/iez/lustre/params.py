"""Reading Lustre parameters the way `lctl get_param` finds them (the one I/O module here).

`ParamTree(prefix)` searches, below `prefix`, the roots lctl globs (libcfs/libcfs/util/param.c,
lustre-formats.md §0): sys/fs/{lnet,lustre}, sys/kernel/debug/{lnet,lustre},
proc/fs/{lnet,lustre}, proc/sys/{lnet,lustre}. A dotted name maps to a path with "." -> "/",
except inside NIDs (exports.10.1.2.3@tcp.stats). The prefix is "/" on a real node,
DIR/params/<host> on the emulated cluster (docs/emulated.md) and a fixture directory in tests.

The same `get(pattern)` reads an `lctl get_param` dump (`ParamTree.from_getparam_text`) or runs
the real lctl (`ParamTree.from_lctl`), whose tree also writes (`set`: `lctl set_param`). Files that match but cannot be read (dangling symlinks
such as 2.15's obdfilter brw_stats link into /proc, write-only files, I/O errors) are left out
of the result and listed in `tree.errors`; nothing here raises for them.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shlex
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from iez.errors import BackendError
from iez.lustre.getparam import param_matches, parse_getparam, split_param_name

ROOTS = (
    "sys/fs/lnet", "sys/fs/lustre", "sys/kernel/debug/lnet", "sys/kernel/debug/lustre",
    "proc/fs/lnet", "proc/fs/lustre", "proc/sys/lnet", "proc/sys/lustre",
)
LCTL_TIMEOUT = 60.0  # seconds; get_param of a large job_stats can take a while
_BAD_PATTERN = re.compile(r"[\s/=]")  # a pattern is a dotted name: no path, no setting
_GLOB = re.compile(r"[*?[]")


@dataclass(frozen=True)
class ParamIssue:
    """A parameter that matched but could not be read."""

    name: str
    where: str  # the file, or "lctl"
    reason: str

    def __str__(self) -> str:
        return f"{self.name}: {self.reason} ({self.where})"


class ParamTree:
    """Parameters of one node: `get("obdfilter.*.kbytesavail") -> {name: value text}`.

    A directory tree is listed once, the values are read at every `get`: a new tree sees the
    targets that appeared or went since the last one was made."""

    def __init__(self, prefix: str | os.PathLike = "/") -> None:
        self.prefix = Path(prefix)
        self.errors: list[ParamIssue] = []
        self._values: dict[str, str] | None = None  # set for a get_param dump
        self._lctl: str | None = None  # set when reading through lctl
        # Each directory is listed once in the tree's life, when a pattern first needs it: a
        # collector's patterns walk the same OST directories, and it makes a tree each round, so
        # every round sees the directories as they are then. Files are read at every get.
        self._listings = _Listings()
        self._roots: list[str] | None = None  # the roots that are directories, as paths: looked at once

    @classmethod
    def from_getparam_text(cls, text: str) -> "ParamTree":
        """A tree over an `lctl get_param` dump; its unreadable lines are in `errors`."""
        tree = cls()
        dump = parse_getparam(text)
        tree._values = dump.values
        tree.errors = [ParamIssue("?", f"line {s.lineno}", s.reason) for s in dump.skipped]
        return tree

    @classmethod
    def from_lctl(cls, lctl: str = "lctl") -> "ParamTree":
        """A tree that runs `lctl get_param PATTERN` for every `get`."""
        exe = shutil.which(lctl)
        if exe is None:
            raise BackendError(f"{lctl} not found: install the Lustre utilities, or read a "
                               "parameter tree with ParamTree(prefix) or a get_param dump")
        tree = cls()
        tree._lctl = exe
        return tree

    def get(self, pattern: str) -> dict[str, str]:
        """Values (trailing newline removed) of every parameter matching the lctl glob."""
        if not pattern or _BAD_PATTERN.search(pattern):
            raise BackendError(f"bad parameter pattern {pattern!r}: use dotted names like obdfilter.*.stats")
        if self._values is not None:
            return {n: v for n, v in self._values.items() if param_matches(pattern, n)}
        if self._lctl is not None:
            return self._run_lctl(pattern)
        return self._read_files(pattern)

    def get_one(self, name: str) -> str:
        """The value of exactly one parameter; a one-line BackendError if absent or unreadable."""
        before = len(self.errors)
        values = self.get(name)
        if len(values) == 1:
            return next(iter(values.values()))
        if values:
            raise BackendError(f"{name} matches {len(values)} parameters, expected one")
        why = f": {self.errors[before]}" if len(self.errors) > before else ""
        raise BackendError(f"parameter {name} not found{why}")

    def set(self, name: str, value: str) -> None:
        """`lctl set_param NAME=VALUE`; a one-line BackendError when lctl refuses. Only a tree
        reading through lctl writes: a dump or a directory tree is a copy, not the node."""
        if self._lctl is None:
            raise BackendError(f"cannot set {name}: parameters are set through lctl (ParamTree.from_lctl)")
        setting = f"{name}={value}"
        proc = self._lctl_run("set_param", setting)
        if proc.returncode:
            why = (proc.stderr or proc.stdout).strip()[:200]
            raise BackendError(f"{shlex.join(['lctl', 'set_param', setting])} failed: {why}")

    # -- sources ---------------------------------------------------------------------------

    def _read_files(self, pattern: str) -> dict[str, str]:
        comps = split_param_name(pattern)
        found: dict[str, str] = {}
        failed: dict[str, ParamIssue] = {}
        if self._roots is None:
            prefix = os.fspath(self.prefix)
            self._roots = [b for b in (os.path.join(prefix, r) for r in ROOTS) if self._listings.isdir(b)]
        for base in self._roots:
            for names, path in _walk(base, comps, self._listings):
                name = ".".join(names)
                if name in found:
                    continue
                text, why = _read(path)
                if text is None:
                    failed.setdefault(name, ParamIssue(name, path, why))
                else:
                    found[name] = text
                    failed.pop(name, None)
        self.errors.extend(failed.values())
        return found

    def _lctl_run(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self._lctl is not None
        try:
            return subprocess.run([self._lctl, *args], capture_output=True, text=True, errors="replace",
                                  timeout=LCTL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BackendError(f"lctl {' '.join(args)} did not finish in {LCTL_TIMEOUT:.0f} s") from None
        except OSError as e:
            raise BackendError(f"cannot run {self._lctl}: {e.strerror}") from None

    def _run_lctl(self, pattern: str) -> dict[str, str]:
        proc = self._lctl_run("get_param", pattern)
        dump = parse_getparam(proc.stdout)
        self.errors.extend(ParamIssue(pattern, "lctl", ln.strip()) for ln in proc.stderr.splitlines() if ln.strip())
        self.errors.extend(ParamIssue(pattern, f"lctl output line {s.lineno}", s.reason) for s in dump.skipped)
        return dump.values


@functools.lru_cache(maxsize=256)
def _matcher(pat: str) -> Callable[[str], object]:
    """fnmatchcase(name, pat) as one compiled match, without its per-call lookups."""
    return re.compile(fnmatch.translate(pat)).match


def _name(e: os.DirEntry) -> str:
    return e.name


class _Listings:
    """Directories listed, and paths found to be directories: each directory is listed once,
    and a name in a listed directory is looked up there, not stat'ed."""

    def __init__(self) -> None:
        self._dirs: dict[str, tuple[list[os.DirEntry], dict[str, os.DirEntry]] | None] = {}
        self._isdir: dict[str, bool] = {}

    def listing(self, d: str) -> list[os.DirEntry] | None:
        """`d`'s entries sorted by name (None if it cannot be listed)."""
        if d not in self._dirs:
            try:
                # scandir's entry types come with the listing: no stat per entry unless a symlink
                with os.scandir(d) as it:
                    entries = sorted(it, key=_name)
                self._dirs[d] = (entries, {e.name: e for e in entries})
            except OSError:
                self._dirs[d] = None
        got = self._dirs[d]
        return None if got is None else got[0]

    def entry(self, d: str, name: str) -> tuple[bool, bool]:
        """(exists, is a directory) of `d/name` (a dangling symlink exists and is not one)."""
        got = self._dirs.get(d)
        if got is not None:
            e = got[1].get(name)
            return (False, False) if e is None else (True, _is_dir(e))
        p = f"{d}/{name}"
        return (True, True) if self.isdir(p) else (os.path.lexists(p), False)

    def isdir(self, p: str) -> bool:
        got = self._isdir.get(p)
        if got is None:
            got = self._isdir[p] = os.path.isdir(p)
        return got


def _is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir()
    except OSError:
        return False


# Paths are strings, not Path objects: a collector reads every OST's parameters each second,
# and pathlib's objects were most of a round's CPU (the system calls are the same).
def _walk(base: str, comps: list[str], listings: _Listings):
    """(components, path) of every non-directory below `base` matching the glob components;
    like glob(3), "*" does not match names starting with a dot."""
    globs = [_GLOB.search(pat) is not None for pat in comps]

    def rec(d: str, i: int, names: list[str]):
        pat = comps[i]
        last = i == len(comps) - 1
        if globs[i]:
            match, dotted = _matcher(pat), pat.startswith(".")
            for e in listings.listing(d) or ():
                if not match(e.name) or (not dotted and e.name[:1] == "."):
                    continue
                is_dir = _is_dir(e)
                if last and not is_dir:
                    yield names + [e.name], e.path
                elif not last and is_dir:
                    yield from rec(e.path, i + 1, names + [e.name])
            return
        exists, is_dir = listings.entry(d, pat)
        if last and exists and not is_dir:
            yield names + [pat], f"{d}/{pat}"
        elif not last and is_dir:
            yield from rec(f"{d}/{pat}", i + 1, names + [pat])

    yield from rec(base, 0, [])


def _read(path: str) -> tuple[str | None, str]:
    # open first and fstat the descriptor: one path lookup per file instead of two; the
    # path is looked at again only to say why a file could not be opened
    try:  # os.read, not open(): a buffered file object cost more than the system calls
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        return None, _why_unreadable(path, e)
    try:
        if not os.fstat(fd).st_mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH):
            return None, "write-only"
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except OSError as e:
        return None, e.strerror or str(e)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace").rstrip("\n"), ""


def _why_unreadable(path: str, err: OSError) -> str:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        target = os.readlink(path) if os.path.islink(path) else "?"
        return f"dangling symlink to {target}"
    except OSError as e:
        return e.strerror or str(e)
    if not st.st_mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH):
        return "write-only"
    return err.strerror or str(err)
