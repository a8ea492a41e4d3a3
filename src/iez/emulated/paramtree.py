"""Lustre-style parameter trees of an emulated cluster, one per host (docs/emulated.md).

Files sit where a 2.15 server keeps them (docs/references.md#l-fmt-paths): space counters in sysfs
(`sys/fs/lustre/obdfilter/<ost>/kbytes*`, since 2.11), `obdfilter.*.stats` in procfs, LOD
tunables in sysfs and `target_obd` in procfs on the MDS, and the MDS's view of each OST through
its OSP device. Values use the 2.15.3+ text formats. `render_*` are pure; `write_tree` writes
each file atomically so a collector never reads half a file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from iez.cluster import Cluster, ost_name, ost_uuid
from iez.errors import BackendError
from iez.lustre.parse import Times
from iez.lustre.stats import Counter, Stats, format_stats
from iez.lustre.targets import TargetObd, format_target_obd

RPC_SIZE = 1 << 20  # emulated bulk RPCs are 1 MiB (max_pages_per_rpc 256, the pre-2.16 default)
VERSION = "2.15.5"
MASK64 = (1 << 64) - 1


@dataclass
class Accumulator:
    """One lprocfs counter being counted, with min/max/sum/sumsq (LPROCFS_CNTR_AVGMINMAX |
    STDDEV); `counter()` is what a stats file shows of it."""

    samples: int = 0
    min: int = 0
    max: int = 0
    sum: int = 0
    sumsq: int = 0

    def add(self, value: int, times: int = 1) -> None:
        if times <= 0:
            return
        self.min = value if self.samples == 0 else min(self.min, value)
        self.max = max(self.max, value)
        self.samples += times
        self.sum += value * times
        self.sumsq = (self.sumsq + value * value * times) & MASK64  # u64, wraps as in the kernel

    def add_bytes(self, nbytes: int, rpc_size: int = RPC_SIZE) -> None:
        """Account `nbytes` moved as full RPCs plus one partial one."""
        full, rest = divmod(nbytes, rpc_size)
        self.add(rpc_size, full)
        if rest:
            self.add(rest)

    def counter(self, name: str, unit: str) -> Counter:
        return Counter(name, self.samples, unit, self.min, self.max, self.sum, self.sumsq)


@dataclass
class OSTCounters:
    write_bytes: Accumulator = field(default_factory=Accumulator)
    read_bytes: Accumulator = field(default_factory=Accumulator)


def render_stats(counters: dict[str, tuple[Accumulator, str]], now: float, start: float) -> str:
    """An lprocfs stats file, 2.15.3+ header; only counters with samples are printed."""
    ns = int(round(now * 1e9))
    start_ns = int(round(start * 1e9))
    return format_stats(Stats(Times(ns, start_ns, max(0, ns - start_ns)),
                              tuple(a.counter(name, unit) for name, (a, unit) in counters.items() if a.samples)))


@dataclass(frozen=True)
class OSTSpace:
    kbytestotal: int
    kbytesfree: int
    kbytesavail: int
    filestotal: int
    filesfree: int


def render_host() -> dict[str, str]:
    """The host's own /proc/loadavg and /proc/meminfo, for its collector's `--proc`. An
    emulated OSS or MDS is an idle server of its own (64 GiB), not the machine running the
    emulation, whose load would otherwise read as every server's."""
    gib = 64 << 20  # KiB
    return {"proc/loadavg": "0.00 0.00 0.00 1/256 1\n",
            "proc/meminfo": f"MemTotal:       {gib} kB\nMemFree:        {gib - (2 << 20)} kB\n"
                            f"MemAvailable:   {gib - (2 << 20)} kB\n"}


def render_oss(cluster: Cluster, oss: str, space: dict[int, OSTSpace],
               counters: dict[int, OSTCounters], now: float, start: float) -> dict[str, str]:
    """Files of one OSS host's tree, relative to the host prefix."""
    out = {"sys/fs/lustre/version": VERSION + "\n", "sys/fs/lustre/health_check": "healthy\n", **render_host()}
    for i in cluster.oss_by_name(oss).osts:
        name = ost_name(cluster.fsname, i)
        sp = space[i]
        sysd = f"sys/fs/lustre/obdfilter/{name}"
        out[f"{sysd}/kbytestotal"] = f"{sp.kbytestotal}\n"
        out[f"{sysd}/kbytesfree"] = f"{sp.kbytesfree}\n"
        out[f"{sysd}/kbytesavail"] = f"{sp.kbytesavail}\n"
        out[f"{sysd}/filestotal"] = f"{sp.filestotal}\n"
        out[f"{sysd}/filesfree"] = f"{sp.filesfree}\n"
        out[f"{sysd}/blocksize"] = "4096\n"
        c = counters.get(i, OSTCounters())
        out[f"proc/fs/lustre/obdfilter/{name}/stats"] = render_stats(
            {"read_bytes": (c.read_bytes, "bytes"), "write_bytes": (c.write_bytes, "bytes")}, now, start)
    return out


def render_mds(cluster: Cluster, space: dict[int, OSTSpace], qos_maxage: int = 5) -> dict[str, str]:
    """Files of the MDS host's tree: LOD tunables, target_obd, and OSP views of every OST."""
    mdt = f"{cluster.fsname}-MDT0000"
    lod = f"{mdt}-mdtlov"
    active = [o for o in cluster.osts if o.state != "inactive"]
    out = {
        **render_host(),
        "sys/fs/lustre/version": VERSION + "\n",
        "sys/fs/lustre/health_check": "healthy\n",
        f"sys/fs/lustre/lod/{lod}/qos_threshold_rr": f"{cluster.qos_threshold_rr}%\n",
        f"sys/fs/lustre/lod/{lod}/qos_prio_free": f"{cluster.qos_prio_free}%\n",
        f"sys/fs/lustre/lod/{lod}/qos_maxage": f"{qos_maxage}\n",
        f"sys/fs/lustre/lod/{lod}/stripesize": f"{cluster.default_stripe_size}\n",
        f"sys/fs/lustre/lod/{lod}/stripecount": f"{cluster.default_stripe_count}\n",
        f"sys/fs/lustre/lod/{lod}/stripeoffset": "-1\n",
        f"sys/fs/lustre/lod/{lod}/numobd": f"{len(cluster.osts)}\n",
        f"sys/fs/lustre/lod/{lod}/activeobd": f"{len(active)}\n",
        # `lfs osts` format: "%d: %s %sACTIVE" (docs/references.md#l-fmt-getstripe)
        f"proc/fs/lustre/lod/{lod}/target_obd": format_target_obd(
            [TargetObd(o.index, ost_uuid(cluster.fsname, o.index), o.state != "inactive") for o in cluster.osts]),
    }
    for o in cluster.osts:
        osp = f"sys/fs/lustre/osp/{ost_name(cluster.fsname, o.index)}-osc-MDT0000"
        sp = space[o.index]
        out[f"{osp}/kbytestotal"] = f"{sp.kbytestotal}\n"
        out[f"{osp}/kbytesfree"] = f"{sp.kbytesfree}\n"
        out[f"{osp}/kbytesavail"] = f"{sp.kbytesavail}\n"
        out[f"{osp}/active"] = f"{0 if o.state == 'inactive' else 1}\n"
        out[f"{osp}/max_create_count"] = f"{0 if o.state == 'nocreate' else 20000}\n"
    return out


# What this process last wrote to each parameter file, with the file's identity right after
# (inode, size, mtime, ctime): a file that still has it holds that text, so a value that did not
# change costs one stat instead of a read (the MDS rewrites about 13,000 files a second at the
# centre's scale, a thousand of which change). A file another process wrote or replaced, or
# removed, has another identity and is read and rewritten (since Linux 6.13 a change after a
# stat gets a fine-grained ctime; before, a same-size write in place within the clock tick of
# ours went unseen until the next change); a fresh process knows nothing and reads every file once.
_written: dict[str, tuple[str, tuple[int, int, int, int]]] = {}


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def write_tree(prefix: Path, files: dict[str, str]) -> None:
    base = os.fspath(prefix)
    for rel, text in files.items():
        # the names come from the cluster (fsname), which its schema keeps safe; still, a
        # parameter file is written below its host's prefix or not at all
        if rel.startswith("/") or ".." in rel.split("/"):
            raise BackendError(f"parameter file {rel!r} would be written outside {prefix}")
        path = f"{base}/{rel}"
        last = _written.get(path)
        if last is not None and last[0] == text:
            try:
                if _identity(os.stat(path, follow_symlinks=False)) == last[1]:
                    continue
            except OSError:
                pass
        elif last is None and (st := _same_text(path, text)) is not None:
            _written[path] = (text, st)
            continue
        _written[path] = (text, _replace(path, text))


def _same_text(path: str, text: str) -> tuple[int, int, int, int] | None:
    """The identity of the file at `path` if it holds `text` (else None)."""
    data = text.encode()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        return _identity(st) if st.st_size == len(data) and os.read(fd, len(data) + 1) == data else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _replace(path: str, text: str) -> tuple[int, int, int, int]:
    """Write `path` atomically (a collector never reads half a file); its identity after."""
    head, name = os.path.split(path)
    tmp = f"{head}/.{name}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:
        os.makedirs(head, exist_ok=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        data = memoryview(text.encode())
        while data:
            data = data[os.write(fd, data):]
        os.replace(tmp, path)
        return _identity(os.fstat(fd))  # after the rename, which changes the ctime
    finally:
        os.close(fd)
