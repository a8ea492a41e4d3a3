"""The access controller's state file: SQLite in WAL mode, one transaction per batch of requests.

The server saves the keys a batch changed before it sends the batch's replies, so whatever a
client has been told (a grant, its place in the queue) survives a crash or restart of the
controller. synchronous=NORMAL: a committed batch survives the controller being killed; only a
power loss can take back the last batches (then clients re-register, see docs/iocop.md).
An exclusive lock on STATE.lock keeps two controllers off one state file.

The tables are a `Schema` of db/migrations.py: each controller has a file of its own (its lock
is the file's lock), versioned in `access_schema_version` and brought forward by the same steps
as the interaction database. Files written before that table existed kept their version in
meta's "schema" row; they are read as that version and migrated.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from sqlalchemy import Column, bindparam, Connection, Float, Integer, MetaData, Table, Text, create_engine, inspect, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.expression import ClauseElement

from iez.access.admission import Claim, Usage
from iez.access.protocol import format_osts, parse_osts
from iez.access.queue import App, Changes, State
from iez.db.errors import DatabaseError
from iez.db.migrations import Migration, Schema, migrate
from iez.db.schema import version_table
from iez.db.sqlite import take_transactions
from iez.errors import ConfigError

metadata = MetaData()

access_schema_version = version_table("access_schema_version", metadata)
meta = Table(  # next_seq, next_token
    "meta", metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)
apps = Table(
    "apps", metadata,
    Column("appid", Text, primary_key=True),
    Column("secret_hash", Text, nullable=False),
    Column("user", Text, nullable=False),
    Column("project", Text, nullable=False),
    Column("jobid", Text, nullable=False),
    Column("osts", Text),  # protocol.format_osts; NULL: any OST
    Column("priority", Integer, nullable=False),
    Column("registered", Float, nullable=False),
    Column("revoked", Integer, nullable=False),
)
claims = Table(
    "claims", metadata,
    Column("appid", Text, primary_key=True),
    Column("phase", Text, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("since", Float, nullable=False),
    Column("osts", Text),
    Column("user", Text, nullable=False),
    Column("project", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("expect", Float, nullable=False),
    Column("token", Integer, nullable=False),
    Column("granted", Float, nullable=False),
)
usage = Table(
    "usage", metadata,
    Column("grp", Text, primary_key=True),
    Column("value", Float, nullable=False),
    Column("as_of", Float, nullable=False),
)
history = Table(
    "history", metadata,
    Column("key", Text, primary_key=True),
    Column("seconds", Float, nullable=False),
)


def _legacy_version(conn: Connection) -> int | None:
    """Files of iez before access_schema_version: the version in meta's "schema" row (always 1)."""
    if not inspect(conn).has_table("meta"):
        return None
    v = conn.execute(select(meta.c.value).where(meta.c.key == "schema")).scalar()
    return int(v) if v is not None and v.isdigit() else None


def _version_table(conn: Connection) -> None:
    conn.execute(meta.delete().where(meta.c.key == "schema"))  # the version now lives in its table


# Version 1 is the tables as first written (raw sqlite3, version in meta); no step leads to it.
ACCESS_STATE = Schema(
    "the access-controller state file", metadata, access_schema_version, 2,
    steps=(Migration(2, "the schema version moves from meta's 'schema' row to access_schema_version",
                     _version_table),),
    legacy_version=_legacy_version,
)


def _osts(v: frozenset[int] | None) -> str | None:
    return None if v is None else format_osts(v)


def _unosts(v: str | None) -> frozenset[int] | None:
    return None if v is None else parse_osts(v)


def _app_row(a: App) -> dict[str, Any]:
    return {"appid": a.appid, "secret_hash": a.secret_hash, "user": a.user, "project": a.project,
            "jobid": a.jobid, "osts": _osts(a.osts), "priority": a.priority, "registered": a.registered,
            "revoked": a.revoked}


def _claim_row(c: Claim) -> dict[str, Any]:
    return {"appid": c.appid, "phase": c.phase, "seq": c.seq, "since": c.since, "osts": _osts(c.osts),
            "user": c.user, "project": c.project, "priority": c.priority, "expect": c.expect,
            "token": c.token, "granted": c.granted}


T = TypeVar("T")


def _sql(stmt: ClauseElement) -> str:
    return str(stmt.compile(dialect=_NAMED))


# A batch's writes run on the sqlite3 connection itself, as SQL compiled from the tables above
# once: through SQLAlchemy each save took 220 us instead of 60 us, a quarter more on a grant's
# round trip (ARCHITECTURE.md, Access control).
_NAMED = sqlite.dialect(paramstyle="named")
_UPSERT = {t.name: _sql(t.insert().prefix_with("OR REPLACE")) for t in (apps, claims, usage, history, meta)}
_DELETE = {t.name: _sql(t.delete().where(t.c.appid == bindparam("k"))) for t in (apps, claims)}


class StateFile:
    def __init__(self, path: str | Path, half_life: float = 3600.0):
        self.path = Path(path)
        self.half_life = half_life
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = open(f"{self.path}.lock", "a+")
        except OSError as e:
            raise ConfigError(f"cannot use state file {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.seek(0)
            holder = self._lock.read().strip() or "?"
            self._lock.close()
            raise ConfigError(f"another access controller (pid {holder}) uses {self.path}") from None
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(str(os.getpid()))
        self._lock.flush()
        # One connection for the controller's life: the server saves from its own thread, and
        # the lock above means no other process writes the file.
        self.engine = create_engine(f"sqlite:///{self.path}", connect_args={"check_same_thread": False})
        take_transactions(self.engine, "journal_mode=WAL", "synchronous=NORMAL")
        try:
            self.conn = self.engine.connect()
            with self.conn.begin():
                migrate(self.conn, ACCESS_STATE)
            db = self.conn.connection.dbapi_connection
            assert db is not None  # None only after the connection is closed
            self._db = db
        except SQLAlchemyError as e:
            self._close()
            raise ConfigError(f"{self.path} is not an access-controller state file: {getattr(e, 'orig', e)}") from None
        except DatabaseError as e:
            self._close()
            raise ConfigError(f"{self.path}: {e}") from None

    def load(self) -> State:
        st = State(usage=Usage(self.half_life))
        q = self.conn.execute
        for r in q(select(apps)):
            st.apps[r.appid] = App(appid=r.appid, secret_hash=r.secret_hash, user=r.user, project=r.project,
                                   jobid=r.jobid, osts=_unosts(r.osts), priority=r.priority,
                                   registered=r.registered, revoked=r.revoked)
        for r in q(select(claims).order_by(claims.c.seq)):
            if r.appid in st.apps:
                st.claims[r.appid] = Claim(appid=r.appid, phase=r.phase, seq=r.seq, since=r.since,
                                           osts=_unosts(r.osts), user=r.user, project=r.project,
                                           priority=r.priority, expect=r.expect, token=r.token, granted=r.granted)
        for r in q(select(usage)):
            st.usage.values[r.grp] = (r.value, r.as_of)
        st.history = {r.key: r.seconds for r in q(select(history))}
        kv = {r.key: r.value for r in q(select(meta))}
        self.conn.rollback()  # end the read transaction the selects began
        st.next_seq = int(kv.get("next_seq", 1))
        st.next_token = int(kv.get("next_token", 1))
        return st

    def save(self, st: State, ch: Changes) -> None:
        """Write what changed, in one transaction, committed on return."""
        if not ch:
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._sync(apps, ch.apps, st.apps, _app_row)
            self._sync(claims, ch.claims, st.claims, _claim_row)
            self._upsert(usage, [{"grp": g, "value": st.usage.values[g][0], "as_of": st.usage.values[g][1]}
                                 for g in ch.usage])
            self._upsert(history, [{"key": k, "seconds": st.history[k]} for k in ch.history])
            if ch.meta:
                self._upsert(meta, [{"key": "next_seq", "value": str(st.next_seq)},
                                    {"key": "next_token", "value": str(st.next_token)}])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _upsert(self, table: Table, rows: list[dict[str, Any]]) -> None:
        if rows:
            self._db.executemany(_UPSERT[table.name], rows)

    def _sync(self, table: Table, keys: set[str], objs: Mapping[str, T], row: Callable[[T], dict[str, Any]]) -> None:
        """Upsert the changed keys that exist, delete the ones that are gone."""
        gone = [{"k": k} for k in keys if k not in objs]
        if gone:
            self._db.executemany(_DELETE[table.name], gone)
        self._upsert(table, [row(objs[k]) for k in keys if k in objs])

    def _close(self) -> None:
        self.engine.dispose()
        self._lock.close()

    def close(self) -> None:
        self.conn.close()
        self._close()
