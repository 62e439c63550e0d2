"""Filtered searches of the vector cells against a brute-force oracle (issue 46): a
narrow filter (a session, a short time range, a small tier) is compared exactly and
answers as the oracle does; a wide one (a tag on a tenth, an agent, half the time range,
a tag and a tier) probes cells by the share that passes and finds nearly all of the
oracle's ten, never a memory the filter turns away."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from persistence import Memory, MemoryFilter, Tier
from persistence.sqlite import (
    SQLiteStore,
    cell_packs,
    cell_scan,
    cell_split,
    cell_sync,
    cell_train,
)
from tests.engines.sqlite.test_cell_vectors import (
    clustered,
    exact,
    nearest,
    problems,
    state,
    unit,
)

COUNT = 2_400
START = 1_700_000_000_000


@dataclass(frozen=True, slots=True)
class Row:
    session: str
    agent: str
    tags: tuple[str, ...]
    created_at: int
    tier: Tier


def row_of(i: int) -> Row:
    tags = tuple(
        tag for tag, held in (("tenth", i % 10 == 0), ("odd", i % 2 == 1), ("third", i % 3 == 0))
        if held
    )  # fmt: skip
    tier = Tier.SEMANTIC if i % 97 == 0 else Tier.EPISODIC
    return Row(f"s{i // 40}", f"a{i % 4}", tags, START + i, tier)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return clustered(np.random.default_rng(46), COUNT)


@pytest.fixture
def store(
    db_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SQLiteStore]:
    """2,400 memories in cells (49 of them, trained from 64 vectors up)."""
    monkeypatch.setattr(cell_sync, "TRAIN_MIN", 64)
    monkeypatch.setattr(cell_sync, "CELLS_FROM", 200)
    opened = SQLiteStore(str(db_path), vector_index="cells").open()
    with opened.transaction():
        for i in range(COUNT):
            row = row_of(i)
            opened.memories.put_memory(
                Memory.create(
                    f"text {i}",
                    row.tier,
                    id=f"m{i:05d}",
                    now=row.created_at,
                    session_id=row.session,
                    agent_id=row.agent,
                    tags=row.tags,
                    embedding=vectors[i],
                )  # fmt: skip
            )
    with opened.engine.exclusive_connection() as conn:
        opened.indexes.vectors.maintain(conn)
    assert state(opened).cells == 49
    yield opened
    opened.close()


def queries(seed: int, vectors: np.ndarray, n: int) -> np.ndarray:
    """Stored vectors with noise (half their norm), normalised."""
    rng = np.random.default_rng(seed)
    noisy = vectors[rng.choice(len(vectors), n, replace=False)] + 0.5 * unit(rng, n)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def oracle(
    vectors: np.ndarray, query: np.ndarray, accepts: Callable[[Row], bool], k: int = 10
) -> list[str]:
    kept = np.array([accepts(row_of(i)) for i in range(COUNT)])
    ids = np.flatnonzero(kept)
    order = np.argsort(-(vectors[ids] @ query), kind="stable")[:k]
    return [f"m{i:05d}" for i in ids[order]]


NARROW = {
    "session": (MemoryFilter(session_id="s7"), lambda r: r.session == "s7"),
    "short time range": (
        MemoryFilter(created_after=START + 1_000, created_before=START + 1_150),
        lambda r: START + 1_000 <= r.created_at < START + 1_150,
    ),
    "small tier": (MemoryFilter(tier=Tier.SEMANTIC), lambda r: r.tier is Tier.SEMANTIC),
    "session and tag": (
        MemoryFilter(session_id="s3", tags=("odd",)),
        lambda r: r.session == "s3" and "odd" in r.tags,
    ),
}
WIDE = {
    "tag on a tenth": (MemoryFilter(tags=("tenth",)), lambda r: "tenth" in r.tags),
    "agent": (MemoryFilter(agent_id="a1"), lambda r: r.agent == "a1"),
    "half the time range": (
        MemoryFilter(created_after=START + 600, created_before=START + 1_800),
        lambda r: START + 600 <= r.created_at < START + 1_800,
    ),
    "two tags": (
        MemoryFilter(tags=("third", "odd")),
        lambda r: {"third", "odd"} <= set(r.tags),
    ),
    "tag and tier": (
        MemoryFilter(tags=("odd",), tier=Tier.EPISODIC),
        lambda r: "odd" in r.tags and r.tier is Tier.EPISODIC,
    ),
    "not by an index": (MemoryFilter(current=True), lambda r: True),
}


@pytest.mark.parametrize("name", list(NARROW))
def test_a_narrow_filter_is_compared_exactly_without_reading_a_cell(
    name: str, store: SQLiteStore, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    where, accepts = NARROW[name]
    read: list[int] = []
    monkeypatch.setattr(cell_scan, "best_codes", lambda *a, **k: read.append(1) or [])
    for query in queries(1, vectors, 8):
        assert nearest(store, query, 10, where=where) == oracle(vectors, query, accepts)
    assert read == []
    assert store.indexes.vectors.last_search == "cells"


@pytest.mark.parametrize("name", list(WIDE))
def test_a_wide_filter_probes_by_its_share_and_finds_the_oracles_ten(
    name: str, store: SQLiteStore, vectors: np.ndarray
) -> None:
    where, accepts = WIDE[name]
    store.indexes.exact_scan_max = 64  # more are accepted: the cells are searched
    allowed = set(oracle(vectors, vectors[0], accepts, COUNT))
    overlap = []
    for query in queries(2, vectors, 12):
        found = nearest(store, query, 10, where=where)
        assert len(found) == 10 and set(found) <= allowed
        overlap.append(len(set(found) & set(oracle(vectors, query, accepts))) / 10)
    assert store.indexes.vectors.last_search == "cells"
    assert np.mean(overlap) >= 0.95


def test_a_filter_that_proves_narrow_is_compared_exactly(
    store: SQLiteStore, vectors: np.ndarray
) -> None:
    """Not index-backed (so not counted first), but the candidates that pass show it
    accepts few: all of them are compared exactly."""
    where = MemoryFilter(tier=Tier.SEMANTIC, current=True)
    store.indexes.exact_scan_max = 64  # the tier holds 25: not listed first (no index)
    for query in queries(3, vectors, 4):
        found = nearest(store, query, 10, where=where)
        assert found == oracle(vectors, query, lambda r: r.tier is Tier.SEMANTIC)


def test_a_wide_search_after_writes_sees_the_new_vectors_and_a_clean_check(
    store: SQLiteStore, vectors: np.ndarray
) -> None:
    """New memories (in tails, not packs) are scored with the packs; the check is clean."""
    rng = np.random.default_rng(4)
    extra = clustered(rng, 50)
    for n, vector in enumerate(extra):
        store.memories.put_memory(
            Memory.create(
                f"new {n}",
                Tier.EPISODIC,
                id=f"n{n:03d}",
                tags=("tenth",),
                embedding=vector,
                now=START + COUNT + n,
            )  # fmt: skip
        )
    assert problems(store) == []
    for n in range(0, 50, 10):
        found = nearest(store, extra[n], 3, where=MemoryFilter(tags=("tenth",)))
        assert found[0] == f"n{n:03d}"


def test_a_file_grown_by_writes_splits_its_cells_and_stays_exact(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past FIRST_TRAIN_MAX no write trains; over-full cells split inside the writes
    (bounded: the cell's own vectors), the check stays clean, and searches (plain and
    filtered) find what exhaustive search finds."""
    monkeypatch.setattr(cell_sync, "TRAIN_MIN", 64)
    monkeypatch.setattr(cell_sync, "FIRST_TRAIN_MAX", 128)
    monkeypatch.setattr(cell_sync, "CELLS_FROM", 200)
    monkeypatch.setattr(cell_sync, "TAIL_MIN", 8)
    monkeypatch.setattr(cell_train, "CELL_SIZE", 64)
    vectors = clustered(np.random.default_rng(7), 1_500)
    ids = [f"g{i:05d}" for i in range(len(vectors))]
    with SQLiteStore(str(db_path), vector_index="cells") as store:
        generations = set()
        for start in range(0, len(vectors), 25):  # a transaction of 25 writes at a time
            with store.transaction():
                for i in range(start, start + 25):
                    store.memories.put_memory(
                        Memory.create(
                            f"t {i}",
                            Tier.EPISODIC,
                            id=ids[i],
                            embedding=vectors[i],
                            tags=("tenth",) if i % 10 == 0 else (),
                        )
                    )
            if start >= 100:  # trained at 64
                generations.add(state(store).generation)
        now = state(store)
        assert now.trained_on <= 128 and now.members == 1_500  # not trained since
        assert now.cells > 10 and len(generations) > 10  # split, write after write
        bound = cell_split.split_above()
        with store.engine.snapshot() as conn:
            sizes = [cell_packs.held(conn, c) for c in range(now.cells)]
        assert min(sizes) > 0 and max(sizes) <= bound + 25
        assert problems(store) == []
        store.indexes.exact_scan_max = 64
        tenth = np.arange(len(vectors)) % 10 == 0
        plain, filtered = [], []
        for query in queries(8, vectors, 12):
            found = nearest(store, query, 10)
            plain.append(len(set(found) & set(exact(ids, vectors, query, 10))) / 10)
            found = nearest(store, query, 10, where=MemoryFilter(tags=("tenth",)))
            truth = exact([i for i, t in zip(ids, tenth, strict=True) if t], vectors[tenth],
                          query, 10)  # fmt: skip
            filtered.append(len(set(found) & set(truth)) / 10)
        assert store.indexes.vectors.last_search == "cells"
        assert np.mean(plain) >= 0.95 and np.mean(filtered) >= 0.95


def test_a_filtered_search_keeps_the_backlog_a_ram_handle_wrote(
    store: SQLiteStore, vectors: np.ndarray, db_path: Path
) -> None:
    """The backlog (vectors the cells do not hold yet) is compared besides the ranked
    codes: the cut to as many as without a filter keeps it."""
    query = vectors[5]
    with SQLiteStore(str(db_path)) as ram:  # the RAM copy's handle does not sync the cells
        ram.memories.put_memory(Memory.create(
            "new", Tier.EPISODIC, id="new", tags=("tenth",), embedding=query,
            now=START + COUNT))  # fmt: skip
    store.indexes.exact_scan_max = 64
    found = nearest(store, query, 10, where=MemoryFilter(tags=("tenth",)))
    assert store.indexes.vectors.last_search == "cells"
    assert found[0] == "new"


@pytest.mark.parametrize("index", ["cells", "ram"])
def test_a_filtered_search_inside_a_transaction_finds_its_own_nearest_write(
    store: SQLiteStore, vectors: np.ndarray, db_path: Path, index: str
) -> None:
    query = vectors[5]
    handle = store if index == "cells" else SQLiteStore(str(db_path)).open()
    try:
        nearest(handle, query, 1)  # loaded
        handle.indexes.exact_scan_max = 64
        with handle.transaction():
            handle.memories.put_memory(Memory.create(
                "new", Tier.EPISODIC, id="new", tags=("tenth",), embedding=query,
                now=START + COUNT))  # fmt: skip
            found = nearest(handle, query, 10, where=MemoryFilter(tags=("tenth",)))
            assert found[0] == "new"
    finally:
        if handle is not store:
            handle.close()
