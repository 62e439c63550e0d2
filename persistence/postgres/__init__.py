"""The PostgreSQL + pgvector backend (extra ``[postgres]``: psycopg 3, psycopg_pool,
pgvector): the same record families as :mod:`persistence.sqlite`, on a server.

Imported only when a ``postgresql://`` location is opened
(:func:`persistence.build_backend`), so the core import never loads psycopg.
"""

from persistence.postgres.database import PgDatabase, PoolSettings
from persistence.postgres.location import is_server_url, redact
from persistence.postgres.store import PostgresStore

__all__ = ["PgDatabase", "PoolSettings", "PostgresStore", "is_server_url", "redact"]
