"""The shared session store over a server database (see
:class:`persistence.stores.sessions.SessionStore`): :mod:`~persistence.postgres.sql.session_sql`
as it is (row-level security scopes it; a transcript line and its session's times go in
one statement)."""

from __future__ import annotations

from persistence.postgres.database import PgDatabase
from persistence.postgres.sql import session_sql
from persistence.stores.config import StoreConfig
from persistence.stores.sessions import SessionStore


def server_session_store(engine: PgDatabase, config: StoreConfig) -> SessionStore:
    """Sessions and transcripts of one server database."""
    return SessionStore(engine, session_sql, config)
