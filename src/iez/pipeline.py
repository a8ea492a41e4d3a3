"""The control plane's pipeline (docs/references.md#s000-fig4), one function per step, shared by the `iez`
commands and the controller:

    load_trace(PATH, app)            a libiez shard directory or Darshan log -> one run's requests
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
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from iez.alloc.registry import DEFAULT_POLICY, get_policy
from iez.cluster import Cluster, Snapshot, load_cluster, make_cluster
from iez.db.errors import DatabaseError
from iez.errors import AllocationError, IezError
from iez.fields import Matcher
from iez.plan import Plan, save
from iez.request import Placement, Request
from iez.trace.ingest import Ingested, TraceError, ingest

if TYPE_CHECKING:
    from iez.alloc.policy import AllocOptions
    from iez.db import Database, PlacementSet, PredictionInfo, Txn
    from iez.predict import Prediction


# -- trace -------------------------------------------------------------------------------------


@dataclass
class LoadedTrace:
    path: Path
    source: str  # libiez | darshan
    label: str
    nprocs: int
    ingested: Ingested
    meta: dict[str, Any] = field(default_factory=dict)


def load_trace(path: str | Path, app: str) -> LoadedTrace:
    """Read one PATH and turn it into one run's requests (no database access)."""
    p = Path(path)
    if p.is_dir():
        from iez.trace.shard import read_trace

        trace = read_trace(p)
        runs = trace.runs()
        if len(runs) > 1:
            names = ", ".join(f"{r.app}/{r.run}" for r in runs[:3])
            raise TraceError(f"{p}: holds shards of {len(runs)} runs ({names}{', ...' if len(runs) > 3 else ''}): "
                             "give each run's shards as their own directory")
        if not runs:
            raise TraceError(f"{p}: no libiez trace shards (*.shard) here")
        run = runs[0]
        meta: dict[str, Any] = {"warnings": trace.warnings, "plan_rejected": run.plan_rejected}
        loaded = LoadedTrace(p, "libiez", run.run, run.processes, ingest(trace.records, app=app), meta)
    elif p.is_file():
        from iez.trace.darshan import read_log

        log = read_log(p)
        loaded = LoadedTrace(p, "darshan", str(log.jobid), log.nprocs, ingest(log.records, app=app),
                             {"exe": log.exe, "warnings": [f"{p}: {w}" for w in log.warnings],
                              "start_time": log.start_time})
    else:
        raise TraceError(f"{p}: no such shard directory or Darshan log")
    if not loaded.ingested.requests:
        raise TraceError(f"{p}: the run created no file ({loaded.ingested.not_created} files were only read "
                         "or written in place): nothing to place")
    return loaded


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
    matchers: dict[tuple[str, str, int], Matcher] = {}

    def planned(q: Request) -> str | None:
        """The prediction's key of a traced file: its name, or a template it falls under (its
        job id, host and rank filled in as libiez filled them: docs/plan-format.md)."""
        if q.path in asked:
            return q.path
        env = (q.run, q.host, q.rank)
        if env not in matchers:
            matchers[env] = Matcher(asked, {"job": q.run, "rank": str(q.rank), "fqdn": q.host,
                                            "host": q.host.split(".")[0]})
        return matchers[env](q.path)

    return [replace(q, stripe_count=asked[k]) if q.placed and (k := planned(q)) is not None else q for q in requests]


def store_trace(tx: Txn, app: str, got: Ingested, run: int | None = None, *, label: str = "", source: str = "",
                source_path: str = "", nprocs: int = 0, meta: dict[str, Any] | None = None) -> tuple[int, list[str]]:
    """Store one traced run of `app` (`run`, e.g. the predicted one it followed, else the next
    number) and say how well it was foreseen; returns its number and the notes."""
    meta = meta or {}
    requests = asked_counts(tx, app, run, got.requests)
    got = replace(got, requests=requests)
    number = tx.add_trace(app, requests, run, label=label, source=source, source_path=source_path,
                          nprocs=nprocs, plan_hits=got.plan_hits, plan_misses=got.plan_misses, meta=meta)
    return number, prediction_notes(app, number, got, tx.find_prediction(app, number),
                                    meta.get("plan_rejected", False))


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


def predict(db: Database, app: str, *, progress: bool = False, workers: int | None = None) -> Predicted:
    """Fit AIPA on every traced run of `app` and store the requests of its next run."""
    from iez.predict import predict_next_run

    with db.begin() as tx:
        traced = tx.traced_runs(app)
    if not traced:
        raise DatabaseError(f"{app!r} has no traced run to learn from (iez trace import PATH --app {app})")
    # Fitting may take seconds: no transaction is held meanwhile.
    tuning: dict[str, Any] = {} if workers is None else {"workers": workers}  # None: AIPA's default
    pred = predict_next_run([reqs for _, reqs in traced], progress=progress, **tuning)
    target = traced[-1][0] + 1
    models = {f.name: jsonable(getattr(pred, f.name)) for f in fields(pred) if f.name != "requests"}
    runs = [n for n, _ in traced]
    with db.begin() as tx:
        tx.add_prediction(app, target, pred.requests, models, runs)
    return Predicted(target, pred, models, runs)


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
    want = {q.path for q in requests}
    got = [p.path for p in placed]
    if len(got) != len(set(got)) or set(got) != want:
        missing, extra = want - set(got), set(got) - want
        raise AllocationError(f"policy {policy} placed {len(got)} files for {len(want)} requests "
                              f"(missing {len(missing)}, unexpected {len(extra)}, repeated {len(got) - len(set(got))})")
    for p in placed:
        if not p.layout.osts():
            raise AllocationError(f"policy {policy} gave {p.path} no OSTs")


class NoPrediction(DatabaseError):
    """The run to place has no prediction (or the application is unknown)."""


@dataclass(frozen=True)
class Allocation:
    app: str
    run: int
    requests: list[Request]
    placements: dict[str, list[Placement]]  # by policy, in the order asked
    cluster: Cluster
    snapshot: Snapshot  # what the policies saw, other plans' space taken as used (as stored)
    reserved: dict[int, int]  # bytes per OST other applications' plans hold
    excluded: frozenset[int]  # OSTs the snapshot left out (no fresh statistics): no stripe went there
    pending: int  # other applications' placements holding space
    seconds: float  # placing, checking and storing


def allocate(db: Database, app: str, run: int | None, policies: Sequence[str], state: Callable[[], ClusterState],
             options: AllocOptions, *, reservation_ttl: float, progress: Callable[[str, int, int], None] | None = None,
             commit: Callable[[Txn, Allocation], None] | None = None, site_layout: bool = False) -> Allocation:
    """Place run `run` of `app` (None: its newest prediction) with each policy and store the
    placements with the snapshot they were made on, in one transaction.

    Other applications' planned, unrun placements younger than `reservation_ttl` hold their
    space (the global view): the policies see it as used. `state()` is taken once the run is
    read, so a caller may wait in it (the host gate) or refuse (no fresh statistics). OSTs its
    snapshot leaves out (stale) take no stripe and reserve nothing. `commit(tx, allocation)` runs in the
    storing transaction, before it commits: a plan to write, a check to make. `progress(policy,
    run, files)` hears each policy start. `site_layout`: the layout mode is the cluster file's
    ([defaults] layout) when it sets one, not `options.layout` (docs/layouts.md "Modes").
    """
    from iez.alloc.policy import job_bytes

    with db.begin() as tx:
        try:
            pred = tx.prediction(app, run)
        except DatabaseError as e:
            raise NoPrediction(str(e)) from None
        pending = tx.pending_placements(app, reservation_ttl)
    chosen = {name: get_policy(name) for name in policies}
    now = state()
    cluster, snap = now.cluster, now.snapshot
    excluded = frozenset(i for i in cluster.ost_indices() if i not in snap.osts)
    reserved = {i: b for i, b in job_bytes(pending).items() if i in snap.osts}
    options = replace(options, reserved=reserved, exclude=options.exclude | excluded,
                      layout=cluster.layout if site_layout and cluster.layout else options.layout)
    t0 = time.perf_counter()
    results: dict[str, list[Placement]] = {}
    for name, policy in chosen.items():
        if progress:
            progress(name, pred.run, len(pred.requests))
        placed = [replace(p, app=app, run=str(pred.run), policy=name)
                  for p in policy.place(pred.requests, cluster, snap, options)]
        check_placements(name, pred.requests, placed)
        results[name] = placed
    seen = snap.debit(reserved)
    ranks = {q.path: q.rank for q in pred.requests}
    with db.begin() as tx:
        sid = tx.add_snapshot(cluster, seen, now.source + (f"+{len(pending)} pending" if pending else ""))
        for name, placed in results.items():
            tx.set_placements(app, pred.run, name, placed, sid, ranks)
        done = Allocation(app, pred.run, pred.requests, results, cluster, seen, reserved, excluded, len(pending), 0.0)
        if commit:
            commit(tx, done)
    return replace(done, seconds=time.perf_counter() - t0)


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


def make_plan(app: str, run: int, policy: str, cluster: Cluster, placed: Sequence[Placement],
              created: float | None = None) -> Plan:
    """The plan file (docs/plan-format.md) of run `run`: each placed file's layout."""
    stamp = time.gmtime(created) if created is not None else time.gmtime()
    plan = Plan(meta={"app": app, "run": str(run), "policy": policy, "fsname": cluster.fsname,
                      "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp)})
    for p in placed:
        plan.add(p.path, p.layout)
    return plan


def write_plan(tx: Txn, app: str, run: int, policy: str, cluster: Cluster, placed: Sequence[Placement],
               path: str | Path) -> Plan:
    """Write the plan file of `policy`'s placements to `path` and record that the run follows it."""
    plan = make_plan(app, run, policy, cluster, placed)
    try:
        save(plan, path)
    except OSError as e:
        raise IezError(f"cannot write plan {path}: {e.strerror}") from None
    tx.mark_planned(app, run, policy)
    return plan
