"""SIGKILL during remember_many() and during transactions of remember() calls: each batch
is all there or not there at all, every batch whose call returned is there, and the
keyword index is exact (nothing left waiting in ``keyword_dirty``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from persistence.sqlite import SQLiteStore
from tests.crash_checks import read_state
from tests.data_checks import open_raw
from tests.processes import spawn_worker
from tests.test_keyword_context import rebuilt_scores_and_size, scores_and_size

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = 12
BATCH = 40


def test_sigkill_during_batches_leaves_whole_batches_and_an_exact_index(tmp_path: Path) -> None:
    path = tmp_path / "batch-crash.db"
    rng = random.Random(3)
    returned: set[str] = set()
    for kill in range(KILLS):
        lines = spawn_worker("batch", str(path), str(kill)).kill(after=rng.uniform(0.6, 1.4))
        returned.update(line.split()[1] for line in lines if line[:1] in "BT")
        state = read_state(path)  # integrity_check is ok
        conn = open_raw(path)
        try:
            sizes = dict(
                conn.execute(
                    "SELECT tag, count(*) FROM memory_tags WHERE tag <> 'batch' GROUP BY tag"
                )
            )
            (waiting,) = conn.execute("SELECT count(*) FROM keyword_dirty").fetchone()
            (indexed,) = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()
        finally:
            conn.close()
        assert all(size == BATCH for size in sizes.values()), sizes
        assert returned <= set(sizes), returned - set(sizes)
        assert waiting == 0
        assert indexed == len(state.where)
        assert all(memory_id in state.scheduled for memory_id in state.where)
    assert len(returned) > KILLS, "the worker hardly wrote: the test is not exercising it"
    with SQLiteStore(path) as store:
        words = ["turn", "0", "1", "2", "zzz"]
        assert scores_and_size(store, words) == rebuilt_scores_and_size(store, words)
