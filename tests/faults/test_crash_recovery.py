"""Crash recovery with real processes: SIGKILL a writer at random moments, many times.

After every kill the file must pass ``PRAGMA integrity_check``, hold every write whose
call had returned (the child reports an id only after the call returned), and show no
half-done promotion: each memory is in exactly one tier and the log agrees. On both
backends: on PostgreSQL the server rolls the killed client's transaction back (nothing
stays open), and a kill during start-up leaves no schema or a whole one (migrations run
in one transaction).
"""

from __future__ import annotations

import random

import pytest

from persistence import Tier
from persistence.locations import is_server_url
from tests.support.crash_checks import assert_no_half_done_promotion, open_transactions, read_state
from tests.support.processes import spawn_worker
from tests.support.worker import open_store

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = {"sqlite": 60, "postgres": 10}  # the server's run adds start-up time per kill


def _check(path: str, reported: dict[str, Tier]) -> int:
    """Assert the crash invariants; return how many memories the file holds."""
    state = read_state(path)
    assert_no_half_done_promotion(state, tags_per_memory=2)
    for memory_id, tier in reported.items():
        assert memory_id in state.where, f"returned write {memory_id} was lost"
        assert state.where[memory_id][0].rank >= tier.rank, (
            f"returned promotion of {memory_id} lost"
        )
    return len(state.where)


def test_sigkill_at_random_moments_loses_nothing_that_returned(any_location: str) -> None:
    path = any_location
    on_server = is_server_url(path)
    kills = KILLS["postgres" if on_server else "sqlite"]
    rng = random.Random(20261122)
    reported: dict[str, Tier] = {}
    writes_seen = promotions_seen = 0
    for kill in range(kills):
        # Mostly mid-write; now and then during start-up and migration.
        delay = rng.uniform(0.0, 0.25) if kill % 10 == 0 else rng.uniform(0.3, 0.7)
        ready = None if kill % 10 == 0 else "READY"
        worker = spawn_worker("crash", path, str(kill), ready=ready)
        for line in worker.kill(after=delay):
            parts = line.split()
            if parts[0] == "W":
                reported[parts[1]] = Tier(parts[2])
                writes_seen += 1
            elif parts[0] == "P":
                assert reported[parts[1]] is Tier(parts[2])
                reported[parts[1]] = Tier(parts[3])
                promotions_seen += 1
        if on_server:
            assert open_transactions(path) == 0, "the killed client's transaction stayed open"
        held = _check(path, reported)
        assert held >= len(reported)
    print(f"{kills} kills, {writes_seen} returned writes, {promotions_seen} returned promotions")
    assert writes_seen > kills and promotions_seen > kills // 2
    with open_store(path) as store:  # the library itself reopens the crashed store
        stats = store.get_statistics()
        total = stats.scratchpad_count + stats.episodic_count + stats.semantic_count
        assert total >= len(reported)
