"""The keyword search's common-terms rule (``keyword_search.coordinated``): when a query's
words match more than ``RANK_CAP`` memories, its common words count only in memories
that hold another query word; rare words still find every memory that holds them, the
result (and recall's explanation) says what was left out, and a file with at most
``RANK_CAP`` memories never takes the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence import KeywordHits, Memory, MemoryFilter, Tier
from persistence.sqlite import SQLiteStore, keyword_search
from persistence.sqlite.sql import index_sql
from tiered_memory import AgentMemoryManager

ROWS = 600
RARE = 120  # rows 0-59 hold "common" and "rare", rows 60-119 only "rare"
CAP = 500  # "rare" (120 rows) is under CAP // 4, "common" (540) over CAP


def _fill(store: SQLiteStore, agent_id: str | None = None) -> None:
    """``ROWS`` memories (no sessions: no keyword window): every one but rows 60-119
    holds "common", rows 0-119 hold "rare", none holds "absent"."""
    for i in range(ROWS):
        words = ["common"] if not RARE // 2 <= i < RARE else []
        words += ["rare"] if i < RARE else []
        text = " ".join([*words, f"filler{i}"])
        store.memories.put_memory(
            Memory.create(text, Tier.EPISODIC, id=f"m{i:03d}", agent_id=agent_id)
        )


@pytest.fixture
def filled(file_store: SQLiteStore) -> SQLiteStore:
    _fill(file_store)
    return file_store


def _search(store: SQLiteStore, words: tuple[str, ...], limit: int, cap: int | None) -> KeywordHits:
    with store.engine.reading() as conn:
        return keyword_search.keyword_search(
            conn, words, limit, MemoryFilter(), 0.5, 0.5, rank_cap=cap
        )


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_a_common_word_counts_only_beside_another_word(filled: SQLiteStore) -> None:
    cut = _search(filled, ("common", "rare", "absent"), RARE, CAP)
    # Every memory holding the rare word, and only those: the 480 holding just the
    # common word were not ranked.
    assert sorted(m for m, _ in cut) == [f"m{i:03d}" for i in range(RARE)]
    assert all(score < 0 for _, score in cut)
    assert cut.skipped is not None
    assert "'common'" in cut.skipped and "'rare'" not in cut.skipped
    assert "'absent'" not in cut.skipped and "over 500 memories" in cut.skipped
    # Without the rule (cap above the file) the common word's memories rank as well.
    plain = _search(filled, ("common", "rare", "absent"), 150, 10**9)
    assert plain.skipped is None and len(plain) == 150
    assert any(not (i < RARE) for i in (int(m[1:]) for m, _ in plain))


def test_the_rule_gives_way_when_it_finds_too_few(filled: SQLiteStore) -> None:
    """Asked for more rows than the rule's memories hold: every match is ranked."""
    hits = _search(filled, ("common", "rare"), 200, CAP)
    assert hits.skipped is None and len(hits) == 200
    with filled.engine.reading() as conn:
        expected = conn.execute(
            "SELECT i.memory_id, bm25(memory_fts, 1.0, 0.5, 0.5) AS s FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid WHERE memory_fts MATCH ? "
            "ORDER BY s, memory_fts.rowid LIMIT 200",
            ['"common" OR "rare"'],
        ).fetchall()
    assert list(hits) == expected


def test_a_file_no_larger_than_the_cap_never_takes_the_rule(filled: SQLiteStore) -> None:
    """Every word in every row, and still no rule while the cap is at least the file's
    size: a query cannot match more rows than the file holds."""
    words = ("common", "rare", "filler1", "filler2")
    with filled.engine.reading() as conn:
        for cap in (ROWS, ROWS + 1, keyword_search.RANK_CAP):
            assert keyword_search.coordinated(conn, words, cap) is None
        assert keyword_search.coordinated(conn, words, ROWS - 1) is not None
        assert keyword_search.coordinated(conn, ("common",), 10) is None  # one word: no pairs
        many = tuple(f"filler{i}" for i in range(keyword_search.PAIRED_WORDS)) + ("common",)
        assert keyword_search.coordinated(conn, many, 10) is None  # too many words to pair
    assert keyword_search.RANK_CAP >= 20_000  # the figure the CHANGELOG and README give


def test_word_pairs_is_the_expression_the_docstring_gives() -> None:
    expression = index_sql.word_pairs(["rare", "a", "b"], ["a", "b"])
    assert expression == '"rare" OR ("rare" AND "a") OR ("rare" AND "b") OR ("a" AND "b")'
    assert index_sql.word_pairs(['say"'], ['say"']) == ""  # one word: nothing to pair


def test_recall_explains_the_common_words_it_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        _fill(store)
    with AgentMemoryManager.open(path, embedder=None) as memory:
        before = memory.recall("common rare", k=5)
        assert before and all(not h.explanation.notes for h in before)  # 600 rows < cap
        monkeypatch.setattr(keyword_search, "RANK_CAP", CAP)  # recall asks for 100 rows
        hits = memory.recall("common rare", k=5)
    assert {int(h.memory.id[1:]) for h in hits} <= set(range(RARE))  # all hold "rare"
    for hit in hits:
        (note,) = hit.explanation.notes
        assert "'common'" in note and "another query word" in note
        assert note in str(hit.explanation)


def test_an_agent_scoped_recall_says_so_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent filter passes the keyword search's note on (it wraps the store)."""
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        _fill(store, agent_id="ann")
    monkeypatch.setattr(keyword_search, "RANK_CAP", CAP)
    with AgentMemoryManager.open(path, embedder=None, agent_id="ann") as memory:
        hits = memory.recall("common rare", k=5)
    assert hits and all("'common'" in " ".join(h.explanation.notes) for h in hits)
