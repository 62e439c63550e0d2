"""Invariants a file must keep after any crash, shared by the crash-recovery tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from persistence import Tier
from tests.data_checks import open_raw


@dataclass
class FileState:
    """What a crashed file holds, read with a plain APSW connection."""

    where: dict[str, list[Tier]] = field(default_factory=dict)
    origin: dict[str, Tier] = field(default_factory=dict)
    log: dict[str, list[tuple[Tier, Tier]]] = field(default_factory=dict)
    tag_counts: dict[str, int] = field(default_factory=dict)
    scheduled: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)


def read_state(path: Path) -> FileState:
    """Check ``integrity_check`` and read every memory's tier, log, tags and schedule.

    A file killed before its first migration committed has no tables yet: that reads as
    empty, which the callers' checks of reported writes then judge.
    """
    state = FileState()
    if not path.exists():
        return state
    conn = open_raw(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if "promotion_log" not in tables:
            return state
        for tier in Tier:
            for memory_id, metadata in conn.execute(f"SELECT id, metadata FROM {tier.value}"):
                state.where.setdefault(memory_id, []).append(tier)
                state.origin[memory_id] = Tier(orjson.loads(metadata)["origin"])
        for memory_id, src, dst in conn.execute(
            "SELECT memory_id, from_tier, to_tier FROM promotion_log ORDER BY id"
        ):
            state.log.setdefault(memory_id, []).append((Tier(src), Tier(dst)))
        state.tag_counts = dict(
            conn.execute("SELECT memory_id, count(*) FROM memory_tags GROUP BY memory_id")
        )
        state.scheduled = {r[0] for r in conn.execute("SELECT memory_id FROM repetition_schedules")}
        if "forgetting_log" in tables:
            state.forgotten = {r[0] for r in conn.execute("SELECT memory_id FROM forgetting_log")}
        return state
    finally:
        conn.close()


def assert_no_half_done_promotion(state: FileState, tags_per_memory: int) -> None:
    """Each memory is in one tier, its log chains from its origin to it, tags are whole."""
    for memory_id, tiers in state.where.items():
        assert len(tiers) == 1, f"{memory_id} is in {tiers}"
        current = state.origin[memory_id]
        for src, dst in state.log.get(memory_id, []):
            assert src is current, f"log of {memory_id} does not chain: {state.log[memory_id]}"
            current = dst
        assert current is tiers[0], f"{memory_id} is in {tiers[0]} but its log ends at {current}"
        assert state.tag_counts.get(memory_id) == tags_per_memory, f"{memory_id} lost tags"
    assert set(state.log) <= set(state.where) | state.forgotten, "log names an unknown memory"
