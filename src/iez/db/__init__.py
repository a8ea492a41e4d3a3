"""The interaction database (seed 000 §III-A3): SQLAlchemy Core over SQLite or PostgreSQL."""

from iez.db.database import Database, PlacementSet, PredictionInfo, RunInfo, Txn, check_app_name, default_url  # noqa: F401
from iez.db.errors import DatabaseError  # noqa: F401
