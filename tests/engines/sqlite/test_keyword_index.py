"""persistence/sqlite/keyword_index.py: where the idle merges' pause comes from, and
which stores merge in the background at all."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from persistence import InvalidInputError, Memory
from persistence.sqlite import SQLiteStore
from persistence.sqlite.keyword_index import IDLE_ENV, IDLE_S, idle_seconds


def _mergers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tiered-memory keyword merger")]


def test_the_pause_is_the_parameter_else_the_variable_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert idle_seconds(0.2) == 0.2
    monkeypatch.setenv(IDLE_ENV, "1.5")
    assert idle_seconds(None) == 1.5 and idle_seconds(0.2) == 0.2
    monkeypatch.delenv(IDLE_ENV)
    assert idle_seconds(None) == IDLE_S
    monkeypatch.setenv(IDLE_ENV, "soon")
    with pytest.raises(InvalidInputError, match=IDLE_ENV):
        idle_seconds(None)
    with pytest.raises(InvalidInputError, match="positive"):
        idle_seconds(0.0)


def test_this_test_process_merges_only_after_an_hour(db_path: Path) -> None:
    """The suite's own setting (tests/conftest.py), read as each store is constructed."""
    with SQLiteStore(db_path) as store:
        assert store.keywords.merger.idle_s == 3600.0
    with SQLiteStore(db_path, idle_merge_s=0.5) as store:
        assert store.keywords.merger.idle_s == 0.5


def test_only_a_writable_file_merges_in_the_background(db_path: Path) -> None:
    before = len(_mergers())
    with SQLiteStore(db_path) as store:
        assert store.keywords.merger.running and len(_mergers()) == before + 1
        store.put_episodic(Memory.create("one"))
    assert len(_mergers()) == before
    with SQLiteStore(db_path, read_only=True) as reader:
        assert not reader.keywords.merger.running and len(_mergers()) == before
    with SQLiteStore(":memory:") as in_memory:
        in_memory.put_episodic(Memory.create("one"))
        assert not in_memory.keywords.merger.running and len(_mergers()) == before
