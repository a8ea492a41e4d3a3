"""SQLite under SQLAlchemy: transactions iez controls, and the pragmas each connection needs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, event


def take_transactions(engine: Engine, *pragmas: str) -> None:
    """Make every transaction on `engine` a BEGIN IMMEDIATE of ours and run `pragmas` (e.g.
    "foreign_keys=ON") on each new connection."""

    def connect(dbapi_conn: Any, _record: Any) -> None:
        # Python's sqlite3 commits before DDL on its own, which would make a migration
        # half-apply; take transactions out of its hands (SQLAlchemy's documented recipe).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        for p in pragmas:
            cur.execute(f"PRAGMA {p}")
        cur.close()

    def begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front: two writers wait on busy_timeout instead of
        # one failing when it tries to upgrade a read lock.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(engine, "connect", connect)
    event.listen(engine, "begin", begin)
