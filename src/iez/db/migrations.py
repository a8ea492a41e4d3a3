"""Schema versions: the `schema_version` table and the ordered steps between versions.

A new database gets the current tables (schema.py) and is stamped SCHEMA_VERSION. An older one
is brought forward one step at a time, all steps in one transaction, so a failed step leaves it
at the version it had. A database newer than this iez is refused rather than guessed at.

To change the schema: edit schema.py, bump SCHEMA_VERSION, and append a Migration whose `apply`
takes a database of the previous version to the new one (ALTER TABLE, data moves).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from sqlalchemy import Connection, inspect, select, text

from iez.db.errors import DatabaseError
from iez.db.schema import SCHEMA_VERSION, metadata, schema_version


@dataclass(frozen=True)
class Migration:
    version: int  # the version this step produces
    description: str
    apply: Callable[[Connection], None]


def _released_at(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE runs ADD COLUMN released_at FLOAT"))


def _planned_at(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE runs ADD COLUMN planned_at FLOAT"))
    # plans made before the step: their TTL runs from now, none lapses at the upgrade
    conn.execute(text("UPDATE runs SET planned_at = :now WHERE planned_policy IS NOT NULL"), {"now": time.time()})


# Version 1 is the baseline: no step leads to it. Steps for versions 2, 3, ... go here, in order.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "runs.released_at: a planned run an admin released reserves no space", _released_at),
    Migration(3, "runs.planned_at: a plan older than the reservation TTL reserves no space", _planned_at),
)


def current_version(conn: Connection) -> int | None:
    """The database's schema version; None when it has no iez tables at all."""
    if not inspect(conn).has_table(schema_version.name):
        return None
    v = conn.execute(select(schema_version.c.version).order_by(schema_version.c.version.desc())).first()
    return v[0] if v else None


def migrate(conn: Connection, steps: Sequence[Migration] = MIGRATIONS, target: int = SCHEMA_VERSION) -> int:
    """Bring the database on `conn` (inside a transaction) to `target`; returns the old version."""
    have = current_version(conn)
    if have is None:
        existing = set(inspect(conn).get_table_names()) & set(metadata.tables)
        if existing:
            raise DatabaseError(f"the database has iez tables ({', '.join(sorted(existing))}) "
                                "but no schema_version: not created by iez, refusing to touch it")
        metadata.create_all(conn)
        conn.execute(schema_version.insert().values(version=target, applied_at=time.time(),
                                                    description="created"))
        return 0
    if have > target:
        raise DatabaseError(f"the database has schema version {have}, newer than this iez "
                            f"understands ({target}): upgrade iez")
    for step in sorted(steps, key=lambda s: s.version):
        if have < step.version <= target:
            step.apply(conn)
            conn.execute(schema_version.insert().values(version=step.version, applied_at=time.time(),
                                                        description=step.description))
    now = current_version(conn)
    if now != target:
        raise DatabaseError(f"no migration step leads from schema version {now} to {target}")
    return have
