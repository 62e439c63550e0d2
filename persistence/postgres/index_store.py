"""PgIndexStore: keyword and vector search, conversation turns, embeddings, re-embedding on PostgreSQL (placeholder: being built)."""

from __future__ import annotations

from persistence.postgres.config import StoreConfig
from persistence.postgres.database import PgDatabase


class PgIndexStore:
    """keyword and vector search, conversation turns, embeddings, re-embedding over one :class:`~persistence.postgres.database.PgDatabase`."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config
