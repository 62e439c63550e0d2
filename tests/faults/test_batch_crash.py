"""SIGKILL during remember_many() and during transactions of remember() calls: each batch
is all there or not there at all, every batch whose call returned is there, and the
keyword index is exact (nothing left waiting in ``keyword_dirty``; at the end, searches
score as after a rebuild and PostgreSQL's keyword rows (postings and windows) equal a
rebuild's). On both backends."""

from __future__ import annotations

import random

import pytest

from persistence.locations import is_server_url
from persistence.postgres import PostgresStore, keyword_search
from persistence.sqlite import SQLiteStore
from persistence.storage import MemoryStorage
from tests.engines.postgres.test_pg_index import keyword_rows
from tests.support.backends import keyword_state, rebuilt_keyword_state
from tests.support.crash_checks import (
    batch_index_state,
    open_transactions,
    read_state,
    server_problems,
)
from tests.support.processes import spawn_worker

pytestmark = [pytest.mark.crash, pytest.mark.subprocess, pytest.mark.slow]

KILLS = {"sqlite": 12, "postgres": 4}  # the server's run adds start-up time per kill
BATCH = 40
WORDS = ["turn", "0", "1", "2", "zzz"]


def test_sigkill_during_batches_leaves_whole_batches_and_an_exact_index(
    any_location: str,
) -> None:
    on_server = is_server_url(any_location)
    rng = random.Random(3)
    returned: set[str] = set()
    kills = KILLS["postgres" if on_server else "sqlite"]
    for kill in range(kills):
        lines = spawn_worker("batch", any_location, str(kill)).kill(after=rng.uniform(0.6, 1.4))
        returned.update(line.split()[1] for line in lines if line[:1] in "BT")
        if on_server:
            assert open_transactions(any_location) == 0, "the killed client's transaction stayed"
            assert server_problems(any_location, "keyword_index_matches") == []
        state = read_state(any_location)  # on a file: integrity_check is ok
        sizes, waiting, indexed = batch_index_state(any_location)
        assert all(size == BATCH for size in sizes.values()), sizes
        assert returned <= set(sizes), returned - set(sizes)
        assert waiting == 0
        assert indexed == len(state.where)
        assert all(memory_id in state.scheduled for memory_id in state.where)
    assert len(returned) > kills, "the worker hardly wrote: the test is not exercising it"
    store: MemoryStorage = PostgresStore(any_location) if on_server else SQLiteStore(any_location)
    with store.open():
        assert keyword_state(store, WORDS) == rebuilt_keyword_state(store, WORDS)
        if on_server:  # the rows the triggers kept are the rows a rebuild writes
            kept = keyword_rows(store), _keyword_stats(store)
            with store.transaction() as conn:
                keyword_search.rebuild(conn)
            assert (keyword_rows(store), _keyword_stats(store)) == kept


def _keyword_stats(store: PostgresStore) -> tuple[object, ...] | None:
    with store.engine.reading() as conn:
        row: tuple[object, ...] | None = conn.execute(
            "SELECT sum(n), sum(tokens) FROM tm_kw_stats"
        ).fetchone()
        return row
