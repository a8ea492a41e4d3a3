"""Scenario files for `iez sim` (docs/simulator.md, "Scenario files").

A scenario names a cluster (a cluster TOML, or the testbed of docs/references.md#s000-testbed), the simulator's knobs
(`[sim]`), IO-Cop access control (`[access]`), jobs (`[[job]]`), and optionally a sweep, named
variants, a figure and comparisons against a seed's numbers. Each combination of sweep values and
variants is one run. Parsing is pure: file reads happen only in `load_scenario` and for the files
a scenario names (cluster, traces), and every bad value is one ConfigError line.
"""

from __future__ import annotations

import copy
import itertools
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from iez.cluster import DEFAULT_NIC_BW, Cluster, load_cluster, make_cluster
from iez.errors import ConfigError
from iez.sim.collread import MODES as COLLECTIVE_READS
from iez.sim.kinds import kind_of
from iez.sim.workload import BT_DUMPS, Pattern
from iez.units import parse_duration, parse_size

GRANULARITIES = ("none", "job", "phase", "call")
METRICS = ("write_bw", "read_bw", "end_to_end", "makespan", "token_wait")

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e[+-]?\d+)?)\s*([kmgt]?)(i?)(b|bit)?(?:/s|ps)?\s*$", re.IGNORECASE)


def parse_rate(v: Any, what: str) -> float:
    """Bytes per second: a number, or text like "1.25GB/s", "10Gbit/s", "500MiB/s" (GB = 1e9, GiB = 2^30)."""
    if isinstance(v, bool):
        raise ConfigError(f"{what}: expected a bandwidth, got {v!r}")
    if isinstance(v, (int, float)):
        if v <= 0:
            raise ConfigError(f"{what}: bandwidth must be > 0, got {v}")
        return float(v)
    m = _RATE.match(str(v))
    if not m:
        raise ConfigError(f"{what}: cannot read {v!r} as a bandwidth (examples: 1.25e9, 10Gbit/s, 500MiB/s)")
    num, prefix, binary, unit = m.groups()
    scale = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}[prefix.lower()]
    value = float(num) * ((1024 if binary else 1000) ** scale)
    if unit and unit.lower() == "bit":
        value /= 8
    if value <= 0:
        raise ConfigError(f"{what}: bandwidth must be > 0, got {v!r}")
    return value


@dataclass(frozen=True)
class SimParams:
    """The `[sim]` table: clients and LNet, and how Lustre moves data (docs/simulator.md)."""

    clients: int = 0  # client nodes (0 = as many as the jobs need)
    client_nic_bw: float = DEFAULT_NIC_BW
    lnet_routers: int = 0  # clients reach the servers through this many LNet routers (0 = direct)
    lnet_router_bw: float = DEFAULT_NIC_BW
    fabric_bw: float = 0.0  # bisection bandwidth of the fabric (0 = not a limit)
    rpc_size: int = 1 << 20  # osc.*.max_pages_per_rpc x 4 KiB (1 MiB; 4 MiB from 2.16)
    rpcs_in_flight: int = 8  # osc.*.max_rpcs_in_flight
    rpc_rtt: float = 0.0  # seconds per bulk RPC round trip (0 = no per-OSC window limit)
    lock_switch: float = 0.0  # seconds to move an extent lock between clients (0 = free)
    call_overhead: float = 0.0  # client seconds per application I/O call
    osc_overhead: float = 0.0  # extra client seconds per call for each OST it talks to
    contention: tuple[tuple[float, float], ...] = ()  # OST efficiency vs concurrent streams
    mds_open_rate: float = 40000.0
    mds_create_rate: float = 0.0  # creates a second on the MDS (0 = the cluster file's [mds] create_rate)
    optim: str = "Full"  # SimGrid network/optim; docs/simulator.md says why not Lazy


@dataclass(frozen=True)
class Access:
    """IO-Cop access control (docs/references.md#s004-controller): one exclusive token, taken per
    job, phase or call."""

    granularity: str = "none"
    overhead: float = 0.0  # seconds per token round trip


@dataclass(frozen=True)
class JobEntry:
    pattern: Pattern  # its kind is a name in iez.sim.kinds.KINDS
    source_path: str = ""  # the file a recorded kind (trace, darshan) reads
    placement: str = "rr"  # an allocation policy name, "list" or "observed"
    osts: tuple[int, ...] = ()  # for placement "list"
    submit: float = 0.0
    windows: tuple[tuple[float, float], ...] = ()
    # Whose layout a shared file gets (AllocOptions.layout): "keep" the job's stripe count, "auto"
    # or "hierarchical" the policy's choice; with placement "list", "hierarchical" is built here:
    # `subfiles` components (0 = one per writer, split writing) over disjoint subsets of
    # `subset_size` listed OSTs (docs/references.md#s001-hierarchical).
    layout: str = "keep"
    subset_size: int = 2
    subfiles: int = 0
    # What a policy is told of each file, as a prediction from earlier runs would tell it: this
    # share of the bytes it writes, and whether it grows (Request.grows, docs/layouts.md).
    planned: float = 1.0
    grows: bool = False
    # Other jobs' creates in the same allocator stream while this job creates its files (a busy
    # MDS: LOD's RR index and QoS penalties are one state per pool, docs/references.md#l-alloc-shared-state):
    # on average this many before each of the job's creates (Poisson, seeded), each asking for a
    # stripe count drawn from `others_stripe_count` (() = the job's). Only Lustre's policies (rr,
    # qos) take their files from that stream; the others place the job's files by their own rule.
    others_per_create: float = 0.0
    others_stripe_count: tuple[int, ...] = ()


@dataclass(frozen=True)
class Compare:
    metric: str
    base: dict[str, Any]
    test: dict[str, Any]
    job: str = ""  # "" = every job
    seed: str = ""  # the seed's claim, reported beside ours
    label: str = ""


@dataclass(frozen=True)
class Figure:
    x: str = "run"  # a sweep key, "variant", "job" or "run" (each variant x job)
    series: str = ""  # a sweep key, "variant" or "job" ("" = one series)
    metrics: tuple[str, ...] = ("write_bw",)
    title: str = ""
    job: str = ""  # only this job's numbers ("" = every job's)


@dataclass(frozen=True)
class Scenario:
    title: str
    cluster: Cluster
    sim: SimParams
    access: Access
    jobs: tuple[JobEntry, ...]
    figure: Figure = field(default_factory=Figure)
    compares: tuple[Compare, ...] = ()
    notes: str = ""


@dataclass(frozen=True)
class Variant:
    """One run of a scenario: its label, the sweep values and variant name that made it."""

    label: str
    values: dict[str, Any]
    scenario: Scenario


def load_scenario(path: str | Path) -> tuple[dict[str, Any], Path]:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read scenario {p}: {e.strerror}") from None
    try:
        return tomllib.loads(text), p.parent
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None


def variants(doc: dict[str, Any], base: Path) -> list[Variant]:
    """Every run the scenario asks for: the cartesian product of `[sweep]` and `[[variant]]`."""
    sweep = doc.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ConfigError("[sweep] must be a table of key = [values]")
    for k, v in sweep.items():
        if not isinstance(v, list) or not v:
            raise ConfigError(f"sweep.{k}: expected a non-empty list of values")
    named = doc.get("variant", [{}]) or [{}]
    if not isinstance(named, list) or not all(isinstance(v, dict) for v in named):
        raise ConfigError("[[variant]] entries must be tables")
    out = []
    keys = list(sweep)
    for var in named:
        var = dict(var)
        vname = str(var.pop("name", ""))
        only = var.pop("jobs", None)
        for combo in itertools.product(*(sweep[k] for k in keys)):
            d = copy.deepcopy({k: v for k, v in doc.items() if k not in ("sweep", "variant")})
            values: dict[str, Any] = {"variant": vname} if vname else {}
            for k, v in list(var.items()) + list(zip(keys, combo)):
                _override(d, k, v)
            values.update(zip(keys, combo))
            if only is not None:
                d["job"] = [j for j in d.get("job", []) if j.get("name") in only]
                if len(d["job"]) != len(only):
                    raise ConfigError(f"variant {vname!r}: jobs {only} are not all defined")
            parts = ([vname] if vname else []) + [f"{k}={_short(v)}" for k, v in zip(keys, combo)]
            label = ",".join(parts) or "run"
            out.append(Variant(label, values, parse_scenario(d, base)))
    return out


def _short(v: Any) -> str:
    return str(v).replace(" ", "")


def _override(d: dict[str, Any], key: str, value: Any) -> None:
    """Apply one sweep/variant key: `sim.X`, `access.X`, `job.X` (every job), `NAME.X` (one job),
    `policy` (every job's placement)."""
    if key == "policy":
        key = "job.placement"
    head, _, rest = key.partition(".")
    if not rest:
        raise ConfigError(f"override key {key!r}: expected sim.X, access.X, job.X or JOBNAME.X")
    if head in ("sim", "access"):
        d.setdefault(head, {})[rest] = value
        return
    jobs = d.get("job", [])
    hit = [j for j in jobs if head == "job" or j.get("name") == head]
    if not hit:
        raise ConfigError(f"override key {key!r}: no job named {head!r}")
    for j in hit:
        j[rest] = value


def parse_scenario(doc: dict[str, Any], base: Path) -> Scenario:
    try:
        return _parse(doc, base)
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise ConfigError(f"malformed scenario ({type(e).__name__}: {e})") from None


def _parse(doc: dict[str, Any], base: Path) -> Scenario:
    known = {"title", "notes", "cluster", "sim", "access", "job", "figure", "compare"}
    extra = set(doc) - known
    if extra:
        raise ConfigError(f"unknown scenario keys: {', '.join(sorted(extra))}")
    cluster = _cluster(doc.get("cluster"), base)
    sim_t = {**cluster.raw.get("sim", {}), **doc.get("sim", {})}
    sim = _sim(sim_t)
    acc = doc.get("access", {})
    access = Access(granularity=str(acc.get("granularity", "none")),
                    overhead=parse_duration(acc.get("overhead", 0), "access.overhead"))
    if access.granularity not in GRANULARITIES:
        raise ConfigError(f"access.granularity: {access.granularity!r} is not one of {', '.join(GRANULARITIES)}")
    jobs_t = doc.get("job", [])
    if not isinstance(jobs_t, list) or not jobs_t:
        raise ConfigError("a scenario needs at least one [[job]]")
    jobs = tuple(_job(j, k, base) for k, j in enumerate(jobs_t))
    names = [j.pattern.name for j in jobs]
    if len(set(names)) != len(names):
        raise ConfigError(f"job names repeat: {names}")
    fig_t = doc.get("figure", {})
    metrics = fig_t.get("metrics", ["write_bw"])
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    for m in metrics:
        if m not in METRICS:
            raise ConfigError(f"figure.metrics: {m!r} is not one of {', '.join(METRICS)}")
    figure = Figure(x=str(fig_t.get("x", "run")), series=str(fig_t.get("series", "")),
                    metrics=tuple(metrics), title=str(fig_t.get("title", doc.get("title", ""))),
                    job=str(fig_t.get("job", "")))
    if figure.job and figure.job not in names:
        raise ConfigError(f"figure.job: {figure.job!r} is not one of the jobs {names}")
    compares = []
    for k, c in enumerate(doc.get("compare", [])):
        if c.get("metric") not in METRICS:
            raise ConfigError(f"compare[{k}].metric: {c.get('metric')!r} is not one of {', '.join(METRICS)}")
        if not isinstance(c.get("base"), dict) or not isinstance(c.get("test"), dict):
            raise ConfigError(f"compare[{k}]: base and test must be tables of sweep values")
        compares.append(Compare(metric=c["metric"], base=dict(c["base"]), test=dict(c["test"]),
                                job=str(c.get("job", "")), seed=str(c.get("seed", "")),
                                label=str(c.get("label", ""))))
    return Scenario(title=str(doc.get("title", "")), cluster=cluster, sim=sim, access=access, jobs=jobs,
                    figure=figure, compares=tuple(compares), notes=str(doc.get("notes", "")))


def _cluster(v: Any, base: Path) -> Cluster:
    if v is None:
        return make_cluster()
    if isinstance(v, str):
        p = Path(v)
        return load_cluster(p if p.is_absolute() else base / p)
    raise ConfigError("cluster: expected the path of a cluster TOML file")


def _sim(t: dict[str, Any]) -> SimParams:
    d = SimParams()
    known = set(SimParams.__dataclass_fields__)
    extra = set(t) - known
    if extra:
        raise ConfigError(f"[sim]: unknown keys {', '.join(sorted(extra))}")
    cont = []
    for k, pt in enumerate(t.get("contention", [])):
        if not isinstance(pt, list) or len(pt) != 2 or pt[0] < 1 or pt[1] <= 0:
            raise ConfigError(f"sim.contention[{k}]: expected [streams >= 1, factor > 0]")
        cont.append((float(pt[0]), float(pt[1])))
    if any(b[0] <= a[0] for a, b in zip(cont, cont[1:])):
        raise ConfigError("sim.contention: stream counts must increase")
    s = replace(
        d,
        clients=_int(t.get("clients", 0), "sim.clients", 0),
        client_nic_bw=parse_rate(t.get("client_nic_bw", d.client_nic_bw), "sim.client_nic_bw"),
        lnet_routers=_int(t.get("lnet_routers", 0), "sim.lnet_routers", 0),
        lnet_router_bw=parse_rate(t.get("lnet_router_bw", d.lnet_router_bw), "sim.lnet_router_bw"),
        fabric_bw=parse_rate(t["fabric_bw"], "sim.fabric_bw") if t.get("fabric_bw") else 0.0,
        rpc_size=parse_size(t.get("rpc_size", d.rpc_size), "sim.rpc_size"),
        rpcs_in_flight=_int(t.get("rpcs_in_flight", d.rpcs_in_flight), "sim.rpcs_in_flight", 1),
        rpc_rtt=parse_duration(t.get("rpc_rtt", 0), "sim.rpc_rtt"),
        lock_switch=parse_duration(t.get("lock_switch", 0), "sim.lock_switch"),
        call_overhead=parse_duration(t.get("call_overhead", 0), "sim.call_overhead"),
        osc_overhead=parse_duration(t.get("osc_overhead", 0), "sim.osc_overhead"),
        contention=tuple(cont),
        mds_open_rate=float(t.get("mds_open_rate", d.mds_open_rate)),
        mds_create_rate=float(t.get("mds_create_rate", d.mds_create_rate)),
        optim=str(t.get("optim", d.optim)),
    )
    if s.rpc_size <= 0:
        raise ConfigError("sim.rpc_size must be > 0")
    if s.optim not in ("Full", "Lazy"):
        raise ConfigError(f"sim.optim: {s.optim!r} is not Full or Lazy")
    if s.mds_open_rate <= 0:
        raise ConfigError("sim.mds_open_rate must be > 0")
    if s.mds_create_rate < 0:
        raise ConfigError("sim.mds_create_rate must be >= 0 (0 = the cluster's)")
    return s


def _int(v: Any, what: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{what}: expected an integer >= {lo}, got {v!r}")
    return v


_JOB_KEYS = {"name", "kind", "ranks", "ranks_per_node", "nodes", "mode", "block", "transfer", "segments",
             "stripe_count", "stripe_size", "write", "read", "particles", "class", "dumps", "tile", "element",
             "collective", "bursts", "compute", "compute_after", "placement", "osts", "submit", "windows",
             "path", "layout", "subset_size", "subfiles", "planned", "grows",
             "split_writing", "collective_read", "others_per_create", "others_stripe_count"}
OTHERS_MAX = 1000  # others_per_create: a bound on the stream the job's creates are drawn into
LAYOUTS = ("keep", "auto", "hierarchical")


def _job(t: dict[str, Any], k: int, base: Path) -> JobEntry:
    if not isinstance(t, dict):
        raise ConfigError(f"job[{k}]: expected a table")
    name = str(t.get("name", f"job{k}"))
    w = f"job {name}"
    extra = set(t) - _JOB_KEYS
    if extra:
        raise ConfigError(f"{w}: unknown keys {', '.join(sorted(extra))}")
    kind = str(t.get("kind", "ior"))
    recorded = kind_of(kind, name).recorded
    if recorded and "path" not in t:
        raise ConfigError(f"{w}: a {kind} job needs path = \"...\"")
    ranks = _int(t.get("ranks", 1), f"{w}.ranks", 1)
    if "nodes" in t and "ranks_per_node" in t:
        raise ConfigError(f"{w}: give nodes or ranks_per_node, not both")
    if "nodes" in t:
        rpn = -(-ranks // _int(t["nodes"], f"{w}.nodes", 1))
    else:
        rpn = _int(t.get("ranks_per_node", 1), f"{w}.ranks_per_node", 1)
    tile = t.get("tile", [2048, 1536])
    if not isinstance(tile, list) or len(tile) != 2:
        raise ConfigError(f"{w}.tile: expected [x, y] elements")
    pattern = Pattern(
        name=name, kind=kind, ranks=ranks, ranks_per_node=rpn,
        mode=str(t.get("mode", "fpp")),
        block=parse_size(t.get("block", 1 << 30), f"{w}.block"),
        transfer=parse_size(t.get("transfer", 1 << 20), f"{w}.transfer"),
        segments=_int(t.get("segments", 1), f"{w}.segments", 1),
        stripe_count=_int(t.get("stripe_count", 1), f"{w}.stripe_count", 1),
        stripe_size=parse_size(t.get("stripe_size", 1 << 20), f"{w}.stripe_size"),
        write=bool(t.get("write", True)), read=bool(t.get("read", False)),
        particles=_int(t.get("particles", 0), f"{w}.particles", 0),
        bt_class=str(t.get("class", "B")),
        dumps=_int(t.get("dumps", BT_DUMPS), f"{w}.dumps", 1),
        tile=(_int(tile[0], f"{w}.tile", 1), _int(tile[1], f"{w}.tile", 1)),
        element=parse_size(t.get("element", 64), f"{w}.element"),
        collective=bool(t.get("collective", True)),
        bursts=_int(t.get("bursts", 1), f"{w}.bursts", 1),
        compute=parse_duration(t.get("compute", 0), f"{w}.compute"),
        compute_after=bool(t.get("compute_after", False)),
        split_writing=bool(t.get("split_writing", False)),
        collective_read=str(t.get("collective_read", "off")),
    )
    if pattern.collective_read not in COLLECTIVE_READS:
        raise ConfigError(f"{w}.collective_read: {pattern.collective_read!r} is not one of {', '.join(COLLECTIVE_READS)}")
    windows: list[tuple[float, float]] = []
    for pair in t.get("windows", []):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ConfigError(f"{w}.windows: expected [[start, end], ...] in seconds")
        a, b = parse_duration(pair[0], f"{w}.windows"), parse_duration(pair[1], f"{w}.windows")
        if b <= a or (windows and a < windows[-1][1]):
            raise ConfigError(f"{w}.windows: windows must have start < end, in order, without overlap")
        windows.append((a, b))
    osts = t.get("osts", [])
    if not isinstance(osts, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in osts):
        raise ConfigError(f"{w}.osts: expected a list of OST indices")
    placement = str(t.get("placement", "observed" if recorded else "rr"))
    if placement == "list" and not osts:
        raise ConfigError(f"{w}: placement \"list\" needs osts = [...]")
    layout = str(t.get("layout", "keep"))
    if layout not in LAYOUTS:
        raise ConfigError(f"{w}.layout: {layout!r} is not one of {', '.join(LAYOUTS)}")
    if layout != "keep" and placement == "observed":
        raise ConfigError(f"{w}: layout {layout!r} needs a placement (a policy, or list), not observed")
    if layout == "auto" and placement == "list":
        raise ConfigError(f"{w}: layout \"auto\" is a policy's choice: give placement = a policy name")
    if ("subset_size" in t or "subfiles" in t) and layout == "hierarchical" and placement != "list":
        raise ConfigError(f"{w}: subset_size and subfiles are for placement = \"list\"; "
                          f"policy {placement!r} chooses its own hierarchical layout")
    planned = t.get("planned", 1.0)
    if isinstance(planned, bool) or not isinstance(planned, (int, float)) or not 0 < planned < 1e6:
        raise ConfigError(f"{w}.planned: expected a share of the bytes > 0, got {planned!r}")
    if ("planned" in t or "grows" in t) and placement in ("list", "observed"):
        raise ConfigError(f"{w}: planned and grows are what a policy is told: give placement = a policy name")
    others = t.get("others_per_create", 0.0)
    if isinstance(others, bool) or not isinstance(others, (int, float)) or not 0 <= others <= OTHERS_MAX:
        raise ConfigError(f"{w}.others_per_create: expected other creates per create of the job, "
                          f"0 to {OTHERS_MAX}, got {others!r}")
    if others and placement in ("list", "observed"):
        raise ConfigError(f"{w}: others_per_create shares an allocator's stream: give placement = a policy name")
    counts = t.get("others_stripe_count", [])
    counts = [counts] if isinstance(counts, int) and not isinstance(counts, bool) else counts
    if not isinstance(counts, list):
        raise ConfigError(f"{w}.others_stripe_count: expected a stripe count or a list of them")
    src_path = ""
    if recorded:
        p = Path(str(t["path"]))
        src_path = str(p if p.is_absolute() else base / p)
    return JobEntry(pattern=pattern, source_path=src_path, placement=placement,
                    osts=tuple(osts), submit=parse_duration(t.get("submit", 0), f"{w}.submit"),
                    windows=tuple(windows), layout=layout,
                    subset_size=_int(t.get("subset_size", 2), f"{w}.subset_size", 1),
                    subfiles=_int(t.get("subfiles", 0), f"{w}.subfiles", 0),
                    planned=float(planned), grows=bool(t.get("grows", False)),
                    others_per_create=float(others),
                    others_stripe_count=tuple(_int(c, f"{w}.others_stripe_count", 1) for c in counts))
