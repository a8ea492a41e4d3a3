"""libiez's object graph has no cycle (docs/libiez.md, "Inside libiez"): the global state is a
leaf, core.c walks the module table, and no module calls back into core or into the layers
above it. An edge A -> B is an undefined symbol of A's object that B's object defines, read
with nm. Symbols the library exports are not edges: they are the interposed interface (open,
write, MPI_File_open, ...), bound at run time to the first definition in the process, as a
call libiez's own code makes to write is a call into libc that libiez also intercepts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, ROOT

OBJECTS = BUILD / "libiez" / "CMakeFiles"
# the objects of libiez.so and libiez-mpi.so, and the core they link (not the probe, the tests)
TARGETS = ("iezcore.dir", "iezpreload.dir", "iez-mpi.dir")


def nm(*args: str) -> list[list[str]]:
    out = subprocess.run(["nm", "-P", *args], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def source_of(rel: Path) -> Path:
    """The source of an object, from its path in the target's directory (CMake writes .. as __)."""
    parts = [".." if p == "__" else p for p in rel.parts]
    return ROOT / "libiez" / Path(*parts).with_suffix("")


def object_graph() -> dict[str, set[str]]:
    # an object whose source is gone (a renamed file) is stale, not part of the library
    objects = sorted(o for t in TARGETS for o in (OBJECTS / t).rglob("*.o")
                     if source_of(o.relative_to(OBJECTS / t)).exists())
    if not any(o.parent.name == "src" and o.name == "core.c.o" for o in objects):
        pytest.fail(f"no libiez objects under {OBJECTS}: build libiez (cmake -S . -B build && cmake --build build)")
    exported = set()
    for lib in ("libiez.so", "libiez-mpi.so"):
        if (BUILD / "libiez" / lib).exists():
            exported |= {f[0] for f in nm("-D", "--defined-only", str(BUILD / "libiez" / lib))}
    name = {o: o.name.removesuffix(".c.o") for o in objects}
    defines: dict[str, str] = {}
    needs: dict[str, set[str]] = {}
    for o in objects:
        syms = nm(str(o))
        needs[name[o]] = {s[0] for s in syms if s[1] in "Uwv"}
        for s in syms:
            if s[1] in "TDBRGSVW" and s[0] not in exported:
                defines[s[0]] = name[o]
    return {a: {defines[s] for s in u if s in defines and defines[s] != a} for a, u in needs.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of graph as a path a -> ... -> a, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (cycle := visit(w)):
                return cycle
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (cycle := visit(v)):
            return cycle
    return None


def test_find_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_object_graph_is_acyclic():
    graph = object_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "libiez's objects call each other in a cycle: " + " -> ".join(cycle)


def test_state_is_a_leaf_and_core_is_above_the_modules():
    graph = object_graph()
    assert graph["state"] == set(), f"state.c depends on {sorted(graph['state'])}"

    def reaches(a: str) -> set[str]:
        seen, todo = set(), [a]
        while todo:
            for w in graph[todo.pop()] - seen:
                seen.add(w)
                todo.append(w)
        return seen

    # the modules of core's table never reach core (they would if one called iez_init)
    for module in ("log", "iolog", "trace", "access", "open", "place", "backend"):
        assert "core" not in reaches(module), f"{module}.c reaches core.c"
    assert "trace" not in reaches("place"), "place.c reaches the trace: open.c records placement"
