"""The keyword search's bound (``keyword_search.bounded``): when ranking every match of
a query would rank more than ``RANK_CAP`` memories, its commonest words are left out of
the ranking (the rarest still find every memory that holds them); when even the rarest
word is in more, it alone is ranked among its newest ``RANK_CAP`` memories. The result
(and recall's explanation) says what was left out, and a file with at most
``RANK_CAP`` memories never takes the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from persistence import KeywordHits, Memory, MemoryFilter, Tier
from persistence.sqlite import SQLiteStore, keyword_search
from tiered_memory import AgentMemoryManager

ROWS = 600
RARE = 120  # rows 0-59 hold "common" and "rare", rows 60-119 only "rare"
CAP = 500  # "rare" (120 rows) fits under CAP, "rare" and "common" (540) together do not
OFTEN = 300  # "often": every other row


def _fill(store: SQLiteStore, agent_id: str | None = None) -> None:
    """``ROWS`` memories (no sessions: no keyword window): every one but rows 60-119
    holds "common", rows 0-119 hold "rare", the even ones "often", none "absent"."""
    for i in range(ROWS):
        words = ["common"] if not RARE // 2 <= i < RARE else []
        words += ["rare"] if i < RARE else []
        words += ["often"] if i % 2 == 0 else []
        text = " ".join([*words, f"filler{i}"])
        store.memories.put_memory(
            Memory.create(text, Tier.EPISODIC, id=f"m{i:03d}", agent_id=agent_id)
        )


@pytest.fixture
def filled(file_store: SQLiteStore) -> SQLiteStore:
    _fill(file_store)
    return file_store


def _search(
    store: SQLiteStore, words: tuple[str, ...], limit: int, cap: int | None,
    where: MemoryFilter | None = None,
) -> KeywordHits:  # fmt: skip
    with store.engine.reading() as conn:
        return keyword_search.keyword_search(
            conn, words, limit, where or MemoryFilter(), 0.5, 0.5, rank_cap=cap
        )


def _bm25(store: SQLiteStore, match: str, limit: int, newest: int | None = None) -> list[object]:
    """The plain bm25 ranking of ``match`` (among its ``newest`` matches)."""
    among = "" if newest is None else (
        " AND memory_fts.rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?1 "
        f"ORDER BY rowid DESC LIMIT {newest})"
    )  # fmt: skip
    with store.engine.reading() as conn:
        return conn.execute(
            "SELECT i.memory_id, bm25(memory_fts, 1.0, 0.5, 0.5) AS s FROM memory_fts "
            "JOIN memory_index AS i ON i.rowid = memory_fts.rowid WHERE memory_fts MATCH ?1"
            f"{among} ORDER BY s, memory_fts.rowid LIMIT {limit}",
            [match],
        ).fetchall()


def test_the_commonest_word_is_left_out(filled: SQLiteStore) -> None:
    cut = _search(filled, ("common", "rare", "absent"), 200, CAP)
    # Every memory holding the rare word, ranked by bm25 over the rare word alone; the
    # 480 holding just the common word were not ranked.
    assert sorted(m for m, _ in cut) == [f"m{i:03d}" for i in range(RARE)]
    assert list(cut) == _bm25(filled, '"rare"', 200)
    assert cut.skipped is not None
    assert "'common'" in cut.skipped and "'rare'" not in cut.skipped
    assert "'absent'" not in cut.skipped and "over 500 memories" in cut.skipped
    # Without the rule (cap above the file) the common word's memories rank as well.
    plain = _search(filled, ("common", "rare", "absent"), 200, 10**9)
    assert plain.skipped is None and len(plain) == 200
    assert list(plain) == _bm25(filled, '"common" OR "rare" OR "absent"', 200)


def test_the_rarest_words_are_kept_while_they_fit(filled: SQLiteStore) -> None:
    """The rare word (120 rows) and "often" (300) fit under 500 together; "common" does not."""
    cut = _search(filled, ("often", "common", "rare"), 600, CAP)
    assert list(cut) == _bm25(filled, '"often" OR "rare"', 600)
    assert cut.skipped is not None and "'common'" in cut.skipped and "'often'" not in cut.skipped
    assert _search(filled, ("often", "rare"), 600, CAP).skipped is None  # 420 rows: all ranked


def test_a_word_in_more_than_the_cap_ranks_among_its_newest(filled: SQLiteStore) -> None:
    """Every word over the cap: the rarest ("often", 300) alone, among its newest 250."""
    cut = _search(filled, ("common", "often"), 100, 250)
    assert list(cut) == _bm25(filled, '"often"', 100, newest=250)
    held = {f"m{i:03d}" for i in range(0, ROWS, 2)}  # the memories holding "often"
    newest = {f"m{i:03d}" for i in range(ROWS - 500, ROWS, 2)}  # the newest 250 of them
    assert {m for m, _ in cut} <= newest < held and len(cut) == 100
    assert cut.skipped is not None
    assert "only 'often' ranked, among the newest 250 memories holding it" in cut.skipped
    # A filter is applied among those newest rows as well.
    tiered = _search(filled, ("common", "often"), 400, 250, MemoryFilter(tier=Tier.EPISODIC))
    assert {m for m, _ in tiered} == newest and tiered.skipped == cut.skipped
    current = _search(filled, ("common", "often"), 100, 250, MemoryFilter(current=True))
    assert list(current) == list(cut)  # nothing superseded: the same rows


def test_a_file_no_larger_than_the_cap_never_takes_the_rule(filled: SQLiteStore) -> None:
    """Every word in every row, and still no rule while the cap is at least the file's
    size: a query cannot match more rows than the file holds."""
    words = ("common", "rare", "filler1", "filler2")
    with filled.engine.reading() as conn:
        for cap in (ROWS, ROWS + 1, keyword_search.RANK_CAP):
            assert keyword_search.bounded(conn, words, cap) is None
        assert keyword_search.bounded(conn, words, ROWS - 1) is not None
        assert keyword_search.bounded(conn, ("rare", "filler1"), 121) is None  # 121 rows fit
    assert keyword_search.RANK_CAP == 20_000  # the figure the CHANGELOG and docs give


def test_recall_explains_the_words_it_left_out(
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
        assert "'common'" in note and "left out" in note
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


def _bounded_search(
    store: SQLiteStore, words: tuple[str, ...], limit: int, cap: int, where: MemoryFilter
) -> KeywordHits:
    with store.engine.reading() as conn:
        return keyword_search.keyword_search(conn, words, limit, where, 0.5, 0.5, rank_cap=cap)


def test_an_agents_recall_still_finds_its_own_memories_when_the_rare_word_is_anothers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(str(path)) as store:
        for i in range(500):
            store.memories.put_memory(
                Memory.create(f"deploy filler{i}", id=f"a{i:03d}", agent_id="ann")
            )
        for i in range(100):
            store.memories.put_memory(
                Memory.create(f"staging other{i}", id=f"b{i:03d}", agent_id="bob")
            )
    monkeypatch.setattr(keyword_search, "RANK_CAP", CAP)
    with AgentMemoryManager.open(path, embedder=None, agent_id="ann") as memory:
        hits = memory.recall("deploy staging", k=5)
    # 'staging' (bob's) is the rare word the bound keeps; ann's filter turns it all away
    assert len(hits) == 5 and all(h.memory.agent_id == "ann" for h in hits)


def test_an_as_of_search_finds_memories_older_than_the_newest_ranked(tmp_path: Path) -> None:
    with SQLiteStore(str(tmp_path / "m.db")) as store:
        for i in range(600):
            store.memories.put_memory(
                Memory.create(f"often common filler{i}", id=f"m{i:03d}", now=1_000_000 + i)
            )
        hits = _bounded_search(store, ("common", "often"), 10, 250, MemoryFilter(as_of=1_000_100))
    assert len(hits) == 10
    assert all(int(memory_id[1:]) <= 100 for memory_id, _ in hits)


def test_a_word_given_twice_is_counted_once(tmp_path: Path) -> None:
    with SQLiteStore(str(tmp_path / "m.db")) as store:
        for i in range(700):
            text = f"alpha filler{i}" if i < 300 else f"other filler{i}"
            store.memories.put_memory(Memory.create(text, id=f"m{i:03d}"))
        hits = _bounded_search(store, ("alpha", "alpha"), 10, CAP, MemoryFilter())
    assert hits.skipped is None  # 300 rows: under the cap, nothing left out
