"""Schema versions: a table of the versions a database went through, and the ordered steps
between them. The interaction database (schema.py) and the access controller's state files
(access/statefile.py) are each a `Schema`.

A new database gets the current tables and is stamped with the schema's version. An older one
is brought forward one step at a time, all steps in one transaction, so a failed step leaves it
at the version it had. A database newer than this iez is refused rather than guessed at.

To change a schema: edit its tables, bump its version, and append a Migration whose `apply`
takes a database of the previous version to the new one (ALTER TABLE, data moves).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    select,
    text,
)

from iez.db.errors import DatabaseError
from iez.db.schema import SCHEMA_VERSION, metadata, runs, schema_version


@dataclass(frozen=True)
class Migration:
    version: int  # the version this step produces
    description: str
    apply: Callable[[Connection], None]


@dataclass(frozen=True)
class Schema:
    """One kind of database: its tables, the table of its versions, and the steps to `version`."""

    name: str  # what the database is, in errors
    metadata: MetaData  # every table, `versions` included
    versions: Table  # (version, applied_at, description)
    version: int  # the version this iez writes
    steps: tuple[Migration, ...] = ()
    # The version of a database from before `versions` existed (None: it is not one).
    legacy_version: Callable[[Connection], int | None] | None = None


def _released_at(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE runs ADD COLUMN released_at FLOAT"))


def _planned_at(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE runs ADD COLUMN planned_at FLOAT"))
    # plans made before the step: their TTL runs from now, none lapses at the upgrade
    conn.execute(text("UPDATE runs SET planned_at = :now WHERE planned_policy IS NOT NULL"), {"now": time.time()})


def _write_facts(conn: Connection) -> None:
    # requests stored before: their writers' facts are not known (0), as for a trace without them
    for table in ("traced_requests", "predicted_requests"):
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN writers INTEGER NOT NULL DEFAULT 0"))
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN transfer_size BIGINT NOT NULL DEFAULT 0"))
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN write_align BIGINT NOT NULL DEFAULT 0"))


def _placement_notes(conn: Connection) -> None:
    # placements made before the step: iez kept every asked layout then
    conn.execute(text("ALTER TABLE placements ADD COLUMN note TEXT NOT NULL DEFAULT ''"))


# Columns version 6 adds to every request: (name, SQL type, default).
_V6_REQUEST_COLUMNS = (("writer_segments", "INTEGER", "0"), ("read_bytes", "BIGINT", "0"), ("read_size", "BIGINT", "0"),
                       ("host", "VARCHAR(255)", "''"), ("final_path", "TEXT", "''"))


def _reads(conn: Connection) -> None:
    # requests stored before: how they were read and written in segments is not known (0), nor
    # their host or final name ("")
    for table in ("traced_requests", "predicted_requests"):
        for column, kind, default in _V6_REQUEST_COLUMNS:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind} NOT NULL DEFAULT {default}"))
    # traced_reads as version 6 defines it (a later step that changes it must find these columns)
    frozen = MetaData()
    reads = Table(
        "traced_reads", frozen,
        Column("id", Integer, primary_key=True),
        Column("run_id", Integer, ForeignKey(runs.c.id, ondelete="CASCADE"), nullable=False),
        Column("path", Text, nullable=False),
        Column("write_bytes", BigInteger, nullable=False),
        Column("stripe_count", Integer, nullable=False),
        Column("rank", Integer, nullable=False),
        Column("comm_size", Integer, nullable=False, default=1),
        Column("create_time", Float, nullable=False, default=0.0),
        Column("api", String(8), nullable=False, default="posix"),
        Column("pool", String(16), nullable=False, default=""),
        *(Column(name, Integer, nullable=False, default=0) for name in ("writers", "writer_segments")),
        *(Column(name, BigInteger, nullable=False, default=0)
          for name in ("transfer_size", "write_align", "read_bytes", "read_size")),
        Column("host", String(255), nullable=False, default=""),
        Column("final_path", Text, nullable=False, default=""),
        Column("observed_layout", Text),
        UniqueConstraint("run_id", "path", name="uq_read_run_path"),
    )
    Index("ix_read_run", reads.c.run_id)
    reads.create(conn)


def _name_random(conn: Connection) -> None:
    # requests stored before: no generated name part known (0), as for a trace without it
    for table in ("traced_requests", "traced_reads", "predicted_requests"):
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN name_random INTEGER NOT NULL DEFAULT 0"))


def _plans(conn: Connection) -> None:
    # runs planned before the step have no stored plan: it is rendered from their placements
    frozen = MetaData()
    Table("runs", frozen, Column("id", Integer, primary_key=True))
    Table("plans", frozen,
          Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
          Column("policy", String(32), nullable=False),
          Column("created_at", Float, nullable=False),
          Column("body", LargeBinary, nullable=False)).create(conn)


# Indexes version 9 drops: each is the leading column(s) of a unique constraint's index on its table.
COVERED_INDEXES = ("ix_runs_app", "ix_placements_run_policy", "ix_predicted_prediction", "ix_traced_run", "ix_read_run")


def _covered_indexes(conn: Connection) -> None:
    # a second index on the same leading columns only slows every insert (8,192 placements:
    # 33 against 28 ms on SQLite); lookups use the unique constraint's
    for name in COVERED_INDEXES:
        conn.execute(text(f"DROP INDEX IF EXISTS {name}"))


def _v10_held(written: int, layout: str) -> dict[int, int]:
    """The bytes a stored placement puts on each OST, as version 10 summed them: the RAID-0 map
    of `iez.layout.raid0` (stripe of an absolute offset) of each component of its layout (the plan
    grammar: `START-END/plain;...`, or one plain `S=..,c=..,o=a:b:..`) over [0, written). Written
    out here so that this step does not change with the live code."""
    out: dict[int, int] = {}
    for part in layout.split(";"):
        extent, _, plain = part.rpartition("/")
        start, _, end = extent.partition("-") if extent else ("0", "", "EOF")
        fields = dict(f.split("=", 1) for f in plain.split(","))
        size, osts = int(fields.get("S", "0")), [int(i) for i in fields.get("o", "").split(":") if i]
        if size <= 0 or not osts:
            continue  # not a resolved layout: iez never stored one
        lo, hi = int(start), written if end == "EOF" else min(written, int(end))
        width = size * len(osts)

        def below(x: int, k: int) -> int:  # bytes of stripe k in [0, x)
            return x // width * size + min(max(x % width - k * size, 0), size)

        for k, ost in enumerate(osts):
            b = below(hi, k) - below(lo, k) if hi > lo else 0
            if b:
                out[ost] = out.get(ost, 0) + b
    return out


def _placed_bytes(conn: Connection) -> None:
    # placed_bytes as version 10 defines it, filled from the placements stored before the step
    frozen = MetaData()
    Table("runs", frozen, Column("id", Integer, primary_key=True))
    table = Table("placed_bytes", frozen,
                  Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
                  Column("policy", String(32), primary_key=True),
                  Column("ost", Integer, primary_key=True),
                  Column("bytes", BigInteger, nullable=False))
    table.create(conn)
    sets: dict[tuple[int, str], dict[int, int]] = {}
    for run, policy, written, layout in conn.execute(text("SELECT run_id, policy, write_bytes, layout FROM placements")):
        held = sets.setdefault((run, policy), {})
        for ost, b in _v10_held(written, layout).items():
            held[ost] = held.get(ost, 0) + b
    rows = [{"run_id": run, "policy": policy, "ost": i, "bytes": b}
            for (run, policy), held in sets.items() for i, b in sorted(held.items())]
    if rows:
        conn.execute(table.insert(), rows)


# Version 1 is the baseline: no step leads to it. Steps for versions 2, 3, ... go here, in order.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "runs.released_at: a planned run an admin released reserves no space", _released_at),
    Migration(3, "runs.planned_at: a plan older than the reservation TTL reserves no space", _planned_at),
    Migration(4, "requests' writers, transfer_size, write_align: the writers' facts the automatic layout reads",
              _write_facts),
    Migration(5, "placements.note: why iez changed a file's asked layout (the automatic layout)", _placement_notes),
    Migration(6, "requests' writer_segments, read_bytes, read_size, host, final_path; traced_reads: the files a run "
                 "read and did not create", _reads),
    Migration(7, "requests' name_random: the generated characters ending a name (mkstemp), for one-run "
                 "prediction of {rand:N}", _name_random),
    Migration(8, "plans: a planned run's plan file, rendered once and served as stored", _plans),
    Migration(9, "no index a unique constraint covers: runs (app), placements (run, policy), predicted requests "
                 "(prediction), traced requests and reads (run)", _covered_indexes),
    Migration(10, "placed_bytes: the bytes each run's placements put on each OST, summed once (reservations read "
                  "a row per OST)", _placed_bytes),
)

INTERACTION = Schema("the interaction database", metadata, schema_version, SCHEMA_VERSION, MIGRATIONS)


def current_version(conn: Connection, schema: Schema = INTERACTION) -> int | None:
    """The database's schema version; None when it has no tables of `schema` at all."""
    if not inspect(conn).has_table(schema.versions.name):
        return None
    col = schema.versions.c.version
    v = conn.execute(select(col).order_by(col.desc())).first()
    return v[0] if v else None


def _stamp(conn: Connection, schema: Schema, version: int, description: str) -> None:
    conn.execute(schema.versions.insert().values(version=version, applied_at=time.time(),
                                                 description=description))


def migrate(conn: Connection, schema: Schema = INTERACTION) -> int:
    """Bring the database on `conn` (inside a transaction) to `schema.version`; returns the old
    version (0: it was created)."""
    target = schema.version
    have = current_version(conn, schema)
    if have is None:
        have = schema.legacy_version(conn) if schema.legacy_version else None
        if have is not None:
            schema.versions.create(conn)
            _stamp(conn, schema, have, "found without a version table")
    if have is None:
        existing = set(inspect(conn).get_table_names()) & set(schema.metadata.tables)
        if existing:
            raise DatabaseError(f"the database has tables of {schema.name} ({', '.join(sorted(existing))}) "
                                f"but no {schema.versions.name}: not created by iez, refusing to touch it")
        schema.metadata.create_all(conn)
        _stamp(conn, schema, target, "created")
        return 0
    if have > target:
        raise DatabaseError(f"{schema.name} has schema version {have}, newer than this iez "
                            f"understands ({target}): upgrade iez")
    for step in sorted(schema.steps, key=lambda s: s.version):
        if have < step.version <= target:
            step.apply(conn)
            _stamp(conn, schema, step.version, step.description)
    now = current_version(conn, schema)
    if now != target:
        raise DatabaseError(f"no migration step leads from schema version {now} to {target}")
    return have
