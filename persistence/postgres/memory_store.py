"""PgMemoryStore: memories of the three tiers, promotion, deduplication notes, the scratchpad on PostgreSQL (placeholder: being built)."""

from __future__ import annotations

from persistence.postgres.config import StoreConfig
from persistence.postgres.database import PgDatabase


class PgMemoryStore:
    """memories of the three tiers, promotion, deduplication notes, the scratchpad over one :class:`~persistence.postgres.database.PgDatabase`."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config
