"""The `emulated` backend: an emulated Lustre cluster directory (docs/emulated.md).

Create asks the emulated MDS for the layout (as a real create goes through LOD), creates the
file with O_EXCL and stores the `lov_user_md` in `user.lustre.lov`. Usage and df come from a
scan of the files and their layouts, the same computation the MDS publishes in `params/`.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import replace
from pathlib import Path

from iez.backend import layout_from_xattr, stripe_from_xattr
from iez.cluster import Snapshot
from iez.emulated.mds_client import MdsClient
from iez.emulated.clusterdir import XATTR, find_cluster_dir, open_cluster_dir, stored_form
from iez.emulated.mds import df_rows, snapshot_from_space, space_from_scan
from iez.emulated.usage import UsageScanner
from iez.errors import BackendError
from iez.layout.layout import FileLayout, Layout
from iez.lustre.getstripe import LCME_FL_INIT, FileStripe
from iez.lustre.lfsdf import DfRow
from iez.plan import format_layout, parse_layout

__all__ = ["EmulatedBackend", "find_cluster_dir"]


FID_SEQ_NORMAL = 0x2_0000_0400  # the first sequence an MDT hands to files (lustre_fid.h)


def emulated_fid(ino: int) -> tuple[int, int, int]:
    """A FID for an emulated file, from its inode number (an emulated MDT has no FIDs)."""
    return FID_SEQ_NORMAL + (ino >> 32), ino & 0xFFFF_FFFF, 0


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
        if fl == FileLayout(plain=Layout()):  # all defaults: no default left, as the MDS does (lfs setstripe -d)
            try:
                os.removexattr(d, XATTR)
            except OSError as e:
                if e.errno != errno.ENODATA:
                    raise BackendError(f"cannot delete the default layout of {directory}: {e.strerror}") from None
            return fl
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

    def getstripe(self, path: str | Path) -> FileStripe:
        """As Lustre shows it: a PFL component is instantiated (init, with objects) once the
        file reaches it (the first at create); the emulated MDS chose every component's OSTs
        at create, so a later one shows its OSTs only from then on. Objects have no ids here."""
        p = self._check_inside(Path(path))
        st = os.stat(p)
        fs = stripe_from_xattr(p, XATTR, emulated_fid(st.st_ino))
        fs = replace(fs, path=str(path))
        if fs.layout is None or fs.is_default or not fs.layout.components:
            return fs
        init = [i == 0 or c.start < st.st_size for i, c in enumerate(fs.layout.components)]
        comps = tuple(replace(c, flags=c.flags | LCME_FL_INIT) if on
                      # the request's offset is gone (the MDS resolved it): -1, as for most requests
                      else replace(c, flags=c.flags & ~LCME_FL_INIT, layout=replace(c.layout, osts=(), stripe_offset=-1))
                      for on, c in zip(init, fs.layout.components))
        objects = tuple(objs if on else () for on, objs in zip(init, fs.objects)) if fs.objects else ()
        return replace(fs, layout=FileLayout(components=comps), objects=objects)

    def pool_osts(self, pool: str) -> tuple[int, ...]:
        return self.cluster.pool(pool)

    def mdt_index(self, path: str | Path) -> int:
        self._check_inside(Path(path))
        return 0  # one MDT (MDT0000)

    def fs_default(self) -> Layout:
        return Layout(self.cluster.default_stripe_size, self.cluster.default_stripe_count)

    def _space(self):
        scan = UsageScanner(self.cd.fs).scan()
        return scan, space_from_scan(self.cluster, scan)

    def stats(self) -> Snapshot:
        _, space = self._space()
        return snapshot_from_space(self.cluster, space, time.time())

    def df(self, inodes: bool = False) -> list[DfRow]:
        scan, space = self._space()
        return df_rows(self.cluster, space, scan.files, inodes)
