"""The interaction database (docs/references.md#s000-table1): SQLAlchemy Core over SQLite or PostgreSQL.

Names are loaded on first use, so that importing the package (every `iez` command does, through
the CLI) does not import SQLAlchemy.
"""

from typing import Any

from iez.db.errors import DatabaseError

_LAZY = ("Database", "PlacementSet", "PredictionInfo", "RunInfo", "Txn", "check_app_name", "default_url")
__all__ = ["DatabaseError", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from iez.db import database

        return getattr(database, name)
    raise AttributeError(f"module 'iez.db' has no attribute {name!r}")
