"""Lint and type check as tests: `make test` (and so CI) stays one command, and a finding shows in
pytest's report and counts like any failure. The rule set and the checked packages are in
pyproject.toml ([tool.ruff], [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

HINT = "pip install -e '.[test]' (make test does it)"


def tool(name: str) -> str:
    """The tool from this checkout's venv; missing is a failure, never a skip."""
    exe = Path(sys.executable).with_name(name)
    if not exe.exists():
        pytest.fail(f"{name} is not installed in {exe.parent}: {HINT}")
    return str(exe)


def check(argv: list[str]) -> None:
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(argv)} found problems:\n{r.stdout}{r.stderr}"


def test_ruff():
    check([tool("ruff"), "check", "--no-cache", "src", "tests", "bench"])


def test_mypy():
    check([tool("mypy")])
