"""The cluster model: one MDS, OSSs, and the OSTs they serve, plus live statistics.

A cluster is described by a TOML file (see docs/cluster-toml.md):

    fsname = "iez"
    [mds]
    name = "mds0"
    [[oss]]
    name = "oss0"
    osts = [0, 1, 2, 3, 4]
    [ost_defaults]
    size = "10GiB"
    [[ost]]              # optional per-OST settings
    index = 3
    used = "2GiB"
    state = "degraded"
    [pools]
    fast = [0, 1, 2]

Pure data: loading parses text, nothing here touches a file system other than reading the TOML.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from iez.errors import ConfigError
from iez.units import parse_size

# OST states as the MDS sees them through the OSP statfs flags (lustre-allocator.md §0, §2c):
# inactive OSTs take no objects; degraded ones only when nothing else is left (speed 2);
# readonly/nocreate/full ones take none.
OST_STATES = ("active", "inactive", "degraded", "readonly", "nocreate")

# Defaults of the seed-000 testbed (seed 000 §II-D): 1 MDS, 3 OSSs x 5 OSTs of 10 GB.
DEFAULT_OSS = 3
DEFAULT_OSTS_PER_OSS = 5
DEFAULT_OST_SIZE = 10 << 30
DEFAULT_FSNAME = "iez"

# Bandwidths used by the simulator when the TOML gives none (bytes/s). The seeds do not give
# hardware figures for their testbeds; these are a single SATA/SAS-class OST and a 10 GbE NIC.
DEFAULT_OST_READ_BW = 500e6
DEFAULT_OST_WRITE_BW = 400e6
DEFAULT_NIC_BW = 1.25e9


@dataclass(frozen=True)
class OST:
    index: int
    oss: str
    capacity: int  # bytes (kbytestotal * 1024)
    used: int = 0  # bytes already used by other data when the model was loaded
    state: str = "active"
    read_bw: float = DEFAULT_OST_READ_BW
    write_bw: float = DEFAULT_OST_WRITE_BW

    def uuid(self, fsname: str) -> str:
        return ost_uuid(fsname, self.index)

    @property
    def avail(self) -> int:
        return max(0, self.capacity - self.used)


@dataclass(frozen=True)
class OSS:
    name: str
    osts: tuple[int, ...]
    nid: str = ""
    nic_bw: float = DEFAULT_NIC_BW


@dataclass(frozen=True)
class MDS:
    name: str = "mds0"
    nid: str = ""
    create_rate: float = 20000.0  # creates/s, for metadata storms in the simulator


def ost_name(fsname: str, index: int) -> str:
    """Target name as Lustre prints it: `<fsname>-OST%04x`."""
    return f"{fsname}-OST{index:04x}"


def ost_uuid(fsname: str, index: int) -> str:
    return ost_name(fsname, index) + "_UUID"


@dataclass(frozen=True)
class Cluster:
    fsname: str
    mds: MDS
    osses: tuple[OSS, ...]
    osts: tuple[OST, ...]  # in add (config-log) order, normally ascending index
    pools: dict[str, tuple[int, ...]] = field(default_factory=dict)
    default_stripe_count: int = 1
    default_stripe_size: int = 1 << 20
    qos_threshold_rr: int = 17  # percent, lod.*.qos_threshold_rr
    qos_prio_free: int = 90  # percent, lod.*.qos_prio_free (2.15+ default)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for o in self.osts:
            if o.index in seen:
                raise ConfigError(f"OST index {o.index} is defined twice")
            seen.add(o.index)
        owners = {o.index: o.oss for o in self.osts}
        for s in self.osses:
            for i in s.osts:
                if owners.get(i) != s.name:
                    raise ConfigError(f"OSS {s.name} lists OST {i}, which it does not own")
        for name, members in self.pools.items():
            for i in members:
                if i not in seen:
                    raise ConfigError(f"pool {name!r} names unknown OST index {i}")

    # -- lookups ---------------------------------------------------------------------------
    def ost(self, index: int) -> OST:
        for o in self.osts:
            if o.index == index:
                return o
        raise ConfigError(f"unknown OST index {index} (this cluster has {self.ost_indices()})")

    def ost_indices(self) -> list[int]:
        return [o.index for o in self.osts]

    def oss_of(self, index: int) -> str:
        return self.ost(index).oss

    def oss_by_name(self, name: str) -> OSS:
        for s in self.osses:
            if s.name == name:
                return s
        raise ConfigError(f"unknown OSS {name!r}")

    def pool(self, name: str) -> tuple[int, ...]:
        if not name:
            return tuple(self.ost_indices())
        try:
            return self.pools[name]
        except KeyError:
            raise ConfigError(f"unknown pool {name!r} (pools: {sorted(self.pools) or 'none'})") from None

    @property
    def total_capacity(self) -> int:
        return sum(o.capacity for o in self.osts)

    def with_used(self, used: dict[int, int]) -> "Cluster":
        """A copy whose OSTs carry the given used bytes (unlisted OSTs keep theirs)."""
        osts = tuple(replace(o, used=used.get(o.index, o.used)) for o in self.osts)
        return replace(self, osts=osts)


def make_cluster(
    n_oss: int = DEFAULT_OSS,
    osts_per_oss: int = DEFAULT_OSTS_PER_OSS,
    ost_size: int = DEFAULT_OST_SIZE,
    fsname: str = DEFAULT_FSNAME,
) -> Cluster:
    """A uniform cluster; OST indices are assigned OSS by OSS (oss0 has 0..k-1, ...)."""
    if n_oss < 1 or osts_per_oss < 1:
        raise ConfigError("a cluster needs at least one OSS with at least one OST")
    if ost_size <= 0:
        raise ConfigError("OST size must be positive")
    validate_fsname(fsname)
    osses, osts = [], []
    for s in range(n_oss):
        idx = tuple(range(s * osts_per_oss, (s + 1) * osts_per_oss))
        osses.append(OSS(name=f"oss{s}", osts=idx))
        osts.extend(OST(index=i, oss=f"oss{s}", capacity=ost_size) for i in idx)
    return Cluster(fsname=fsname, mds=MDS(), osses=tuple(osses), osts=tuple(osts))


def validate_fsname(fsname: str) -> None:
    # Lustre fsnames are at most 8 characters of [A-Za-z0-9_-] (mkfs.lustre --fsname).
    if not (1 <= len(fsname) <= 8) or not all(c.isalnum() or c in "_-" for c in fsname):
        raise ConfigError(f"bad fsname {fsname!r}: 1-8 characters of letters, digits, '_' or '-'")


def load_cluster(path: str | Path) -> Cluster:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read cluster file {p}: {e.strerror}") from None
    return parse_cluster(text, source=str(p))


def parse_cluster(text: str, source: str = "<cluster>") -> Cluster:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None
    try:
        return _from_doc(doc)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"{source}: malformed cluster description ({e})") from None


def _from_doc(doc: dict[str, Any]) -> Cluster:
    fsname = str(doc.get("fsname", DEFAULT_FSNAME))
    validate_fsname(fsname)
    mds_t = doc.get("mds", {})
    mds = MDS(
        name=str(mds_t.get("name", "mds0")),
        nid=str(mds_t.get("nid", "")),
        create_rate=float(mds_t.get("create_rate", MDS.create_rate)),
    )
    oss_list = doc.get("oss")
    if not isinstance(oss_list, list) or not oss_list:
        raise ConfigError("no [[oss]] entries: a cluster needs at least one OSS")
    defaults = doc.get("ost_defaults", {})
    d_size = parse_size(defaults.get("size", DEFAULT_OST_SIZE), "ost_defaults.size")
    d_rbw = float(defaults.get("read_bw", DEFAULT_OST_READ_BW))
    d_wbw = float(defaults.get("write_bw", DEFAULT_OST_WRITE_BW))
    per_ost = {}
    for t in doc.get("ost", []):
        if "index" not in t:
            raise ConfigError("an [[ost]] entry has no index")
        per_ost[_index(t["index"])] = t
    osses, osts = [], []
    for s in oss_list:
        name = s.get("name")
        if not name:
            raise ConfigError("an [[oss]] entry has no name")
        idx = tuple(_index(i) for i in s.get("osts", []))
        if not idx:
            raise ConfigError(f"OSS {name} has no osts")
        osses.append(OSS(name=str(name), osts=idx, nid=str(s.get("nid", "")),
                         nic_bw=float(s.get("nic_bw", DEFAULT_NIC_BW))))
        for i in idx:
            t = per_ost.pop(i, {})
            state = str(t.get("state", "active"))
            if state not in OST_STATES:
                raise ConfigError(f"OST {i}: state {state!r} is not one of {', '.join(OST_STATES)}")
            cap = parse_size(t.get("size", d_size), f"OST {i} size")
            used = parse_size(t.get("used", 0), f"OST {i} used")
            if cap <= 0:
                raise ConfigError(f"OST {i}: size must be positive")
            if used > cap:
                raise ConfigError(f"OST {i}: used ({used}) exceeds size ({cap})")
            osts.append(OST(index=i, oss=str(name), capacity=cap, used=used, state=state,
                            read_bw=float(t.get("read_bw", d_rbw)),
                            write_bw=float(t.get("write_bw", d_wbw))))
    if per_ost:
        raise ConfigError(f"[[ost]] entries for OSTs no OSS serves: {sorted(per_ost)}")
    pools = {str(k): tuple(_index(i) for i in v) for k, v in doc.get("pools", {}).items()}
    for k in pools:
        if len(k) > 15:  # LOV_MAXPOOLNAME (lustre-layout-abi.md §1)
            raise ConfigError(f"pool name {k!r} is longer than 15 characters")
    lod = doc.get("lod", {})
    defaults_t = doc.get("defaults", {})
    return Cluster(
        fsname=fsname,
        mds=mds,
        osses=tuple(osses),
        osts=tuple(osts),
        pools=pools,
        default_stripe_count=int(defaults_t.get("stripe_count", 1)),
        default_stripe_size=parse_size(defaults_t.get("stripe_size", 1 << 20), "defaults.stripe_size"),
        qos_threshold_rr=_percent(lod.get("qos_threshold_rr", 17), "lod.qos_threshold_rr"),
        qos_prio_free=_percent(lod.get("qos_prio_free", 90), "lod.qos_prio_free"),
        raw=doc,
    )


def _index(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > 0xFFFF:
        raise ConfigError(f"bad OST index {v!r}: expected an integer 0..65535")
    return v


def _percent(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 100:
        raise ConfigError(f"{what}: expected a percentage 0..100, got {v!r}")
    return v


def dump_cluster(c: Cluster) -> str:
    """TOML text that load_cluster reads back to an equal Cluster."""
    lines = [f'fsname = "{c.fsname}"', "", "[mds]", f'name = "{c.mds.name}"']
    if c.mds.nid:
        lines.append(f'nid = "{c.mds.nid}"')
    lines += ["", "[defaults]", f"stripe_count = {c.default_stripe_count}",
              f"stripe_size = {c.default_stripe_size}", "", "[lod]",
              f"qos_threshold_rr = {c.qos_threshold_rr}", f"qos_prio_free = {c.qos_prio_free}"]
    for s in c.osses:
        lines += ["", "[[oss]]", f'name = "{s.name}"', f"osts = {list(s.osts)}"]
        if s.nid:
            lines.append(f'nid = "{s.nid}"')
        if s.nic_bw != DEFAULT_NIC_BW:
            lines.append(f"nic_bw = {s.nic_bw!r}")
    for o in c.osts:
        lines += ["", "[[ost]]", f"index = {o.index}", f"size = {o.capacity}"]
        if o.used:
            lines.append(f"used = {o.used}")
        if o.state != "active":
            lines.append(f'state = "{o.state}"')
        if o.read_bw != DEFAULT_OST_READ_BW:
            lines.append(f"read_bw = {o.read_bw!r}")
        if o.write_bw != DEFAULT_OST_WRITE_BW:
            lines.append(f"write_bw = {o.write_bw!r}")
    if c.pools:
        lines += ["", "[pools]"] + [f"{k} = {list(v)}" for k, v in sorted(c.pools.items())]
    return "\n".join(lines) + "\n"


# -- live statistics --------------------------------------------------------------------------


@dataclass(frozen=True)
class OSTStats:
    """What a collector reads for one OST (obdfilter.*.kbytes*, obdfilter stats as rates)."""

    index: int
    kbytestotal: int
    kbytesavail: int
    kbytesfree: int | None = None
    read_bps: float = 0.0
    write_bps: float = 0.0
    state: str = "active"
    time: float = 0.0  # when it was read (epoch seconds)

    @property
    def bavail(self) -> int:
        return self.kbytesavail * 1024

    @property
    def used_fraction(self) -> float:
        if self.kbytestotal <= 0:
            return 1.0
        free = self.kbytesfree if self.kbytesfree is not None else self.kbytesavail
        return (self.kbytestotal - free) / self.kbytestotal


@dataclass(frozen=True)
class OSSStats:
    name: str
    cpu: float = 0.0  # load average / cores, 0..1+ (seed 000 §III-B1 reads /proc/loadavg)
    mem: float = 0.0  # used memory fraction 0..1 (/proc/meminfo)
    time: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    """Live statistics of a cluster at one moment: the input the allocators see."""

    time: float
    osts: dict[int, OSTStats]
    osses: dict[str, OSSStats] = field(default_factory=dict)

    @classmethod
    def from_cluster(cls, c: Cluster, time: float = 0.0) -> "Snapshot":
        """Statistics as the cluster model states them (capacity and used bytes, idle servers)."""
        osts = {
            o.index: OSTStats(index=o.index, kbytestotal=o.capacity // 1024,
                              kbytesavail=o.avail // 1024, kbytesfree=o.avail // 1024,
                              state=o.state, time=time)
            for o in c.osts
        }
        return cls(time=time, osts=osts, osses={s.name: OSSStats(s.name, time=time) for s in c.osses})

    def bavail(self, index: int) -> int:
        return self.osts[index].bavail

    def active(self) -> list[int]:
        return [i for i, s in self.osts.items() if s.state == "active"]

    def with_ost(self, stats: OSTStats) -> "Snapshot":
        osts = dict(self.osts)
        osts[stats.index] = stats
        return replace(self, osts=osts)


def states_ok(indices: Iterable[int], snap: Snapshot) -> list[int]:
    """The OSTs of `indices` that may take new objects at all (active or degraded)."""
    return [i for i in indices if snap.osts.get(i) and snap.osts[i].state in ("active", "degraded")]
