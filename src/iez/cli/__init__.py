"""The `iez` command. Each module in this package adds its subcommands through
`register(subparsers)`, so a new command never edits a shared list.

Errors a user can fix are IezError, printed as one line, with the error's `exit_code`: 2 for
what the user typed or gave (as argparse's own errors), 1 when doing the work failed (the file
system, an allocation, the host gate).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from iez import __version__
from iez.errors import IezError
from iez.heap import keep_freed_memory


_GROUPS: dict[str, argparse._SubParsersAction] = {}


def subgroup(sub: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """The subcommands of group `name` (e.g. `iez trace ...`), created by the first module that
    asks, so several modules can add commands to one group."""
    if name not in _GROUPS:
        p = sub.add_parser(name, help=help)
        g = p.add_subparsers(dest=f"{name}_command", metavar="COMMAND")
        g.required = True
        _GROUPS[name] = g
    return _GROUPS[name]


def libiez_found() -> str:
    """Which libiez `iez run` would preload, and its version (iez_version()), for --version."""
    import ctypes
    import os

    from iez.preload import libiez_path

    try:
        path = libiez_path()
    except IezError as e:
        return f"libiez: not found ({e})"
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        lib.iez_version.restype = ctypes.c_char_p
        version = lib.iez_version().decode()
    except (OSError, AttributeError) as e:
        return f"libiez: {path} (cannot be loaded: {e})"
    return f"libiez {version}: {path}"


class _Version(argparse.Action):
    """--version: iez's version and the libiez it found, looked up only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"iez {__version__}\n{libiez_found()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    _GROUPS.clear()
    parser = argparse.ArgumentParser(prog="iez", description="iez: an end-to-end I/O control plane for Lustre")
    parser.add_argument("--version", action=_Version, help="iez's version and the libiez it found (path, version)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        module = importlib.import_module(f"{__name__}.{mod}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    keep_freed_memory()  # every iez process: the controller's jobs reuse the heap (iez.heap)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except IezError as e:
        print(f"iez: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)
