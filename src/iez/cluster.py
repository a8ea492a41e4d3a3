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
    [[router]]           # optional topology: LNet routers and the client groups reaching them
    name = "rtr0"
    oss = ["oss0"]
    [[client_group]]
    name = "cab0"
    nodes = ["nid[00000-00099]"]
    routers = ["rtr0"]

Pure data: loading parses text, nothing here touches a file system other than reading the TOML.
Every cluster description goes through one schema (`SCHEMA` and the checks of `cluster_from_doc`):
types, ranges, unique names, no unknown keys; every error is one `ConfigError` line naming the
key, e.g. `cluster.toml: ost[1].write_bw: expected a finite number > 0, got nan`.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

import tomli_w

from iez.errors import ConfigError, shown
from iez.layout.layout import LOV_MAX_STRIPE_COUNT, LOV_MAXPOOLNAME, LOV_MIN_STRIPE_SIZE, STRIPE_SIZE_LIMIT
from iez.units import format_size, parse_size

# OST states as the MDS sees them through the OSP statfs flags (docs/references.md#l-alloc-tunables, #l-alloc-rr):
# inactive OSTs take no objects; degraded ones only when nothing else is left (speed 2);
# readonly/nocreate/full ones take none.
OST_STATES = ("active", "inactive", "degraded", "readonly", "nocreate")

# Defaults of the seed-000 testbed (docs/references.md#s000-testbed): 1 MDS, 3 OSSs x 5 OSTs of 10 GB.
DEFAULT_OSS = 3
DEFAULT_OSTS_PER_OSS = 5
DEFAULT_OST_SIZE = 10 << 30
DEFAULT_FSNAME = "iez"

# Bandwidths used by the simulator when the TOML gives none (bytes/s). The seeds do not give
# hardware figures for their testbeds; these are a single SATA/SAS-class OST and a 10 GbE NIC.
DEFAULT_OST_READ_BW = 500e6
DEFAULT_OST_WRITE_BW = 400e6
DEFAULT_NIC_BW = 1.25e9

# Host names (the MDS's, each OSS's) name directories (an emulated cluster's params/<host>/) and
# collectors: no '/', and no leading '.' or '-', so never '..', a hidden file or an option.
# The one definition of a safe host name; collector messages check theirs with it too.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HOST_NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
FSNAME = re.compile(r"[A-Za-z0-9_-]{1,8}")  # mkfs.lustre --fsname; it is part of target paths too
POOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,%d}" % LOV_MAXPOOLNAME)  # the plan file's pool characters
NID = re.compile(r"[A-Za-z0-9.@:,_\[\]-]{0,256}")  # 10.0.0.1@o2ib, 0@lo, [::1]@tcp, lists
MAX_OST_INDEX = 0xFFFE  # 0xFFFF is "any OST" in a lov_user_md (layout.validate_plain)
SITE_LAYOUTS = ("auto", "keep")  # [defaults] layout: the site's choice (docs/layouts.md)
MIN_OST_SIZE = 1 << 20  # below 1 MiB kbytes and the OSP's MiB watermarks round to nothing

# Every table and key a cluster file may hold ("oss" and "ost" are arrays of tables; [pools]
# maps pool names to OST lists; [sim] belongs to the simulator, which checks it: docs/simulator.md).
SCHEMA: dict[str, tuple[str, ...]] = {
    "": ("fsname", "mds", "defaults", "lod", "oss", "ost_defaults", "ost", "pools", "sim", "router",
         "client_group"),
    "mds": ("name", "nid", "create_rate"),
    "defaults": ("stripe_count", "stripe_size", "layout"),
    "lod": ("qos_threshold_rr", "qos_prio_free"),
    "oss": ("name", "osts", "nid", "nic_bw"),
    "ost_defaults": ("size", "read_bw", "write_bw"),
    "ost": ("index", "size", "used", "state", "read_bw", "write_bw"),
    "router": ("name", "bw", "group", "oss"),
    "client_group": ("name", "nodes", "ranks", "routers"),
}
MAX_NODES = 1 << 20  # client node names a topology may list (Titan had 18,688)
NODE_RANGE = re.compile(r"([A-Za-z0-9._-]*)\[(\d{1,7})-(\d{1,7})\]([A-Za-z0-9._-]*)")  # nid[00000-00099]


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


@dataclass(frozen=True)
class Router:
    """An LNet router: clients' traffic to the OSSs it serves crosses it (fine-grained routing)."""

    name: str
    osses: tuple[str, ...]  # the OSSs it serves
    bw: float = DEFAULT_NIC_BW
    group: str = ""  # its router group ("" = a group of its own)


@dataclass(frozen=True)
class ClientGroup:
    """Client nodes that reach the servers through the same routers."""

    name: str
    routers: tuple[str, ...]  # router names (a router group's name stands for its routers)
    nodes: tuple[str, ...] = ()
    ranks: tuple[int, int] | None = None  # ranks lo..hi of a job, when their host is not listed


@dataclass(frozen=True)
class Topology:
    """The I/O path from client nodes to OSSs: client groups -> routers -> OSSs."""

    routers: tuple[Router, ...]
    clients: tuple[ClientGroup, ...]
    by_host: dict[str, ClientGroup] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.by_host.update((n, g) for g in self.clients for n in g.nodes)

    def router_group(self, r: Router) -> str:
        return r.group or r.name

    def oss_router_bw(self, osses: list[str]) -> list[float]:
        """Per OSS (in `osses` order): the router bandwidth it can get, each router's split evenly
        among the OSSs it serves."""
        share = dict.fromkeys(osses, 0.0)
        for r in self.routers:
            for s in r.osses:
                share[s] += r.bw / len(r.osses)
        return [share[s] for s in osses]

    def group_of(self, host: str, rank: int) -> ClientGroup | None:
        """The client group of a process: by its host (as recorded, else its short name), else by
        its rank; None if neither is listed."""
        for name in (host, host.split(".")[0]):
            if name in self.by_host:
                return self.by_host[name]
        return next((g for g in self.clients if g.ranks and g.ranks[0] <= rank <= g.ranks[1]), None)


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
    # The site's layout mode, "auto" or "keep" (docs/layouts.md); "" = not set, iez's default.
    layout: str = ""
    topology: Topology | None = None  # None: clients reach every OSS directly
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        """What must hold however the cluster was made: its names are used in paths and as
        keys, its OSTs are served by exactly one OSS, its pools name its OSTs."""
        check_fsname(self.fsname)
        hosts: set[str] = set()
        for h, what in [(self.mds.name, "MDS name"), *((s.name, "OSS name") for s in self.osses)]:
            check_host_name(h, what)
            if h in hosts:  # each host has its own parameter tree and collector
                raise ConfigError(f"host name {h!r} is used twice")
            hosts.add(h)
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
            check_pool_name(name)
            for i in members:
                if i not in seen:
                    raise ConfigError(f"pool {name!r} names unknown OST index {i}")
            if len(set(members)) != len(members):
                raise ConfigError(f"pool {name!r} lists an OST twice: {list(members)}")

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
    """A uniform cluster; OST indices are assigned OSS by OSS (oss0 has 0..k-1, ...). It goes
    through the same schema as a cluster file."""
    if n_oss < 1 or osts_per_oss < 1:
        raise ConfigError("a cluster needs at least one OSS with at least one OST")
    if n_oss * osts_per_oss > MAX_OST_INDEX + 1:
        raise ConfigError(f"{n_oss} x {osts_per_oss} OSTs: a cluster has at most {MAX_OST_INDEX + 1}")
    return cluster_from_doc({
        "fsname": fsname, "ost_defaults": {"size": ost_size},
        "oss": [{"name": f"oss{s}", "osts": list(range(s * osts_per_oss, (s + 1) * osts_per_oss))}
                for s in range(n_oss)]})


def check_host_name(name: Any, what: str = "host name") -> str:
    """`name` if it is a safe host name (HOST_NAME), else a one-line ConfigError."""
    if not isinstance(name, str) or not HOST_NAME.fullmatch(name):
        raise ConfigError(f"{what}: expected {HOST_NAME_RULE}, got {shown(name)}")
    return name


def check_fsname(fsname: Any, what: str = "fsname") -> str:
    if not isinstance(fsname, str) or not FSNAME.fullmatch(fsname):
        raise ConfigError(f"{what}: expected 1-8 letters, digits, '_' or '-' (mkfs.lustre --fsname), "
                          f"got {shown(fsname)}")
    return fsname


def check_pool_name(name: Any, what: str = "pool name") -> str:
    if not isinstance(name, str) or not POOL_NAME.fullmatch(name):
        raise ConfigError(f"{what}: expected a pool name of 1-{LOV_MAXPOOLNAME} letters, digits, '_', '.' "
                          f"or '-', got {shown(name)}")
    return name


def load_cluster(path: str | Path) -> Cluster:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read cluster file {p}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not valid TOML: not UTF-8 text") from None
    return parse_cluster(text, source=str(p))


def parse_cluster(text: str, source: str = "<cluster>") -> Cluster:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{source}: not valid TOML: arrays or tables nested too deeply") from None
    try:
        return cluster_from_doc(doc)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def cluster_from_doc(doc: dict[str, Any]) -> Cluster:
    """A Cluster from a parsed cluster description (SCHEMA), or a one-line ConfigError naming
    the key at fault."""
    _table(doc, "", SCHEMA[""])
    fsname = check_fsname(doc.get("fsname", DEFAULT_FSNAME))
    mds_t = _table(doc.get("mds", {}), "mds", SCHEMA["mds"])
    mds = MDS(name=check_host_name(mds_t.get("name", "mds0"), "mds.name"),
              nid=_text(mds_t.get("nid", ""), "mds.nid", NID, "a Lustre NID (10.0.0.1@o2ib)"),
              create_rate=_positive(mds_t.get("create_rate", MDS.create_rate), "mds.create_rate"))
    base = _ost_settings(_table(doc.get("ost_defaults", {}), "ost_defaults", SCHEMA["ost_defaults"]),
                         "ost_defaults", {"size": DEFAULT_OST_SIZE, "used": 0, "state": "active",
                                          "read_bw": DEFAULT_OST_READ_BW, "write_bw": DEFAULT_OST_WRITE_BW})
    per_ost: dict[int, tuple[str, dict[str, Any]]] = {}
    for k, t in enumerate(_tables(doc.get("ost", []), "ost")):
        where = f"ost[{k}]"
        if "index" not in t:
            raise ConfigError(f"{where}.index: missing (which OST this entry sets)")
        i = _index(t["index"], f"{where}.index")
        if i in per_ost:
            raise ConfigError(f"{where}.index: OST {i} already has an entry ({per_ost[i][0]})")
        per_ost[i] = (where, _ost_settings(t, where, base))
    oss_list = _tables(doc.get("oss", []), "oss")
    if not oss_list:
        raise ConfigError("oss: no [[oss]] entries: a cluster needs at least one OSS")
    osses, osts = [], []
    for k, s in enumerate(oss_list):
        where = f"oss[{k}]"
        if "name" not in s:
            raise ConfigError(f"{where}.name: missing")
        name = check_host_name(s["name"], f"{where}.name")
        idx = _indices(s.get("osts", []), f"{where}.osts")
        if not idx:
            raise ConfigError(f"{where}.osts: expected a non-empty list of the OST indices it serves")
        osses.append(OSS(name=name, osts=idx,
                         nid=_text(s.get("nid", ""), f"{where}.nid", NID, "a Lustre NID (10.0.0.10@o2ib)"),
                         nic_bw=_positive(s.get("nic_bw", DEFAULT_NIC_BW), f"{where}.nic_bw")))
        for i in idx:
            at, o = per_ost.pop(i, (where, base))
            if o["used"] > o["size"]:
                raise ConfigError(f"{at}: OST {i}: used ({o['used']}) exceeds size ({o['size']})")
            osts.append(OST(index=i, oss=name, capacity=o["size"], used=o["used"], state=o["state"],
                            read_bw=o["read_bw"], write_bw=o["write_bw"]))
    if per_ost:
        raise ConfigError(f"{next(iter(per_ost.values()))[0]}: [[ost]] entries for OSTs no OSS "
                          f"serves: {sorted(per_ost)}")
    pools_t = _table(doc.get("pools", {}), "pools", None)
    pools = {check_pool_name(name, "pools"): _indices(v, f"pools.{name}") for name, v in pools_t.items()}
    _table(doc.get("sim", {}), "sim", None)
    d = _table(doc.get("defaults", {}), "defaults", SCHEMA["defaults"])
    stripe_size = _size(d.get("stripe_size", 1 << 20), "defaults.stripe_size", LOV_MIN_STRIPE_SIZE)
    if stripe_size >= STRIPE_SIZE_LIMIT or stripe_size % LOV_MIN_STRIPE_SIZE:
        raise ConfigError(f"defaults.stripe_size: expected a multiple of 64 KiB below 4 GiB, got {stripe_size}")
    lod = _table(doc.get("lod", {}), "lod", SCHEMA["lod"])
    topology = _topology(doc, [s.name for s in osses])
    return Cluster(
        fsname=fsname,
        mds=mds,
        osses=tuple(osses),
        osts=tuple(osts),
        pools=pools,
        default_stripe_count=_int(d.get("stripe_count", 1), "defaults.stripe_count", -1, LOV_MAX_STRIPE_COUNT),
        default_stripe_size=stripe_size,
        qos_threshold_rr=_int(lod.get("qos_threshold_rr", 17), "lod.qos_threshold_rr", 0, 100),
        qos_prio_free=_int(lod.get("qos_prio_free", 90), "lod.qos_prio_free", 0, 100),
        layout=_choice(d.get("layout", ""), "defaults.layout", SITE_LAYOUTS),
        topology=topology,
        raw=doc,
    )


def _topology(doc: dict[str, Any], oss_names: list[str]) -> Topology | None:
    """[[router]] and [[client_group]]: both or neither; every OSS reachable, every router serving
    an OSS, every client group reaching a router."""
    if "router" not in doc and "client_group" not in doc:
        return None
    routers: list[Router] = []
    names: set[str] = set()
    for k, t in enumerate(_tables(doc.get("router", []), "router")):
        where = f"router[{k}]"
        name = check_host_name(t.get("name"), f"{where}.name")
        if name in names:
            raise ConfigError(f"{where}.name: router {name!r} is defined twice")
        names.add(name)
        osses = _names(t.get("oss", []), f"{where}.oss")
        if not osses:
            raise ConfigError(f"router {name}: serves no OSS ({where}.oss is empty)")
        for s in osses:
            if s not in oss_names:
                raise ConfigError(f"router {name}: serves unknown OSS {s!r}")
        group = check_host_name(t["group"], f"{where}.group") if "group" in t else ""
        routers.append(Router(name, osses, _positive(t.get("bw", DEFAULT_NIC_BW), f"{where}.bw"), group))
    groups: dict[str, list[str]] = {r.name: [r.name] for r in routers}  # a router, or a group's routers
    for r in routers:
        if r.group:
            if r.group in names:
                raise ConfigError(f"router {r.name}: group {r.group!r} has the name of a router")
            groups.setdefault(r.group, []).append(r.name)
    clients: list[ClientGroup] = []
    for k, t in enumerate(_tables(doc.get("client_group", []), "client_group")):
        where = f"client_group[{k}]"
        name = check_host_name(t.get("name"), f"{where}.name")
        if name in (g.name for g in clients):
            raise ConfigError(f"{where}.name: client group {name!r} is defined twice")
        reach: list[str] = []
        for via in _names(t.get("routers", []), f"{where}.routers"):
            if via not in groups:
                raise ConfigError(f"client group {name}: unknown router or router group {via!r}")
            reach += [x for x in groups[via] if x not in reach]
        if not reach:
            raise ConfigError(f"client group {name}: reaches no router ({where}.routers is empty)")
        ranks = None
        if "ranks" in t:
            v = t["ranks"]
            if not (isinstance(v, list) and len(v) == 2):
                raise ConfigError(f"{where}.ranks: expected [first, last], got {shown(v)}")
            ranks = (_int(v[0], f"{where}.ranks[0]", 0, 1 << 30), _int(v[1], f"{where}.ranks[1]", 0, 1 << 30))
        clients.append(ClientGroup(name, tuple(reach), _nodes(t.get("nodes", []), f"{where}.nodes"), ranks))
    if not routers or not clients:
        raise ConfigError("topology: give both [[router]] and [[client_group]] entries, or neither")
    seen: dict[str, str] = {}
    for g in clients:
        for n in g.nodes:
            if n in seen:
                raise ConfigError(f"client group {g.name}: node {n} is already in client group {seen[n]}")
            seen[n] = g.name
    reached = {r for g in clients for r in g.routers}
    served = {s for r in routers if r.name in reached for s in r.osses}
    for s in oss_names:
        if s not in served:
            raise ConfigError(f"OSS {s}: unreachable (no router a client group reaches serves it)")
    return Topology(tuple(routers), tuple(clients))


def _names(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list of names, got {shown(v)}")
    return tuple(check_host_name(x, f"{where}[{k}]") for k, x in enumerate(v))


def _nodes(v: Any, where: str) -> tuple[str, ...]:
    """Node names; `nid[00000-00099]` stands for nid00000 .. nid00099 (the digits' width kept)."""
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list of node names, got {shown(v)}")
    out: list[str] = []
    for k, x in enumerate(v):
        m = NODE_RANGE.fullmatch(x) if isinstance(x, str) else None
        if m is None:
            out.append(check_host_name(x, f"{where}[{k}]"))
            continue
        lo, hi = int(m[2]), int(m[3])
        if lo > hi or len(out) + hi - lo + 1 > MAX_NODES:
            raise ConfigError(f"{where}[{k}]: expected a range [lo-hi], lo <= hi, at most {MAX_NODES} nodes, "
                              f"got {shown(x)}")
        out += [check_host_name(f"{m[1]}{i:0{len(m[2])}d}{m[4]}", f"{where}[{k}]") for i in range(lo, hi + 1)]
    return tuple(out)


# -- the checks of one value; `where` is the key's path, as the error names it ---------------


def _table(v: Any, where: str, keys: tuple[str, ...] | None) -> dict[str, Any]:
    """`v` if it is a table whose keys are all in `keys` (None: any key)."""
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: expected a table, got {shown(v)}")
    for k in v:
        if keys is not None and k not in keys:
            key = k if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", k) else shown(k)  # keys may hold anything
            raise ConfigError(f"{where + '.' if where else ''}{key}: unknown key (known: {', '.join(keys)})")
    return v


def _tables(v: Any, where: str) -> list[dict[str, Any]]:
    """An array of tables ([[oss]], [[ost]]), each checked against SCHEMA[where]."""
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected an array of tables ([[{where}]]), got {shown(v)}")
    return [_table(t, f"{where}[{k}]", SCHEMA[where]) for k, t in enumerate(v)]


def _int(v: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError(f"{where}: expected an integer {lo}..{hi}, got {shown(v)}")
    return v


def _index(v: Any, where: str) -> int:
    return _int(v, where, 0, MAX_OST_INDEX)


def _indices(v: Any, where: str) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list of OST indices, got {shown(v)}")
    return tuple(_index(i, f"{where}[{k}]") for k, i in enumerate(v))


def _positive(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{where}: expected a finite number > 0, got {shown(v)}")
    return float(v)


def _size(v: Any, where: str, least: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ConfigError(f"{where}: expected a size (1048576, 64K, 10GiB), got {shown(v)}")
    n = parse_size(v, where)
    if n < least:
        raise ConfigError(f"{where}: expected at least {format_size(least)}B, got {shown(v)}")
    return n


def _text(v: Any, where: str, pattern: re.Pattern[str], rule: str) -> str:
    if not isinstance(v, str) or not pattern.fullmatch(v):
        raise ConfigError(f"{where}: expected {rule}, got {shown(v)}")
    return v


def _choice(v: Any, where: str, choices: tuple[str, ...]) -> str:
    if v != "" and v not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(map(repr, choices))}, got {shown(v)}")
    return str(v)


def _state(v: Any, where: str) -> str:
    if v not in OST_STATES:
        raise ConfigError(f"{where}: expected one of {', '.join(OST_STATES)}, got {shown(v)}")
    return v


# The per-OST settings an [[ost]] entry (or [ost_defaults], for size and bandwidths) may give.
_OST_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "size": lambda v, w: _size(v, w, MIN_OST_SIZE), "used": _size, "state": _state,
    "read_bw": _positive, "write_bw": _positive,
}


def _ost_settings(t: dict[str, Any], where: str, inherited: dict[str, Any]) -> dict[str, Any]:
    return {**inherited, **{k: _OST_CHECKS[k](v, f"{where}.{k}") for k, v in t.items() if k in _OST_CHECKS}}


def dump_cluster(c: Cluster) -> str:
    """TOML text that load_cluster reads back to an equal Cluster (defaults left out)."""
    mds: dict[str, Any] = {"name": c.mds.name}
    if c.mds.nid:
        mds["nid"] = c.mds.nid
    if c.mds.create_rate != MDS.create_rate:
        mds["create_rate"] = c.mds.create_rate
    osses = []
    for s in c.osses:
        oss: dict[str, Any] = {"name": s.name, "osts": list(s.osts)}
        if s.nid:
            oss["nid"] = s.nid
        if s.nic_bw != DEFAULT_NIC_BW:
            oss["nic_bw"] = s.nic_bw
        osses.append(oss)
    osts = []
    for o in c.osts:
        ost: dict[str, Any] = {"index": o.index, "size": o.capacity}
        if o.used:
            ost["used"] = o.used
        if o.state != "active":
            ost["state"] = o.state
        if o.read_bw != DEFAULT_OST_READ_BW:
            ost["read_bw"] = o.read_bw
        if o.write_bw != DEFAULT_OST_WRITE_BW:
            ost["write_bw"] = o.write_bw
        osts.append(ost)
    doc: dict[str, Any] = {
        "fsname": c.fsname, "mds": mds,
        "defaults": {"stripe_count": c.default_stripe_count, "stripe_size": c.default_stripe_size,
                     **({"layout": c.layout} if c.layout else {})},
        "lod": {"qos_threshold_rr": c.qos_threshold_rr, "qos_prio_free": c.qos_prio_free},
        "oss": osses, "ost": osts}
    if c.pools:
        doc["pools"] = {k: list(v) for k, v in sorted(c.pools.items())}
    if c.topology:
        doc["router"] = [{"name": r.name, "oss": list(r.osses), "bw": r.bw, **({"group": r.group} if r.group else {})}
                         for r in c.topology.routers]
        doc["client_group"] = [{"name": g.name, "routers": list(g.routers), "nodes": list(g.nodes),
                                **({"ranks": list(g.ranks)} if g.ranks else {})} for g in c.topology.clients]
    return tomli_w.dumps(doc)


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
    def kbytes_free(self) -> int:
        """Free space counting the blocks reserved for root; kbytesavail where it was not read."""
        return self.kbytesfree if self.kbytesfree is not None else self.kbytesavail

    @property
    def used_fraction(self) -> float:
        if self.kbytestotal <= 0:
            return 1.0
        return (self.kbytestotal - self.kbytes_free) / self.kbytestotal

    def debit(self, nbytes: int) -> "OSTStats":
        """The OST once `nbytes` more are written to it. Whole KiB are debited, rounded up: free
        space in KiB is the floor of the free bytes (statfs, and the emulated OSSs' scan), so a
        byte written takes a KiB the OST no longer reports free."""
        kb = -(-nbytes // 1024)
        return replace(self, kbytesavail=max(0, self.kbytesavail - kb),
                       kbytesfree=None if self.kbytesfree is None else max(0, self.kbytesfree - kb))


@dataclass(frozen=True)
class OSSStats:
    name: str
    cpu: float = 0.0  # load average / cores, 0..1+ (/proc/loadavg, as docs/references.md#s000-collect reads it)
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

    def debit(self, bytes_on: dict[int, int]) -> "Snapshot":
        """The snapshot once `bytes_on[i]` more bytes are on OST i (OSTs it does not hold are
        skipped: stale ones the controller left out)."""
        osts = dict(self.osts)
        for i, n in bytes_on.items():
            if i in osts:
                osts[i] = osts[i].debit(n)
        return replace(self, osts=osts)


def states_ok(indices: Iterable[int], snap: Snapshot) -> list[int]:
    """The OSTs of `indices` that may take new objects at all (active or degraded)."""
    return [i for i in indices if snap.osts.get(i) and snap.osts[i].state in ("active", "degraded")]
