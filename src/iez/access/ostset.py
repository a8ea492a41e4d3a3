"""Which OSTs an application's I/O touches, for the ost-aware policy: from the layouts iez
planned (a plan file, the placements in the interaction database) or the layouts its files
really have. A layout that does not name all its OSTs makes the set unknown (None), and the
controller then treats the application as touching every OST.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from iez.layout.layout import FileLayout
from iez.request import Placement


def osts_of_layouts(layouts: Iterable[FileLayout]) -> frozenset[int] | None:
    out: set[int] = set()
    for fl in layouts:
        for comp in fl.parts():
            lay = comp.layout
            if not lay.osts or (lay.stripe_count > 0 and len(lay.osts) != lay.stripe_count):
                return None
            out.update(lay.osts)
    return frozenset(out)


def osts_of_plan(path: str | Path) -> frozenset[int] | None:
    """The OSTs a plan file places files on (libiez creates them there)."""
    from iez import plan

    return osts_of_layouts(plan.load(path).entries.values())


def osts_of_paths(paths: Iterable[str | Path]) -> frozenset[int] | None:
    """The OSTs existing files sit on, read through their backend (Lustre or emulated)."""
    from iez.backend import backend_for

    return osts_of_layouts(backend_for(p).get_layout(p) for p in paths)


def osts_by_app(placements: Iterable[Placement]) -> dict[str, frozenset[int]]:
    """Per application, the OSTs of its placements; applications with an unresolved layout are left out."""
    by: dict[str, list[FileLayout]] = {}
    for p in placements:
        by.setdefault(p.app, []).append(p.layout)
    out = {}
    for app, layouts in by.items():
        s = osts_of_layouts(layouts)
        if s is not None:
            out[app] = s
    return out


def known_osts_from_db(url: str | None) -> dict[str, frozenset[int]]:
    """The OST sets of every application whose planned run has not been traced yet: the runs
    about to happen, as `iez plan` placed them (the database's global view, docs/references.md#s000-fig4)."""
    from iez.db import Database

    with Database(url) as db, db.begin() as txn:
        return osts_by_app(txn.pending_placements(exclude_app=""))
