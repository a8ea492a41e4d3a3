"""The interaction database, run against SQLite and a real PostgreSQL server (tests/plugins/postgres.py)."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace

import pytest
from sqlalchemy import inspect, text

from iez.cluster import OSSStats, OSTStats, Snapshot, make_cluster
from iez.db import Database, DatabaseError, default_url
from iez.db.migrations import INTERACTION, Migration, current_version, migrate
from iez.db.schema import SCHEMA_VERSION
from iez.layout.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.request import Placement, Request


@pytest.fixture
def db(db_url):
    d = Database(db_url)
    yield d
    d.close()


def hacc(n: int = 8, size: int = 803405824) -> list[Request]:
    """docs/references.md#s000-table1: HACC-I/O, FPP, n ranks, stripe count 8."""
    return [Request(path=f"/lustre/scratch/hacc-io/FPP1-Part{r:08d}-of-{n:08d}.data", write_bytes=size,
                    stripe_count=8, rank=r, create_time=0.01 * r) for r in range(n)]


def test_fresh_database_is_stamped_with_the_current_version(db):
    with db.begin() as tx:
        assert current_version(tx.conn) == SCHEMA_VERSION
        names = set(inspect(tx.conn).get_table_names())
    assert {"applications", "runs", "traced_requests", "predictions", "predicted_requests",
            "placements", "cluster_snapshots", "schema_version"} <= names


def test_reopening_keeps_data_and_version(db_url):
    with Database(db_url) as d, d.begin() as tx:
        tx.add_trace("hacc", hacc())
    with Database(db_url) as d, d.begin() as tx:
        assert current_version(tx.conn) == SCHEMA_VERSION
        assert [n for n, _ in tx.traced_runs("hacc")] == [1]


def add_note(conn):
    conn.execute(text("ALTER TABLE runs ADD COLUMN note TEXT"))


def test_migration_steps_run_in_order_inside_one_transaction(db):
    def add_flag(conn):
        conn.execute(text("ALTER TABLE runs ADD COLUMN flag INTEGER"))

    steps = [Migration(SCHEMA_VERSION + 2, "flag", add_flag), Migration(SCHEMA_VERSION + 1, "note", add_note)]
    with db.begin() as tx:
        assert migrate(tx.conn, replace(INTERACTION, steps=tuple(steps), version=SCHEMA_VERSION + 2)) == SCHEMA_VERSION
    with db.begin() as tx:
        assert current_version(tx.conn) == SCHEMA_VERSION + 2
        cols = {c["name"] for c in inspect(tx.conn).get_columns("runs")}
        assert {"note", "flag"} <= cols
        descs = [r[0] for r in tx.conn.execute(text("SELECT description FROM schema_version ORDER BY version"))]
        assert descs == ["created", "note", "flag"]


def test_a_failing_migration_leaves_the_old_version(db):
    def broken(conn):
        conn.execute(text("ALTER TABLE no_such_table ADD COLUMN x INTEGER"))

    steps = [Migration(SCHEMA_VERSION + 1, "note", add_note), Migration(SCHEMA_VERSION + 2, "broken", broken)]
    with pytest.raises(DatabaseError):
        with db.begin() as tx:
            migrate(tx.conn, replace(INTERACTION, steps=tuple(steps), version=SCHEMA_VERSION + 2))
    with db.begin() as tx:
        assert current_version(tx.conn) == SCHEMA_VERSION
        assert "note" not in {c["name"] for c in inspect(tx.conn).get_columns("runs")}


def test_a_missing_step_is_an_error(db):
    with pytest.raises(DatabaseError, match="no migration step"):
        with db.begin() as tx:
            migrate(tx.conn, replace(INTERACTION, steps=(), version=SCHEMA_VERSION + 1))


def test_a_newer_database_is_refused(db_url):
    with Database(db_url) as d, d.begin() as tx:
        tx.conn.execute(text("INSERT INTO schema_version (version, applied_at, description) "
                             f"VALUES ({SCHEMA_VERSION + 5}, 0, 'future')"))
    with pytest.raises(DatabaseError, match="newer than this iez"):
        Database(db_url)


def test_foreign_tables_without_a_version_are_not_touched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(DatabaseError, match="not created by iez"):
        Database(f"sqlite:///{path}")


def test_trace_round_trip_keeps_every_column(db):
    big = 2199023259968  # > 2**32: the SSF of darshan's sample.darshan
    observed = FileLayout(plain=Layout(stripe_size=1 << 20, osts=(7, 9, 23)))
    pfl = FileLayout(components=(Component(0, 1 << 26, Layout(stripe_size=1 << 20, stripe_count=1)),
                                 Component(1 << 26, LUSTRE_EOF, Layout(stripe_size=4 << 20, osts=(1, 5, 9, 13)))))
    reqs = [Request("/l/ssf.h5", big, 3, rank=0, comm_size=2048, create_time=1.5, api="mpiio", pool="fast",
                    observed=observed),
            Request("/l/ckpt", 10, 1, rank=4, create_time=2.0, api="hdf5", observed=pfl),
            Request("/l/x y\u00e9", 0, 1, rank=7, create_time=3.0)]
    with db.begin() as tx:
        n = tx.add_trace("vpic", reqs, label="4478544", source="darshan", source_path="/logs/a.darshan",
                         nprocs=2048, meta={"exe": "vpicio_uni"})
    assert n == 1
    with db.begin() as tx:
        [(num, back)] = tx.traced_runs("vpic")
        [info] = tx.runs("vpic")
    assert num == 1
    assert back == [replace(q, app="vpic", run="4478544") for q in reqs]  # a run is named by its label
    assert [q.observed for q in back] == [observed, pfl, None]
    assert (info.label, info.source, info.nprocs, info.n_traced, info.meta) == ("4478544", "darshan", 2048, 3,
                                                                                {"exe": "vpicio_uni"})


def test_runs_are_numbered_and_a_trace_cannot_be_imported_twice(db):
    with db.begin() as tx:
        assert tx.add_trace("ior", hacc(2)) == 1
        assert tx.add_trace("ior", hacc(2)) == 2
        assert tx.add_trace("ior", hacc(2), number=7) == 7
        assert tx.add_trace("other", hacc(1)) == 1
    with pytest.raises(DatabaseError, match="already has a trace"):
        with db.begin() as tx:
            tx.add_trace("ior", hacc(3), number=2)
    with db.begin() as tx:
        assert [(n, len(r)) for n, r in tx.traced_runs("ior")] == [(1, 2), (2, 2), (7, 2)]
        assert tx.apps() == ["ior", "other"]


def test_a_failed_transaction_changes_nothing(db):
    with db.begin() as tx:
        tx.add_trace("ior", hacc(2))
    with pytest.raises(RuntimeError):
        with db.begin() as tx:
            tx.add_trace("ior", hacc(4))
            tx.add_trace("new-app", hacc(4))
            raise RuntimeError("the third log was corrupt")
    with db.begin() as tx:
        assert tx.apps() == ["ior"]
        assert [(n, len(r)) for n, r in tx.traced_runs("ior")] == [(1, 2)]


def test_bulk_rows_keep_any_text_and_a_row_refused_changes_nothing(db):
    # many rows go in at once (PostgreSQL: COPY, whose text format escapes these characters)
    odd = ["/l/back\\slash", "/l/tab\there", "/l/new\nline", "/l/\\N", "/l/quote'\"", "/l/x\u00e9\u4e2d"]
    with db.begin() as tx:
        tx.add_trace("odd", [Request(p, i, 1, rank=i, host="h\\1") for i, p in enumerate(odd)])
    with db.begin() as tx:
        assert [(q.path, q.host) for q in tx.traced_runs("odd")[0][1]] == [(p, "h\\1") for p in odd]
    with pytest.raises(DatabaseError) as e:  # the same path twice in one run: the unique constraint
        with db.begin() as tx:
            tx.add_trace("odd", hacc(2) + hacc(2)[:1])
    assert "\n" not in str(e.value) and ("UNIQUE constraint failed" in str(e.value)  # SQLite
                                          or "uq_traced_run_path" in str(e.value))  # PostgreSQL
    with db.begin() as tx:
        assert [n for n, _ in tx.traced_runs("odd")] == [1] and tx.runs("odd")[-1].number == 1


def test_unknown_application_is_a_clear_error(db):
    with pytest.raises(DatabaseError, match="no application 'nope'.*iez trace import"):
        with db.begin() as tx:
            tx.traced_runs("nope")


def test_prediction_round_trip_and_the_trace_that_follows_fills_the_same_run(db):
    with db.begin() as tx:
        tx.add_trace("hacc", hacc())
        tx.add_trace("hacc", hacc())
        models = {"write_bytes": {"order": [2, 1, 1], "rmse": 0.0}}
        tx.add_prediction("hacc", 3, hacc(), models, based_on=[1, 2])
    with db.begin() as tx:
        p = tx.prediction("hacc")
        assert (p.run, p.models, p.based_on) == (3, models, [1, 2])
        assert p.requests == [replace(q, app="hacc", run="3") for q in hacc()]
        assert tx.next_traced_run("hacc") == 3
        assert tx.add_trace("hacc", hacc()) == 3
        assert [r.number for r in tx.runs("hacc")] == [1, 2, 3]
        with pytest.raises(DatabaseError, match="no prediction for run 1"):
            tx.prediction("hacc", 1)


def test_newest_prediction_of_a_run_wins(db):
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        tx.add_prediction("a", 2, hacc(2), {}, [1])
        tx.add_prediction("a", 2, hacc(3), {"v": 2}, [1])
    with db.begin() as tx:
        p = tx.prediction("a", 2)
    assert len(p.requests) == 3 and p.models == {"v": 2}


def test_a_prediction_read_twice_in_a_transaction_is_read_once_until_one_is_stored(db):
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        assert tx.find_prediction("a", 2) is None and tx.find_prediction("a") is None
        tx.add_prediction("a", 2, hacc(2), {}, [1])
        first = tx.find_prediction("a", 2)
        assert first is not None and tx.find_prediction("a", 2) is first and len(first.requests) == 2
        tx.add_prediction("a", 2, hacc(3), {"v": 2}, [1])  # a newer one: what is read next
        assert len(tx.find_prediction("a", 2).requests) == 3 and tx.find_prediction("a").models == {"v": 2}


def test_snapshot_round_trip(db):
    cluster = make_cluster().with_used({3: 5 << 30})
    snap = Snapshot.from_cluster(cluster, time=1700000000.5)
    snap = snap.with_ost(replace(snap.osts[4], write_bps=1.5e8, state="degraded"))
    snap = replace(snap, osses={**snap.osses, "oss1": OSSStats("oss1", cpu=0.75, mem=0.4, time=1.0)})
    with db.begin() as tx:
        sid = tx.add_snapshot(cluster, snap, "default")
    with db.begin() as tx:
        c2, s2 = tx.snapshot(sid)
    assert c2 == cluster and s2 == snap
    assert isinstance(s2.osts[4], OSTStats)


def table2_placements() -> list[Placement]:
    # docs/references.md#s000-table2 (OST ids there are 1-based; Lustre's are 0-based).
    rows = ["8 13 12 9 7 4 3 5", "11 2 15 10 1 6 8 13"]
    return [Placement(path=q.path, write_bytes=q.write_bytes, policy="balanced",
                      layout=FileLayout(plain=Layout(stripe_size=100532224,
                                                     osts=tuple(int(i) - 1 for i in rows[q.rank].split()))))
            for q in hacc(2)]


def test_placements_store_table_ii_columns_and_replace_per_policy(db):
    placed = table2_placements()
    with db.begin() as tx:
        tx.add_trace("hacc", hacc(2))
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        tx.set_placements("hacc", 2, "balanced", placed, sid, {p.path: i for i, p in enumerate(placed)})
        tx.set_placements("hacc", 2, "rr", placed[:1], sid, {})
        row = tx.conn.execute(text("SELECT path, stripe_size, stripe_count, rank, ost_list FROM placements "
                                   "WHERE policy = 'balanced' ORDER BY rank")).all()
    assert [tuple(r) for r in row] == [
        (placed[0].path, 100532224, 8, 0, "7 12 11 8 6 3 2 4"),
        (placed[1].path, 100532224, 8, 1, "10 1 14 9 0 5 7 12"),
    ]
    with db.begin() as tx:
        sets = {s.policy: s for s in tx.placement_sets("hacc")}
        assert sets["balanced"].run == 2 and sets["balanced"].snapshot_id == sid
        assert [p.layout for p in sets["balanced"].placements] == [p.layout for p in placed]
        assert len(sets["rr"].placements) == 1
        tx.set_placements("hacc", 2, "rr", placed, sid, {})
    with db.begin() as tx:
        assert len({s.policy: s for s in tx.placement_sets("hacc", 2)}["rr"].placements) == 2
        with pytest.raises(DatabaseError, match="no placements for run 1"):
            tx.placement_sets("hacc", 1)


def test_pending_placements_are_other_apps_planned_but_untraced_runs(db):
    placed = table2_placements()
    with db.begin() as tx:
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        for app in ("a", "b"):
            tx.add_trace(app, hacc(2))
            tx.set_placements(app, 2, "balanced", placed, sid, {})
            tx.set_placements(app, 2, "rr", placed, sid, {})
        tx.mark_planned("b", 2, "rr")
        assert tx.pending_placements("a") != []
        pending = tx.pending_placements("a")
        assert {(p.app, p.run, p.policy) for p in pending} == {("b", "2", "rr")}
        assert tx.pending_placements("b") == []  # a never planned
        tx.add_trace("b", hacc(2))  # run 2 of b happened: its bytes are on the OSTs now
        assert tx.pending_placements("a") == []
        # b's run 3 is planned, then run 4 replaces that plan before run 3 ever ran
        for run in (3, 4):
            tx.set_placements("b", run, "balanced", placed, sid, {})
            tx.mark_planned("b", run, "balanced")
        assert {(p.run, p.policy) for p in tx.pending_placements("a")} == {("4", "balanced")}
        # b will not run again: an admin releases its plan, which then reserves nothing
        assert tx.release_plans("b") == [3, 4]
        assert tx.pending_placements("a") == []
        assert tx.release_plans("b") == []  # already released


def test_a_plan_older_than_the_ttl_reserves_nothing(db):
    from sqlalchemy import text

    placed = table2_placements()
    with db.begin() as tx:
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        tx.add_trace("b", hacc(2))
        tx.set_placements("b", 2, "balanced", placed, sid, {})
        tx.mark_planned("b", 2, "balanced")
        assert len(tx.pending_placements("a", ttl=3600)) == len(placed)
        tx.conn.execute(text("UPDATE runs SET planned_at = planned_at - 7200"))  # planned two hours ago
        assert tx.pending_placements("a", ttl=3600) == []
        assert len(tx.pending_placements("a", ttl=3 * 3600)) == len(placed)
        assert len(tx.pending_placements("a")) == len(placed)  # no TTL: until it runs



def mixed_placements(n: int = 60):
    """balanced's Placements (arrays) of n files of odd sizes: plain, hierarchical and PFL layouts."""
    from iez.alloc.policy import AllocOptions
    from iez.alloc.registry import get_policy

    cluster = make_cluster()
    reqs = [Request(f"/lustre/b/out.{i}", (i % 7 + 1) * 9_000_000 + i, i % 5 or -1, rank=i, app="b", run="2",
                    comm_size=8 if i % 3 == 0 else 1, writers=8 if i % 3 == 0 else 0, writer_segments=1,
                    api="mpiio" if i % 3 == 0 else "posix", grows=i % 11 == 0) for i in range(n)]
    return get_policy("balanced").place(reqs, cluster, Snapshot.from_cluster(cluster), AllocOptions(layout="hierarchical"))


def test_placements_stored_from_arrays_read_back_as_placed_and_reserve_what_objects_would(db):
    """A policy's Placements are stored from their arrays (plain, hierarchical and PFL layouts,
    partial last rounds): read back they are the placements they stand for, and the bytes other
    applications' plans hold (pending_bytes, in bulk) are job_bytes of pending_placements."""
    from iez.alloc.policy import job_bytes

    cluster = make_cluster()
    snap = Snapshot.from_cluster(cluster)
    placed = mixed_placements()
    reqs = placed.requests
    kinds = {"plain" if p.layout.plain is not None else "components" for p in placed}
    assert kinds == {"plain", "components"} and placed.replaced and any(placed.table.components)
    with db.begin() as tx:
        sid = tx.add_snapshot(cluster, snap, "default")
        tx.add_trace("b", hacc(1))
        tx.set_placements("b", 2, "balanced", placed, sid, {})
        tx.mark_planned("b", 2, "balanced")
        assert tx.placement_sets("b", 2)[0].placements == list(placed)
        tx.add_trace("c", hacc(1))
        tx.set_placements("c", 2, "rr", table2_placements(), sid, {})  # objects, as other policies give
        tx.mark_planned("c", 2, "rr")
        pending = tx.pending_placements("a")
        assert len(pending) == len(reqs) + 2
        assert tx.pending_bytes("a") == (len(pending), job_bytes(pending))
        assert tx.pending_bytes("a", ttl=3600) == (len(pending), job_bytes(pending))
        assert tx.pending_bytes("b") == (2, job_bytes(table2_placements()))

REQUEST_TABLES = ("traced_requests", "predicted_requests")
V6_COLUMNS = ("writer_segments", "read_bytes", "read_size", "host", "final_path")
# What each migration step added, undone: a database as that version made it.
UNDO = {
    2: ["ALTER TABLE runs DROP COLUMN released_at"],
    3: ["ALTER TABLE runs DROP COLUMN planned_at"],
    4: [f"ALTER TABLE {t} DROP COLUMN {c}" for t in REQUEST_TABLES for c in ("writers", "transfer_size", "write_align")],
    5: ["ALTER TABLE placements DROP COLUMN note"],
    6: ["DROP TABLE traced_reads", *(f"ALTER TABLE {t} DROP COLUMN {c}" for t in REQUEST_TABLES for c in V6_COLUMNS)],
    7: [f"ALTER TABLE {t} DROP COLUMN name_random" for t in (*REQUEST_TABLES, "traced_reads")],
    8: ["DROP TABLE plans"],
    9: ["CREATE INDEX ix_runs_app ON runs (app_id)",
        "CREATE INDEX ix_traced_run ON traced_requests (run_id)", "CREATE INDEX ix_read_run ON traced_reads (run_id)",
        "CREATE INDEX ix_predicted_prediction ON predicted_requests (prediction_id)",
        "CREATE INDEX ix_placements_run_policy ON placements (run_id, policy)"],
    10: ["DROP TABLE placed_bytes"],
}


def as_version(tx, version: int) -> None:
    from iez.db.schema import schema_version

    assert max(UNDO) == SCHEMA_VERSION  # a new step needs its undo here
    for v in sorted(UNDO, reverse=True):
        for sql in UNDO[v] if v > version else ():
            tx.conn.execute(text(sql))
    tx.conn.execute(schema_version.update().values(version=version))


def test_a_version_1_database_is_brought_to_the_current_version(db):
    """The real steps: a database made before runs.released_at and runs.planned_at gains them and
    keeps its rows; a plan made before the upgrade reserves for a full TTL from the upgrade."""
    placed = table2_placements()
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        tx.set_placements("a", 2, "balanced", placed, sid, {})
        tx.mark_planned("a", 2, "balanced")
        as_version(tx, 1)
        assert current_version(tx.conn) == 1
    t0 = time.time()
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 1
        assert current_version(tx.conn) == SCHEMA_VERSION == 10
        # every step together gives the tables a new database gets
        have = inspect(tx.conn)
        assert {t: {c["name"] for c in have.get_columns(t)} for t in INTERACTION.metadata.tables} == {
            name: {c.name for c in t.columns} for name, t in INTERACTION.metadata.tables.items()}
        assert {"released_at", "planned_at"} <= {c["name"] for c in inspect(tx.conn).get_columns("runs")}
        ((number, requests),) = tx.traced_runs("a")
        assert number == 1 and len(requests) == 2
        (planned_at,) = tx.conn.execute(text("SELECT planned_at FROM runs WHERE number = 2")).one()
        assert planned_at >= t0 and len(tx.pending_placements("b", ttl=60)) == len(placed)


def test_a_version_3_database_gains_the_writers_facts(db):
    """Requests stored before the writers' facts read them as unknown (0); new ones keep them,
    traced and predicted alike."""
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        as_version(tx, 3)
        assert current_version(tx.conn) == 3
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 3 and current_version(tx.conn) == SCHEMA_VERSION == 10
        ((_, old),) = tx.traced_runs("a")
        assert {(q.writers, q.transfer_size, q.write_align) for q in old} == {(0, 0, 0)}
        facts = dict(writers=1024, transfer_size=1 << 20, write_align=1 << 16)
        tx.add_trace("a", [replace(q, **facts) for q in hacc(2)])
        tx.add_prediction("a", 3, [replace(q, **facts) for q in hacc(2)], {}, [1, 2])
    with db.begin() as tx:
        assert [r for _, r in tx.traced_runs("a")][1] == [replace(q, **facts, app="a", run="2") for q in hacc(2)]
        assert {(q.writers, q.transfer_size, q.write_align) for q in tx.prediction("a", 3).requests} == {
            (1024, 1 << 20, 1 << 16)}


def test_a_version_4_database_gains_the_placements_notes(db):
    """Placements stored before the notes read as kept ("" ); new ones keep why iez changed their
    layout, in the placement sets and in the other applications' pending placements alike."""
    placed = table2_placements()
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        tx.set_placements("a", 2, "balanced", placed, sid, {})
        as_version(tx, 4)
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 4 and current_version(tx.conn) == SCHEMA_VERSION == 10
        [old] = tx.placement_sets("a", 2)
        assert [p.note for p in old.placements] == ["", ""]
        noted = [replace(placed[0], note="auto: 15 x 64 MiB instead of 8 x 96 MiB: fastest"), placed[1]]
        tx.set_placements("a", 2, "balanced", noted, sid, {})
        tx.mark_planned("a", 2, "balanced")
    with db.begin() as tx:
        [s] = tx.placement_sets("a", 2)
        assert [p.note for p in s.placements] == [noted[0].note, ""]
        assert sorted(p.note for p in tx.pending_placements("b")) == ["", noted[0].note]


READ_FACTS = dict(writer_segments=3, read_bytes=5 << 30, read_size=1 << 20, host="nid00042",
                  final_path="/lustre/scratch/hacc-io/final.data")


def test_a_version_5_database_gains_the_read_facts_and_the_reads(db):
    """Requests stored before version 6 read their new fields as unknown (0, ""); new ones keep
    them, traced and predicted alike, and a run's reads are stored beside its requests, apart
    from what prediction learns from."""
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        tx.add_prediction("a", 2, hacc(2), {}, [1])
        as_version(tx, 5)
        assert "traced_reads" not in inspect(tx.conn).get_table_names()
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 5 and current_version(tx.conn) == SCHEMA_VERSION == 10
        ((_, old),) = tx.traced_runs("a")
        for q in old + tx.prediction("a", 2).requests:
            assert (q.writer_segments, q.read_bytes, q.read_size, q.host, q.final_path) == (0, 0, 0, "", "")
        assert tx.run_reads("a", 1) == [] and tx.runs("a")[0].n_reads == 0
        made = [replace(q, **READ_FACTS) for q in hacc(2)]
        read = [Request("/lustre/in/deck.in", 0, 4, rank=1, comm_size=2, read_bytes=1 << 40, read_size=4 << 20,
                        writers=0, host="nid00001", observed=FileLayout(plain=Layout(stripe_size=1 << 20, osts=(1, 2, 3, 4))))]
        assert tx.add_trace("a", made, reads=read) == 2
        tx.add_prediction("a", 3, made, {}, [1, 2])
    with db.begin() as tx:
        back = [r for _, r in tx.traced_runs("a")][1]
        assert back == [replace(q, app="a", run="2") for q in made]
        assert [(q.host, q.final_path) for q in back + tx.prediction("a", 3).requests] == [
            (READ_FACTS["host"], READ_FACTS["final_path"])] * 4  # compare=False fields, checked apart
        [r] = tx.run_reads("a", 2)
        assert r == replace(read[0], app="a", run="2") and (r.host, r.observed) == ("nid00001", read[0].observed)
        assert [(i.number, i.n_traced, i.n_reads) for i in tx.runs("a")] == [(1, 2, 0), (2, 2, 1), (3, 0, 0)]


def test_a_version_6_database_gains_the_generated_name_part(db):
    """Requests stored before version 7 know no generated name part (0); new ones keep theirs,
    traced, read and predicted alike."""
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        tx.add_prediction("a", 2, hacc(2), {}, [1])
        as_version(tx, 6)
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 6 and current_version(tx.conn) == SCHEMA_VERSION == 10
        ((_, old),) = tx.traced_runs("a")
        assert {q.name_random for q in old + tx.prediction("a", 2).requests} == {0}
        made = [replace(q, path=q.path + ".aB3xY9", name_random=6) for q in hacc(2)]
        read = [Request("/lustre/in/tmp.Qz81kLm0Pq", 0, 1, read_bytes=1 << 20, name_random=10)]
        tx.add_trace("a", made, reads=read)
        tx.add_prediction("a", 3, made, {}, [1, 2])
    with db.begin() as tx:
        back = [r for _, r in tx.traced_runs("a")][1]
        assert [q.name_random for q in back + tx.prediction("a", 3).requests] == [6] * 4  # compare=False
        assert [r.name_random for r in tx.run_reads("a", 2)] == [10]


def test_a_stored_plan_is_served_as_stored_until_its_placements_change(db):
    """planned_run: the newest planned untraced run (or the one asked) with its plan bytes; a plan
    stored for another policy, or before its placements were replaced, is not returned."""
    placed = table2_placements()
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        assert tx.planned_run("a") is None
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        for run in (2, 3):
            tx.set_placements("a", run, "balanced", placed, sid, {})
            tx.mark_planned("a", run, "balanced")
            tx.set_plan("a", run, "balanced", f"plan {run}\n".encode())
    with db.begin() as tx:
        assert tx.planned_run("a") == (3, "balanced", b"plan 3\n")
        assert tx.planned_run("a", body=False) == (3, "balanced", None)
        assert tx.planned_run("a", 2) == (2, "balanced", b"plan 2\n")
        assert tx.planned_run("a", 4) is None and tx.planned_run("b") is None
        tx.mark_planned("a", 3, "rr")  # re-planned by another policy: the stored bytes are not its plan
        assert tx.planned_run("a") == (3, "rr", None)
        tx.set_placements("a", 2, "balanced", placed[:1], sid, {})
        assert tx.planned_run("a", 2) == (2, "balanced", None)
        tx.add_trace("a", hacc(2), 3)  # run 3 ran: a job starting now follows run 2
        assert tx.planned_run("a")[0] == 2


def test_a_version_7_database_gains_the_plans_table(db):
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        as_version(tx, 7)
        assert "plans" not in inspect(tx.conn).get_table_names()
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 7 and current_version(tx.conn) == SCHEMA_VERSION
        assert "plans" in inspect(tx.conn).get_table_names()


def indexes(tx) -> set[str]:
    have = inspect(tx.conn)
    return {i["name"] for t in have.get_table_names() for i in have.get_indexes(t)}


def test_a_version_8_database_loses_the_indexes_its_unique_constraints_cover(db):
    """Step 9 drops the indexes whose columns lead a unique constraint; the rows stay, and a
    migrated database has the indexes a new one gets."""
    from iez.db.migrations import COVERED_INDEXES

    placed = table2_placements()
    with db.begin() as tx:
        new = indexes(tx)
        tx.add_trace("a", hacc(2))
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        tx.set_placements("a", 2, "balanced", placed, sid, {})
        as_version(tx, 8)
        assert set(COVERED_INDEXES) <= indexes(tx) and not set(COVERED_INDEXES) & new
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 8 and current_version(tx.conn) == SCHEMA_VERSION
        assert indexes(tx) == new
        stored = tx.placement_sets("a", 2)[0].placements
        assert [(p.path, p.layout) for p in stored] == [(p.path, p.layout) for p in placed]
        assert len(tx.traced_runs("a")[0][1]) == 2


def test_a_version_9_database_sums_the_bytes_its_plans_hold(db):
    """Step 10 sums the stored placements of every run and policy per OST (its own RAID-0 map of
    the stored layouts: plain, PFL and hierarchical, partial last rounds): other applications'
    plans then reserve what they reserved before the step, read from the sums."""
    from iez.alloc.policy import job_bytes

    placed = [*table2_placements(), *mixed_placements()]
    assert {p.layout.plain is None for p in placed} == {True, False}
    with db.begin() as tx:
        tx.add_trace("a", hacc(2))
        sid = tx.add_snapshot(make_cluster(), Snapshot.from_cluster(make_cluster()), "default")
        tx.set_placements("a", 2, "balanced", placed, sid, {})
        tx.set_placements("a", 2, "rr", placed[:1], sid, {})
        tx.mark_planned("a", 2, "balanced")
        before = tx.pending_bytes("b")
        assert before == (len(placed), job_bytes(placed))
        as_version(tx, 9)
        assert "placed_bytes" not in inspect(tx.conn).get_table_names()
    with db.begin() as tx:
        assert migrate(tx.conn, INTERACTION) == 9 and current_version(tx.conn) == SCHEMA_VERSION
        assert tx.pending_bytes("b") == before
        rr = tx.conn.execute(text("SELECT ost, bytes FROM placed_bytes WHERE policy = 'rr'")).all()
        assert dict(rr) == job_bytes(placed[:1])


def test_a_read_only_run_is_stored_and_teaches_prediction_nothing(db):
    reads = [Request(f"/lustre/data/shard.{i}", 0, 1, read_bytes=1 << 30, read_size=1 << 20) for i in range(3)]
    with db.begin() as tx:
        tx.add_trace("dlio", hacc(2))
        assert tx.add_trace("dlio", [], reads=reads) == 2
        assert tx.add_trace("dlio", [], reads=reads) == 3  # another read-only run: its own rows
    with db.begin() as tx:
        assert [n for n, _ in tx.traced_runs("dlio")] == [1]
        assert [len(tx.run_reads("dlio", n)) for n in (1, 2, 3)] == [0, 3, 3]
        assert tx.next_traced_run("dlio") == 4


def test_bad_urls_and_files_are_one_line_errors(tmp_path):
    with pytest.raises(DatabaseError, match="bad database URL"):
        Database("::not a url::")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database file at all" * 100)
    with pytest.raises(DatabaseError) as e:
        Database(f"sqlite:///{junk}")
    assert "\n" not in str(e.value)


def test_unreachable_postgresql_is_a_one_line_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(DatabaseError) as e:
            Database(f"postgresql://iez@127.0.0.1:{port}/iez")
    assert "\n" not in str(e.value) and "127.0.0.1" in str(e.value)


def test_default_url_follows_iez_db_and_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("IEZ_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_url() == f"sqlite:///{tmp_path / 'xdg' / 'iez' / 'iez.db'}"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_url() == f"sqlite:///{tmp_path / '.local' / 'share' / 'iez' / 'iez.db'}"
    monkeypatch.setenv("IEZ_DB", str(tmp_path / "mine.db"))
    assert default_url() == f"sqlite:///{tmp_path / 'mine.db'}"
    monkeypatch.setenv("IEZ_DB", "postgresql://u@h/db")
    assert default_url() == "postgresql://u@h/db"


def test_integer_columns_hold_what_lustre_uses(db):
    # ranks and OST indices are small, byte counts are not: check a 64-bit byte count survives.
    huge = (1 << 62) + 3
    with db.begin() as tx:
        tx.add_trace("big", [Request("/l/huge", huge, 1)])
    with db.begin() as tx:
        assert tx.traced_runs("big")[0][1][0].write_bytes == huge


def test_concurrent_imports_into_one_app_take_distinct_run_numbers(db_url):
    import threading

    with Database(db_url) as d, d.begin() as tx:
        tx.add_trace("ior", hacc(1))
    numbers, errors = [], []

    def one_import():
        try:
            with Database(db_url) as d, d.begin() as tx:
                numbers.append(tx.add_trace("ior", hacc(2)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one_import) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sorted(numbers) == [2, 3, 4, 5]
