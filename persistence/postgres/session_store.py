"""PgSessionStore: sessions and transcripts on PostgreSQL (placeholder: being built)."""

from __future__ import annotations

from persistence.postgres.config import StoreConfig
from persistence.postgres.database import PgDatabase


class PgSessionStore:
    """sessions and transcripts over one :class:`~persistence.postgres.database.PgDatabase`."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config
