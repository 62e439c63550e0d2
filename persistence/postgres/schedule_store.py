"""The shared schedule store over a server database (see
:class:`persistence.stores.schedules.ScheduleStore`): decay applied in a few set-based
statements (:func:`~persistence.postgres.forgetting_steps.forget_many`)."""

from __future__ import annotations

from persistence.postgres.database import PgDatabase
from persistence.postgres.forgetting_steps import forget_many
from persistence.postgres.sql import forgetting_sql, memory_sql, schedule_sql
from persistence.stores.config import StoreConfig
from persistence.stores.schedules import ScheduleStore


def server_schedule_store(engine: PgDatabase, config: StoreConfig) -> ScheduleStore:
    """Schedules, retention and the forgetting log of one server database."""
    return ScheduleStore(engine, config, schedule_sql=schedule_sql, forgetting_sql=forgetting_sql,
                         forget_many=forget_many, memory_sql=memory_sql)  # fmt: skip
