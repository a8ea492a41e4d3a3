"""The layers ARCHITECTURE.md draws, checked on the import graph: the pure core imports no adapter,
service or I/O library; nothing below the command line imports `iez.cli`; the pipeline is shared by
the CLI and the controller, so it imports neither. Imports inside functions count as much as the
top-level ones: a late import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src"

# The pure core: plain data in, plain data out (ARCHITECTURE.md "Layers"). lustre/params.py is the
# one adapter in lustre/ (it reads /sys, /proc and lctl); the rest of lustre/ parses text handed in.
PURE = ["iez.layout", "iez.alloc", "iez.predict", "iez.request", "iez.metrics", "iez.units",
        "iez.lustre", "iez.access.admission", "iez.access.queue", "iez.access.protocol", "iez.sim.workload",
        "iez.audit.findings", "iez.audit.advice", "iez.audit.site", "iez.fields"]
NOT_PURE = ["iez.lustre.params"]
# Adapters: files, databases, sockets to one component; they serve the layers above and use none.
ADAPTERS = ["iez.backend", "iez.emulated", "iez.lustre", "iez.trace", "iez.db", "iez.collect", "iez.plan",
            "iez.cluster"]
SERVICES_AMONG_ADAPTERS = ["iez.collect.publisher", "iez.emulated.mds"]
ABOVE_ADAPTERS = ["iez.pipeline", "iez.controller", "iez.access.server", "iez.collect.publisher", "iez.cli",
                  "iez.demo", "iez.profile", "iez.report", "iez.wrapper", "iez.audit"]
# What the core must not reach: adapters, services, entry points, and the libraries of I/O.
OUTSIDE_CORE = ["iez.backend", "iez.emulated", "iez.db", "iez.controller", "iez.collect", "iez.cli",
                "iez.pipeline", "iez.demo", "iez.profile", "iez.report", "iez.wrapper", "iez.zmqauth",
                "iez.access.server", "iez.lustre.params", "subprocess", "socket", "zmq", "sqlalchemy",
                "fastapi", "uvicorn", "httpx", "requests"]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, src: Path) -> set[str]:
    """Every module `path` imports, as absolute names (`from iez.x import y` gives iez.x and iez.x.y)."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path, src).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def within(name: str, prefixes: list[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def graph(src: Path = SRC) -> dict[str, set[str]]:
    return {module_name(p, src): imports(p, src) for p in sorted((src / "iez").rglob("*.py"))}


def violations(g: dict[str, set[str]], members: list[str], forbidden: list[str],
               exempt: list[str] = ()) -> list[str]:
    return [f"{m} imports {i}" for m, deps in sorted(g.items())
            if within(m, members) and not within(m, list(exempt))
            for i in sorted(deps) if within(i, forbidden)]


def test_the_checker_sees_late_and_relative_imports(tmp_path):
    pkg = tmp_path / "iez" / "layout"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text("from . import raid0\ndef f():\n    import subprocess\n    from iez.db import Database\n")
    g = graph(tmp_path)
    assert violations(g, PURE, OUTSIDE_CORE) == ["iez.layout.x imports iez.db", "iez.layout.x imports iez.db.Database",
                                                 "iez.layout.x imports subprocess"]
    assert "iez.layout.raid0" in g["iez.layout.x"]


def test_the_pure_core_imports_no_adapter_service_or_io_library():
    assert violations(graph(), PURE, OUTSIDE_CORE, exempt=NOT_PURE) == []


def test_adapters_import_no_service_pipeline_or_entry_point():
    assert violations(graph(), ADAPTERS, ABOVE_ADAPTERS, exempt=SERVICES_AMONG_ADAPTERS) == []


def test_only_the_command_line_imports_the_command_line():
    assert violations(graph(), ["iez"], ["iez.cli"], exempt=["iez.cli", "iez.__main__"]) == []


def test_the_pipeline_is_below_both_of_its_callers():
    assert violations(graph(), ["iez.pipeline"], ["iez.cli", "iez.controller", "iez.demo"]) == []
