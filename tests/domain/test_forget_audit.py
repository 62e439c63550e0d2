"""Forgetting removes content, never the audit.

A forgotten (decayed, deleted) memory keeps its promotion-log rows and gains a
forgetting-log row; the integrity checks accept both, an export/import round trip keeps
them, and a real disagreement between the log and a live memory is still reported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from persistence import Memory, Tier
from persistence.sqlite import BackupManager, SQLiteStore
from tests.conftest import FakeClock
from tests.support.backends import is_postgres
from tiered_memory import AgentMemoryManager


def _log(memory: AgentMemoryManager) -> list[tuple[str, str, str]]:
    """Every row of the promotion log (PostgreSQL's table is ``tm_promotion_log``)."""
    table = "tm_promotion_log" if is_postgres(memory.store) else "promotion_log"
    with memory.store.engine.reading() as conn:
        rows = conn.execute(f"SELECT memory_id, from_tier, to_tier FROM {table}").fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def test_forget_keeps_the_promotion_history(memory: AgentMemoryManager) -> None:
    m = memory.remember("The user prefers dark mode")
    memory.promote(m.id, Tier.SEMANTIC, reason="confirmed")
    assert memory.forget(m.id)
    assert memory.get(m.id) is None
    [record] = memory.promotion_history(m.id)
    assert (record.from_tier, record.to_tier, record.reason) == (
        Tier.EPISODIC, Tier.SEMANTIC, "confirmed",
    )  # fmt: skip
    assert [r.tier for r in memory.forgetting_log(m.id)] == [Tier.SEMANTIC]
    stats = memory.statistics().storage
    assert (stats.promotion_count, stats.forgotten_count, stats.semantic_count) == (1, 1, 0)
    assert memory.check_integrity().ok


def test_decay_and_scratchpad_forgetting_keep_it_too(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(initial_stability_days=1e-6)
    faded = memory.remember("fades fast")
    memory.promote(faded.id, Tier.SEMANTIC)
    entry = memory.scratchpad.put("goal", "ship it")
    memory.promote(entry.id, Tier.EPISODIC, reason="done with it")
    clock.advance(10_000)
    report = memory.decay()
    assert entry.id in report.forgotten_ids
    memory.forget(faded.id)
    assert sorted(_log(memory)) == sorted(
        [(faded.id, "episodic", "semantic"), (entry.id, "scratchpad", "episodic")]
    )
    assert memory.check_integrity().ok


def test_store_deletes_are_audited_the_same_way(store: SQLiteStore) -> None:
    m = store.put_episodic(Memory.create("to be deleted"))
    store.promote_memory(m.id, Tier.EPISODIC, Tier.SEMANTIC)
    assert store.delete_semantic(m.id) is True
    assert store.delete_semantic(m.id) is False
    assert [r.to_tier for r in store.memories.get_promotion_history(m.id)] == [Tier.SEMANTIC]
    assert [r.reason for r in store.schedules.get_forgetting_log(m.id)] == ["deleted"]
    assert BackupManager(store, backup_dir=".").check_integrity().ok


def test_integrity_still_catches_a_log_that_disagrees_with_a_live_memory(
    store: SQLiteStore, clock: FakeClock
) -> None:
    backups = BackupManager(store, backup_dir=".")
    live = store.put_episodic(Memory.create("lives in episodic", now=clock()))
    gone = store.put_episodic(Memory.create("forgotten", now=clock()))
    store.promote_memory(gone.id, Tier.EPISODIC, Tier.SEMANTIC)
    clock.advance(1)
    store.memories.forget_memory(gone.id, "no longer true")
    assert backups.check_integrity().ok
    with store.transaction() as conn:  # a log row saying the live one went to semantic
        conn.execute(
            "INSERT INTO promotion_log (memory_id, from_tier, to_tier, promoted_at) "
            "VALUES (?, 'episodic', 'semantic', ?)",
            (live.id, clock()),
        )
        conn.execute(
            "INSERT INTO promotion_log (memory_id, from_tier, to_tier, promoted_at) "
            "VALUES ('never-existed', 'episodic', 'semantic', ?)",
            (clock(),),
        )
    found = {(p.check, p.detail) for p in backups.check_integrity().problems}
    assert found == {
        ("promotion_log_agrees_with_tiers",
         f"memory {live.id} was last promoted to semantic but is in episodic"),
        ("promotion_log_points_at_memories",
         "promotion_log names memory never-existed, which neither exists nor was forgotten"),
    }  # fmt: skip


def test_an_id_written_again_after_forgetting_starts_a_new_history(
    store: SQLiteStore, clock: FakeClock
) -> None:
    first = store.put_episodic(Memory.create("first life", now=clock()))
    store.promote_memory(first.id, Tier.EPISODIC, Tier.SEMANTIC)
    clock.advance(5)
    store.memories.forget_memory(first.id, "obsolete")
    clock.advance(5)
    store.put_episodic(Memory.create("second life", now=clock(), id=first.id))
    assert BackupManager(store, backup_dir=".").check_integrity().ok


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_export_import_round_trip_keeps_the_log_rows_of_forgotten_memories(
    tmp_path: Path, mode: str
) -> None:
    with AgentMemoryManager.open(tmp_path / "a.db", embedder=None) as memory:
        kept = memory.remember("kept")
        gone = memory.remember("gone")
        for m in (kept, gone):
            memory.promote(m.id, Tier.SEMANTIC, reason="learned")
        memory.forget(gone.id)
        before = sorted(_log(memory))
        document = memory.export_json(tmp_path / "a.json")
    assert (gone.id, "episodic", "semantic") in before
    for target in ("fresh.db", "a.db"):  # into an empty file, and back into its own
        with AgentMemoryManager.open(tmp_path / target, embedder=None) as memory:
            memory.import_json(document, mode)
            assert sorted(_log(memory)) == before
            assert [r.memory_id for r in memory.forgetting_log()] == [gone.id]
            assert memory.check_integrity().ok
