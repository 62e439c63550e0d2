"""The shared session store over a file: :mod:`~persistence.sqlite.sql.session_sql` as
it is (each statement carries the store's :class:`~persistence.stores.scope.Scope`)."""

from __future__ import annotations

from collections.abc import Callable

from persistence.sqlite.database import Database
from persistence.sqlite.sql import session_sql
from persistence.stores import sessions
from persistence.stores.config import StoreConfig
from persistence.stores.scope import Scope
from persistence.validation import DEFAULT_MAX_CONTENT_BYTES


class SessionStore(sessions.SessionStore):
    """The shared session store over a file, built from a clock: ``agent_id``, only
    that agent's sessions (``None``: every session)."""

    def __init__(
        self, engine: Database, clock: Callable[[], int], agent_id: str | None = None
    ) -> None:
        config = StoreConfig(clock, DEFAULT_MAX_CONTENT_BYTES, scope=Scope.of(agent_id))
        super().__init__(engine, session_sql, config)
        self.agent_id = agent_id
