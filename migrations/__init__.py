"""The schema's history: one module per version (``vNNN_name.py``) and the runner.

This package imports nothing else of the project.
"""

from migrations.runner import (
    LATEST_VERSION,
    Migration,
    MigrationFailed,
    SchemaTooNew,
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
