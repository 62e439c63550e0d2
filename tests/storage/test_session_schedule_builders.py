"""The SQL of sessions, schedules and the forgetting log only builds and decodes: its
functions take values, never a connection, and the modules import no driver (the stores
run what they build, persistence.statements)."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

from persistence.postgres.sql import forgetting_sql as pg_forgetting
from persistence.postgres.sql import schedule_sql as pg_schedule
from persistence.postgres.sql import session_sql as pg_session
from persistence.records import RepetitionSchedule, Tier, TranscriptEntry
from persistence.sqlite.sql import forgetting_sql as file_forgetting
from persistence.sqlite.sql import schedule_sql as file_schedule
from persistence.sqlite.sql import session_sql as file_session
from persistence.statements import Batch, Statement
from persistence.stores.scope import Scope

MODULES = (file_session, file_schedule, file_forgetting, pg_session, pg_schedule, pg_forgetting)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_the_modules_build_and_decode_only(module: ModuleType) -> None:
    assert not {"apsw", "psycopg"} & set(vars(module))
    for name, function in inspect.getmembers(module, inspect.isfunction):
        if function.__module__ == module.__name__:
            assert "conn" not in inspect.signature(function).parameters, name


@pytest.mark.parametrize("module", (file_session, pg_session), ids=("sqlite", "postgres"))
def test_a_write_the_store_counts_returns_its_rows(module: ModuleType) -> None:
    statement = module.delete("s1", Scope.of("ann"))
    assert isinstance(statement, Statement)
    assert statement.sql.endswith("RETURNING 1") and "ann" in statement.params
    assert module.upsert((), Scope.of("ann")).sql.endswith("RETURNING 1")
    first, *_ = module.append_transcript(TranscriptEntry("t1", "s1", 1, "user", "hi", 5))
    assert first.sql.endswith("RETURNING 1") and "s1" in first.params


@pytest.mark.parametrize("module", (file_schedule, pg_schedule), ids=("sqlite", "postgres"))
def test_schedules_go_in_one_batch(module: ModuleType) -> None:
    schedules = [RepetitionSchedule(f"m{i}", next_review_at=i, interval_ms=10) for i in range(3)]
    batch = module.insert_many(schedules)
    assert isinstance(batch, Batch) and [r[0] for r in batch.rows] == ["m0", "m1", "m2"]
    assert module.insert_many([]).rows == []


@pytest.mark.parametrize("module", (file_forgetting, pg_forgetting), ids=("sqlite", "postgres"))
def test_no_retention_to_write_runs_nothing(module: ModuleType) -> None:
    assert module.set_retention(Tier.EPISODIC, []).rows == []
    assert len(module.set_retention(Tier.EPISODIC, [("a", 0.5)]).rows) == 1
