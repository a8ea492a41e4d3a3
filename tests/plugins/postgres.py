"""A real PostgreSQL server for tests: initdb into a temporary directory, run it on a free
loopback port, stop it at the end of the session. No mocks.

A plugin (tests/conftest.py registers it), so a test module just names the fixtures:

    def test_x(pg_url): ...              # a fresh, empty PostgreSQL database per test
    def test_y(db_url): ...              # runs twice: a new SQLite file, then a new PostgreSQL db

PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user
(Debian's package creates it), or as a system user `iez-pg` made with useradd if that is missing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import pytest


HINT = "apt-get install postgresql (Debian 12 ships PostgreSQL 15)"
SUPERUSER = "iez"


def _bindir() -> Path:
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name))
    for d in reversed(dirs):
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists():
            return Path(d)
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    pytest.fail(f"PostgreSQL server binaries (initdb, pg_ctl) not found: {HINT}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self) -> None:
        self.bindir = _bindir()
        self.user = self._run_user()
        self.datadir = Path(tempfile.mkdtemp(prefix="iez-pg-"))
        self.port = 0

    @staticmethod
    def _run_user() -> str | None:
        if os.geteuid() != 0:
            return None
        for name in ("postgres", "iez-pg"):
            try:
                pwd.getpwnam(name)
                return name
            except KeyError:
                continue
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "iez-pg"],
                       check=True, capture_output=True)
        return "iez-pg"

    def _cmd(self, *argv: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else list(argv)

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        p = subprocess.run(self._cmd(*argv), capture_output=True, text=True, cwd="/")
        if p.returncode:
            log = self.datadir / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            pytest.fail(f"{' '.join(argv[:2])} failed ({p.returncode}): {p.stderr.strip()}\n{tail}")
        return p

    def start(self) -> None:
        if self.user:
            shutil.chown(self.datadir, self.user)
        self._run(str(self.bindir / "initdb"), "-D", str(self.datadir / "data"), "-U", SUPERUSER,
                  "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
        for _attempt in range(5):  # the port may be taken between choosing and binding it
            self.port = _free_port()
            opts = f"-h 127.0.0.1 -p {self.port} -k {self.datadir} -F"
            p = subprocess.run(self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.datadir / "data"),
                                         "-o", opts, "-l", str(self.datadir / "server.log"), "-w",
                                         "-t", "60", "start"),
                               capture_output=True, text=True, cwd="/")
            if p.returncode == 0:
                return
        pytest.fail(f"PostgreSQL did not start: {(self.datadir / 'server.log').read_text()[-2000:]}")

    def stop(self) -> None:
        subprocess.run(self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.datadir / "data"),
                                 "-m", "fast", "-w", "stop"), capture_output=True, cwd="/")
        shutil.rmtree(self.datadir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres",
                             autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty database on the session's server."""
    return pg_server.create_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a new, empty database: once a SQLite file, once on the PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'iez.db'}"
    return request.getfixturevalue("pg_url")
