"""SIGKILL during remember, promote and decay, through AgentMemoryManager.

After each kill: integrity is ok; every returned ``remember`` is present or was forgotten
by decay with an audit row; every returned promotion to semantic is there (semantic is
not decayed); no promotion, remember or forget is half done.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from persistence import Tier
from tests.crash_checks import assert_no_half_done_promotion, read_state
from tests.processes import spawn_worker
from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = 25


def test_sigkill_during_remember_promote_and_decay(tmp_path: Path) -> None:
    path = tmp_path / "manager-crash.db"
    rng = random.Random(11)
    written: set[str] = set()
    promoted: set[str] = set()
    decays = 0
    for kill in range(KILLS):
        worker = spawn_worker("manager-crash", str(path), str(kill))
        for line in worker.kill(after=rng.uniform(0.4, 0.9)):
            kind, *rest = line.split()
            if kind == "W":
                written.add(rest[0])
            elif kind == "P":
                promoted.add(rest[0])
            elif kind == "D":
                decays += 1
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
    print(f"{KILLS} kills: {len(written)} remembered, {len(promoted)} promoted, {decays} decays")
    assert len(written) > KILLS and promoted and decays > KILLS
    assert state.forgotten, "decay never forgot anything: the test is not exercising it"
    with AgentMemoryManager.open(path) as memory:
        # >=: a kill between COMMIT and the "P" line leaves a promotion nobody reported.
        assert memory.statistics().tier_counts[Tier.SEMANTIC] >= len(promoted)
