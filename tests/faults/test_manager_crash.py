"""SIGKILL during remember, promote and decay, through AgentMemoryManager.

After each kill: integrity is ok; every returned ``remember`` is present or was forgotten
by decay with an audit row; every returned promotion to semantic is there (semantic is
not decayed); no promotion, remember or forget is half done. On both backends (a file,
a PostgreSQL database: there the killed client's open transaction is rolled back by the
server, and nothing is left holding the agent's writer lock).
"""

from __future__ import annotations

import random

import pytest

from persistence import Tier
from persistence.locations import is_server_url
from tests.support.crash_checks import assert_no_half_done_promotion, open_transactions, read_state
from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = {"sqlite": 25, "postgres": 8}  # the server's run adds start-up time per kill


def test_sigkill_during_remember_promote_and_decay(any_location: str) -> None:
    on_server = is_server_url(any_location)
    path = any_location
    kills = KILLS["postgres" if on_server else "sqlite"]
    rng = random.Random(11)
    written: set[str] = set()
    promoted: set[str] = set()
    decays = 0
    for kill in range(kills):
        worker = spawn_worker("manager-crash", path, str(kill))
        for line in worker.kill(after=rng.uniform(0.4, 0.9)):
            kind, *rest = line.split()
            if kind == "W":
                written.add(rest[0])
            elif kind == "P":
                promoted.add(rest[0])
            elif kind == "D":
                decays += 1
        if on_server:
            assert open_transactions(path) == 0, "the killed client's transaction stayed open"
        state = read_state(path)
        assert_no_half_done_promotion(state, tags_per_memory=2)
        for memory_id in written:
            assert memory_id in state.where or memory_id in state.forgotten, f"{memory_id} lost"
        for memory_id in promoted:
            assert state.where.get(memory_id) == [Tier.SEMANTIC], f"promotion of {memory_id} lost"
        for memory_id in state.where:
            assert memory_id in state.scheduled, f"{memory_id} was remembered without a schedule"
        for memory_id in state.forgotten:
            assert memory_id not in state.where, f"{memory_id} is both forgotten and present"
            assert memory_id not in state.scheduled and memory_id not in state.tag_counts
    print(f"{kills} kills: {len(written)} remembered, {len(promoted)} promoted, {decays} decays")
    assert len(written) > kills and promoted and decays > kills
    assert state.forgotten, "decay never forgot anything: the test is not exercising it"
    with AgentMemoryManager.open(path) as memory:
        # >=: a kill between COMMIT and the "P" line leaves a promotion nobody reported.
        assert memory.statistics().tier_counts[Tier.SEMANTIC] >= len(promoted)
