"""The access controller's state file across versions: files written by iez before its tables
moved onto db/'s migrations (raw sqlite3, the version in meta's "schema" row), newer files and
foreign ones (the round trip and the lock: test_access_policy.py)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from sqlalchemy import select

from iez.access.admission import make_policy
from iez.access.queue import AccessQueue, Settings
from iez.access.statefile import ACCESS_STATE, StateFile, access_schema_version
from iez.errors import ConfigError


# The tables as iez wrote them with raw sqlite3, schema version 1 (the version in meta).
OLD_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS apps (appid TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, user TEXT NOT NULL,
  project TEXT NOT NULL, jobid TEXT NOT NULL, osts TEXT, priority INTEGER NOT NULL,
  registered REAL NOT NULL, revoked INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS claims (appid TEXT PRIMARY KEY, phase TEXT NOT NULL, seq INTEGER NOT NULL,
  since REAL NOT NULL, osts TEXT, user TEXT NOT NULL, project TEXT NOT NULL, priority INTEGER NOT NULL,
  expect REAL NOT NULL, token INTEGER NOT NULL, granted REAL NOT NULL);
CREATE TABLE IF NOT EXISTS usage (grp TEXT PRIMARY KEY, value REAL NOT NULL, as_of REAL NOT NULL);
CREATE TABLE IF NOT EXISTS history (key TEXT PRIMARY KEY, seconds REAL NOT NULL);
"""
SECRET_A, SECRET_B = "a" * 32, "b" * 32


def write_old_state_file(path) -> None:
    """A state file as the raw-sqlite3 store left it: 1:a holds token 1 on OSTs 1-3, 2:b waits."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(OLD_SCHEMA_V1)
    db.execute("INSERT INTO meta VALUES ('schema', '1')")
    h = {s: hashlib.sha256(s.encode()).hexdigest() for s in (SECRET_A, SECRET_B)}
    db.execute("BEGIN")
    db.execute("INSERT OR REPLACE INTO apps VALUES (?,?,?,?,?,?,?,?,?)",
               ("1:a", h[SECRET_A], "alice", "p1", "1", "1-3", 0, 0.0, 0))
    db.execute("INSERT OR REPLACE INTO apps VALUES (?,?,?,?,?,?,?,?,?)",
               ("2:b", h[SECRET_B], "bob", "", "2", None, 5, 0.5, 0))
    db.execute("INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               ("1:a", "io", 1, 1.0, "1-3", "alice", "p1", 0, 7.0, 1, 1.0))
    db.execute("INSERT OR REPLACE INTO claims VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               ("2:b", "ckpt", 2, 1.5, None, "bob", "", 5, 60.0, 0, 0.0))
    db.execute("INSERT OR REPLACE INTO usage VALUES (?,?,?)", ("user:alice", 3.0, 1.0))
    db.execute("INSERT OR REPLACE INTO history VALUES (?,?)", ("a/io", 12.5))
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", [("next_seq", "3"), ("next_token", "2")])
    db.execute("COMMIT")
    db.close()


def test_a_state_file_of_the_raw_sqlite3_store_is_read_and_migrated(tmp_path):
    path = tmp_path / "old.db"
    write_old_state_file(path)
    f = StateFile(path)
    st_ = f.load()
    assert list(st_.claims) == ["1:a", "2:b"]
    a, b = st_.claims["1:a"], st_.claims["2:b"]
    assert (a.token, a.expect, a.osts, a.user, a.project) == (1, 7.0, {1, 2, 3}, "alice", "p1")
    assert (b.token, b.phase, b.osts, b.priority) == (0, "ckpt", None, 5)
    assert st_.apps["2:b"].user == "bob" and st_.apps["2:b"].registered == 0.5
    assert st_.usage.values["user:alice"] == (3.0, 1.0) and st_.history == {"a/io": 12.5}
    assert (st_.next_seq, st_.next_token) == (3, 2)
    versions = [tuple(r) for r in f.conn.execute(select(access_schema_version.c.version,
                                                        access_schema_version.c.description))]
    f.conn.rollback()
    assert [v for v, _ in versions] == [1, ACCESS_STATE.version] == [1, 2]
    # who holds and who waits survive: the holder's secret still releases, the waiter gets the token
    c = AccessQueue(make_policy("exclusive"), Settings(), st_, now=100.0)
    assert c.handle(f"RELEASE\t1:a\t{SECRET_A}\t1", 100.5).reply.startswith("OK")
    assert c.take_grants() == ["2:b"]
    f.save(c.state, c.take_changes())
    f.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() is None
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    again = StateFile(path)
    assert again.load().claims["2:b"].token == 2
    again.close()


def test_a_newer_state_file_is_refused(tmp_path):
    path = tmp_path / "s.db"
    StateFile(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO access_schema_version VALUES (99, 0, 'future')")
    with pytest.raises(ConfigError, match="newer than this iez"):
        StateFile(path)


def test_tables_without_a_version_are_not_touched(tmp_path):
    path = tmp_path / "s.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE apps (x INTEGER)")
    with pytest.raises(ConfigError, match="not created by iez"):
        StateFile(path)
    with sqlite3.connect(path) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["apps"]
