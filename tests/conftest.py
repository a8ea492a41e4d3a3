"""Shared test helpers. Tests run real processes and real components; nothing is mocked."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures" / "lustre"
VECTORS = ROOT / "tests" / "vectors"
BUILD = ROOT / "build"

# Fixtures several modules use live in plugins, never imported from another test module.
pytest_plugins = ["plugins.postgres", "plugins.controller_stack", "plugins.controller_process",
                  "plugins.access_controllers", "plugins.sim_engine"]


def need_fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"Lustre fixtures not found at {FIXTURES}: clone the repo with ../shared beside it")
    return FIXTURES


@pytest.fixture
def fixtures() -> Path:
    return need_fixtures()


def need_built(*paths: Path) -> None:
    """Fail loudly (never skip) when a program or library of the C build is missing."""
    for p in paths:
        if not Path(p).exists():
            pytest.fail(f"{p} is missing: build the C components (apt-get install mpich libmpich-dev for the MPI "
                         "parts; cmake -S . -B build && cmake --build build; make test does both)")


def need_tool(name: str, hint: str) -> str:
    """Fail loudly (never skip) when a required program is missing."""
    path = shutil.which(name)
    if not path:
        pytest.fail(f"{name} is not installed: {hint}")
    return path


@pytest.fixture
def iez_cmd() -> list[str]:
    """The iez CLI as a real subprocess, from this checkout's venv."""
    exe = Path(sys.executable).with_name("iez")
    if not exe.exists():
        pytest.fail("the iez console script is missing: run `make test` (it installs the package)")
    return [str(exe)]


@pytest.fixture
def subenv() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("IEZ_MODE", None)
    return env


def fuzz_settings(examples: int, **kw):
    """Hypothesis settings for a fuzz target of a parser that reads untrusted bytes.

    `make test` runs `examples` cases (a bounded time); `make fuzz` multiplies them by
    $IEZ_FUZZ_SCALE (default 100 there), so the same targets run far longer."""
    from hypothesis import HealthCheck, settings

    scale = int(os.environ.get("IEZ_FUZZ_SCALE", "1") or 1)
    return settings(max_examples=examples * max(scale, 1), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture], **kw)
