"""The SQLite schema's history: one frozen module per version (``vNNN_name.py``) and its
glue for the runner core (:mod:`migrations.core`).

Importing this package loads no driver: the chain's modules (which import apsw) are
loaded when the migrations are listed or applied.
"""

from migrations.core import MigrationFailed, SchemaTooNew
from migrations.sqlite.runner import (
    LATEST_VERSION,
    Migration,
    apply_migrations,
    available_migrations,
    read_schema_version,
)

__all__ = [
    "LATEST_VERSION",
    "Migration",
    "MigrationFailed",
    "SchemaTooNew",
    "apply_migrations",
    "available_migrations",
    "read_schema_version",
]
