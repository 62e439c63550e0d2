"""The storage contract in domain terms, as a second backend must honour it: keyword
search takes words (the FTS5 expression is SQLite's own business), statistics are a size
plus the backend's details, the file operations are a Protocol, and the store says where
its data lives."""

from __future__ import annotations

import pytest

from persistence import InvalidTypeError, Memory, MemoryFilter, Tier
from persistence.sqlite import SQLiteStore
from persistence.sqlite.sql import index_sql
from tiered_memory.recall.settings import keywords

# --- keyword_search takes words --------------------------------------------------------


def _fill(store: SQLiteStore) -> None:
    for n, text in enumerate(
        ("The user prefers dark mode", "Dark chocolate is a favourite", "Mode of transport: bike",
         "Lunch at noon", "dark dark dark mode mode")
    ):  # fmt: skip
        store.put_memory(Memory.create(text, Tier.EPISODIC, id=f"m{n}", session_id=None))


def test_keyword_search_takes_words_and_builds_the_same_fts5_expression(
    store: SQLiteStore,
) -> None:
    _fill(store)
    words = keywords("Does the user like DARK mode?")
    assert words == ("user", "like", "dark", "mode")
    assert index_sql.fts5_match(words) == '"user" OR "like" OR "dark" OR "mode"'
    found = store.keyword_search(words, 10)
    with store.read_connection() as conn:
        expected = index_sql.keyword_search(
            conn, '"user" OR "like" OR "dark" OR "mode"', 10, MemoryFilter(), 0.5, 0.5
        )
    assert found == expected and len(found) == 4  # bit-identical to the old expression
    assert all(score <= 0 for _, score in found)  # the score contract: <= 0, lower is better
    assert [s for _, s in found] == sorted(s for _, s in found)


def test_keyword_search_of_no_words_finds_nothing(store: SQLiteStore) -> None:
    _fill(store)
    assert store.keyword_search([], 10) == []
    assert store.keyword_search((), 10, Tier.EPISODIC, where=MemoryFilter(agent_id="a")) == []


def test_keyword_search_refuses_an_expression_string(store: SQLiteStore) -> None:
    _fill(store)
    with pytest.raises(InvalidTypeError, match="sequence of str"):
        store.keyword_search('"dark" OR "mode"', 10)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        store.keyword_search(["dark", 3], 10)  # type: ignore[list-item]


@pytest.mark.parametrize("word", ['say "hi', "OR", "NEAR(x", "a*", "title:x", "-y"])
def test_a_word_is_never_fts5_syntax(store: SQLiteStore, word: str) -> None:
    store.put_memory(Memory.create(f"plain {word} text", Tier.EPISODIC, id="w", session_id=None))
    assert isinstance(store.keyword_search([word], 5), list)  # no FTS5 syntax error
