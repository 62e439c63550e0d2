"""Validation on import equals validation on write: one rule set.

Each bad value below is refused by ``import_json`` with an ``InvalidImportError`` naming
its place in the document, and the same value is refused by the store's write
(``put_memory`` and friends, or ``remember``) with an ``InvalidInputError``; either way
the file's bytes stay as they were. Values at the bounds are accepted, and the calls
that increment them (``review``) keep working afterwards.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from persistence import (
    InvalidImportError,
    InvalidInputError,
    Memory,
    RepetitionSchedule,
    SessionState,
    Tier,
)
from persistence.validation import MAX_COUNT
from tests.conftest import FakeClock, file_digest
from tiered_memory import AgentMemoryManager


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real export with one row in every table."""
    root = tmp_path_factory.mktemp("rules")
    clock = FakeClock()
    with AgentMemoryManager.open(root / "base.db", embedder=None, clock=clock) as memory:
        session = memory.start_session("s1")
        kept = memory.remember("kept", session_id=session.session_id, tags=["t"])
        gone = memory.remember("gone")
        memory.promote(gone.id, Tier.SEMANTIC)
        memory.forget(gone.id)
        memory.append_transcript(session.session_id, "user", "hello")
        memory.review(kept.id, 4)
        doc: dict[str, Any] = orjson.loads(memory.export_json(root / "base.json").read_bytes())
    return doc


@pytest.fixture
def target(tmp_path: Path) -> Iterator[AgentMemoryManager]:
    with AgentMemoryManager.open(
        tmp_path / "target.db", embedder=None, embed_in_background=False
    ) as memory:
        memory.start_session("s1")
        memory.remember("already here", session_id="s1")
        yield memory


def _digests(memory: AgentMemoryManager) -> tuple[str, ...]:
    path = memory.path
    assert path is not None
    return tuple(file_digest(p) for p in (path, Path(f"{path}-wal")) if p.exists())


Write = Callable[[AgentMemoryManager], object]


def _put(**changes: Any) -> Write:
    def write(memory: AgentMemoryManager) -> object:
        now = memory.clock()
        original = Memory.create("written", now=now)
        return memory.store.memories.put_memory(replace(original, **changes))

    return write


def _put_session(**changes: Any) -> Write:
    def write(memory: AgentMemoryManager) -> object:
        memory.store.put_session(replace(SessionState("s2", 1, 1), **changes))
        return None

    return write


def _put_schedule(**changes: Any) -> Write:
    def write(memory: AgentMemoryManager) -> object:
        [m] = memory.query(Tier.EPISODIC)
        schedule = RepetitionSchedule(m.id, 1, 1000)
        memory.store.put_repetition_schedule(replace(schedule, **changes))
        return None

    return write


# (table, field, bad value or a function of the row, the same value on a write)
CASES: list[tuple[str, str, Any, Write]] = [
    ("episodic", "access_count", 2**63 - 1, _put(access_count=2**63 - 1)),
    ("episodic", "access_count", MAX_COUNT + 1, _put(access_count=MAX_COUNT + 1)),
    ("episodic", "token_count", MAX_COUNT + 1, _put(token_count=MAX_COUNT + 1)),
    ("episodic", "created_at", -1, _put(created_at=-1, updated_at=-1)),
    ("episodic", "updated_at", lambda row: row["created_at"] - 1,
     _put(updated_at=1_000, created_at=1_001)),
    ("episodic", "last_accessed_at", -5, _put(last_accessed_at=-5)),
    ("episodic", "session_id", "", _put(session_id="")),
    ("episodic", "session_id", "", lambda memory: memory.remember("x", session_id="")),
    ("sessions", "started_at", -1, _put_session(started_at=-1)),
    ("sessions", "last_active_at", -1, _put_session(last_active_at=-1)),
    ("sessions", "turn_number", MAX_COUNT + 1, _put_session(turn_number=MAX_COUNT + 1)),
    ("repetition_schedules", "review_count", 2**63 - 1, _put_schedule(review_count=2**63 - 1)),
    ("repetition_schedules", "next_review_at", -1, _put_schedule(next_review_at=-1)),
    ("repetition_schedules", "last_reviewed_at", -1, _put_schedule(last_reviewed_at=-1)),
    ("session_transcripts", "turn_number", MAX_COUNT + 1,
     lambda memory: memory.store.append_transcript("s1", MAX_COUNT + 1, "user", "hi")),
    ("session_transcripts", "session_id", "",
     lambda memory: memory.store.append_transcript("", 1, "user", "hi")),
]  # fmt: skip

IMPORT_ONLY = [  # the library writes these rows itself, with its clock
    ("session_transcripts", "timestamp", -1),
    ("promotion_log", "promoted_at", -1),
    ("forgetting_log", "forgotten_at", -1),
]


def _import_with(
    memory: AgentMemoryManager, base: dict[str, Any], table: str, field: str, value: Any, mode: str
) -> None:
    doc = copy.deepcopy(base)
    row = doc["tables"][table][0]
    row[field] = value(row) if callable(value) else value
    path = Path(f"{memory.path}.json")
    path.write_bytes(orjson.dumps(doc))
    memory.import_json(path, mode)


@pytest.mark.parametrize(("table", "field", "value", "write"), CASES)
@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_a_bad_value_is_refused_by_import_and_by_write_alike(
    target: AgentMemoryManager,
    base: dict[str, Any],
    table: str,
    field: str,
    value: Any,
    write: Write,
    mode: str,
) -> None:
    before = _digests(target)
    with pytest.raises(InvalidImportError) as refused:
        _import_with(target, base, table, field, value, mode)
    assert refused.value.location == f"tables.{table}[0].{field}"
    assert _digests(target) == before
    with pytest.raises(InvalidInputError, match=field):
        write(target)
    assert _digests(target) == before


@pytest.mark.parametrize(("table", "field", "value"), IMPORT_ONLY)
def test_bad_audit_and_transcript_times_are_refused_by_import(
    target: AgentMemoryManager, base: dict[str, Any], table: str, field: str, value: Any
) -> None:
    before = _digests(target)
    with pytest.raises(InvalidImportError) as refused:
        _import_with(target, base, table, field, value, "replace")
    assert refused.value.location == f"tables.{table}[0].{field}"
    assert _digests(target) == before


def test_counters_at_the_bound_import_and_keep_working(
    target: AgentMemoryManager, base: dict[str, Any], clock: FakeClock
) -> None:
    doc = copy.deepcopy(base)
    [row] = doc["tables"]["episodic"]
    row["access_count"] = MAX_COUNT
    [schedule] = doc["tables"]["repetition_schedules"]
    schedule["review_count"] = MAX_COUNT
    path = Path(f"{target.path}.json")
    path.write_bytes(orjson.dumps(doc))
    target.import_json(path)
    reviewed = target.review(row["id"], 5)  # "does not fit in 64 bits" before
    assert reviewed.review_count == MAX_COUNT
    again = target.get(row["id"])
    assert again is not None and again.access_count == MAX_COUNT
    assert target.check_integrity().ok


def test_a_clock_that_went_back_never_makes_updated_at_precede_created_at(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory()
    m = memory.remember("made now")
    pad = memory.scratchpad.put("goal", "made now too")
    clock.advance(-60_000)
    updated = memory.update(m.id, content="changed after the clock went back")
    assert updated.updated_at == updated.created_at
    memory.link(m.id, pad.id)
    assert memory.scratchpad.put("goal", "rewritten").updated_at == pad.created_at
    record = memory.promote(m.id, Tier.SEMANTIC)
    assert record.to_tier is Tier.SEMANTIC
