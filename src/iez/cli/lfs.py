"""lfs-style commands that work on both backends, with lfs's options and output formats
(Lustre 2.15's, docs/lustre-formats.md): `iez df`, `iez getstripe`, `iez setstripe` (PFL with
`-E`, several files, `-d`) and `iez find` (files by OST, stripe count, pool, type, name)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from iez.backend import Backend, backend_for
from iez.errors import IezError, LayoutError, one_line
from iez.layout.layout import LUSTRE_EOF, PATTERN_MDT, Component, FileLayout, Layout
from iez.lustre import getstripe as gs
from iez.units import parse_size

SETSTRIPE_USAGE = """usage: iez setstripe [--component-end|-E END] [--stripe-count|-c COUNT]
                     [--stripe-size|-S SIZE] [--stripe-index|-i INDEX] [--ost|-o OST_LIST]
                     [--pool|-p POOL] [--layout|-L mdt|raid0] [-E END ...] FILE|DIR ...
       iez setstripe -d DIR ...

Create each FILE with this layout, or set (-d: delete) the default layout of each existing DIR,
printing nothing, as lfs setstripe; iez getstripe shows what each got. Options as lfs's: -c4,
--stripe-count=4 and -c 4 are the same; sizes take K/M/G suffixes (powers of 1024); -c -1 is
every OST; -o takes lists such as 1,3,5-7; each -E starts a PFL component that ends at END
(-1 or eof: the end of the file) and takes the options after it.
"""

# lfs setstripe's options: long name -> short letter; which take a value
_SET_LONG = {"stripe-count": "c", "stripe_count": "c", "count": "c", "stripe-size": "S", "stripe_size": "S",
             "size": "S", "stripe-index": "i", "stripe_index": "i", "index": "i", "ost": "o", "ost-list": "o",
             "pool": "p", "component-end": "E", "layout": "L", "delete": "d", "help": "h"}
_SET_VALUED = set("cSiopEL")


def register(sub: argparse._SubParsersAction) -> None:
    # add_help=False: -h means --human-readable, as in lfs df
    p = sub.add_parser("df", add_help=False, help="space (or inodes) per MDT and OST, as lfs df prints it",
                       description="Space or inodes per MDT and OST, in lfs df's format.")
    p.add_argument("path", nargs="?", default=".")
    p.add_argument("-h", "--human-readable", action="store_true", help="sizes in K/M/G/T (base 1024)")
    p.add_argument("-i", "--inodes", action="store_true", help="inodes instead of space")
    p.add_argument("-l", "--lazy", action="store_true", help="skip unreachable OSTs (accepted; iez never waits on one)")
    p.add_argument("-p", "--pool", default="", metavar="[FSNAME.]POOL", help="only the OSTs of this pool")
    p.add_argument("-v", "--verbose", action="store_true", help="also list inactive OSTs")
    p.add_argument("--json", action="store_true", help="the rows as JSON (numbers in KiB, or inodes with -i)")
    p.add_argument("--help", action="help", help="show this help")
    p.set_defaults(func=cmd_df)

    p = sub.add_parser("getstripe", help="the layout of files and directories, as lfs getstripe prints it",
                       description="The layout of each FILE, or the default layout of each DIR and the "
                                   "layouts of the files in it, in lfs getstripe's format.")
    p.add_argument("paths", nargs="*", metavar="FILE|DIR")
    for flags, dest, what in ((("-c", "--stripe-count", "--count"), "count", "the stripe count"),
                              (("-S", "--stripe-size", "--size"), "size", "the stripe size"),
                              (("-i", "--stripe-index", "--index"), "index", "the first stripe's OST"),
                              (("-p", "--pool"), "pool", "the pool"),
                              (("-L", "--layout"), "layout", "the layout pattern"),
                              (("-g", "--generation"), "generation", "the layout generation"),
                              (("-F", "--fid"), "fid", "the FID"),
                              (("--component-count",), "comp_count", "the number of components")):
        p.add_argument(*flags, dest=dest, action="store_true", help=f"only {what}")
    p.add_argument("-I", "--component-id", nargs="?", const="", metavar="ID",
                   help="alone: only component ids; with ID: only that component")
    p.add_argument("--component-flags", nargs="?", const="", metavar="FLAGS",
                   help="alone: only flags; with FLAGS (init,^init,...): components with them")
    p.add_argument("--component-start", nargs="?", const="", metavar="[+-]N", help="alone: only starts; else a filter")
    p.add_argument("-E", "--component-end", nargs="?", const="", metavar="[+-]N", help="alone: only ends; else a filter")
    p.add_argument("-m", "--mdt-index", "--mdt", dest="mdt", action="store_true", help="only the MDT index")
    p.add_argument("-v", "--verbose", action="store_true", help="every field, with magic, FID and offsets")
    p.add_argument("-y", "--yaml", action="store_true", help="YAML, as lfs setstripe --yaml reads it")
    p.add_argument("-d", "--directory", action="store_true", help="a directory's default only, not its files")
    p.add_argument("-r", "--recursive", action="store_true", help="all the way down")
    p.add_argument("-q", "--quiet", action="store_true", help="only the objects")
    p.add_argument("-R", "--raw", action="store_true", help="a directory's default as stored (0 = the fs default)")
    p.add_argument("--json", action="store_true", help="the layouts as JSON")
    p.set_defaults(func=cmd_getstripe)

    # lfs's option grammar (-E starts a component) is ordered, which argparse cannot express:
    # take every token as a positional (prefix "+") and parse them in parse_setstripe.
    p = sub.add_parser("setstripe", usage=SETSTRIPE_USAGE, prefix_chars="+", add_help=False,
                       help="create files with a layout (plain, explicit OST list, or PFL with -E), or set a directory's default")
    p.add_argument("spec", nargs="*", help="options as for lfs setstripe, then FILE or DIR (several allowed)")
    p.set_defaults(func=cmd_setstripe)

    p = sub.add_parser("find", help="files by OST, stripe count, pool, type or name, as lfs find finds them",
                       description="Paths under DIR that match every test given, one a line, as lfs find prints "
                                   "them. --ost finds the files with an object on a (hot) OST.")
    p.add_argument("paths", nargs="+", metavar="DIR|FILE")
    p.add_argument("-O", "--ost", "--obd", action="append", default=[], metavar="INDEX[,INDEX...]",
                   help="files with an object on one of these OSTs (indices, ranges, or fsname-OSTxxxx_UUID)")
    p.add_argument("-c", "--stripe-count", metavar="[+-]N", help="stripe count N, more than N (+N) or fewer (-N)")
    p.add_argument("--pool", metavar="POOL", help="files with a component in this pool")
    p.add_argument("-t", "--type", choices=("f", "d"), help="f: regular files, d: directories")
    p.add_argument("-n", "--name", metavar="GLOB", help="base name matches this shell pattern")
    p.add_argument("--maxdepth", type=int, default=-1, metavar="N", help="descend at most N levels")
    p.add_argument("-0", "--print0", action="store_true", help="end each path with NUL, not newline")
    p.set_defaults(func=cmd_find)


# -- df ---------------------------------------------------------------------------------------------


def cmd_df(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from iez.lustre.lfsdf import format_lfs_df, summarize

    b = backend_for(args.path)
    rows = b.df(inodes=args.inodes)
    if args.pool:
        pool = args.pool.split(".", 1)[-1]  # lfs df takes FSNAME.POOL or POOL
        members = set(b.pool_osts(pool))
        rows = [r for r in rows if r.kind != "OST" or r.index in members]
    if not args.verbose:  # lfs df lists an inactive OST only with -v
        rows = [r for r in rows if r.status != "inactive device"]
    if args.json:
        unit = "inodes" if args.inodes else "KiB"
        print(json.dumps({"mount": str(b.mount), "unit": unit, "targets": [asdict(r) for r in rows],
                          "summary": asdict(summarize(rows, args.inodes))}, indent=1))
        return 0
    print(format_lfs_df(rows, str(b.mount), human=args.human_readable, inodes=args.inodes), end="")
    return 0


# -- getstripe ------------------------------------------------------------------------------------


def _range(text: str, what: str) -> gs.Range:
    """lfs find's "[+-]N[KMG]" (N may be EOF or -1 for --component-end)."""
    sign = {"+": -1, "-": 1}.get(text[:1], 0)
    body = text[1:] if sign else text
    if text in ("EOF", "eof", "-1"):
        return gs.Range(LUSTRE_EOF)
    return gs.Range(parse_size(body, what), sign)


def _comp_flags(text: str) -> tuple[int, int]:
    """--component-flags=init,^stale: flags every component shown has, and flags none has."""
    want = neg = 0
    for word in text.split(","):
        try:
            bit = gs.parse_comp_flags(word.lstrip("^"))
        except (KeyError, ValueError):
            raise LayoutError(f"bad component flag {word!r} (names: init, stale, prefer, nosync, ...)") from None
        if word.startswith("^"):
            neg |= bit
        else:
            want |= bit
    return want, neg


def getstripe_show(args: argparse.Namespace) -> gs.Show:
    """The verbose mask and path printing lfs.c's lfs_getstripe_internal derives from the options."""
    filters: dict[str, Any] = {}
    verbose, depth = 0, 1
    for on, bit in ((args.count, gs.VERBOSE_COUNT), (args.size, gs.VERBOSE_SIZE), (args.index, gs.VERBOSE_OFFSET),
                    (args.pool, gs.VERBOSE_POOL), (args.layout, gs.VERBOSE_PATTERN),
                    (args.generation, gs.VERBOSE_GENERATION), (args.fid, gs.VERBOSE_DFID),
                    (args.comp_count, gs.VERBOSE_COMP_COUNT)):
        if on:
            verbose, depth = verbose | bit, 0
    for value, bit, key, parse in ((args.component_id, gs.VERBOSE_COMP_ID, "comp_id", lambda t: int(t, 0)),
                                   (args.component_flags, gs.VERBOSE_COMP_FLAGS, "comp_flags", _comp_flags),
                                   (args.component_start, gs.VERBOSE_COMP_START, "comp_start",
                                    lambda t: _range(t, "--component-start")),
                                   (args.component_end, gs.VERBOSE_COMP_END, "comp_end",
                                    lambda t: _range(t, "--component-end"))):
        if value == "":  # the option alone: show that field
            verbose, depth = verbose | bit, 0
        elif value is not None:
            filters[key] = parse(value)
    if args.directory or args.mdt:
        depth = 0
    if args.verbose:
        verbose = gs.VERBOSE_DEFAULT | gs.VERBOSE_DETAIL
    if args.recursive:
        depth = -1
    elif verbose & gs.VERBOSE_DETAIL:
        depth = 1
    if args.quiet:
        verbose = gs.VERBOSE_OBJID
    return gs.Show(verbose or gs.VERBOSE_DEFAULT, depth, args.yaml, args.raw, **filters)


def _take_back_paths(args: argparse.Namespace) -> None:
    """An option with an optional value (-I, --component-*) given alone before a path takes the
    path as its value in argparse; lfs (getopt) would not: give the path back."""
    for dest in ("component_id", "component_flags", "component_start", "component_end"):
        value = getattr(args, dest)
        if value and os.path.lexists(value):
            args.paths.insert(0, value)
            setattr(args, dest, "")


def _walk(path: str, depth: int) -> Iterator[tuple[str, bool]]:
    """(path, is_dir) of `path` and, for a directory, what lies below it down to `depth`
    levels (-1: all), as lfs's param_callback visits them (names sorted here)."""
    is_dir = os.path.isdir(path)
    yield path, is_dir
    if not is_dir or depth == 0:
        return
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise IezError(f"cannot read directory {path}: {e.strerror}") from None
    base = path if path.endswith("/") else path + "/"
    for name in names:
        yield from _walk(base + name, depth - 1 if depth > 0 else -1)


def _stripe_json(f: gs.FileStripe) -> dict[str, Any]:
    parts = f.layout.parts() if f.layout is not None else ()
    objects = f.objects or tuple(() for _ in parts)
    return {"path": f.path, "directory_default": f.is_default, "layout_gen": f.layout_gen,
            "composite": bool(f.layout and f.layout.components),
            "components": [{"id": c.id, "flags": gs.comp_flags_name(c.flags), "start": c.start,
                            "end": None if c.end == LUSTRE_EOF else c.end,
                            "stripe_count": c.layout.stripe_count, "stripe_size": c.layout.stripe_size,
                            "stripe_offset": c.layout.stripe_offset, "pattern": gs.pattern_name(c.layout.pattern),
                            "pool": c.layout.pool, "osts": list(c.layout.osts),
                            "objects": [{"ost": o.ost_idx, "objid": o.objid, "group": o.seq} for o in objs]}
                           for c, objs in zip(parts, objects)]}


def cmd_getstripe(args: argparse.Namespace) -> int:
    _take_back_paths(args)
    if not args.paths:
        print("iez getstripe: error: give a FILE or DIR (iez getstripe --help)", file=sys.stderr)
        return 2
    show = getstripe_show(args)
    rc, found = 0, []
    defaults: dict[str, Layout] = {}
    for top in args.paths:
        try:
            b = backend_for(top)
            for path, is_dir in _walk(top, show.depth):
                if args.mdt:  # cb_get_mdt_index
                    index = b.mdt_index(path)
                    print(f"{path}\nmdt_index:\t{index}" if show.verbose & gs.VERBOSE_DETAIL else index)
                    continue
                f = b.getstripe(path)
                if args.json:
                    found.append(_stripe_json(f))
                    continue
                if is_dir and str(b.mount) not in defaults:
                    defaults[str(b.mount)] = b.fs_default()
                print(gs.format_stripe(f, show, defaults.get(str(b.mount), Layout(1 << 20, 1))), end="")
        except (IezError, OSError) as e:
            print(f"iez: error: {top}: {one_line(e) if isinstance(e, IezError) else e.strerror}", file=sys.stderr)
            rc = 1
    if args.json:
        print(json.dumps(found, indent=1))
    return rc


# -- setstripe ------------------------------------------------------------------------------------


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


def setstripe_tokens(tokens: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Split lfs setstripe's argv as getopt_long does: options in order as (letter, value) —
    `-c4`, `-c 4`, `--stripe-count=4` and `--stripe-count 4` alike — and the paths."""
    opts: list[tuple[str, str]] = []
    paths: list[str] = []
    it = iter(tokens)
    for tok in it:
        if tok == "--":
            paths.extend(it)
            break
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            letter = _SET_LONG.get(name)
            if letter is None:
                raise LayoutError(f"unknown option --{name} (iez setstripe --help)")
        elif tok.startswith("-") and len(tok) > 1:
            letter, value, eq = tok[1], tok[2:], "=" if len(tok) > 2 else ""
            if letter not in _SET_VALUED and letter not in "dh":
                raise LayoutError(f"unknown option -{letter} (iez setstripe --help)")
            if letter not in _SET_VALUED and value:
                raise LayoutError(f"option -{letter} takes no value (got {tok})")
        else:
            paths.append(tok)
            continue
        if letter in _SET_VALUED and not eq:
            value = next(it, None)  # type: ignore[assignment]
            if value is None:
                raise LayoutError(f"option {tok} needs a value (iez setstripe --help)")
        opts.append((letter, value))
    return opts, paths


def parse_setstripe(tokens: list[str]) -> tuple[FileLayout, list[str], bool]:
    """lfs setstripe's options and paths -> (layout, paths, delete); `-E` starts a PFL component."""
    opts, paths = setstripe_tokens(tokens)
    if not paths:
        raise LayoutError("no FILE or DIR given (iez setstripe --help)")
    delete = any(k == "d" for k, _ in opts)
    if delete and len(opts) > 1:
        raise LayoutError("-d deletes a directory's default layout and takes no other option")
    try:
        return _layout_from_options([(k, v) for k, v in opts if k != "d"]), paths, delete
    except ValueError as e:  # int() of a count or index
        raise LayoutError(f"bad setstripe option value: {e}") from None


def _layout_from_options(opts: list[tuple[str, str]]) -> FileLayout:
    comps: list[tuple[int | None, dict]] = [(None, {})]
    for key, val in opts:
        cur = comps[-1][1]
        if key == "E":
            end = LUSTRE_EOF if val in ("-1", "eof", "EOF") else parse_size(val, "-E")
            if comps[-1][0] is None and not comps[-1][1] and len(comps) == 1:
                comps[-1] = (end, {})
            else:
                comps.append((end, {}))
        elif key == "c":
            cur["stripe_count"] = int(val)
        elif key == "S":
            cur["stripe_size"] = parse_size(val, "-S")
        elif key == "i":
            cur["stripe_offset"] = int(val)
        elif key == "o":
            cur["osts"] = parse_ost_list(val)
        elif key == "p":
            cur["pool"] = val
        elif key == "L":
            if val not in ("mdt", "raid0"):
                raise LayoutError(f"-L takes mdt or raid0, not {val!r}")
            if val == "mdt":
                cur["pattern"] = PATTERN_MDT
    if comps[0][0] is None:
        if len(comps) > 1:
            raise LayoutError("-E must come before the first component's options")
        return FileLayout(plain=Layout(**comps[0][1]))
    parts, start = [], 0
    for comp_end, kw in comps:
        if comp_end is None or comp_end <= start:
            raise LayoutError(f"component ends must increase (got {comp_end} after {start})")
        if kw.get("pattern") == PATTERN_MDT and "stripe_size" not in kw:
            kw["stripe_size"] = comp_end  # lfs: a DoM component's stripe size is its end
        parts.append(Component(start, comp_end, Layout(**kw)))
        start = comp_end
    return FileLayout(components=tuple(parts))


def cmd_setstripe(args: argparse.Namespace) -> int:
    if any(t in ("-h", "--help") for t in args.spec):
        print(SETSTRIPE_USAGE, end="")
        return 0
    if not args.spec:
        print(SETSTRIPE_USAGE, end="", file=sys.stderr)
        return 2
    fl, paths, delete = parse_setstripe(args.spec)
    rc = 0
    for target in paths:  # lfs goes on with the next path after a failure, and fails at the end
        try:
            _setstripe_one(target, fl, delete)
        except IezError as e:
            print(f"iez: error: {target}: {one_line(e)}", file=sys.stderr)
            rc = max(rc, e.exit_code)
    return rc


def _setstripe_one(target: str, fl: FileLayout, delete: bool) -> None:
    b = backend_for(target)
    if delete:
        if not os.path.isdir(target):
            raise LayoutError(f"-d deletes a directory's default layout; {target} is not a directory")
        b.set_default(target, Layout())  # all-default: the MDS drops the default (lfs setstripe -d)
    elif os.path.isdir(target):  # a directory: the default of the files created in it
        b.set_default(target, fl)
    else:
        b.create(target, fl)


# -- find -----------------------------------------------------------------------------------------


def _ost_indices(values: list[str]) -> set[int]:
    from iez.lustre.targets import parse_target_name

    out: set[int] = set()
    for v in values:
        for part in v.split(","):
            named = parse_target_name(part.removesuffix("_UUID"))
            out.update([named[2]] if named else parse_ost_list(part))
    return out


def _count_test(text: str) -> Callable[[int], bool]:
    try:
        r = gs.Range(int(text.lstrip("+-")), {"+": -1, "-": 1}.get(text[:1], 0))
    except ValueError:
        raise LayoutError(f"--stripe-count takes [+-]N, not {text!r}") from None
    return r.matches


def find_matches(f: gs.FileStripe, osts: set[int], count: Callable[[int], bool] | None, pool: str | None) -> bool:
    """lfs find's layout tests on one file: an object on one of `osts`; the stripe count of the
    last instantiated component (find_get_stripe_count); a component in `pool`."""
    if f.layout is None:
        return not (osts or count or pool)
    parts = f.layout.parts()
    if osts:
        inst = [c for c in parts if f.layout.plain is not None or c.flags & gs.LCME_FL_INIT]
        if not any(i in osts for c in inst for i in c.layout.osts):
            return False
    if count is not None:
        inst = [c for c in parts if f.layout.plain is not None or c.flags & gs.LCME_FL_INIT]
        if not inst or not count(inst[-1].layout.stripe_count):
            return False
    return not pool or any(c.layout.pool == pool for c in parts)


def cmd_find(args: argparse.Namespace) -> int:
    osts = _ost_indices(args.ost)
    count = _count_test(args.stripe_count) if args.stripe_count else None
    layout_test = bool(osts or count or args.pool)
    end = "\0" if args.print0 else "\n"
    rc = 0
    for top in args.paths:
        try:
            b: Backend = backend_for(top)
            for path, is_dir in _walk(top, args.maxdepth):
                if args.type and args.type != ("d" if is_dir else "f"):
                    continue
                if args.name and not fnmatch.fnmatchcase(Path(path).name, args.name):
                    continue
                if layout_test and (is_dir or not find_matches(b.getstripe(path), osts, count, args.pool)):
                    continue
                sys.stdout.write(path + end)
        except IezError as e:
            print(f"iez: error: {top}: {one_line(e)}", file=sys.stderr)
            rc = 1
    return rc
