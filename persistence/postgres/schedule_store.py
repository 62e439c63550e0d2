"""PgScheduleStore: review schedules, retention batches, the forgetting log on PostgreSQL (placeholder: being built)."""

from __future__ import annotations

from persistence.postgres.config import StoreConfig
from persistence.postgres.database import PgDatabase


class PgScheduleStore:
    """review schedules, retention batches, the forgetting log over one :class:`~persistence.postgres.database.PgDatabase`."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config
