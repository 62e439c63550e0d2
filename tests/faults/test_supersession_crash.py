"""SIGKILL in the middle of superseding writes (``remember(..., supersedes=)``): each is
all or nothing. A new memory that names (in its metadata) the memory it superseded is
there only with that memory marked ``superseded_by`` it, and a memory marked superseded
names a successor that is there. On a file and on PostgreSQL."""

from __future__ import annotations

import random

import pytest

from persistence.locations import is_server_url
from tests.support.crash_checks import open_transactions
from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = {"sqlite": 12, "postgres": 5}


def test_sigkill_during_superseding_writes(any_location: str) -> None:
    on_server = is_server_url(any_location)
    kills = KILLS["postgres" if on_server else "sqlite"]
    rng = random.Random(43)
    reported: list[tuple[str, str]] = []
    for kill in range(kills):
        worker = spawn_worker("supersede-crash", any_location, str(kill))
        for line in worker.kill(after=rng.uniform(0.2, 0.6)):
            kind, *rest = line.split()
            if kind == "S":
                reported.append((rest[0], rest[1]))
        if on_server:
            assert open_transactions(any_location) == 0
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        everything = {m.id: m for m in memory.query(limit=None, include_superseded=True)}
        assert memory.check_integrity().ok
    for new, old in reported:  # returned: durable, both halves
        assert everything[old].superseded_by == new and new in everything
    chained = 0
    for found in everything.values():
        named = found.metadata.get("supersedes")
        if named is not None:  # the new half landed: so did the mark on the old one
            chained += 1
            assert everything[named].superseded_by == found.id, f"{named} not marked"
            assert everything[named].valid_to == found.created_at
        if found.superseded_by is not None:  # the mark landed: so did its successor
            successor = everything[found.superseded_by]
            assert successor.metadata.get("supersedes") == found.id
    current = [m for m in everything.values() if m.current]
    assert len(current) == kills  # one live end of each chain
    print(f"{kills} kills: {len(reported)} reported, {chained} superseding writes")
    assert len(reported) > kills
