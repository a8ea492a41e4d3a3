"""`iez access serve` controllers as real processes, the C IO-Cop client, a site token, and readers
of the controllers' event log."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import BUILD
from iez.access.server import Spawned, spawn
from iez.tokens import new_token


@pytest.fixture
def iocop_client() -> str:
    exe = BUILD / "iocop" / "iocop-client"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: build the C components (cmake -S . -B build && cmake --build build)")
    return str(exe)


@pytest.fixture
def site_token(monkeypatch) -> str:
    """A fresh site token, in $IEZ_TOKEN for every client of the test (in process and children)."""
    token = new_token()
    monkeypatch.setenv("IEZ_TOKEN", token)
    monkeypatch.delenv("IEZ_TOKEN_FILE", raising=False)
    monkeypatch.delenv("IEZ_SITE_TOKEN", raising=False)
    return token


@pytest.fixture
def controllers(tmp_path, site_token):
    """Start `iez access serve` processes that take requests signed with the site token."""
    started: list[Spawned] = []

    def start(*opts: str, state: Path | None = None, events: str = "events.jsonl", **kw) -> Spawned:
        token = None if "--trusted-network" in opts else site_token
        c = spawn(state or tmp_path / "state.db", *opts, token=token, events=tmp_path / events,
                  log=tmp_path / "serve.log", **kw)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def holds(evs: list[dict]) -> list[tuple[float, float, str, int]]:
    """(grant, end, app, token) of every token in the controller's log."""
    start = {}
    out = []
    for e in evs:
        if e["ev"] == "grant":
            start[e["token"]] = e
        elif e.get("token") in start and e["ev"] in ("release", "expire", "max_hold", "unregister"):
            g = start.pop(e["token"])
            out.append((g["t"], e["t"], g["app"], g["token"]))
    assert not start, f"tokens never ended: {sorted(start)}"
    return out


def wait_until(pred, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")
