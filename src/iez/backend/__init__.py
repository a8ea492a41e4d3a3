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
from iez.lustre.getstripe import FileStripe
from iez.lustre.lfsdf import DfRow


class Backend(Protocol):
    name: str
    mount: Path

    def create(self, path: str | Path, layout: Layout | FileLayout, mode: int = 0o644) -> FileLayout:
        """Create a new file with this layout (fails if it exists); returns the layout it got."""

    def get_layout(self, path: str | Path) -> FileLayout:
        """The layout stored with an existing file (a directory: its default layout)."""

    def getstripe(self, path: str | Path) -> FileStripe:
        """What `lfs getstripe` reads of a file or directory: its layout (None when it has none),
        objects, generation and FID; a directory's is its default (`is_default`)."""

    def mdt_index(self, path: str | Path) -> int:
        """The MDT holding the file or directory (lfs getstripe -m)."""

    def fs_default(self) -> Layout:
        """The file system's default stripe count and size (lov.*.stripecount, stripesize)."""

    def pool_osts(self, pool: str) -> tuple[int, ...]:
        """The OST indices of a pool (lov.*.pools.POOL); an unknown pool is an error."""

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


def stripe_from_xattr(path: str | Path, attr: str, fid: tuple[int, int, int]) -> FileStripe:
    """The `lov_user_md` a file or directory carries in xattr `attr`, as lfs getstripe shows it:
    read back, objects carry their ids (docs/references.md#l-abi-xattr); no xattr, no layout."""
    import errno
    import os
    import stat

    from iez.layout import lum
    from iez.lustre.getstripe import StripeObject

    is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    try:
        raw = os.getxattr(path, attr)
    except OSError as e:
        if e.errno == errno.ENODATA:
            return FileStripe(str(path), None, is_default=is_dir, fid=fid)
        raise BackendError(f"getstripe {path}: {e.strerror}") from None
    fl = lum.decode(raw)
    md = lum.parse(raw)

    def objects(lmm: lum.Lmm) -> tuple[StripeObject, ...]:
        # struct ost_id: {oi_id, oi_seq} with oi_seq 0 (an IDIF object), else a FID {f_seq; f_oid, f_ver}
        return tuple(StripeObject(o.ost_idx, o.oi_id) if o.oi_seq == 0 else
                     StripeObject.from_fid(o.ost_idx, o.oi_id, o.oi_seq & 0xFFFF_FFFF, o.oi_seq >> 32)
                     for o in lmm.objects if o.ost_idx != lum.DUMMY_OST)

    if isinstance(md, lum.Lmm):
        objs = (objects(md),) if fl.plain and fl.plain.osts else ()
        # read back from a file, the offset slot holds lmm_layout_gen; in a request, the offset
        gen = md.offset_or_gen if objs and not is_dir and md.magic != lum.LOV_USER_MAGIC_SPECIFIC else 0
        return FileStripe(str(path), fl, objs, gen, is_default=is_dir, fid=fid)
    per_comp = tuple(objects(e.lmm) if c.layout.osts else () for c, e in zip(fl.parts(), md.entries))
    return FileStripe(str(path), fl, per_comp if any(per_comp) else (), md.layout_gen, md.mirror_count + 1,
                      is_default=is_dir, fid=fid)


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
