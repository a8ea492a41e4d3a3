"""The control plane's pipeline (docs/references.md#s000-fig4), one function per step, shared by the `iez`
commands and the controller:

    load_trace(PATH, app)            a libiez shard directory or Darshan log -> one run's requests and reads
    predict(db, app)                 AIPA: the next run's requests, stored as its prediction
    allocate(db, app, run, ...)      placements on a snapshot with other plans' space reserved,
                                     checked, stored with that snapshot
    make_plan(...)                   the plan file libiez loads, from stored placements

Each step reads what the previous one stored in the interaction database. Where the snapshot
comes from (a cluster description, an emulated cluster, the controller's global view) and when
allocation may run (the host gate) is the caller's; so are printing and HTTP.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from iez.alloc.registry import DEFAULT_POLICY, get_policy
from iez.cluster import Cluster, Snapshot, load_cluster, make_cluster
from iez.db.errors import DatabaseError
from iez.errors import AllocationError, IezError
from iez.fields import HOST_ENV, Matchers, process_fields
from iez.layout.collread import striped_collective_reads
from iez.plan import Plan, dumps, dumps_arrays, save
from iez.request import Placement, Request, RequestColumns
from iez.trace.ingest import Ingested, TraceError, ingest
from iez.units import format_size

if TYPE_CHECKING:
    from iez.alloc.policy import AllocOptions
    from iez.db import Database, PlacementSet, PredictionInfo, Txn
    from iez.predict import Prediction
    from iez.trace.shard import Shard


# -- trace -------------------------------------------------------------------------------------

# Programs that start or wrap the program a job runs, never the one a run is named after: MPI
# and batch launchers and their proxies, shells, and the wrappers job scripts put in front of a
# program (docs/trace-format.md "One run, many programs").
LAUNCHERS = frozenset({
    "mpiexec", "mpirun", "mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich", "mpiexec.openmpi", "mpirun.openmpi",
    "orterun", "hydra_pmi_proxy", "pmi_proxy", "srun", "slurmstepd", "orted", "prted", "prterun", "prun",
    "aprun", "jsrun", "flux", "charmrun", "ibrun", "mpiexec_mpt",
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox",
    "env", "time", "timeout", "nohup", "nice", "ionice", "taskset", "numactl", "stdbuf", "setsid", "chrt",
    "xargs", "parallel", "strace", "ltrace", "valgrind", "perf",
})


MAX_NAMED = 20  # files a run's meta names as read collectively and striped (the plan needs one)


def collective_reads(got: Ingested) -> list[str]:
    """The run's meta `collective_reads`: its striped files read with collective MPI-IO calls."""
    return striped_collective_reads(got.requests + got.reads)[:MAX_NAMED]


@dataclass
class LoadedTrace:
    path: Path
    source: str  # libiez | darshan
    label: str
    nprocs: int
    ingested: Ingested
    meta: dict[str, Any] = field(default_factory=dict)
    app: str = ""  # the application the run is stored as: --app, else the program the trace names
    notes: list[str] = field(default_factory=list)  # how the import decided (programs merged, Lustre)


def launched_program(written: dict[str, int], processes: dict[str, int]) -> str:
    """The program a run of several programs is named after: not a launcher or wrapper
    (LAUNCHERS) when another ran; of those, the one that wrote the most bytes, then the one with
    the most processes. `written` and `processes` are per program name."""
    others = [p for p in processes if p not in LAUNCHERS] or list(processes)
    return min(others, key=lambda p: (-written.get(p, 0), -processes[p], p))


def _one_run(p: Path, shards: list[Shard]) -> list[Shard]:
    """The shards of the one run a directory holds: one run id, whatever program each process
    ran (a launcher and the program it started, a job script and its commands)."""
    runs: dict[str, list[Shard]] = defaultdict(list)
    for s in shards:
        if s.run or s.records:  # a shard whose header is damaged has a warning and nothing else
            runs[s.run].append(s)
    if not runs:
        raise TraceError(f"{p}: no libiez trace shards (*.shard) here")
    if len(runs) > 1:
        names = ", ".join(f"{run} ({', '.join(sorted({s.program or s.app for s in ss}))})"
                          for run, ss in sorted(runs.items())[:3])
        raise TraceError(f"{p}: holds shards of {len(runs)} runs ({names}{', ...' if len(runs) > 3 else ''}): "
                         "give each run's shards as their own directory")
    [(run, ours)] = runs.items()
    given = sorted({s.app for s in ours if s.app_given})
    if len(given) > 1:
        raise TraceError(f"{p}: run {run} holds shards of {len(given)} applications named by IEZ_APP "
                         f"({', '.join(given)}): give each application's shards as their own directory")
    return ours


def _program_name(p: Path, app: str, given: str, programs: dict[str, int], written: dict[str, int]) -> str:
    """The application a run is stored as: --app, else IEZ_APP as the run gave it, else its program."""
    from iez.db import check_app_name

    name = app or given or launched_program(written, programs)
    try:
        return check_app_name(name)
    except IezError:
        raise TraceError(f"{p}: the run's program {name!r} is not an application name: give --app NAME") from None


def _load_shards(p: Path, app: str) -> LoadedTrace:
    from iez.trace.shard import Trace, read_trace

    trace = read_trace(p)
    shards = _one_run(p, trace.shards)
    programs: dict[str, int] = defaultdict(int)  # processes per program
    written: dict[str, int] = defaultdict(int)
    for s in shards:
        programs[s.program or s.app] += 1  # shards before version 3 name the program as app
        written[s.program or s.app] += sum(r.bytes_written for r in s.records)
    given = next((s.app for s in shards if s.app_given), "")
    name = _program_name(p, app, given, programs, written)
    run = shards[0].run
    notes = []
    if len(programs) > 1:
        each = ", ".join(f"{prog} ({n} process{'es' * (n != 1)}, {format_size(written[prog])} written"
                         f"{', launcher' if prog in LAUNCHERS else ''})" for prog, n in sorted(programs.items()))
        notes.append(f"run {run}: merged the processes of {len(programs)} programs into one run of {name}: {each}")
    meta: dict[str, Any] = {"warnings": trace.warnings, "plan_rejected": any(s.plan == "rejected" for s in shards),
                            "programs": dict(programs), "notes": notes}
    records = Trace(shards).records
    got = ingest(records, app=name)
    if not got.requests and not got.reads:
        in_place = {r.path for r in records if r.bytes_written > 0}
        raise TraceError(f"{p}: nothing to import: the run created no file and read none "
                         f"({len(in_place)} files only written in place, "
                         f"{len({r.path for r in records} - in_place)} only opened)")
    meta["collective_reads"] = collective_reads(got)
    return LoadedTrace(p, "libiez", run, len(shards), got, meta, name, notes)


def _load_darshan(p: Path, app: str) -> LoadedTrace:
    from iez.trace.darshan import read_log

    log = read_log(p)
    program = Path(log.exe.split()[0]).name if log.exe.split() else ""
    name = _program_name(p, app, "", {program: log.nprocs}, {})
    got = ingest(log.records, app=name)
    if not got.requests and not got.reads:
        d = log.decisions
        raise TraceError(f"{p}: nothing to import: of the log's {d.get('files', 0)} files none was written or "
                         f"read on Lustre ({d.get('read_only', 0)} only read, {d.get('off_lustre', 0)} off Lustre, "
                         f"{d.get('anonymised', 0)} with anonymised (hashed) names)")
    return LoadedTrace(p, "darshan", str(log.jobid), log.nprocs, got,
                       {"exe": log.exe, "warnings": [f"{p}: {w}" for w in log.warnings], "notes": log.notes,
                        "start_time": log.start_time,
                        "collective_reads": collective_reads(got)},
                       name, [f"{p}: {n}" for n in log.notes])


def load_trace(path: str | Path, app: str = "") -> LoadedTrace:
    """Read one PATH, a libiez shard directory or a Darshan log, into one run's requests (the
    files it created) and reads (the files it read and did not create), stored as `app`, else
    as the program the trace names (no database access)."""
    p = Path(path)
    if p.is_dir():
        return _load_shards(p, app)
    if p.is_file():
        return _load_darshan(p, app)
    raise TraceError(f"{p}: no such shard directory or Darshan log")


def prediction_notes(app: str, number: int, got: Ingested, predicted: PredictionInfo | None,
                     plan_rejected: bool = False) -> list[str]:
    """How well run `number` was foreseen, and whether it calls for a new prediction (more than
    half of the created files missing from the plan, docs/references.md#s000-retrace)."""
    if predicted is None and not (got.plan_hits or got.plan_misses or plan_rejected):
        return []
    from iez.predict import accuracy, needs_retrace

    notes = []
    if predicted is not None:
        acc = accuracy(predicted.requests, got.requests)
        notes.append(f"run {number}: prediction accuracy {100 * acc:.1f}% ({len(predicted.requests)} files "
                     f"predicted, {len(got.requests)} created)")
    again = f"run: iez predict {app} && iez allocate {app} --policy P -o PLAN"
    if plan_rejected:
        notes.append(f"run {number}: libiez rejected its plan file (IEZ_LOG says why) and placed nothing; {again}")
    elif needs_retrace(got.plan_hits, got.plan_misses):
        notes.append(f"run {number}: {got.plan_misses} of {got.plan_hits + got.plan_misses} created files were "
                     f"not in the plan: the prediction no longer fits; this trace is the new training data, {again}")
    return notes


def asked_counts(tx: Txn, app: str, run: int | None, requests: list[Request]) -> list[Request]:
    """The requests with the stripe count each job asks for. A file created from the plan was
    traced with the count iez gave it; the count it asks for is the one its prediction carried
    (from the runs before iez placed it), so that prediction accuracy, the next prediction and a
    later `keep` see what the job asks, not what iez chose."""
    if not any(q.placed for q in requests) or app not in tx.apps():
        return requests
    predicted = tx.find_prediction(app, tx.next_traced_run(app) if run is None else run)
    asked = {q.path: q.stripe_count for q in predicted.requests} if predicted else {}
    planned = Matchers(asked)  # a file's name or a template it falls under (docs/plan-format.md)
    # a copy only where the count differs: `replace` of a Request costs more than the match
    return [replace(q, stripe_count=asked[k]) if q.placed and (k := planned(q.path, process_fields(
        job=q.run, host=q.host, rank=q.rank))) is not None and asked[k] != q.stripe_count else q for q in requests]


def store_trace(tx: Txn, app: str, got: Ingested, run: int | None = None, *, label: str = "", source: str = "",
                source_path: str = "", nprocs: int = 0, meta: dict[str, Any] | None = None) -> tuple[int, list[str]]:
    """Store one traced run of `app` (`run`, e.g. the predicted one it followed, else the next
    number), its files created and its reads, and say how well it was foreseen; returns its
    number and the notes."""
    meta = meta or {}
    requests = asked_counts(tx, app, run, got.requests)
    got = replace(got, requests=requests)
    number = tx.add_trace(app, requests, run, label=label, source=source, source_path=source_path,
                          nprocs=nprocs, plan_hits=got.plan_hits, plan_misses=got.plan_misses, meta=meta,
                          reads=got.reads)
    notes = prediction_notes(app, number, got, tx.find_prediction(app, number), meta.get("plan_rejected", False))
    if not requests and meta.get("collective_reads"):
        notes.append(f"run {number}: read {len(got.reads)} files and created none: no layout to choose; it read "
                     f"{len(meta['collective_reads'])} striped files with collective MPI-IO calls, so its next "
                     "run's plan (no files) asks for the Lustre-aware collective read (a controller makes "
                     f"it; by hand: iez predict {app} && iez allocate {app} -o PLAN)")
    elif not requests:
        notes.append(f"run {number}: read {len(got.reads)} files and created none: no layout to choose, "
                     "no plan to make; its reads are stored")
    return number, notes


# -- predict -----------------------------------------------------------------------------------


def jsonable(obj: Any) -> Any:
    """Model descriptions (dataclasses, numpy scalars, tuples) as plain JSON values."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj if isinstance(obj, (str, int, float, bool, type(None))) else str(obj)


@dataclass(frozen=True)
class Predicted:
    run: int  # the run predicted: one after the newest traced run
    prediction: Prediction
    models: dict[str, Any]  # how each series was predicted, as stored
    from_runs: list[int]  # the traced runs it learned from
    notes: list[str] = field(default_factory=list)  # why it predicts what it does, where that is not plain


def predict(db: Database, app: str, *, progress: bool = False, workers: int | None = None) -> Predicted:
    """Fit AIPA on every traced run of `app` that created files and store the requests of its
    next run (one after its newest traced run). An application whose runs created nothing but
    whose last run read striped files collectively is predicted to create nothing: its plan has
    no files and asks for the Lustre-aware collective read (`reads_collectively`)."""
    from iez.predict import predict_next_run

    with db.begin() as tx:
        traced = tx.traced_runs(app)
        collective = reads_collectively(tx, app)
        target = tx.next_traced_run(app)
    notes = []
    if not traced:
        if not collective:
            raise DatabaseError(f"{app!r} has no traced run to learn from (iez trace import PATH --app {app})")
        notes.append(f"{app}: no traced run created files, and the last one read striped files with collective "
                     f"MPI-IO calls: the plan of run {target} places no file and asks for the Lustre-aware "
                     "collective read")
    # Fitting may take seconds: no transaction is held meanwhile.
    tuning: dict[str, Any] = {} if workers is None else {"workers": workers}  # None: AIPA's default
    # AIPA predicts no file from a run that created none
    pred = predict_next_run([reqs for _, reqs in traced] or [[]], progress=progress, **tuning)
    models = {f.name: jsonable(getattr(pred, f.name)) for f in fields(pred) if f.name != "requests"}
    runs = [n for n, _ in traced] or [target - 1]
    with db.begin() as tx:
        tx.add_prediction(app, target, pred.requests, models, runs)
    return Predicted(target, pred, models, runs, notes)


# -- allocate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterState:
    """A cluster and its statistics at one moment: what a run is placed on."""

    cluster: Cluster
    snapshot: Snapshot
    source: str  # where the statistics came from, stored with the placements


def cluster_model(cluster_toml: str | Path | None = None, emulated: str | Path | None = None) -> Cluster:
    """The cluster an emulated cluster directory or a cluster description holds (default: the
    seed-000 testbed)."""
    if emulated:
        from iez.emulated.clusterdir import open_cluster_dir

        return open_cluster_dir(emulated).cluster()
    return load_cluster(cluster_toml) if cluster_toml else make_cluster()


def cluster_state(cluster_toml: str | Path | None = None, emulated: str | Path | None = None) -> ClusterState:
    """An emulated cluster's usage through its backend, or a cluster description (default: the
    seed-000 testbed) as its model states it."""
    if emulated:
        from iez.backend.emulated import EmulatedBackend

        backend = EmulatedBackend(emulated)
        return ClusterState(backend.cluster, backend.stats(), f"emulated:{backend.cd.root}")
    now = time.time()
    cluster = cluster_model(cluster_toml)
    source = f"toml:{Path(cluster_toml).absolute()}" if cluster_toml else "default"
    return ClusterState(cluster, Snapshot.from_cluster(cluster, now), source)


def check_placements(policy: str, requests: Sequence[Request], placed: Sequence[Placement]) -> None:
    """Every requested file placed once, with a layout that names its OSTs."""
    from iez.alloc.policy import Placements

    if isinstance(placed, Placements) and placed.requests is requests:  # the arrays, checked in bulk
        paths = placed.paths()
        empty = np.flatnonzero(np.diff(placed.offsets) == 0)
        if len(placed) == len(set(paths)) == len(paths) and all(i in placed.replaced for i in empty.tolist()) \
                and all(p.layout.osts() for p in placed.replaced.values()):
            return
    want = {q.path for q in requests}
    got = [p.path for p in placed]
    if len(got) != len(set(got)) or set(got) != want:
        missing, extra = want - set(got), set(got) - want
        raise AllocationError(f"policy {policy} placed {len(got)} files for {len(want)} requests "
                              f"(missing {len(missing)}, unexpected {len(extra)}, repeated {len(got) - len(set(got))})")
    for p in placed:
        if not p.layout.osts():
            raise AllocationError(f"policy {policy} gave {p.path} no OSTs")


def as_placed(placed: Sequence[Placement], requests: Sequence[Request], app: str, run: int,
              policy: str) -> Sequence[Placement]:
    """`placed` as run `run` of `app` placed by `policy`. Placements made from the prediction's
    requests (which carry the app and run) stay arrays, the policy a set-level attribute; other
    answers are copied placement by placement."""
    from iez.alloc.policy import Placements

    if isinstance(placed, Placements) and placed.requests is requests:
        return Placements(requests, placed.table, placed.osts, placed.offsets, policy,
                          {i: replace(p, app=app, run=str(run), policy=policy) for i, p in placed.replaced.items()})
    return [replace(p, app=app, run=str(run), policy=policy) for p in placed]


def noted(placed: Sequence[Placement]) -> list[Placement]:
    """The placements with a note (a layout other than the asked one), building no others."""
    from iez.alloc.policy import Placements

    if not isinstance(placed, Placements):
        return [p for p in placed if p.note]
    notes = placed.table.notes
    some = [] if notes.count("") == len(notes) else [i for i, note in enumerate(notes) if note]
    return [p for p in map(placed.__getitem__, sorted({*some, *placed.replaced})) if p.note]


class NoPrediction(DatabaseError):
    """The run to place has no prediction (or the application is unknown)."""


@dataclass(frozen=True)
class Allocation:
    app: str
    run: int
    requests: Sequence[Request]
    placements: dict[str, Sequence[Placement]]  # by policy, in the order asked (Placements: arrays)
    cluster: Cluster
    snapshot: Snapshot  # what the policies saw, other plans' space taken as used (as stored)
    reserved: dict[int, int]  # bytes per OST other applications' plans hold
    excluded: frozenset[int]  # OSTs the snapshot left out (no fresh statistics): no stripe went there
    pending: int  # other applications' placements holding space
    seconds: float  # placing, checking and storing
    cpu: float = 0.0  # the CPU time of the same, in the calling thread (wall time is the machine's load too)


def allocate(db: Database, app: str, run: int | None, policies: Sequence[str], state: Callable[[], ClusterState],
             options: AllocOptions, *, reservation_ttl: float, progress: Callable[[str, int, int], None] | None = None,
             commit: Callable[[Txn, Allocation], None] | None = None, site_layout: bool = False,
             known: Mapping[int, RequestColumns] | None = None) -> Allocation:
    """Place run `run` of `app` (None: its newest prediction) with each policy and store the
    placements with the snapshot they were made on, in one transaction.

    Other applications' planned, unrun placements younger than `reservation_ttl` hold their
    space (the global view): the policies see it as used. `state()` is taken once the run is
    read, so a caller may wait in it (the host gate) or refuse (no fresh statistics). OSTs its
    snapshot leaves out (stale) take no stripe and reserve nothing. `commit(tx, allocation)` runs in the
    storing transaction, before it commits: a plan to write, a check to make. `progress(policy,
    run, files)` hears each policy start. `site_layout`: the layout mode is the cluster file's
    ([defaults] layout) when it sets one, not `options.layout` (docs/layouts.md "Modes"). The
    prediction is read as columns; one whose id `known` holds (the caller just stored it, in stored
    order) is not read back.
    """
    with db.begin() as tx:
        try:
            number, requests = tx.prediction_columns(app, run, known)
        except DatabaseError as e:
            raise NoPrediction(str(e)) from None
        pending, held = tx.pending_bytes(app, reservation_ttl)
    chosen = {name: get_policy(name) for name in policies}
    now = state()
    cluster, snap = now.cluster, now.snapshot
    excluded = frozenset(i for i in cluster.ost_indices() if i not in snap.osts)
    reserved = {i: b for i, b in held.items() if i in snap.osts}
    options = replace(options, reserved=reserved, exclude=options.exclude | excluded,
                      layout=cluster.layout if site_layout and cluster.layout else options.layout)
    t0, c0 = time.perf_counter(), time.thread_time()
    results: dict[str, Sequence[Placement]] = {}
    for name, policy in chosen.items():
        if progress:
            progress(name, number, len(requests))
        placed = as_placed(policy.place(requests, cluster, snap, options), requests, app, number, name)
        check_placements(name, requests, placed)
        results[name] = placed
    seen = snap.debit(reserved)
    ranks = dict(zip(requests.path, requests.more.get("rank", ())))
    with db.begin() as tx:
        sid = tx.add_snapshot(cluster, seen, now.source + (f"+{pending} pending" if pending else ""))
        for name, placed in results.items():
            tx.set_placements(app, number, name, placed, sid, ranks)
        done = Allocation(app, number, requests, results, cluster, seen, reserved, excluded, pending, 0.0)
        if commit:
            commit(tx, done)
    return replace(done, seconds=time.perf_counter() - t0, cpu=time.thread_time() - c0)


# -- plan --------------------------------------------------------------------------------------


def choose(sets: Sequence[PlacementSet], policy: str | None) -> PlacementSet:
    """Whose placements become the plan: `policy`'s, else the default policy's, else the only one."""
    by = {s.policy: s for s in sets}
    run = sets[0].run
    if policy:
        if policy not in by:
            raise DatabaseError(f"no {policy} placements for run {run} (have: {', '.join(sorted(by))})")
        return by[policy]
    if DEFAULT_POLICY in by:
        return by[DEFAULT_POLICY]
    if len(by) == 1:
        return sets[0]
    raise DatabaseError(f"run {run} was placed by {', '.join(sorted(by))}: choose one with --policy")


def plan_source(tx: Txn, app: str, run: int | None, policy: str | None
                ) -> tuple[int, str, Cluster | None, list[Placement]]:
    """What the plan of run `run` (None: the newest run with placements) is made from: the run,
    `policy`'s stored placements (`choose`) and the cluster they were placed on. A predicted run
    that creates no file has no placements: when the application reads collectively its plan is
    still made (no files, `collread`), on no known cluster."""
    try:
        sets = tx.placement_sets(app, run)
    except DatabaseError:
        pred = tx.find_prediction(app, run) if app in tx.apps() else None
        if pred is None or pred.requests or not reads_collectively(tx, app):
            raise
        planned = next((r.planned_policy for r in tx.runs(app) if r.number == pred.run and r.planned_policy), "")
        return pred.run, policy or planned or DEFAULT_POLICY, None, []
    chosen = choose(sets, policy)
    cluster, _ = tx.snapshot(chosen.snapshot_id)
    return chosen.run, chosen.policy, cluster, chosen.placements


def reads_collectively(tx: Txn, app: str) -> bool:
    """The application's last traced run read a striped file with collective MPI-IO calls
    (`iez.layout.collread`): its plan asks for libiez-mpi's Lustre-aware collective read."""
    traced = [r for r in tx.runs(app) if r.traced] if app in tx.apps() else []
    return bool(traced and traced[-1].meta.get("collective_reads"))


def off_topology_note(tx: Txn, app: str, run: int, policy: str, cluster: Cluster | None) -> list[str]:
    """The creators bpio placed as without topology (their nodes are not in it), from the
    prediction the placements were made for; [] for other policies or without topology."""
    if policy != "bpio" or cluster is None or cluster.topology is None:
        return []
    from iez.alloc.bpio import off_topology

    predicted = tx.find_prediction(app, run)
    return off_topology(predicted.requests, cluster.topology) if predicted else []


MAX_NOTED = 16  # nodes the plan's off_topology names; the rest are counted


def make_plan(app: str, run: int, policy: str, cluster: Cluster | None, placed: Sequence[Placement],
              created: float | None = None, collread: bool = False, off_topology: Sequence[str] = ()) -> Plan:
    """The plan file (docs/plan-format.md) of run `run`: each placed file's layout,
    `collread=lustre` when the run is to read with the Lustre-aware collective read, and the
    creators placed as without topology (`off_topology`). Without a cluster (a run placing no
    file, `plan_source`) the plan names no file system."""
    stamp = time.gmtime(created) if created is not None else time.gmtime()
    plan = Plan(meta={"app": app, "run": str(run), "policy": policy,
                      **({"fsname": cluster.fsname} if cluster is not None else {}),
                      "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp)})
    if collread:
        plan.meta["collread"] = "lustre"
    if off_topology:
        # names go into one metadata word: only those a word can hold are named
        named = [n for n in off_topology if HOST_ENV.fullmatch(n)][:MAX_NOTED]
        rest = len(off_topology) - len(named)
        plan.meta["off_topology"] = ",".join(named + ([f"+{rest}"] if rest else []))
    for p in placed:
        plan.add(p.path, p.layout)
    return plan


def plan_for(tx: Txn, app: str, run: int, policy: str, cluster: Cluster | None, placed: Sequence[Placement],
             created: float | None = None) -> Plan:
    """make_plan with what the database says of the application: whether it reads collectively,
    which creators bpio placed as without topology."""
    return make_plan(app, run, policy, cluster, placed, created, collread=reads_collectively(tx, app),
                     off_topology=off_topology_note(tx, app, run, policy, cluster))


def plan_text(tx: Txn, app: str, run: int, policy: str, cluster: Cluster | None, placed: Sequence[Placement],
              created: float | None = None) -> str:
    """The plan file `plan_for` makes, as `dumps` writes it: straight from the arrays when
    `placed` is a policy's `Placements` (no object per file)."""
    from iez.alloc.policy import Placements

    if not isinstance(placed, Placements):
        return dumps(plan_for(tx, app, run, policy, cluster, placed, created))
    meta = plan_for(tx, app, run, policy, cluster, (), created).meta
    t = placed.table
    return dumps_arrays(meta, placed.paths(), placed.size, placed.offsets, placed.osts, t.pools, t.pool,
                        placed.non_plain())


def write_plan(tx: Txn, app: str, run: int, policy: str, cluster: Cluster | None, placed: Sequence[Placement],
               path: str | Path) -> Plan:
    """Write the plan file of `policy`'s placements to `path` and record that the run follows it."""
    plan = plan_for(tx, app, run, policy, cluster, placed)
    try:
        save(plan, path)
    except OSError as e:
        raise IezError(f"cannot write plan {path}: {e.strerror}") from None
    tx.mark_planned(app, run, policy)
    return plan
