"""The `emulated` backend: an emulated Lustre cluster directory (docs/emulated.md).

Create asks the emulated MDS for the layout (as a real create goes through LOD), creates the
file with O_EXCL and stores the `lov_user_md` in `user.lustre.lov`. Usage and df come from a
scan of the files and their layouts, the same computation the MDS publishes in `params/`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from iez.backend import layout_from_xattr
from iez.cluster import Snapshot
from iez.emulated.mds_client import MdsClient
from iez.emulated.clusterdir import XATTR, find_cluster_dir, open_cluster_dir, stored_form
from iez.emulated.mds import df_rows, snapshot_from_space, space_from_scan
from iez.emulated.usage import UsageScanner
from iez.errors import BackendError
from iez.layout.layout import FileLayout, Layout
from iez.lustre.lfsdf import DfRow
from iez.plan import format_layout, parse_layout

__all__ = ["EmulatedBackend", "find_cluster_dir"]


class EmulatedBackend:
    name = "emulated"

    def __init__(self, cluster_dir: str | Path):
        self.cd = open_cluster_dir(cluster_dir)
        self.mount = self.cd.fs
        self.cluster = self.cd.cluster()

    def _check_inside(self, path: Path) -> Path:
        p = Path(os.path.abspath(path))
        if find_cluster_dir(p) != self.cd.root:
            raise BackendError(f"{path} is not under {self.cd.fs}")
        return p

    def create(self, path: str | Path, layout: Layout | FileLayout, mode: int = 0o644) -> FileLayout:
        from iez.layout import lum

        p = self._check_inside(Path(path))
        if p.exists():
            raise BackendError(f"cannot create {path}: File exists (a layout is set once, at create)")
        got = stored_form(parse_layout(MdsClient(self.cd).alloc(str(p), format_layout(FileLayout.of(layout)))))
        buf = lum.encode(got)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except OSError as e:
            raise BackendError(f"cannot create {path}: {e.strerror}") from None
        try:
            os.setxattr(fd, XATTR, buf)
        except OSError as e:
            os.unlink(p)  # created a moment ago by us: leave nothing layout-less behind
            raise BackendError(f"cannot store the layout of {path} in {XATTR}: {e.strerror}") from None
        finally:
            os.close(fd)
        return got

    def set_default(self, directory: str | Path, layout: Layout | FileLayout) -> FileLayout:
        from iez.layout import lum

        d = self._check_inside(Path(directory))
        if not d.is_dir():
            raise BackendError(f"{directory} is not a directory")
        fl = FileLayout.of(layout)
        known = set(self.cluster.ost_indices())
        for i in fl.osts():
            if i not in known:
                raise BackendError(f"setstripe {directory}: unknown OST index {i}")
        for c in fl.parts():
            if c.layout.pool:
                self.cluster.pool(c.layout.pool)  # unknown pool: one-line error
        try:
            os.setxattr(d, XATTR, lum.encode(fl))
        except OSError as e:
            raise BackendError(f"cannot store the default layout of {directory}: {e.strerror}") from None
        return fl

    def get_layout(self, path: str | Path) -> FileLayout:
        self._check_inside(Path(path))
        return layout_from_xattr(path, XATTR, f"no {XATTR} xattr: created outside iez's emulated MDS")

    def _space(self):
        scan = UsageScanner(self.cd.fs).scan()
        return scan, space_from_scan(self.cluster, scan)

    def stats(self) -> Snapshot:
        _, space = self._space()
        return snapshot_from_space(self.cluster, space, time.time())

    def df(self, inodes: bool = False) -> list[DfRow]:
        scan, space = self._space()
        return df_rows(self.cluster, space, scan.files, inodes)
