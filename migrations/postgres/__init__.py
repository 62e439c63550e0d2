"""The PostgreSQL schema's history: one module per version (``vNNN_name.py``) and its
glue for the runner core (:mod:`migrations.core`). Like the SQLite chain beside it, each
version is frozen once released; unlike SQLite, PostgreSQL runs DDL inside a
transaction, so a version applies whole or not at all.

This package imports neither psycopg nor apsw nor anything else of the project: the
runner takes any connection with ``execute`` (a psycopg 3 connection).
"""

from migrations.core import MigrationFailed, SchemaTooNew
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
    "MigrationFailed",
    "PgConnection",
    "PgMigration",
    "SchemaTooNew",
    "apply_migrations",
    "available_migrations",
    "read_schema_version",
]
