"""The backend interface: every file-system touch of iez goes through one of these.

Two implementations, each a small table of operations (as IOR's aiori backends are):
`lustre` (real ioctls, xattrs and parameter files) and `emulated` (a directory that behaves
as a Lustre client mount, see docs/emulated.md). `backend_for(path)` picks the one that serves
a path, so nothing above this layer knows which it talks to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from iez.cluster import Snapshot
from iez.errors import BackendError
from iez.layout.layout import FileLayout, Layout
from iez.lustre.lfsdf import DfRow


class Backend(Protocol):
    name: str
    mount: Path

    def create(self, path: str | Path, layout: Layout | FileLayout, mode: int = 0o644) -> FileLayout:
        """Create a new file with this layout (fails if it exists); returns the layout it got."""

    def get_layout(self, path: str | Path) -> FileLayout:
        """The layout stored with an existing file (a directory: its default layout)."""

    def set_default(self, directory: str | Path, layout: Layout | FileLayout) -> FileLayout:
        """Make `layout` the default of the files later created in `directory` (lfs setstripe DIR)."""

    def stats(self) -> Snapshot:
        """Live per-OST statistics as the MDS sees them."""

    def df(self, inodes: bool = False) -> list[DfRow]:
        """Per-target usage, the rows of `lfs df` in KiB (`-i`: inodes)."""


def layout_from_xattr(path: str | Path, attr: str, missing: str) -> FileLayout:
    """Decode the lov_user_md a file carries in xattr `attr`; `missing` says why it may lack one."""
    import errno
    import os

    from iez.layout import lum

    try:
        raw = os.getxattr(path, attr)
    except OSError as e:
        if e.errno == errno.ENODATA:
            raise BackendError(f"{path} has no layout ({missing})") from None
        raise BackendError(f"getstripe {path}: {e.strerror}") from None
    return lum.decode(raw)


def backend_for(path: str | Path) -> Backend:
    """The backend serving `path`: an emulated cluster if the path lies under one's `fs/`,
    else real Lustre if the path's file system is Lustre."""
    from iez.backend import emulated, lustre

    p = Path(path).absolute()
    root = emulated.find_cluster_dir(p)
    if root is not None:
        return emulated.EmulatedBackend(root)
    if lustre.is_lustre(p):
        return lustre.LustreBackend(lustre.mount_point(p))
    raise BackendError(f"{path} is on neither Lustre nor an emulated iez cluster (iez emulate init DIR makes one)")
