"""The on-disk shape of an emulated cluster (docs/emulated.md) and `iez emulate init`."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, replace
from pathlib import Path

from iez.cluster import Cluster, check_host_name, dump_cluster, load_cluster
from iez.errors import BackendError, ConfigError
from iez.layout.layout import FileLayout

MARKER = ".iez-emulated"
XATTR = "user.lustre.lov"  # the real client's `lustre.lov`, in the namespace users may write


@dataclass(frozen=True)
class ClusterDir:
    root: Path

    @property
    def fs(self) -> Path:
        return self.root / "fs"

    @property
    def params(self) -> Path:
        return self.root / "params"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def sock(self) -> Path:
        return self.run / "mds.sock"

    @property
    def ipc(self) -> str:
        return f"ipc://{self.run / 'mds.ipc'}"

    @property
    def pidfile(self) -> Path:
        return self.run / "mds.pid"

    @property
    def log(self) -> Path:
        return self.run / "mds.log"

    def host_params(self, host: str) -> Path:
        """params/<host>/: `host` must be a safe host name (iez.cluster.HOST_NAME), so it can
        never climb out of params/ ('../../etc') or name a hidden file."""
        return self.params / check_host_name(host)

    def cluster(self) -> Cluster:
        return load_cluster(self.root / "cluster.toml")


def stored_form(fl: FileLayout) -> FileLayout:
    """The layout as the MDS stores it: PFL components numbered 1..n (lcme_id; a create
    request carries 0). In the emulation the client writes the xattr, so it numbers them."""
    if not fl.components:
        return fl
    return replace(fl, components=tuple(replace(c, id=c.id or i + 1) for i, c in enumerate(fl.components)))


def directory_default(cd: "ClusterDir", path: Path) -> FileLayout | None:
    """The default layout a new file at `path` inherits: that of the nearest directory above it,
    up to the mount, that has one (set with `iez setstripe DIR`), as Lustre's MDS applies a
    directory's default striping to the files created in it."""
    from iez.layout import lum

    d = path.parent
    while True:
        try:
            return lum.decode(os.getxattr(d, XATTR))
        except OSError:
            pass  # no default here (or the directory went away): look further up
        if d == cd.fs or cd.fs not in d.parents:
            return None
        d = d.parent


def inherit(req: FileLayout, default: FileLayout | None) -> FileLayout:
    """A create's layout with what it leaves unset taken from the directory default, as LOD
    fills a new file's layout from its parent's (lod_object.c): a request that sets nothing
    takes the default whole; a plain one takes the default's count, size and pool where it has
    0 / "" (what is still unset then gets the file system's defaults)."""
    if default is None or req.plain is None:
        return req
    r = req.plain
    if r.stripe_count == 0 and r.stripe_size == 0 and r.stripe_offset == -1 and not r.osts and not r.pool:
        return default
    if default.plain is None:
        return req
    d = default.plain
    return FileLayout(plain=replace(r, stripe_count=r.stripe_count or (0 if r.osts else d.stripe_count),
                                    stripe_size=r.stripe_size or d.stripe_size, pool=r.pool or d.pool))


def open_cluster_dir(path: str | Path) -> ClusterDir:
    root = Path(path).absolute()
    if not (root / MARKER).exists() or not (root / "cluster.toml").exists():
        raise ConfigError(f"{root} is not an emulated iez cluster (make one with: iez emulate init {path})")
    return ClusterDir(root)


def find_cluster_dir(path: Path) -> Path | None:
    """The emulated cluster whose `fs/` holds `path`, if any."""
    for a in [path, *path.parents]:
        if a.name == "fs" and (a.parent / MARKER).exists():
            return a.parent
    return None


def check_user_xattrs(directory: Path) -> None:
    probe = directory / ".iez-xattr-probe"
    try:
        probe.touch()
        os.setxattr(probe, XATTR, b"probe")
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            raise BackendError(
                f"the file system under {directory} refuses user xattrs ({e.strerror}); the emulated "
                "cluster stores layouts in user.lustre.lov: use ext4, xfs, btrfs or tmpfs "
                "(ext4 needs the user_xattr mount option on old kernels)") from None
        raise BackendError(f"cannot probe xattrs under {directory}: {e.strerror}") from None
    finally:
        probe.unlink(missing_ok=True)


def init_cluster_dir(path: str | Path, cluster: Cluster) -> ClusterDir:
    root = Path(path).absolute()
    if root.exists() and any(root.iterdir()):
        if (root / MARKER).exists():
            raise ConfigError(f"{root} already holds an emulated cluster")
        raise ConfigError(f"{root} exists and is not empty: choose an empty or new directory")
    cd = ClusterDir(root)
    existed = root.exists()
    for d in (cd.fs, cd.params, cd.run):
        d.mkdir(parents=True, exist_ok=True)
    try:
        check_user_xattrs(cd.fs)
    except BackendError:
        # leave the directory as we found it
        for d in (cd.fs, cd.params, cd.run):
            d.rmdir()
        if not existed:
            root.rmdir()
        raise
    (root / "cluster.toml").write_text(dump_cluster(cluster))
    (root / MARKER).write_text("iez emulated Lustre cluster; see docs/emulated.md\n")
    return cd
