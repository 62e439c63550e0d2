"""Crash recovery with real processes: SIGKILL a writer at random moments, many times.

After every kill the file must pass ``PRAGMA integrity_check``, hold every write whose
call had returned (the child reports an id only after the call returned), and show no
half-done promotion: each memory is in exactly one tier and the log agrees.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from persistence import Tier
from persistence.sqlite import SQLiteStore
from tests.crash_checks import assert_no_half_done_promotion, read_state
from tests.processes import spawn_worker

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = 60


def _check(path: Path, reported: dict[str, Tier]) -> int:
    """Assert the crash invariants; return how many memories the file holds."""
    state = read_state(path)
    assert_no_half_done_promotion(state, tags_per_memory=2)
    for memory_id, tier in reported.items():
        assert memory_id in state.where, f"returned write {memory_id} was lost"
        assert state.where[memory_id][0].rank >= tier.rank, (
            f"returned promotion of {memory_id} lost"
        )
    return len(state.where)


def test_sigkill_at_random_moments_loses_nothing_that_returned(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    rng = random.Random(20261122)
    reported: dict[str, Tier] = {}
    writes_seen = promotions_seen = 0
    for kill in range(KILLS):
        # Mostly mid-write; now and then during start-up and migration.
        delay = rng.uniform(0.0, 0.25) if kill % 10 == 0 else rng.uniform(0.3, 0.7)
        ready = None if kill % 10 == 0 else "READY"
        worker = spawn_worker("crash", str(path), str(kill), ready=ready)
        for line in worker.kill(after=delay):
            parts = line.split()
            if parts[0] == "W":
                reported[parts[1]] = Tier(parts[2])
                writes_seen += 1
            elif parts[0] == "P":
                assert reported[parts[1]] is Tier(parts[2])
                reported[parts[1]] = Tier(parts[3])
                promotions_seen += 1
        held = _check(path, reported)
        assert held >= len(reported)
    print(f"{KILLS} kills, {writes_seen} returned writes, {promotions_seen} returned promotions")
    assert writes_seen > KILLS and promotions_seen > KILLS // 2
    with SQLiteStore(path) as store:  # the library itself reopens the crashed file
        stats = store.get_statistics()
        total = stats.scratchpad_count + stats.episodic_count + stats.semantic_count
        assert total >= len(reported)
