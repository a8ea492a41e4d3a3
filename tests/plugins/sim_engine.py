"""The simulator engine's path, for the modules that run it: a missing build fails them loudly."""

from __future__ import annotations

import pytest

from iez.sim import engine


@pytest.fixture(scope="session")
def eng() -> str:
    try:
        return engine.engine_path()
    except engine.SimError as e:
        pytest.fail(str(e))
