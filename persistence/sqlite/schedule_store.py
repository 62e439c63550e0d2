"""The shared schedule store over a file (see
:class:`persistence.stores.schedules.ScheduleStore`): decay forgets row by row, each
logged with its agent (:func:`~persistence.sqlite.forgetting_steps.forget_many`)."""

from __future__ import annotations

from persistence.sqlite.database import Database
from persistence.sqlite.forgetting_steps import forget_many
from persistence.sqlite.sql import forgetting_sql, memory_sql, schedule_sql
from persistence.stores.config import StoreConfig
from persistence.stores.schedules import ScheduleStore

__all__ = ["ScheduleStore", "file_schedule_store"]  # ScheduleStore: for sqlite/__init__


def file_schedule_store(engine: Database, config: StoreConfig) -> ScheduleStore:
    """Schedules, retention and the forgetting log of one file."""
    return ScheduleStore(engine, config, schedule_sql=schedule_sql, forgetting_sql=forgetting_sql,
                         forget_many=forget_many, memory_sql=memory_sql)  # fmt: skip
