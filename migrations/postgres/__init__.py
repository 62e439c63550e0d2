"""The PostgreSQL schema's history: one module per version (``vNNN_name.py``) and the
runner. Like the SQLite chain beside it, each version is frozen once released; unlike
SQLite, PostgreSQL runs DDL inside a transaction, so a version applies whole or not at all.

This package imports neither psycopg nor anything else of the project: the runner takes
any connection with ``execute`` (a psycopg 3 connection).
"""

from migrations.postgres.runner import (
    LATEST_VERSION,
    PgConnection,
    PgMigration,
    apply_migrations,
    available_migrations,
    read_schema_version,
)

__all__ = [
    "LATEST_VERSION",
    "PgConnection",
    "PgMigration",
    "apply_migrations",
    "available_migrations",
    "read_schema_version",
]
