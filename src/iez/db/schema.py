"""The interaction database's tables (docs/references.md#s000-table1, #s000-table2), SQLAlchemy Core.

applications ─< runs ─< traced_requests            what a run really created (Table I)
                    ─< traced_reads               what it read and did not create
                    ─< predictions ─< predicted_requests   AIPA's forecast of a run
                    ─< placements >─ cluster_snapshots     where a policy put each file (Table II)
                    ─< placed_bytes               the bytes those placements put on each OST
                    ─  plans                      the plan file of a planned run, as served

A run is one execution of an application, numbered 1, 2, ... per application. The same run
can hold a prediction (made before it ran) and a trace (imported after), which is how
prediction accuracy is measured. Times are epoch seconds (float), portable across SQLite and
PostgreSQL. Layouts are stored in the plan grammar (docs/plan-format.md).

Changing a table here means bumping SCHEMA_VERSION and adding a step in migrations.py.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
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
)

SCHEMA_VERSION = 10

metadata = MetaData()


def version_table(name: str, meta: MetaData) -> Table:
    """The versions a database went through (db/migrations.py reads and stamps it)."""
    return Table(
        name, meta,
        Column("version", Integer, primary_key=True),
        Column("applied_at", Float, nullable=False),
        Column("description", Text, nullable=False, default=""),
    )


schema_version = version_table("schema_version", metadata)

applications = Table(
    "applications", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True),
    Column("app_id", Integer, ForeignKey("applications.id", ondelete="CASCADE"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("label", String(255), nullable=False, default=""),  # job id or the trace's run name
    Column("traced_at", Float),  # NULL until a trace of this run is imported
    Column("source", String(16), nullable=False, default=""),  # libiez | darshan
    Column("source_path", Text, nullable=False, default=""),
    Column("nprocs", Integer, nullable=False, default=0),
    Column("plan_hits", Integer, nullable=False, default=0),
    Column("plan_misses", Integer, nullable=False, default=0),
    Column("meta", Text, nullable=False, default="{}"),  # JSON: executable, warnings
    Column("planned_policy", String(32)),  # whose placements the run's plan file carries
    Column("released_at", Float),  # an admin said the planned run will not happen: it reserves nothing
    Column("planned_at", Float),  # when its plan was made: older than the reservation TTL, it reserves nothing
    UniqueConstraint("app_id", "number", name="uq_runs_app_number"),
)


def _request_columns() -> list[Column]:
    """The columns of docs/references.md#s000-table1, plus what placement needs (shared by traced and predicted)."""
    return [
        Column("path", Text, nullable=False),
        Column("write_bytes", BigInteger, nullable=False),
        Column("stripe_count", Integer, nullable=False),
        Column("rank", Integer, nullable=False),
        Column("comm_size", Integer, nullable=False, default=1),
        Column("create_time", Float, nullable=False, default=0.0),
        Column("api", String(8), nullable=False, default="posix"),
        Column("pool", String(16), nullable=False, default=""),
        # the writers' facts the automatic layout reads (iez.request.Request); 0 = not known
        Column("writers", Integer, nullable=False, default=0),
        Column("transfer_size", BigInteger, nullable=False, default=0),
        Column("write_align", BigInteger, nullable=False, default=0),
        # how it was written and read, where, and the name it ended with (iez.request.Request)
        Column("writer_segments", Integer, nullable=False, default=0),
        Column("read_bytes", BigInteger, nullable=False, default=0),
        Column("read_size", BigInteger, nullable=False, default=0),
        Column("host", String(255), nullable=False, default=""),
        Column("final_path", Text, nullable=False, default=""),
        # random characters ending the name, generated at create (mkstemp); 0 = none known
        Column("name_random", Integer, nullable=False, default=0),
    ]


traced_requests = Table(
    "traced_requests", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    *_request_columns(),
    Column("observed_layout", Text),  # the layout the file really got, when the trace knows it
    UniqueConstraint("run_id", "path", name="uq_traced_run_path"),
)

# Files the run read but did not create: no layout to choose, kept for read plans and the audit
# (prediction learns from traced_requests only).
traced_reads = Table(
    "traced_reads", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    *_request_columns(),
    Column("observed_layout", Text),
    UniqueConstraint("run_id", "path", name="uq_read_run_path"),
)

predictions = Table(
    "predictions", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("based_on", Text, nullable=False),  # JSON list of the traced run numbers used
    Column("models", Text, nullable=False),  # JSON: per series, ARIMA order and RMSE
)

predicted_requests = Table(
    "predicted_requests", metadata,
    Column("id", Integer, primary_key=True),
    Column("prediction_id", Integer, ForeignKey("predictions.id", ondelete="CASCADE"), nullable=False),
    *_request_columns(),
    UniqueConstraint("prediction_id", "path", name="uq_predicted_path"),
)

cluster_snapshots = Table(
    "cluster_snapshots", metadata,
    Column("id", Integer, primary_key=True),
    Column("taken_at", Float, nullable=False),
    Column("source", Text, nullable=False),  # default | toml:PATH | emulated:DIR
    Column("cluster_toml", Text, nullable=False),  # iez.cluster.dump_cluster
    Column("stats", Text, nullable=False),  # JSON: per-OST and per-OSS statistics
)

placements = Table(
    "placements", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("policy", String(32), nullable=False),
    Column("snapshot_id", Integer, ForeignKey("cluster_snapshots.id"), nullable=False),
    Column("created_at", Float, nullable=False),
    # docs/references.md#s000-table2: file name, stripe size, stripe count, MPI rank, OST list.
    Column("path", Text, nullable=False),
    Column("stripe_size", BigInteger, nullable=False),
    Column("stripe_count", Integer, nullable=False),
    Column("rank", Integer, nullable=False),
    Column("ost_list", Text, nullable=False),  # space separated, stripe order (first component)
    Column("layout", Text, nullable=False),  # the whole layout (PFL too), plan grammar
    Column("write_bytes", BigInteger, nullable=False, default=0),
    Column("note", Text, nullable=False, default=""),  # why iez changed the asked layout ("" = it did not)
    UniqueConstraint("run_id", "policy", "path", name="uq_placement"),
)

# The bytes a policy's placements of a run put on each OST (the RAID-0 map of every file, summed when
# they are stored: iez.db.held): what a planned, unrun run reserves, read as a row per OST.
placed_bytes = Table(
    "placed_bytes", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("policy", String(32), primary_key=True),
    Column("ost", Integer, primary_key=True),
    Column("bytes", BigInteger, nullable=False),
)

# The plan file (docs/plan-format.md) of a planned run, rendered once when it is placed: served as
# these bytes, never re-encoded per request. A run placed before version 8 has none; its plan is
# rendered from its placements when first asked for.
plans = Table(
    "plans", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("policy", String(32), nullable=False),  # runs.planned_policy when it was made
    Column("created_at", Float, nullable=False),
    Column("body", LargeBinary, nullable=False),
)

# A table with a unique constraint needs no index of its leading columns: the constraint's serves
# (app_id for runs, run_id for traced_requests and traced_reads, prediction_id, (run_id, policy) for
# placements).
Index("ix_predictions_run", predictions.c.run_id)
