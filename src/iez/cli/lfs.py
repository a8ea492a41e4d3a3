"""lfs-style commands that work on both backends, printing lfs's own formats:
`iez df`, `iez getstripe`, `iez setstripe` (including PFL components with `-E`)."""

from __future__ import annotations

import argparse
import os
import sys
from iez.backend import backend_for
from iez.errors import IezError, LayoutError
from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.units import parse_size

SETSTRIPE_USAGE = ("iez setstripe [-E END] [-c COUNT] [-S SIZE] [-i INDEX] [-o OST_LIST] [-p POOL] "
                   "[-E END ...] FILE")


def register(sub: argparse._SubParsersAction) -> None:
    # add_help=False: -h means --human-readable, as in lfs df
    p = sub.add_parser("df", add_help=False, help="space (or inodes) per MDT and OST, as lfs df prints it")
    p.add_argument("path", nargs="?", default=".")
    p.add_argument("-h", "--human-readable", action="store_true", help="sizes in K/M/G/T (base 1024)")
    p.add_argument("-i", "--inodes", action="store_true", help="inodes instead of space")
    p.add_argument("--help", action="help", help="show this help")
    p.set_defaults(func=cmd_df)

    p = sub.add_parser("getstripe", help="the layout of a file, as lfs getstripe prints it")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_getstripe)

    # lfs's option grammar (-E starts a component) is ordered, which argparse cannot express:
    # take every token as a positional (prefix "+") and parse them in parse_setstripe.
    p = sub.add_parser("setstripe", usage=SETSTRIPE_USAGE, prefix_chars="+", add_help=False,
                       help="create a file with a layout (plain, explicit OST list, or PFL with -E)")
    p.add_argument("spec", nargs="*", help="options as for lfs setstripe, then FILE")
    p.set_defaults(func=cmd_setstripe)


def cmd_df(args: argparse.Namespace) -> int:
    from iez.lustre.lfsdf import format_lfs_df

    b = backend_for(args.path)
    print(format_lfs_df(b.df(inodes=args.inodes), str(b.mount), human=args.human_readable, inodes=args.inodes), end="")
    return 0


def cmd_getstripe(args: argparse.Namespace) -> int:
    from iez.lustre.getstripe import format_dir_default, format_getstripe

    rc = 0
    for f in args.files:
        try:
            fl = backend_for(f).get_layout(f)
        except IezError as e:
            print(f"iez: error: {e}", file=sys.stderr)
            rc = 2
            continue
        print((format_dir_default if os.path.isdir(f) else format_getstripe)(f, fl), end="")
    return rc


def parse_ost_list(text: str) -> tuple[int, ...]:
    """lfs's OST list syntax: "1,3,5-7" -> (1, 3, 5, 6, 7)."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        try:
            if dash:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise LayoutError(f"bad OST list {text!r} (examples: 1,3,5-7)") from None
    return tuple(out)


def parse_setstripe(tokens: list[str]) -> tuple[FileLayout, str]:
    """Turn lfs setstripe options into a layout; `-E` starts a PFL component (-1/eof = EOF)."""
    if not tokens:
        raise LayoutError(f"usage: {SETSTRIPE_USAGE}")
    *opts, target = tokens
    if target.startswith("-"):
        raise LayoutError(f"no FILE given (usage: {SETSTRIPE_USAGE})")
    try:
        return _layout_from_options(opts), target
    except ValueError as e:  # int() of a count or index
        raise LayoutError(f"bad setstripe option value: {e}") from None


def _layout_from_options(opts: list[str]) -> FileLayout:
    comps: list[tuple[int | None, dict]] = [(None, {})]
    it = iter(opts)
    for tok in it:
        try:
            val = next(it)
        except StopIteration:
            raise LayoutError(f"option {tok} needs a value") from None
        cur = comps[-1][1]
        if tok in ("-E", "--component-end"):
            end = LUSTRE_EOF if val in ("-1", "eof", "EOF") else parse_size(val, "-E")
            if comps[-1][0] is None and not comps[-1][1] and len(comps) == 1:
                comps[-1] = (end, {})
            else:
                comps.append((end, {}))
        elif tok in ("-c", "--stripe-count"):
            cur["stripe_count"] = int(val)
        elif tok in ("-S", "--stripe-size"):
            cur["stripe_size"] = parse_size(val, "-S")
        elif tok in ("-i", "--stripe-index"):
            cur["stripe_offset"] = int(val)
        elif tok in ("-o", "--ost"):
            cur["osts"] = parse_ost_list(val)
        elif tok in ("-p", "--pool"):
            cur["pool"] = val
        else:
            raise LayoutError(f"unknown option {tok} (usage: {SETSTRIPE_USAGE})")
    if comps[0][0] is None:
        if len(comps) > 1:
            raise LayoutError("-E must come before the first component's options")
        return FileLayout(plain=Layout(**comps[0][1]))
    parts, start = [], 0
    for comp_end, kw in comps:
        if comp_end is None or comp_end <= start:
            raise LayoutError(f"component ends must increase (got {comp_end} after {start})")
        parts.append(Component(start, comp_end, Layout(**kw)))
        start = comp_end
    return FileLayout(components=tuple(parts))


def cmd_setstripe(args: argparse.Namespace) -> int:
    from iez.lustre.getstripe import format_dir_default, format_getstripe

    fl, target = parse_setstripe(args.spec)
    if os.path.isdir(target):  # a directory: the default of the files created in it
        print(format_dir_default(target, backend_for(target).set_default(target, fl)), end="")
        return 0
    got = backend_for(target).create(target, fl)
    print(format_getstripe(target, got), end="")
    return 0
