"""Per-OST usage of an emulated cluster, derived from real file sizes and their layouts.

`ost_bytes` is pure; `UsageScanner` walks `fs/` and caches each file's layout by inode and
ctime, so a refresh re-reads only what changed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from iez.errors import IezError
from iez.layout.layout import FileLayout
from iez.layout.raid0 import bytes_per_ost
from iez.emulated.clusterdir import XATTR

BLOCK = 4096  # an OST object occupies whole blocks of its backing file system


def file_ost_bytes(size: int, fl: FileLayout) -> dict[int, int]:
    """Bytes one file of `size` bytes takes on each OST; objects round up to 4 KiB blocks."""
    return {ost: -(-n // BLOCK) * BLOCK for ost, n in bytes_per_ost(fl, size).items()}


def ost_bytes(files: Iterable[tuple[int, FileLayout]]) -> dict[int, int]:
    """Bytes each OST holds for files given as (size, layout)."""
    out: dict[int, int] = defaultdict(int)
    for size, fl in files:
        for ost, n in file_ost_bytes(size, fl).items():
            out[ost] += n
    return dict(out)


@dataclass
class ScanResult:
    bytes_on: dict[int, int]
    files: int
    no_layout: int  # regular files without a layout xattr
    objects: dict[int, int] = field(default_factory=dict)  # OST objects per OST
    bad_layout: list[str] = field(default_factory=list)


class UsageScanner:
    def __init__(self, fs_root: Path):
        self.fs_root = fs_root
        self._cache: dict[tuple[int, int], tuple[int, FileLayout | None]] = {}

    def scan(self) -> ScanResult:
        from iez.layout import lum

        out: dict[int, int] = defaultdict(int)
        objects: dict[int, int] = defaultdict(int)
        seen: dict[tuple[int, int], tuple[int, FileLayout | None]] = {}
        n = no_layout = 0
        bad: list[str] = []
        for dirpath, _dirs, names in os.walk(self.fs_root):
            for name in names:
                p = os.path.join(dirpath, name)
                try:
                    st = os.lstat(p)
                except FileNotFoundError:
                    continue
                if not (st.st_mode & 0o170000) == 0o100000:
                    continue
                n += 1
                key = (st.st_ino, st.st_ctime_ns)
                hit = self._cache.get(key)
                if hit is None:
                    try:
                        fl: FileLayout | None = lum.decode(os.getxattr(p, XATTR))
                    except OSError:
                        fl = None
                    except IezError:
                        fl = None
                        bad.append(p)
                    hit = (st.st_ino, fl)
                seen[key] = hit
                if hit[1] is None:
                    no_layout += 1
                    continue
                try:
                    for ost, b in file_ost_bytes(st.st_size, hit[1]).items():
                        out[ost] += b
                    for ost in hit[1].osts():
                        objects[ost] += 1
                except IezError:  # a layout that does not name its OSTs: count it, don't guess
                    bad.append(p)
        self._cache = seen
        return ScanResult(bytes_on=dict(out), files=n, no_layout=no_layout, bad_layout=bad,
                          objects=dict(objects))
