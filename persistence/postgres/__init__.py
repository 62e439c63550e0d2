"""The PostgreSQL + pgvector backend (extra ``[postgres]``: psycopg 3, psycopg_pool,
pgvector): the same record families as :mod:`persistence.sqlite`, on a server.

Imported only when a ``postgresql://`` location is opened
(:func:`persistence.build_backend`), so the core import never loads psycopg.
"""

from persistence.locations import redact
from persistence.postgres.database import PgDatabase
from persistence.postgres.files import PgFiles
from persistence.postgres.graph_store import pg_graph_store
from persistence.postgres.note_store import PgNoteStore
from persistence.postgres.store import PostgresStore

__all__ = ["PgDatabase", "PgFiles", "PgNoteStore", "PostgresStore", "pg_graph_store", "redact"]
