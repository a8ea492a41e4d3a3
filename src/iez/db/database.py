"""The interaction database: where traces, predictions, snapshots and placements meet.

SQLite by default (`$IEZ_DB`, else `$XDG_DATA_HOME/iez/iez.db`, else
`~/.local/share/iez/iez.db`); any SQLAlchemy URL overrides it, PostgreSQL included
(`postgresql://user@host/db` is read with psycopg 3). Every write happens inside
`Database.begin()`, one transaction: a failure anywhere in it leaves the database as it was.
"""

from __future__ import annotations

import json
import math
import os
from operator import attrgetter, itemgetter
import re
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from sqlalchemy import (Connection, Engine, Insert, Select, Table, bindparam, create_engine, delete, func,
                        literal_column, null,
                        select, update)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from iez.cluster import Cluster, OSSStats, OSTStats, Snapshot, dump_cluster, parse_cluster
from iez.db.errors import DatabaseError
from iez.db.migrations import migrate
from iez.db.schema import (
    applications,
    cluster_snapshots,
    placed_bytes,
    placements,
    plans,
    predicted_requests,
    predictions,
    runs,
    traced_reads,
    traced_requests,
)
from iez.db.sqlite import take_transactions
from iez.errors import IezError
from iez.layout.layout import LOV_MAX_STRIPE_COUNT, FileLayout, Layout
from iez.plan import format_layout, format_plain, parse_layout
from iez.request import Placement, Request, RequestColumns

# A planned run not traced within this long stops reserving its space (docs/controller.md):
# a job that never comes back must not hold it for ever.
RESERVATION_TTL = 7 * 86400.0

# Application names end up in plan metadata (`#app=NAME`) and file names of reports.
APP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
REQUEST_FIELDS = ("path", "write_bytes", "stripe_count", "rank", "comm_size", "create_time", "api", "pool",
                   "writers", "transfer_size", "write_align", "writer_segments", "read_bytes", "read_size", "host",
                   "final_path", "name_random")

# REQUEST_FIELDS in Request's field order (create_time before comm_size): find_prediction's columns.
_PREDICTED_ORDER = ("path", "write_bytes", "stripe_count", "rank", "create_time", "comm_size", "api", "pool",
                    "writers", "transfer_size", "write_align", "writer_segments", "read_bytes", "read_size", "host",
                    "final_path", "name_random")


def check_app_name(name: str) -> str:
    if not APP_NAME.fullmatch(name):
        raise DatabaseError(f"bad application name {name!r}: 1-128 letters, digits, '.', '_', '+' "
                            "or '-', starting with a letter or digit")
    return name


def default_url() -> str:
    """The database iez uses when no --db is given."""
    env = os.environ.get("IEZ_DB", "")
    if env:
        return env if "://" in env else f"sqlite:///{Path(env).expanduser().absolute()}"
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'iez' / 'iez.db'}"


def _normalise(url: str) -> str:
    try:
        u = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"bad database URL {url!r} (examples: sqlite:///path/iez.db, "
                            "postgresql://user@host:5432/iez)") from None
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")  # psycopg 3 is what iez installs
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return u.render_as_string(hide_password=False)


def _safe(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _one_line(e: BaseException) -> str:
    msg = str(getattr(e, "orig", None) or e).strip().splitlines()
    return msg[0] if msg else type(e).__name__


class Database:
    def __init__(self, url: str | None = None) -> None:
        self.url = _normalise(url or default_url())
        try:
            self.engine: Engine = create_engine(self.url)
        except (ArgumentError, ImportError) as e:
            raise DatabaseError(f"cannot use database {_safe(self.url)}: {_one_line(e)}") from None
        if self.engine.dialect.name == "sqlite":
            # SQLite leaves FK enforcement (and CASCADE) off; several iez commands may share one file
            take_transactions(self.engine, "foreign_keys=ON", "busy_timeout=30000")
        with self.begin() as tx:
            migrate(tx.conn)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def begin(self) -> Iterator["Txn"]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        try:
            with self.engine.begin() as conn:
                yield Txn(conn)
        except IezError:
            raise
        except SQLAlchemyError as e:
            raise DatabaseError(f"database {_safe(self.url)}: {_one_line(e)}") from None


@dataclass(frozen=True)
class RunInfo:
    app: str
    number: int
    label: str
    traced: bool
    source: str
    source_path: str
    nprocs: int
    n_traced: int
    plan_hits: int
    plan_misses: int
    planned_policy: str
    meta: dict[str, Any]
    n_reads: int = 0  # files it read and did not create


@dataclass(frozen=True)
class PredictionInfo:
    run: int
    requests: list[Request]
    models: dict[str, Any]
    based_on: list[int]
    created_at: float


@dataclass(frozen=True)
class PlacementSet:
    run: int
    policy: str
    snapshot_id: int
    placements: list[Placement]
    ranks: dict[str, int]


class Txn:
    """The database operations, all inside one transaction (see Database.begin)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # Ids read or made in this transaction (iez deletes no application or run), so that the
        # steps of one placement do not ask again: an application's id and whether this
        # transaction has locked its row (`app_id`), a run's id by (application id, number).
        self._apps: dict[str, tuple[int, bool]] = {}
        self._runs: dict[tuple[int, int], int] = {}
        # Predictions read back, by (application, run asked for), until this transaction stores
        # one: storing a trace reads its run's prediction twice (the asked stripe counts, then
        # how well it was foreseen), 8,192 rows each.
        self._predicted: dict[tuple[str, int | None], PredictionInfo | None] = {}

    def _insert_many(self, table: Table, names: Sequence[str], rows: Iterable[tuple],
                     fixed: Mapping[str, int | float | str] | None = None) -> None:
        """Insert `rows`, tuples of the columns `names`, in one executemany of SQL compiled once:
        through SQLAlchemy's per-row parameter processing 8,192 placements took 1.6x as long to
        write (195 against 121 ms on SQLite), and a dict a row another 5 ms. The columns `fixed`
        are the same in every row: written in the SQL as literals (`_literal`), not bound a row.
        PostgreSQL takes the rows with COPY (`_copy`)."""
        if self.conn.dialect.name == "postgresql":
            self._copy(table, names, rows, fixed or {})
            return
        values: dict[str, Any] = {k: bindparam(k) for k in names}
        values.update({k: literal_column(_literal(v)) for k, v in (fixed or {}).items()})
        compiled = table.insert().values(values).compile(dialect=self.conn.dialect)
        order = compiled.positiontup or []
        params: list[Any] = rows if isinstance(rows, list) else list(rows)  # SQLite's are positional
        if list(order) != list(names):
            at = itemgetter(*(list(names).index(k) for k in order))
            params = [at(r) for r in params] if len(order) > 1 else [(at(r),) for r in params]
        if params:
            self.conn.exec_driver_sql(str(compiled), params)

    def _copy(self, table: Table, names: Sequence[str], rows: Iterable[tuple],
              fixed: Mapping[str, int | float | str]) -> None:
        """`_insert_many` on PostgreSQL: COPY FROM STDIN in this transaction, the rows written by
        psycopg's C code (8,192 placements: 16 against 118 ms of the client's CPU by executemany,
        139 against 321 ms wall). Its errors are raised as SQLAlchemy's, as a statement's are."""
        import psycopg

        quote = self.conn.dialect.identifier_preparer
        columns = [*names, *fixed]
        sql = (f"COPY {quote.format_table(table)} ({', '.join(map(quote.quote, columns))}) FROM STDIN")
        more = tuple(fixed.values())
        raw = self.conn.connection.driver_connection
        assert raw is not None  # a connection in a transaction has its driver's
        try:
            with raw.cursor() as cur, cur.copy(sql) as copy:
                write = copy.write_row
                for r in rows:
                    write(r + more if more else r)
        except psycopg.Error as e:
            raise DBAPIError.instance(sql, None, e, psycopg.Error) from None

    def _insert_columns(self, table: Table, columns: Mapping[str, Any], n: int) -> None:
        """Insert `n` rows given as columns: a sequence of `n` values, or one value for every row.
        A column whose rows all hold one number or plain word (`_literal`) is written into the SQL
        instead of bound in every row (8,192 predicted requests: 17 against 24 ms on SQLite); the
        first column is always bound."""
        fixed, varying = {}, {}
        for i, (k, c) in enumerate(columns.items()):
            c = c.tolist() if isinstance(c, np.ndarray) else c
            every = not isinstance(c, (list, tuple))  # one value (None too) for every row
            one = c if every else c[0] if i and n and c.count(c[0]) == n else None
            if i and one is not None and _literal(one):
                fixed[k] = one
            else:
                varying[k] = [c] * n if every else c
        bound = sorted(varying, key=list(table.c.keys()).index)  # the compiled INSERT's order: no reordering a row
        self._insert_many(table, bound, list(zip(*map(varying.__getitem__, bound))), fixed)

    def _insert(self, stmt: Insert) -> int:
        """Insert one row; its id."""
        key = self.conn.execute(stmt).inserted_primary_key
        assert key is not None  # an INSERT of one row always has one
        return key[0]

    # -- applications and runs -------------------------------------------------------------
    def app_id(self, name: str, create: bool = False) -> int:
        known = self._apps.get(name)
        if known is not None and (known[1] or not create):
            return known[0]
        check_app_name(name)
        q = select(applications.c.id).where(applications.c.name == name)
        # A writer locks the application's row, so that two imports into one application take
        # run numbers one after the other (PostgreSQL; SQLite's BEGIN IMMEDIATE already does).
        row = self.conn.execute(q.with_for_update() if create else q).first()
        if not row and not create:
            raise DatabaseError(f"no application {name!r} in the database "
                                f"(import a trace first: iez trace import PATH --app {name})")
        got = row[0] if row else self._insert(applications.insert().values(name=name, created_at=time.time()))
        self._apps[name] = (got, create)
        return got

    def apps(self) -> list[str]:
        return list(self.conn.execute(select(applications.c.name).order_by(applications.c.name)).scalars())

    def _run_id(self, app_id: int, number: int, create: bool = False) -> int | None:
        known = self._runs.get((app_id, number))
        if known is not None:
            return known
        row = self.conn.execute(select(runs.c.id).where(runs.c.app_id == app_id, runs.c.number == number)).first()
        if not row and not create:
            return None
        got = row[0] if row else self._insert(runs.insert().values(app_id=app_id, number=number))
        self._runs[(app_id, number)] = got
        return got

    def next_traced_run(self, app: str) -> int:
        """1 + the highest run number that has a trace (so a predicted run gets its trace)."""
        top = self.conn.execute(
            select(func.max(runs.c.number)).select_from(runs.join(applications))
            .where(applications.c.name == app, runs.c.traced_at.is_not(None))).scalar()
        return (top or 0) + 1

    def add_trace(self, app: str, requests: Sequence[Request], number: int | None = None, *,
                  label: str = "", source: str = "", source_path: str = "", nprocs: int = 0,
                  plan_hits: int = 0, plan_misses: int = 0, meta: dict[str, Any] | None = None,
                  reads: Sequence[Request] = ()) -> int:
        """Store one traced run of `app`: the files it created (`requests`) and those it read
        without creating them (`reads`); returns its run number."""
        aid = self.app_id(app, create=True)
        number = self.next_traced_run(app) if number is None else number
        if number < 1:
            raise DatabaseError(f"run numbers start at 1, got {number}")
        rid = self._run_id(aid, number, create=True)
        traced = self.conn.execute(select(runs.c.traced_at).where(runs.c.id == rid)).scalar()
        if traced is not None:
            raise DatabaseError(f"run {number} of {app!r} already has a trace (give another --run)")
        self.conn.execute(update(runs).where(runs.c.id == rid).values(
            label=label[:255], traced_at=time.time(), source=source, source_path=source_path,
            nprocs=nprocs, plan_hits=plan_hits, plan_misses=plan_misses, meta=json.dumps(meta or {})))
        for table, files in ((traced_requests, requests), (traced_reads, reads)):
            if not files:
                continue
            texts: dict[int, str] = {}  # each layout object formatted once (an upload shares equal ones)
            observed = [None if o is None else texts.get(id(o)) or texts.setdefault(id(o), format_layout(o))
                        for o in map(attrgetter("observed"), files)]
            columns = dict(zip(REQUEST_FIELDS, map(list, zip(*map(_request_values, files)))))
            self._insert_columns(table, {**columns, "run_id": rid, "observed_layout": observed}, len(files))
        return number

    def runs(self, app: str) -> list[RunInfo]:
        aid = self.app_id(app)
        n_traced, n_reads = (select(func.count()).where(t.c.run_id == runs.c.id).correlate(runs).scalar_subquery()
                             for t in (traced_requests, traced_reads))
        rows = self.conn.execute(select(runs, n_traced.label("n_traced"), n_reads.label("n_reads"))
                                 .where(runs.c.app_id == aid).order_by(runs.c.number))
        return [RunInfo(app=app, number=r.number, label=r.label, traced=r.traced_at is not None,
                        source=r.source, source_path=r.source_path, nprocs=r.nprocs, n_traced=r.n_traced,
                        plan_hits=r.plan_hits, plan_misses=r.plan_misses,
                        planned_policy=r.planned_policy or "", meta=json.loads(r.meta), n_reads=r.n_reads)
                for r in rows]

    def traced_runs(self, app: str) -> list[tuple[int, list[Request]]]:
        """Every traced run of `app`, oldest first, each with its requests in create order (their
        `run` is the run's label: its job id)."""
        aid = self.app_id(app)
        out: dict[int, list[Request]] = {}
        q = (select(runs.c.number, runs.c.label, traced_requests)
             .join(traced_requests, traced_requests.c.run_id == runs.c.id)
             .where(runs.c.app_id == aid, runs.c.traced_at.is_not(None))
             .order_by(runs.c.number, traced_requests.c.create_time, traced_requests.c.rank,
                       traced_requests.c.path))
        for r in self.conn.execute(q):
            observed = parse_layout(r.observed_layout) if r.observed_layout else None
            # the run's label (its job id, as libiez and Darshan name it), so that prediction
            # can tell a name carrying the job id from a number of its own
            out.setdefault(r.number, []).append(_row_request(r, app, r.label or str(r.number), observed))
        return sorted(out.items())

    def run_reads(self, app: str, number: int) -> list[Request]:
        """The files run `number` of `app` read and did not create, by path."""
        aid = self.app_id(app)
        q = (select(traced_reads).join(runs, traced_reads.c.run_id == runs.c.id)
             .where(runs.c.app_id == aid, runs.c.number == number).order_by(traced_reads.c.path))
        return [_row_request(r, app, str(number), parse_layout(r.observed_layout) if r.observed_layout else None)
                for r in self.conn.execute(q)]

    # -- predictions -------------------------------------------------------------------------
    def add_prediction(self, app: str, number: int, requests: Sequence[Request],
                       models: dict[str, Any], based_on: Sequence[int]) -> int:
        aid = self.app_id(app)
        rid = self._run_id(aid, number, create=True)
        self._predicted.clear()
        pid = self._insert(predictions.insert().values(
            run_id=rid, created_at=time.time(), based_on=json.dumps(list(based_on)),
            models=json.dumps(models)))
        if isinstance(requests, RequestColumns):  # a column each, no object per file
            n, more = len(requests), requests.more
            pool = requests.pools[0] if len(requests.pools) == 1 else [requests.pools[k] for k in requests.pool.tolist()]
            given = {"path": requests.path, "write_bytes": requests.write_bytes.tolist(),
                     "stripe_count": requests.stripe_count.tolist(), "create_time": requests.create_time.tolist(),
                     "pool": pool, "read_bytes": 0 if requests.read_bytes is None else requests.read_bytes.tolist()}
            self._insert_columns(predicted_requests, {"path": requests.path, "prediction_id": pid, **{
                k: given.get(k, more.get(k, _DEFAULTS[k])) for k in REQUEST_FIELDS[1:]}}, n)
        else:
            self._insert_many(predicted_requests, ("prediction_id", *REQUEST_FIELDS),
                              [(pid, *_request_values(q)) for q in requests])
        return pid

    def prediction(self, app: str, number: int | None = None) -> PredictionInfo:
        """The newest prediction of run `number`, or of the highest-numbered predicted run."""
        found = self.find_prediction(app, number)
        if found is None:
            which = f"run {number} of {app!r}" if number is not None else repr(app)
            raise DatabaseError(f"no prediction for {which} (run: iez predict {app})")
        return found

    def _prediction_head(self, app: str, number: int | None) -> Any:
        aid = self.app_id(app)
        q = (select(predictions, runs.c.number).join(runs, predictions.c.run_id == runs.c.id)
             .where(runs.c.app_id == aid))
        if number is not None:
            q = q.where(runs.c.number == number)
        return self.conn.execute(q.order_by(runs.c.number.desc(), predictions.c.id.desc()).limit(1)).first()

    def _predicted_rows(self, prediction_id: int) -> Sequence[Any]:
        """A prediction's requests as rows of _PREDICTED_ORDER, in the order they are placed in."""
        c = predicted_requests.c
        # paths by code point, as in_stored_order sorts them (SQLite's BINARY; PostgreSQL's
        # database collation would depend on the site's locale)
        path = c.path.collate("C") if self.conn.dialect.name == "postgresql" else c.path
        return self.conn.execute(select(*(c[k] for k in _PREDICTED_ORDER)).where(c.prediction_id == prediction_id)
                                 .order_by(c.create_time, c.rank, path)).all()

    def prediction_columns(self, app: str, number: int | None = None,
                           known: Mapping[int, RequestColumns] | None = None) -> tuple[int, RequestColumns]:
        """The run and requests of `prediction(app, number)` as columns (no object per file); a
        prediction whose id `known` holds (the controller's own upload, in stored order) is not
        read back."""
        head = self._prediction_head(app, number)
        if head is None:
            self.prediction(app, number)  # its error
        got = (known or {}).get(head.id)
        if got is not None:
            return head.number, replace(got, app=app, run=str(head.number))
        rows = self._predicted_rows(head.id)
        cols = dict(zip(_PREDICTED_ORDER, map(list, zip(*rows)))) if rows else {k: [] for k in _PREDICTED_ORDER}
        return head.number, request_columns(cols, app, str(head.number))

    def find_prediction(self, app: str, number: int | None = None) -> PredictionInfo | None:
        """The newest prediction of run `number` (None: of the highest-numbered predicted run), or
        None. Read once a transaction: its requests are shared by the callers, who do not change them."""
        if (app, number) not in self._predicted:
            self._predicted[(app, number)] = self._read_prediction(app, number)
        return self._predicted[(app, number)]

    def _read_prediction(self, app: str, number: int | None) -> PredictionInfo | None:
        head = self._prediction_head(app, number)
        if head is None:
            return None
        rows = self._predicted_rows(head.id)
        run = str(head.number)
        # Request's fields in its own order, as positional arguments: a prediction is read back
        # before every placement, and keyword dicts per file took most of that time.
        reqs = [Request(p, w, k, rank, app, run, t, comm, api, pool, None, writers, transfer, align, segments,
                        rb, rs, host, final, False, False, rand)
                for p, w, k, rank, t, comm, api, pool, writers, transfer, align, segments, rb, rs, host, final, rand
                in rows]
        return PredictionInfo(run=head.number, requests=reqs, models=json.loads(head.models),
                              based_on=json.loads(head.based_on), created_at=head.created_at)

    # -- cluster snapshots -------------------------------------------------------------------
    def add_snapshot(self, cluster: Cluster, snap: Snapshot, source: str) -> int:
        stats = {"time": snap.time,
                 "osts": [asdict(s) for s in snap.osts.values()],
                 "osses": [asdict(s) for s in snap.osses.values()]}
        return self._insert(cluster_snapshots.insert().values(
            taken_at=snap.time or time.time(), source=source, cluster_toml=dump_cluster(cluster),
            stats=json.dumps(stats)))

    def snapshot(self, snapshot_id: int) -> tuple[Cluster, Snapshot]:
        r = self.conn.execute(select(cluster_snapshots).where(cluster_snapshots.c.id == snapshot_id)).first()
        if r is None:
            raise DatabaseError(f"no cluster snapshot {snapshot_id}")
        cluster = parse_cluster(r.cluster_toml, source=f"snapshot {snapshot_id}")
        st = json.loads(r.stats)
        snap = Snapshot(time=st["time"],
                        osts={s["index"]: OSTStats(**s) for s in st["osts"]},
                        osses={s["name"]: OSSStats(**s) for s in st["osses"]})
        return cluster, snap

    # -- placements --------------------------------------------------------------------------
    def set_placements(self, app: str, number: int, policy: str, placed: Sequence[Placement],
                       snapshot_id: int, ranks: dict[str, int]) -> None:
        """Replace `policy`'s placements for run `number` of `app` (rows of docs/references.md#s000-table2)."""
        aid = self.app_id(app)
        rid = self._run_id(aid, number, create=True)
        from iez.db.held import held_bytes

        for table in (placements, placed_bytes):
            self.conn.execute(delete(table).where(table.c.run_id == rid, table.c.policy == policy))
        self.conn.execute(delete(plans).where(plans.c.run_id == rid))  # rendered from what is replaced
        columns = dict(zip(("path", "stripe_size", "stripe_count", "ost_list", "layout", "write_bytes", "note"),
                           placement_columns(placed)))
        rank = ranks.get
        self._insert_columns(placements, {**columns, "rank": [rank(p, 0) for p in columns["path"]], "run_id": rid,
                                          "policy": policy, "snapshot_id": snapshot_id, "created_at": time.time()},
                             len(columns["path"]))
        held = held_bytes(placed)
        self._insert_many(placed_bytes, ("run_id", "policy", "ost", "bytes"),
                          [(rid, policy, i, b) for i, b in sorted(held.items())])

    def placement_sets(self, app: str, number: int | None = None) -> list[PlacementSet]:
        """Every policy's placements for run `number` (default: the newest run that has any)."""
        aid = self.app_id(app)
        if number is None:
            number = self.conn.execute(
                select(func.max(runs.c.number)).join(placements, placements.c.run_id == runs.c.id)
                .where(runs.c.app_id == aid)).scalar()
            if number is None:
                raise DatabaseError(f"no placements for {app!r} (run: iez allocate {app} --policy P)")
        rows = self.conn.execute(
            select(placements).join(runs, placements.c.run_id == runs.c.id)
            .where(runs.c.app_id == aid, runs.c.number == number)
            .order_by(placements.c.policy, placements.c.id))
        sets: dict[str, PlacementSet] = {}
        for r in rows:
            s = sets.setdefault(r.policy, PlacementSet(number, r.policy, r.snapshot_id, [], {}))
            s.placements.append(Placement(path=r.path, layout=parse_layout(r.layout), write_bytes=r.write_bytes,
                                          app=app, run=str(number), policy=r.policy, note=r.note))
            s.ranks[r.path] = r.rank
        if not sets:
            raise DatabaseError(f"no placements for run {number} of {app!r} "
                                f"(run: iez allocate {app} --run {number} --policy P)")
        return list(sets.values())

    def mark_planned(self, app: str, number: int, policy: str) -> None:
        """Record that run `number`'s plan file carries `policy`'s placements."""
        rid = self._run_id(self.app_id(app), number)
        self.conn.execute(update(runs).where(runs.c.id == rid).values(planned_policy=policy, planned_at=time.time()))

    def set_plan(self, app: str, number: int, policy: str, body: bytes) -> None:
        """Store run `number`'s plan file as served, rendered from `policy`'s placements."""
        rid = self._run_id(self.app_id(app), number)
        self.conn.execute(delete(plans).where(plans.c.run_id == rid))
        self.conn.execute(plans.insert().values(run_id=rid, policy=policy, created_at=time.time(), body=body))

    def planned_run(self, app: str, number: int | None = None,
                    body: bool = True) -> tuple[int, str, bytes | None] | None:
        """A planned run of `app` (None: the newest planned, untraced one: what a job starting now
        follows) as (number, policy, its stored plan file or None when there is none of that
        policy, or when `body` is False); None when there is no such run. One query."""
        q = (select(runs.c.number, runs.c.planned_policy, plans.c.policy,
                    plans.c.body if body else null().label("body"))
             .join(applications, runs.c.app_id == applications.c.id)
             .outerjoin(plans, plans.c.run_id == runs.c.id)
             .where(applications.c.name == app, runs.c.planned_policy.is_not(None)))
        q = q.where(runs.c.traced_at.is_(None)) if number is None else q.where(runs.c.number == number)
        r = self.conn.execute(q.order_by(runs.c.number.desc()).limit(1)).first()
        if r is None:
            return None
        stored = r.body is not None and r.policy == r.planned_policy
        return r.number, r.planned_policy, bytes(r.body) if stored else None

    def release_plans(self, app: str) -> list[int]:
        """Release the app's planned runs that have not run: they stop reserving space (the
        job will not run again, or not soon). Returns the run numbers released."""
        app_id = self.app_id(app)
        q = (select(runs.c.number).where(runs.c.app_id == app_id, runs.c.traced_at.is_(None),
                                         runs.c.planned_policy.is_not(None), runs.c.released_at.is_(None)))
        numbers = [r.number for r in self.conn.execute(q)]
        if numbers:
            self.conn.execute(runs.update().where(runs.c.app_id == app_id, runs.c.number.in_(numbers))
                              .values(released_at=time.time()))
        return numbers

    def pending_placements(self, exclude_app: str, ttl: float = 0.0) -> list[Placement]:
        """Placements of other applications' planned runs that have not been traced yet: bytes the
        file system has been promised but does not hold yet (the global view, docs/references.md#s000-fig4). Only
        each application's newest planned run counts: its plan file replaced the older ones; and
        with a `ttl` (seconds; 0: none), only if that plan was made within it (a job that never
        came back does not hold its space for ever)."""
        layouts: dict[str, FileLayout] = {}  # files of a job share few layouts: each is parsed once
        out = []
        for r in self.conn.execute(self._pending(exclude_app, ttl, placements, applications.c.name, runs.c.number)):
            layout = layouts.get(r.layout) or layouts.setdefault(r.layout, parse_layout(r.layout))
            out.append(Placement(path=r.path, layout=layout, write_bytes=r.write_bytes, app=r.name, run=str(r.number),
                                 policy=r.policy, note=r.note))
        return out

    def pending_bytes(self, exclude_app: str, ttl: float = 0.0) -> tuple[int, dict[int, int]]:
        """How many `pending_placements` there are and the bytes they hold on each OST (the RAID-0
        map of each layout, `iez.alloc.policy.job_bytes`), from the sums stored with them
        (`placed_bytes`): a row per OST, not per file."""
        count = self.conn.execute(self._pending(exclude_app, ttl, func.count())).scalar() or 0
        c = placed_bytes.c
        rows = self.conn.execute(self._pending(exclude_app, ttl, c.ost, func.sum(c.bytes), table=placed_bytes)
                                 .group_by(c.ost)).all()
        return count, {int(i): int(b) for i, b in rows}  # PostgreSQL's SUM of BIGINT is a NUMERIC

    @staticmethod
    def _pending(exclude_app: str, ttl: float, *columns: Any, table: Table = placements) -> Select:
        """The rows of `pending_placements` (placements, or their `placed_bytes`, joined with their
        runs), as `columns`."""
        newest = (select(runs.c.app_id, func.max(runs.c.number).label("number"))
                  .where(runs.c.planned_policy.is_not(None)).group_by(runs.c.app_id).subquery())
        q = (select(*columns)
             .select_from(table)
             .join(runs, table.c.run_id == runs.c.id)
             .join(newest, (newest.c.app_id == runs.c.app_id) & (newest.c.number == runs.c.number))
             .join(applications, runs.c.app_id == applications.c.id)
             .where(applications.c.name != exclude_app, runs.c.traced_at.is_(None),
                    runs.c.released_at.is_(None), runs.c.planned_policy == table.c.policy))
        return q.where(runs.c.planned_at >= time.time() - ttl) if ttl > 0 else q


def placement_columns(placed: Sequence[Placement]) -> list[Sequence[Any]]:
    """The placements' columns as stored: path, stripe size and count and OST list of the first
    component, layout in the plan grammar, write bytes, note. A policy's `Placements` are read from
    their arrays: a plain layout's text is cut from one string of every OST name (the same text
    `format_layout` makes), without a `Placement` or a join per file."""
    from iez.alloc.policy import Placements

    def one(p: Placement) -> tuple[str, int, int, str, str, int, str]:
        head = p.layout.parts()[0].layout
        return (p.path, head.stripe_size, head.stripe_count, " ".join(str(i) for i in head.osts),
                format_layout(p.layout), p.write_bytes, p.note)

    if not isinstance(placed, Placements):
        rows = [one(p) for p in placed]
        return list(map(list, zip(*rows))) if rows else [[]] * 7
    t, n = placed.table, len(placed)
    named = [str(i) for i in range(int(placed.osts.max(initial=0)) + 1)]  # each OST index's name, once
    every = " ".join(map(named.__getitem__, placed.osts.tolist())) + " "
    cut = np.zeros(len(placed.osts) + 1, np.int64)  # where each stripe's OST name starts in `every`
    np.cumsum(np.array([len(x) + 1 for x in named])[placed.osts], out=cut[1:])
    at = cut[placed.offsets].tolist()
    osts = [every[a:b - 1] for a, b in zip(at[:-1], at[1:])]
    counts = np.diff(placed.offsets)
    # "S=..,c=..[,p=..]" of each (size, count, pool): a job has few
    shapes, which = np.unique((t.size * (LOV_MAX_STRIPE_COUNT + 1) + counts) * len(t.pools) + t.pool,
                              return_inverse=True)
    heads = [format_plain(Layout(k // len(t.pools) // (LOV_MAX_STRIPE_COUNT + 1),
                                 k // len(t.pools) % (LOV_MAX_STRIPE_COUNT + 1), pool=t.pools[k % len(t.pools)])) + ",o="
             for k in shapes.tolist()]
    layouts = [heads[k] + o.replace(" ", ":") for k, o in zip(which.reshape(n).tolist(), osts)]
    sizes, counts_list, written, notes = t.size.tolist(), counts.tolist(), t.write_bytes.tolist(), list(t.notes)
    for i in placed.non_plain():  # PFL, hierarchical: from their objects
        _, sizes[i], counts_list[i], osts[i], layouts[i], written[i], notes[i] = one(placed[i])
    return [placed.paths(), sizes, counts_list, osts, layouts, written, notes]


_request_values: Callable[[Request], tuple] = attrgetter(*REQUEST_FIELDS)
_WORD = re.compile(r"[A-Za-z0-9_.+-]*")


def _literal(v: int | float | str) -> str:
    """`v` as an SQL literal both SQLite and PostgreSQL read as it is, or "" when it is not a
    whole number, a finite float or a plain word (nothing to quote or escape): those are bound."""
    if type(v) is int:
        return str(v)
    if type(v) is float and math.isfinite(v):
        return repr(v)
    return f"'{v}'" if type(v) is str and _WORD.fullmatch(v) else ""
_DEFAULTS = {f.name: f.default for f in fields(Request) if f.name in REQUEST_FIELDS}


def in_stored_order(cols: RequestColumns) -> RequestColumns:
    """`cols` in the order a stored prediction is read back in (create time, rank, path): a
    prediction handed on without reading it back is placed as the stored one is."""
    n, t = len(cols), cols.create_time
    rank = np.asarray(cols.more.get("rank", np.zeros(n, np.int64)), np.int64).reshape(n)
    if ((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (rank[1:] > rank[:-1]))).all():  # the path never decides
        return cols
    order = sorted(range(n), key=list(zip(t.tolist(), rank.tolist(), cols.path)).__getitem__)
    return replace(cols, path=[cols.path[i] for i in order], write_bytes=cols.write_bytes[order],
                   stripe_count=cols.stripe_count[order], create_time=t[order], pool=cols.pool[order],
                   read_bytes=None if cols.read_bytes is None else cols.read_bytes[order],
                   more={k: [c[i] for i in order] for k, c in cols.more.items()})


def request_columns(cols: Mapping[str, Sequence], app: str, run: str = "") -> RequestColumns:
    """Requests as columns from a column of plain values per stored field (REQUEST_FIELDS; a
    field left out takes `Request`'s default)."""
    n = len(cols["path"])
    names = cols.get("pool", ())
    pools = tuple(dict.fromkeys(names)) or ("",)
    index = {p: k for k, p in enumerate(pools)}
    pool = np.zeros(n, np.int64) if len(pools) == 1 else np.fromiter(map(index.__getitem__, names), np.int64, n)
    more = {k: c for k, c in cols.items()
            if k not in ("path", "write_bytes", "stripe_count", "create_time", "pool", "read_bytes")}
    return RequestColumns(list(cols["path"]), np.array(cols["write_bytes"], np.int64).reshape(n),
                          np.array(cols["stripe_count"], np.int64).reshape(n),
                          np.array(cols.get("create_time", [0.0] * n), float).reshape(n), pool, pools, app, run,
                          np.array(cols.get("read_bytes", [0] * n), np.int64).reshape(n), more)


def _row_request(r: Any, app: str, run: str, observed: FileLayout | None = None) -> Request:
    return Request(**{k: getattr(r, k) for k in REQUEST_FIELDS}, app=app, run=run, observed=observed)
