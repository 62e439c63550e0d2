"""Close and reopen: everything is as it was; a big file opens without loading it."""

from __future__ import annotations

import gc
from pathlib import Path

import apsw
import pytest

from persistence import Memory, Tier
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager

DAY = 86_400_000


def _everything(memory: AgentMemoryManager, session_id: str) -> dict[str, object]:
    ids = [m.id for m in memory.query(limit=None)]
    return {
        "scratchpad": memory.scratchpad.items(),
        "memories": sorted(memory.query(limit=None), key=lambda m: m.id),
        "embeddings": {
            m.id: m.embedding.tolist() for m in memory.query(limit=None) if m.embedding is not None
        },  # fmt: skip
        "schedules": [memory.schedule(i) for i in sorted(ids)],
        "promotions": [memory.promotion_history(i) for i in sorted(ids)],
        "forgotten": memory.forgetting_log(),
        "session": memory.get_session(session_id),
        "active": memory.active_sessions(),
        "transcript": memory.get_transcript(session_id),
    }


@pytest.mark.slow
def test_everything_survives_close_and_reopen(db_path: Path, clock: FakeClock) -> None:
    with AgentMemoryManager.open(db_path, clock=clock) as memory:
        session = memory.start_session(metadata={"user": "ann"})
        memory.scratchpad.put("goal", "Ship v1")
        memory.scratchpad.put("plan", "Write tests")
        a = memory.remember("fact a", session_id=session.session_id, tags=["x"],
                            embedding=[0.1, 0.2, 0.3])  # fmt: skip
        b = memory.remember("fact b", importance=0.0)
        c = memory.remember("fact c", tier=Tier.SCRATCHPAD, key="c")
        memory.append_transcript(session.session_id, "user", "hello")
        memory.append_transcript(session.session_id, "assistant", "hi")
        memory.promote(a.id, Tier.SEMANTIC, reason="confirmed")
        memory.promote(c.id, Tier.EPISODIC)
        memory.review(a.id, 5)
        memory.link(a.id, c.id)
        clock.advance(3 * DAY)
        memory.decay()
        before = _everything(memory, session.session_id)
        assert memory.get(b.id) is None and len(before["forgotten"]) == 1  # type: ignore[arg-type]
    with AgentMemoryManager.open(db_path, clock=clock) as memory:
        assert _everything(memory, session.session_id) == before


def _fill_raw(path: Path, count: int) -> None:
    """Write ``count`` episodic rows straight into a fresh file (fast, in SQL)."""
    AgentMemoryManager.open(path).shutdown()
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO episodic (id, content, created_at, updated_at) "
            "SELECT printf('m%08d', i), 'memory number ' || i, i, i FROM n",
            (count,),
        )
    conn.close()


def _live_memories() -> int:
    gc.collect()
    return sum(isinstance(o, Memory) for o in gc.get_objects())


@pytest.mark.slow
def test_a_file_of_50k_memories_opens_without_loading_them(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    _fill_raw(path, 50_000)
    baseline = _live_memories()
    with AgentMemoryManager.open(path) as memory:
        assert memory.statistics().storage.episodic_count == 50_000
        assert _live_memories() - baseline <= 5
        read = [memory.get(f"m{i:08d}") for i in (1, 777, 25_000, 49_999)]
        assert [m.content for m in read if m] == [
            "memory number 1",
            "memory number 777",
            "memory number 25000",
            "memory number 49999",
        ]
        assert memory.statistics().cache.size == 4
        del read
        assert _live_memories() - baseline <= 4 + 5


def test_the_cache_stays_bounded_while_reading_many(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    _fill_raw(path, 5_000)
    # No background embedding: its commits would invalidate cached entries while we read
    # (an invalidation is not an eviction), and the count below would depend on timing.
    with AgentMemoryManager.open(path, cache_size=100, embed_in_background=False) as memory:
        for i in range(1, 5_001):
            assert memory.get(f"m{i:08d}") is not None
        stats = memory.statistics().cache
        assert stats.size == 100 and stats.evictions == 4_900
        assert _live_memories() <= 100 + 10
