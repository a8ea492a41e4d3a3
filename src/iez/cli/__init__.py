"""The `iez` command. Each module in this package adds its subcommands through
`register(subparsers)`, so a new command never edits a shared list.

Errors a user can fix (bad input, missing backend) are IezError: printed as one line, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from iez import __version__
from iez.errors import IezError


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


def build_parser() -> argparse.ArgumentParser:
    _GROUPS.clear()
    parser = argparse.ArgumentParser(prog="iez", description="iez: an end-to-end I/O control plane for Lustre")
    parser.add_argument("--version", action="version", version=f"iez {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        module = importlib.import_module(f"{__name__}.{mod}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except IezError as e:
        print(f"iez: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)
