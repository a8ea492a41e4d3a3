"""The controller's work: take statistics and uploads, predict and allocate, serve plans.

Uploads are validated, then written in one transaction; a worker thread then does what the
database says is still to do (`pending_work`): AIPA prediction of an application's next
run after a trace, and allocation of every predicted run not yet planned. Allocation runs on
the global view (fresh statistics only; stale OSTs are excluded) with the space other
applications' plans hold reserved, one run at a time, and only while the controller's host is
idle enough (CPU < 70 %, memory < 50 %: docs/references.md#s000-gate). Since nothing is queued in memory,
a controller killed at any point resumes its work from the database when it starts again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Sequence

from prometheus_client.metrics_core import Metric

from iez import pipeline
from iez.alloc.gate import GateLimits
from iez.collect.host import check
from iez.alloc.registry import DEFAULT_POLICY, get_policy
from iez.cluster import Cluster
from iez.collect.message import MessageError, StatsMessage, decode
from iez.controller.work import Work, pending_work, plan_body, render_plan, run_state
from iez.controller.exposition import Counts, Exposition, Histogram, families
from iez.controller.view import MAX_CLOCK_SKEW, GlobalView
from iez.db.database import RESERVATION_TTL
from iez.db.errors import DatabaseError
from iez.errors import AllocationError, IezError, one_line
from iez.request import Request, RequestColumns

if TYPE_CHECKING:
    from iez.alloc.policy import AllocOptions
    from iez.db import Txn

log = logging.getLogger("iez.controller")

RETRY = 2.0  # seconds between looks at held-back work (gate shut, no fresh statistics)
KEPT_UPLOADS = 2  # uploaded predictions held for the worker until placed (~150 bytes a file each)
# The changed layouts' notes an admin allocation answers with (a run may have thousands; the
# interaction database keeps them all, and `iez report` lists them).
NOTES_SHOWN = 5


class Invalid(IezError):
    """Input that is well-formed JSON but cannot be used (HTTP 422)."""


class Conflict(IezError):
    """The upload clashes with what is stored (HTTP 409)."""


class NotFound(IezError):
    """No such application, run or plan (HTTP 404)."""


class HeldBack(IezError):
    """Work that cannot run now but will later (gate shut, statistics missing)."""


@dataclass(frozen=True)
class Settings:
    cluster: Cluster
    db_url: str | None = None
    policy: str = DEFAULT_POLICY
    capacity_weight: float | None = None
    routers: bool = False  # balanced with the LNet router level (AllocOptions.routers)
    # The layout mode (docs/layouts.md "Modes"): None = the cluster file's [defaults] layout, else
    # iez's default; the applications of `layout_keep` keep their asked layouts whatever the mode.
    layout: str | None = None
    layout_keep: frozenset[str] = frozenset()
    stale_after: float = 0.0  # seconds; 0 = three of each collector's intervals
    gate: GateLimits | None = GateLimits()  # None: allocate however busy the host is
    gate_proc: str = "/proc"  # where the gate reads loadavg and meminfo
    site_key: str = ""  # the site token: collectors' messages are signed with it
    reservation_ttl: float = RESERVATION_TTL  # seconds a planned, unrun run reserves its space; 0: until it runs
    max_clock_skew: float = MAX_CLOCK_SKEW  # seconds a collector's message may be stamped ahead of ours
    iocop: str = ""  # IO-Cop's endpoint, for the dashboard's view of its holders and queue ("": not shown)


@dataclass(frozen=True)
class PlanResult:
    status: str  # "ready" | "pending" | "failed"
    app: str
    run: int | None
    body: bytes = b""  # the plan file, as stored
    reason: str = ""

    @property
    def text(self) -> str:
        return self.body.decode()

    @cached_property  # a plan held in memory is hashed once, not at every fetch
    def etag(self) -> str:
        """An entity tag of the plan (RFC 9110 8.8.3): the run and a hash of its bytes."""
        return f'"{self.run}-{hashlib.blake2b(self.body, digest_size=12).hexdigest()}"'


class Plans:
    """What a plan fetch gets, by (app, run or None for the coming run), read from the database
    once and then answered from memory: a ready plan as served, or the work a pending one waits
    for (its answer, pending or failed, is made at each fetch from the worker's state). Every
    write the controller makes that can change the answer (an upload, a prediction, a placement,
    a release) clears it; a reader that read the database before such a write does not put what
    it read back (`generation`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: dict[tuple[str, int | None], PlanResult | Work] = {}
        self.generation = 0

    def get(self, app: str, run: int | None) -> PlanResult | None:
        """The ready plan held (the server's fast path asks for nothing else)."""
        got = self.known.get((app, run))  # one dict read: atomic under the GIL, no lock needed
        return got if type(got) is PlanResult else None

    def waits_for(self, app: str, run: int | None) -> Work | None:
        """The work a pending plan was last read to wait for."""
        got = self.known.get((app, run))
        return got if type(got) is Work else None

    def put(self, app: str, run: int | None, answer: PlanResult | Work, generation: int) -> None:
        with self.lock:
            if generation == self.generation:
                self.known[(app, run)] = answer

    def clear(self) -> None:
        with self.lock:
            self.generation += 1
            self.known = {}


class Controller:
    def __init__(self, settings: Settings) -> None:
        from iez.alloc.policy import AllocOptions
        from iez.db import Database

        self.settings = settings
        self.cluster = settings.cluster
        self.policy = get_policy(settings.policy)  # unknown names fail at start
        options = AllocOptions(routers=settings.routers)
        if settings.capacity_weight is not None:
            options = replace(options, capacity_weight=settings.capacity_weight)
        layout = settings.layout or self.cluster.layout
        self.options = replace(options, layout=layout) if layout else options
        self.db = Database(settings.db_url)
        self.view = GlobalView(self.cluster, settings.stale_after, settings.max_clock_skew)
        self.lock = threading.Lock()  # the view and the counters
        self.alloc_lock = threading.Lock()  # one allocation at a time: each sees the others' reservations
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.failed: dict[tuple, str] = {}  # work that failed for good, until new input arrives
        self.held: dict[tuple, str] = {}  # work that waits (gate shut, statistics missing), and why
        self.latency: dict[str, Histogram] = {}  # allocation seconds, by policy
        self.done = {"predict": 0, "allocate": 0}
        self.errors = {"predict": 0, "allocate": 0}
        self.messages = {"accepted": 0, "rejected": 0}
        self.ost_bytes: dict[str, tuple[float, float]] = {}  # target -> (read, write) bytes collectors reported
        self.plan_files: dict[str, tuple[int, int]] = {}  # app -> (hits, misses) of its uploaded traces
        self._issues: dict[str, str] = {}
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None  # the worker's newest error, for /health
        self.exposition = Exposition(self._families)
        self.plans = Plans()
        self.uploaded: dict[int, RequestColumns] = {}  # uploaded predictions by id, not read back to place them

    # -- lifetime ------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work_loop, name="iez-worker", daemon=True)
        self._thread.start()

    def worker_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, grace: float = 30.0) -> None:
        """Stop the worker, waiting at most `grace` seconds. A run it is still placing then is
        abandoned uncommitted: the database still says it is to do, so the next start does it."""
        self.stop.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout=grace)
            if self._thread.is_alive():
                log.warning("stopped in the middle of planning: the run is planned again at the next start")
                return  # its connection is still in use; the process exit rolls its transaction back
        self.db.close()

    # -- statistics ----------------------------------------------------------------------------

    def on_message(self, frames: list[bytes], received: float) -> list[str]:
        """One collector message off the wire; returns what was not used of it (logged once)."""
        try:
            msg = decode(frames, self.settings.site_key)
        except MessageError as e:
            accepted, issues, who = False, [f"collector message rejected: {e}"], "?"
        else:
            with self.lock:
                accepted, issues = self.view.apply(msg, received)
                if accepted:
                    self._count_bytes(self.view.collectors[(msg.role, msg.id)].msg)
            who = f"{msg.role}:{msg.id}"
        with self.lock:
            self.messages["accepted" if accepted else "rejected"] += 1
            text = "; ".join(issues)
            if text and self._issues.get(who) != text:
                log.warning("%s", text)
            self._issues[who] = text
        if accepted and self.held:
            self.wake.set()  # fresh statistics may be what held work back
        return issues

    def _count_bytes(self, kept: StatsMessage) -> None:
        """The OSTs' byte counters (/metrics' _total counters, for rate()): the OST's own
        cumulative sums where its collector sends them (version 2), else its rates x the
        interval added up (version 1 collectors; a rate not known yet adds nothing)."""
        for target, r in kept.osts.items():
            if r.read_bytes is not None and r.write_bytes is not None:
                self.ost_bytes[target] = (float(r.read_bytes), float(r.write_bytes))
                continue
            read, write = self.ost_bytes.get(target, (0.0, 0.0))
            self.ost_bytes[target] = (read + (r.read_bps or 0.0) * kept.interval,
                                      write + (r.write_bps or 0.0) * kept.interval)

    # -- uploads -------------------------------------------------------------------------------

    def _check_pools(self, requests: Sequence[Request]) -> None:
        named = requests.pools if isinstance(requests, RequestColumns) else {q.pool for q in requests}
        bad = next((p for p in named if p and p not in self.cluster.pools), None)
        if bad is not None:
            q = next(q for q in requests if q.pool == bad)
            raise Invalid(f"{q.path}: pool {q.pool!r} is not a pool of {self.cluster.fsname} "
                          f"(pools: {', '.join(sorted(self.cluster.pools)) or 'none'})")

    def upload_trace(self, app: str, requests: Sequence[Request], run: int | None = None, *, label: str = "",
                     source: str = "libiez", nprocs: int = 0, plan_hits: int = 0, plan_misses: int = 0,
                     meta: dict[str, Any] | None = None, reads: Sequence[Request] = ()) -> dict[str, Any]:
        """Store what a run created and what it only read, with its meta's `collective_reads`
        (`pipeline.collective_reads` of the files, unless `meta` has it already); when it created
        files, or read striped files collectively (its plan asks for the Lustre-aware collective
        read, even with no file to place), the worker then predicts the next run and plans it."""
        from iez.predict import needs_retrace
        from iez.trace.ingest import Ingested

        self._check_pools(requests)
        got = Ingested(list(requests), plan_hits=plan_hits, plan_misses=plan_misses, reads=list(reads))
        meta = {"collective_reads": pipeline.collective_reads(got), **(meta or {})}
        with self.db.begin() as tx:
            if run is not None:
                info = run_state(tx, app, run)
                if info is not None and info.traced:
                    raise Conflict(f"run {run} of {app} already has a trace")
            number, notes = pipeline.store_trace(tx, app, got, run, label=label, source=source, nprocs=nprocs,
                                                 meta=meta)
        self.plans.clear()  # the traced run is no longer the one to follow
        with self.lock:
            hits, misses = self.plan_files.get(app, (0, 0))
            self.plan_files[app] = (hits + plan_hits, misses + plan_misses)
        self.wake.set()
        return {"app": app, "run": number, "files": len(requests), "reads": len(reads), "notes": notes,
                "retrace": needs_retrace(plan_hits, plan_misses), "next": number + 1}

    def upload_requests(self, app: str, requests: Sequence[Request], run: int | None = None) -> dict[str, Any]:
        """Store the requests of a run to come (predicted elsewhere); the worker plans them.
        Columns (`RequestColumns`) are stored as they are and handed to the worker, which then
        does not read them back."""
        from iez.db.database import in_stored_order

        self._check_pools(requests)
        if not requests:
            raise Invalid("no requests: a run to plan needs at least one file")
        if isinstance(requests, RequestColumns):
            requests = in_stored_order(requests)
        with self.db.begin() as tx:
            tx.app_id(app, create=True)
            number = tx.next_traced_run(app) if run is None else run
            info = run_state(tx, app, number)
            if info is not None and info.traced:
                raise Conflict(f"run {number} of {app} has already run (it has a trace)")
            if info is not None and info.planned_policy:
                raise Conflict(f"run {number} of {app} is already planned; re-plan it with "
                               f"POST /apps/{app}/runs/{number}/allocate (admin)")
            pid = tx.add_prediction(app, number, requests, {"source": "uploaded"}, [])
        if isinstance(requests, RequestColumns):
            with self.lock:  # kept until placed; only the newest few (a shut gate holds them back)
                self.uploaded[pid] = requests
                while len(self.uploaded) > KEPT_UPLOADS:
                    del self.uploaded[next(iter(self.uploaded))]
        self.plans.clear()
        self.wake.set()
        return {"app": app, "run": number, "files": len(requests), "status": "pending"}

    # -- plans and state -----------------------------------------------------------------------

    def plan(self, app: str, run: int | None = None) -> PlanResult:
        """The plan of run `run` of `app` (None: the run a job starting now follows), else why
        there is none. A ready plan, and the work a pending one waits for, are answered from memory
        after their first read."""
        held = self.held_plan(app, run)
        if held is not None:
            return held
        generation = self.plans.generation
        with self.db.begin() as tx:
            planned = tx.planned_run(app, run)
            if planned is not None:
                number, policy, body = planned
                ready = PlanResult("ready", app, number, body if body is not None else
                                   render_plan(tx, app, number, policy))
                self.plans.put(app, run, ready, generation)
                return ready
            todo = pending_work(tx)
            exists = app in tx.apps()
        mine = [w for w in todo if w.app == app and (run is None or w.target == run)]
        failed = [w for w in mine if w.key in self.failed]
        if failed:
            return PlanResult("failed", app, failed[0].target, reason=self.failed[failed[0].key])
        if mine:
            if len(mine) == 1:  # polled again from memory until the worker's next write
                self.plans.put(app, run, mine[0], generation)
            return PlanResult("pending", app, mine[0].target, reason=self.held.get(mine[0].key, "queued"))
        if not exists:
            raise NotFound(f"no application {app!r}: trace a run first (or upload its requests)")
        if run is None:
            raise NotFound(f"{app} has no plan for a coming run: its next run should be traced")
        raise NotFound(f"run {run} of {app} has no plan (runs are planned from a prediction or uploaded requests)")

    def held_plan(self, app: str, run: int | None = None) -> PlanResult | None:
        """`plan(app, run)` when it is answered from memory (a ready plan, or a pending one with the
        worker's state now), else None; no database."""
        ready = self.plans.get(app, run)
        if ready is not None:
            return ready
        work = self.plans.waits_for(app, run)
        if work is not None and work.key not in self.failed:  # a failure is told as the database says it
            return PlanResult("pending", app, work.target, reason=self.held.get(work.key, "queued"))
        return None

    def app_status(self, app: str) -> dict[str, Any]:
        from iez.predict import needs_retrace

        with self.db.begin() as tx:
            if app not in tx.apps():
                raise NotFound(f"no application {app!r}")
            runs = tx.runs(app)
            work = [w for w in pending_work(tx) if w.app == app]
        last = next((r for r in reversed(runs) if r.traced), None)
        return {
            "app": app,
            "runs": [{"run": r.number, "traced": r.traced, "files": r.n_traced, "reads": r.n_reads,
                      "planned": r.planned_policy or None,
                      "plan_hits": r.plan_hits, "plan_misses": r.plan_misses, "source": r.source or None}
                     for r in runs],
            "pending": [{"work": w.kind, "run": w.run, "failed": self.failed.get(w.key)} for w in work],
            "retrace": bool(last and needs_retrace(last.plan_hits, last.plan_misses)),
        }

    def cluster_view(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        with self.lock:
            return self.view.describe(now)

    def health(self) -> dict[str, Any]:
        now = time.time()
        with self.lock:
            snap = self.view.snapshot(now)
        try:
            with self.db.begin() as tx:
                pending = len(pending_work(tx))
            db = "ok"
        except DatabaseError as e:
            pending, db = None, str(e)
        alive = self.worker_alive()
        return {"status": "failed" if not alive else "ok" if db == "ok" else "degraded", "database": db,
                "pending": pending, "waiting": sorted(set(self.held.values())) or None,
                "worker": {"alive": alive, "last_error": self.last_error, "queue": pending,
                           "failed": len(self.failed)},
                "fresh_osts": len(snap.snapshot.osts), "stale_osts": sorted(snap.stale)}

    # -- the worker ----------------------------------------------------------------------------

    def _work_loop(self) -> None:
        while not self.stop.is_set():
            try:
                busy = self.step()
            except DatabaseError as e:  # the database went away: say so, try again
                log.error("%s", e)
                self.last_error = str(e)
                busy = False
            except Exception as e:  # a bug outside any one run: keep the worker alive, say so in /health
                self.last_error = one_line(e)
                log.error("controller worker: %s", self.last_error)
                log.debug("controller worker", exc_info=True)
                busy = False
            if not busy:
                self.wake.wait(RETRY)
                self.wake.clear()

    def step(self) -> bool:
        """Do one piece of pending work; False when there is none that can run now. A piece that
        fails, for whatever reason, fails alone: its error is kept (the plan request and
        /apps/APP say it) and the others go on."""
        with self.db.begin() as tx:
            work = [w for w in pending_work(tx) if w.key not in self.failed]
        held: dict[tuple, str] = {}
        try:
            if work:
                self._gate_open()
            for w in work:
                try:
                    if w.kind == "predict":
                        self._predict(w.app)
                    else:
                        self.allocate(w.app, w.run)
                except HeldBack as e:  # this one waits; the next may go ahead
                    held[w.key] = str(e)
                    continue
                except DatabaseError:
                    raise
                except Exception as e:
                    log.debug("%s %s run %d", w.kind, w.app, w.target, exc_info=True)
                    why = one_line(e)
                    self.failed[w.key] = why
                    self.errors[w.kind] += 1
                    self.last_error = f"{w.kind} {w.app} run {w.target}: {why}"
                    log.error("%s %s run %d failed: %s", w.kind, w.app, w.target, why)
                else:
                    self.done[w.kind] += 1
                return True
        except HeldBack as e:  # the gate: everything waits
            held = {w.key: str(e) for w in work}
        finally:
            for why in sorted(set(held.values()) - set(self.held.values())):
                log.info("%s", why)
            self.held = held
        return False

    def _gate_open(self) -> None:
        if self.settings.gate is None:
            return
        try:
            d = check(self.settings.gate, self.settings.gate_proc)
        except IezError as e:
            raise HeldBack(f"cannot read this host's load ({e}): not allocating") from None
        if not d.open:
            raise HeldBack(f"held back: {d.reason} (iez controller --no-gate, or --max-cpu/--max-mem, lift it)")

    def _predict(self, app: str) -> None:
        # workers=1: the ARIMA grid would otherwise fork this multi-threaded process.
        try:
            got = pipeline.predict(self.db, app, workers=1)
        finally:
            self.plans.clear()  # the work a pending plan waits for is now its placement
        log.info("predicted %s run %d: %d files", app, got.run, len(got.prediction.requests))

    def release(self, app: str) -> dict[str, Any]:
        """The app's planned runs that have not run stop reserving space (admin)."""
        try:
            with self.db.begin() as tx:
                released = tx.release_plans(app)
        except DatabaseError as e:
            raise NotFound(str(e)) from None
        self.plans.clear()
        log.info("released %s runs %s", app, released)
        return {"app": app, "released": released}

    def options_for(self, app: str, capacity_weight: float | None = None) -> AllocOptions:
        """How `app` is allocated: the controller's options, its capacity weight if given, and its
        asked layouts kept if the site says so (`layout_keep`)."""
        options = self.options if capacity_weight is None else replace(self.options, capacity_weight=capacity_weight)
        return replace(options, layout="keep") if app in self.settings.layout_keep else options

    def allocate(self, app: str, run: int, policy_name: str | None = None,
                 capacity_weight: float | None = None) -> dict[str, Any]:
        """Place run `run` of `app` on the global view and store the placements as its plan."""
        name = policy_name or self.settings.policy
        options = self.options_for(app, capacity_weight)

        stale: frozenset[int] = frozenset()

        def fresh() -> pipeline.ClusterState:
            nonlocal stale
            with self.lock:
                view = self.view.snapshot(time.time())
            stale = view.stale
            if not view.snapshot.osts:
                raise HeldBack("waiting for fresh statistics: no collector has reported any OST recently (run iez "
                               "collect on the OSSs; iez controller --stale-after sets how old is too old)")
            return pipeline.ClusterState(self.cluster, view.snapshot, "controller")

        made: list[tuple[PlanResult, bool, int]] = []  # the plan, whether it is the one to follow, generation

        def plan(tx: Txn, done: pipeline.Allocation) -> None:
            generation = self.plans.generation
            info = run_state(tx, app, run)
            if info is not None and info.traced:
                raise Conflict(f"run {run} of {app} was traced while it was being placed")
            tx.mark_planned(app, run, name)
            # rendered once, here: every fetch serves these bytes
            body = plan_body(tx, app, run, name, done.cluster, done.placements[name], done.snapshot.time)
            tx.set_plan(app, run, name, body)
            newest = tx.planned_run(app, body=False)
            made.append((PlanResult("ready", app, run, body), newest is not None and newest[0] == run, generation))

        with self.alloc_lock:
            try:
                done = pipeline.allocate(
                    self.db, app, run, [name], fresh, options, reservation_ttl=self.settings.reservation_ttl,
                    commit=plan, progress=lambda _, r, n: log.info("placing %s run %d: %d files", app, r, n),
                    known=dict(self.uploaded))
            except pipeline.NoPrediction as e:
                raise NotFound(str(e)) from None
            except AllocationError as e:
                if stale:  # the missing OSTs may be the ones it needs
                    raise HeldBack(f"{app} run {run}: {e} (OSTs {sorted(stale)} have no fresh statistics)") from None
                raise
            finally:
                self.plans.clear()  # committed or not, nothing read before it is put back
        for ready, follow, generation in made:  # held at once: the first fetch is served from memory
            # kept only if no other write came between this placement's reads and its clear
            for key in (run, None) if follow else (run,):
                self.plans.put(app, key, ready, generation + 1)
        with self.lock:
            self.latency.setdefault(name, Histogram()).observe(done.seconds)
            self.uploaded = {k: v for k, v in self.uploaded.items() if v.app != app}  # placed: read back if asked again
        log.info("placed %s run %d with %s: %d files in %.3f s (%.3f s of CPU)", app, run, name, len(done.requests),
                 done.seconds, done.cpu)
        changed = pipeline.noted(done.placements[name])
        return {"app": app, "run": run, "policy": name, "files": len(done.requests), "seconds": done.seconds,
                "excluded_osts": sorted(done.excluded), "reserved_osts": sorted(done.reserved),
                "layouts_changed": len(changed), "notes": {p.path: p.note for p in changed[:NOTES_SHOWN]}}

    # -- metrics -------------------------------------------------------------------------------

    def metrics(self) -> bytes:
        """The Prometheus exposition of the current view and counters."""
        return self.exposition.render()

    def _families(self) -> list[Metric]:
        now = time.time()
        with self.lock:
            view = self.view.snapshot(now)
            desc = self.view.describe(now)
            counts = Counts({name: h.copy() for name, h in sorted(self.latency.items())}, dict(self.done),
                            dict(self.errors), dict(self.messages), len(self.held), dict(self.ost_bytes),
                            dict(self.plan_files))
        return families(self.cluster, view, desc, counts)


def check_app(app: str) -> str:
    from iez.db import check_app_name

    try:
        return check_app_name(app)
    except DatabaseError as e:
        raise Invalid(str(e)) from None

