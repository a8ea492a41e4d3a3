"""The controller's state on disk: SQLite in WAL mode, one transaction per batch of requests.

The server saves the keys a batch changed before it sends the batch's replies, so whatever a
client has been told (a grant, its place in the queue) survives a crash or restart of the
controller. synchronous=NORMAL: a committed batch survives the controller being killed; only a
power loss can take back the last batches (then clients re-register, see docs/iocop.md).
An exclusive lock on STATE.lock keeps two controllers off one state file.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

from iez.access.queue import App, Changes, State
from iez.access.admission import Claim, Usage
from iez.access.protocol import format_osts, parse_osts
from iez.errors import ConfigError

SCHEMA_VERSION = 1
_SCHEMA = """
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


def _osts(v: frozenset[int] | None) -> str | None:
    return None if v is None else format_osts(v)


def _unosts(v: str | None) -> frozenset[int] | None:
    return None if v is None else parse_osts(v)


class Store:
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
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.DatabaseError as e:
            self._lock.close()
            raise ConfigError(f"{self.path} is not an access-controller state file: {e}") from None
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif row[0] != str(SCHEMA_VERSION):
            self._lock.close()
            raise ConfigError(f"{self.path} has state schema {row[0]}; this iez reads {SCHEMA_VERSION}")

    def load(self) -> State:
        st = State(usage=Usage(self.half_life))
        q = self.db.execute
        for r in q("SELECT appid, secret_hash, user, project, jobid, osts, priority, registered, revoked FROM apps"):
            st.apps[r[0]] = App(appid=r[0], secret_hash=r[1], user=r[2], project=r[3], jobid=r[4],
                                osts=_unosts(r[5]), priority=r[6], registered=r[7], revoked=r[8])
        for r in q("SELECT appid, phase, seq, since, osts, user, project, priority, expect, token, granted "
                   "FROM claims ORDER BY seq"):
            if r[0] in st.apps:
                st.claims[r[0]] = Claim(appid=r[0], phase=r[1], seq=r[2], since=r[3], osts=_unosts(r[4]),
                                        user=r[5], project=r[6], priority=r[7], expect=r[8], token=r[9],
                                        granted=r[10])
        for g, v, t in q("SELECT grp, value, as_of FROM usage"):
            st.usage.values[g] = (v, t)
        st.history = {k: s for k, s in q("SELECT key, seconds FROM history")}
        meta = dict(q("SELECT key, value FROM meta"))
        st.next_seq = int(meta.get("next_seq", 1))
        st.next_token = int(meta.get("next_token", 1))
        return st

    def save(self, st: State, ch: Changes) -> None:
        """Write what changed, in one transaction."""
        if not ch:
            return
        db = self.db
        db.execute("BEGIN")
        try:
            self._sync("apps", ch.apps, st.apps, lambda a: (
                a.appid, a.secret_hash, a.user, a.project, a.jobid, _osts(a.osts), a.priority, a.registered,
                a.revoked))
            self._sync("claims", ch.claims, st.claims, lambda c: (
                c.appid, c.phase, c.seq, c.since, _osts(c.osts), c.user, c.project, c.priority, c.expect,
                c.token, c.granted))
            for g in ch.usage:
                v, t = st.usage.values[g]
                db.execute("INSERT OR REPLACE INTO usage VALUES (?,?,?)", (g, v, t))
            for k in ch.history:
                db.execute("INSERT OR REPLACE INTO history VALUES (?,?)", (k, st.history[k]))
            if ch.meta:
                db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)",
                               [("next_seq", str(st.next_seq)), ("next_token", str(st.next_token))])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _sync(self, table: str, keys: set[str], rows: dict, values) -> None:
        """Upsert the changed keys that exist, delete the ones that are gone."""
        for key in keys:
            obj = rows.get(key)
            if obj is None:
                self.db.execute(f"DELETE FROM {table} WHERE appid=?", (key,))
            else:
                v = values(obj)
                self.db.execute(f"INSERT OR REPLACE INTO {table} VALUES ({','.join('?' * len(v))})", v)

    def close(self) -> None:
        self.db.close()
        self._lock.close()
