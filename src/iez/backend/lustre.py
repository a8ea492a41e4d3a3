"""The `lustre` backend: a real Lustre client mount.

Create with a layout as llapi_file_open_param() does (docs/references.md#l-abi-setstripe,
#l-abi-recipe): open with
O_LOV_DELAY_CREATE so no objects are allocated, then LL_IOC_LOV_SETSTRIPE with the
lov_user_md, and verify the result with the `lustre.lov` xattr. Statistics come from the
client's parameter tree (`lov.*`, `osc.*`) through the same parsers as everywhere else.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import os
from pathlib import Path

from iez.cluster import OSTStats, Snapshot
from iez.errors import BackendError
from iez.layout.layout import FileLayout, Layout

LL_SUPER_MAGIC = 0x0BD00BD0  # statfs f_type of a Lustre client mount (docs/references.md#l-abi-super-magic)
# O_LOV_DELAY_CREATE (2.6+) = O_LOV_DELAY_CREATE_1_8 | O_NOCTTY | FASYNC; the kernel only
# recognises the mask form on modern kernels (docs/references.md#l-abi-delay-create), which is what
# matters here.
O_LOV_DELAY_CREATE = 0o100000000 | os.O_NOCTTY | 0o20000
LL_IOC_LOV_SETSTRIPE = 0x4008669A  # _IOW('f', 154, long) on LP64 (docs/references.md#l-abi-setstripe)
XATTR_LOV = "lustre.lov"
LL_IOC_GET_MDTIDX = 0x800466AF  # _IOR('f', 175, int), lustre_user.h: what lfs getstripe -m calls
LL_IOC_PATH2FID = 0x801066AD  # _IOR('f', 173, struct lu_fid), lustre_user.h: what lfs path2fid calls


class _Statfs(ctypes.Structure):
    # struct statfs on Linux LP64 (x86_64, aarch64): f_type is the first word.
    _fields_ = [("f_type", ctypes.c_long), ("f_bsize", ctypes.c_long), ("f_blocks", ctypes.c_ulong),
                ("f_bfree", ctypes.c_ulong), ("f_bavail", ctypes.c_ulong), ("f_files", ctypes.c_ulong),
                ("f_ffree", ctypes.c_ulong), ("f_fsid", ctypes.c_int * 2), ("f_namelen", ctypes.c_long),
                ("f_frsize", ctypes.c_long), ("f_flags", ctypes.c_long), ("f_spare", ctypes.c_long * 4)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def fs_type(path: str | Path) -> int:
    """statfs(2) f_type of the file system holding `path` (its nearest existing ancestor)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    buf = _Statfs()
    if _libc.statfs(os.fsencode(str(p)), ctypes.byref(buf)) != 0:
        e = ctypes.get_errno()
        raise BackendError(f"statfs {p}: {os.strerror(e)}")
    return buf.f_type & 0xFFFFFFFF


def is_lustre(path: str | Path) -> bool:
    try:
        return fs_type(path) == LL_SUPER_MAGIC
    except BackendError:
        return False


def mount_point(path: str | Path) -> Path:
    p = Path(path).absolute()
    while not p.exists():
        p = p.parent
    while p != p.parent and not os.path.ismount(p):
        p = p.parent
    return p


_SETSTRIPE_ERRORS = {errno.EREMOTEIO: "an OST in the list is inactive",
                     errno.EINVAL: "bad OST index, duplicate OST, or offset not in the list"}


class LustreBackend:
    name = "lustre"

    def __init__(self, mount: str | Path):
        self.mount = Path(mount)
        if not is_lustre(self.mount):
            raise BackendError(f"{self.mount} is not a Lustre client mount (statfs f_type is not 0x0BD00BD0)")

    def create(self, path: str | Path, layout: Layout | FileLayout, mode: int = 0o644) -> FileLayout:
        from iez.layout import lum

        buf = bytearray(lum.encode(FileLayout.of(layout)))  # writable: the ioctl writes back
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_LOV_DELAY_CREATE
        try:
            fd = os.open(path, flags, mode)
        except OSError as e:
            raise BackendError(f"cannot create {path}: {e.strerror}") from None
        try:
            fcntl.ioctl(fd, LL_IOC_LOV_SETSTRIPE, buf)
        except OSError as e:
            os.close(fd)
            os.unlink(path)  # we created it a moment ago, layout-less: leave nothing behind
            why = _SETSTRIPE_ERRORS.get(e.errno or 0, e.strerror)
            raise BackendError(f"setstripe {path}: {why}") from None
        os.close(fd)
        # 2.16 may silently ignore the request for non-lfs programs (docs/references.md#l-abi-setstripe): verify.
        return self.get_layout(path)

    def set_default(self, directory: str | Path, layout: Layout | FileLayout) -> FileLayout:
        from iez.layout import lum

        buf = bytearray(lum.encode(FileLayout.of(layout)))
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            raise BackendError(f"setstripe {directory}: {e.strerror}") from None
        try:
            fcntl.ioctl(fd, LL_IOC_LOV_SETSTRIPE, buf)  # on a directory: its default (lfs setstripe DIR)
        except OSError as e:
            raise BackendError(f"setstripe {directory}: {e.strerror}") from None
        finally:
            os.close(fd)
        return self.get_layout(directory)

    def get_layout(self, path: str | Path) -> FileLayout:
        from iez.backend import layout_from_xattr

        # ENODATA: opened with O_LOV_DELAY_CREATE (or O_RDONLY) and never written: no layout yet
        # (docs/references.md#l-abi-xattr; why a file can be layout-less: #l-abi-delay-create)
        return layout_from_xattr(path, XATTR_LOV, "not instantiated yet")

    def fid(self, path: str | Path) -> tuple[int, int, int]:
        """The file's FID (LL_IOC_PATH2FID), as lfs path2fid gives it."""
        import struct

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            buf = fcntl.ioctl(fd, LL_IOC_PATH2FID, bytes(16))
        except OSError as e:
            raise BackendError(f"path2fid {path}: {e.strerror}") from None
        finally:
            os.close(fd)
        seq, oid, ver = struct.unpack("<QII", buf)
        return seq, oid, ver

    def mdt_index(self, path: str | Path) -> int:
        import struct

        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return struct.unpack("<i", fcntl.ioctl(fd, LL_IOC_GET_MDTIDX, bytes(4)))[0]
        except OSError as e:
            raise BackendError(f"get_mdtidx {path}: {e.strerror}") from None
        finally:
            os.close(fd)

    def getstripe(self, path: str | Path):
        from iez.backend import stripe_from_xattr

        return stripe_from_xattr(path, XATTR_LOV, self.fid(path))

    def pool_osts(self, pool: str) -> tuple[int, ...]:
        from iez.lustre.targets import parse_target_name

        members = self._tree().get(f"lov.*.pools.{pool}")
        if not members:
            raise BackendError(f"pool {pool!r} does not exist (lctl pool_list lists the pools)")
        names = (parse_target_name(w.removesuffix("_UUID")) for v in members.values() for w in v.split())
        return tuple(sorted({n[2] for n in names if n is not None and n[1] == "OST"}))

    def fs_default(self) -> Layout:
        from iez.lustre.targets import striping_tunables

        tree = self._tree()
        tunables, _ = striping_tunables({**tree.get("lov.*.stripecount"), **tree.get("lov.*.stripesize")})
        for t in tunables.values():  # the client's lov device(s); lfs takes its file system's
            return Layout(t.stripe_size or 1 << 20, t.stripe_count if t.stripe_count is not None else 1)
        raise BackendError("no lov.*.stripecount found: is a Lustre client mounted here?")

    def _tree(self):
        from iez.lustre.params import ParamTree

        return ParamTree("/")

    def stats(self) -> Snapshot:
        import time

        from iez.lustre.targets import target_space

        now = time.time()
        tree = self._tree()
        values = {**tree.get("osc.*.kbytestotal"), **tree.get("osc.*.kbytesavail"), **tree.get("osc.*.kbytesfree")}
        osts = {i: OSTStats(index=i, kbytestotal=t.kbytestotal, kbytesavail=t.kbytesavail,
                            kbytesfree=t.kbytesfree, time=now)
                for i, t in target_space(values).by_index("OST").items()
                if t.kbytestotal is not None and t.kbytesavail is not None}
        if not osts:
            raise BackendError("no osc.*.kbytestotal found: is a Lustre client mounted here?")
        return Snapshot(time=now, osts=osts)

    def df(self, inodes: bool = False):
        import subprocess

        from iez.lustre.lfsdf import parse_lfs_df

        # -v: inactive OSTs too (iez df drops them unless asked, as lfs df does)
        cmd = ["lfs", "df", "-v"] + (["-i"] if inodes else []) + [str(self.mount)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout
        except FileNotFoundError:
            raise BackendError("lfs is not installed on this client (install the lustre-client utilities)") from None
        except subprocess.CalledProcessError as e:
            raise BackendError(f"lfs df failed: {e.stderr.strip() or e.returncode}") from None
        return parse_lfs_df(out).targets
