"""The database's error type (kept apart so schema, migrations and store can all raise it)."""

from iez.errors import IezError


class DatabaseError(IezError):
    """The interaction database cannot be opened, is of an unknown version, or lacks data."""
