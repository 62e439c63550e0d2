"""The schema's history, a chain per engine: ``migrations.sqlite`` and
``migrations.postgres`` (one frozen module per version each), and the runner core they
share (:mod:`migrations.core`).

This package imports nothing else of the project and no driver: a PostgreSQL user's
process never loads apsw through it.
"""

from migrations.core import Migration, MigrationFailed, SchemaTooNew, VersionBook, apply_chain

__all__ = ["Migration", "MigrationFailed", "SchemaTooNew", "VersionBook", "apply_chain"]
