"""Listing a LangGraph store's namespaces from the counts of its namespace tags: the
counts follow every way an item comes and goes (puts, deletes, forget, TTL sweeps,
rollbacks), stay per agent, and older files and databases get them when opened."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import apsw
import psycopg
import pytest

from tiered_memory import AgentMemoryManager
from tiered_memory.integrations.langgraph import TieredMemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 1
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += round(minutes * 60_000)


def recounted(memory: AgentMemoryManager) -> dict[str, int]:
    """The namespace tags' counts worked out from every memory's tags."""
    every = memory.query(None, limit=None)
    return dict(Counter(tag for m in every for tag in m.tags if ":ns:" in tag))


def fill(store: TieredMemoryStore) -> None:
    store.put(("users", "ann", "notes"), "n1", {"t": "a"})
    store.put(("users", "ann", "notes"), "n2", {"t": "b"})
    store.put(("users", "bob"), "p", {"t": "c"})
    store.put(("docs",), "d", {"t": "d"})


ALL = [("docs",), ("users", "ann", "notes"), ("users", "bob")]


def test_listing_follows_puts_deletes_forget_sweeps_and_rollbacks(any_store: str) -> None:
    clock = Clock()
    with TieredMemoryStore.open(any_store, embedder=None, clock=clock) as store:
        memory = store.memory
        fill(store)
        store.put(("tmp", "x"), "t", {"t": "e"}, ttl=1)
        store.put(("mix",), "short", {"t": "f"}, ttl=1)
        store.put(("mix",), "long", {"t": "g"})
        assert store.list_namespaces() == sorted([*ALL, ("mix",), ("tmp", "x")])
        users = [("users", "ann", "notes"), ("users", "bob")]
        assert store.list_namespaces(prefix=("users",)) == users
        assert store.list_namespaces(prefix=("users", "*", "notes")) == users[:1]
        assert store.list_namespaces(prefix=("user",)) == []  # labels, not characters
        assert store.list_namespaces(prefix=("users",), max_depth=2) == [("users", "ann"), users[1]]
        assert store.list_namespaces(suffix=("notes",)) == users[:1]
        assert store.list_namespaces(max_depth=1, limit=2, offset=1) == [("mix",), ("tmp",)]
        assert memory.tag_counts() == recounted(memory)
        assert memory.tag_counts("langgraph:ns:users") == {
            "langgraph:ns:users": 3, "langgraph:ns:users.ann": 2,
            "langgraph:ns:users.ann.notes": 2, "langgraph:ns:users.bob": 1,
        }  # fmt: skip

        store.delete(("users", "ann", "notes"), "n1")  # one of two: still listed
        assert ("users", "ann", "notes") in store.list_namespaces()
        store.delete(("users", "ann", "notes"), "n2")
        bob = memory.query(None, tags=("langgraph:ns:users.bob",))
        assert memory.forget(bob[0].id)  # straight through the manager
        assert store.list_namespaces(prefix=("users",)) == []

        with pytest.raises(RuntimeError), memory.transaction():
            store.put(("new",), "k", {"t": "h"})
            raise RuntimeError("rolled back")
        assert ("new",) not in store.list_namespaces()
        assert memory.tag_counts() == recounted(memory)

        clock.advance(2)  # both TTL items expired, not swept yet
        assert store.list_namespaces() == [("docs",), ("mix",)]
        assert store.sweep_ttl() == 2
        assert store.list_namespaces() == [("docs",), ("mix",)]
        assert memory.tag_counts("langgraph-ttl:") == {}
        assert memory.tag_counts() == recounted(memory)


def test_each_agent_counts_its_own_namespaces(any_location: str) -> None:
    with (
        AgentMemoryManager.open(any_location, embedder=None) as whole,
        AgentMemoryManager.open(any_location, agent_id="ann", embedder=None) as ann,
        AgentMemoryManager.open(any_location, agent_id="bob", embedder=None) as bob,
    ):
        TieredMemoryStore(ann).put(("ann", "notes"), "k", {"t": "a"})
        TieredMemoryStore(bob).put(("bob",), "k", {"t": "b"})
        TieredMemoryStore(bob).put(("shared",), "k", {"t": "c"})
        assert TieredMemoryStore(ann).list_namespaces() == [("ann", "notes")]
        assert TieredMemoryStore(bob).list_namespaces() == [("bob",), ("shared",)]
        everyone = [("ann", "notes"), ("bob",), ("shared",)]
        assert TieredMemoryStore(whole).list_namespaces() == everyone
        assert ann.tag_counts() == recounted(ann) and bob.tag_counts() == recounted(bob)
        assert whole.tag_counts() == recounted(whole)


def test_a_file_from_before_the_counts_gets_them_when_opened(tmp_path: Path) -> None:
    """Version 14 fills the counts from the tags already in the file (a migration; no
    rebuild at open time after it)."""
    db = str(tmp_path / "old.db")
    with TieredMemoryStore.open(db, embedder=None) as store:
        fill(store)
    conn = apsw.Connection(db)  # back to version 13: the same rows, no counts
    later = [  # what versions after 14 made, so the file is a plain version 13
        f"DROP TRIGGER {tier}_vector_code_{event}"
        for tier in ("scratchpad", "episodic", "semantic")
        for event in ("delete", "update")
    ] + ["DROP TABLE vector_codes", "DROP TABLE vector_fit", "DROP TABLE vector_code_packs"]
    conn.execute(
        "BEGIN; DROP TRIGGER memory_tags_count_insert; DROP TRIGGER memory_tags_count_delete; "
        f"DROP TABLE tag_counts; {'; '.join(later)}; "
        "DELETE FROM schema_version WHERE version >= 14; COMMIT"
    )
    conn.close()
    with TieredMemoryStore.open(db, embedder=None) as store:
        assert store.list_namespaces() == ALL
        assert store.memory.tag_counts() == recounted(store.memory) != {}
        store.delete(("docs",), "d")  # and the triggers keep them from there
        assert store.list_namespaces() == ALL[1:]


def test_a_database_from_before_the_counts_gets_them_when_opened(pg_url: str) -> None:
    """PostgreSQL's version 10 fills the counts from the tags already there."""
    with TieredMemoryStore.open(pg_url, embedder=None) as store:
        fill(store)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to version 9
        conn.execute("DROP TABLE tm_tag_counts")
        conn.execute("DROP FUNCTION tm_tag_counts_follow() CASCADE")
        conn.execute("DELETE FROM tm_schema_version WHERE version >= 10")  # 11 runs again
    with TieredMemoryStore.open(pg_url, embedder=None) as store:
        assert store.list_namespaces() == ALL
        assert store.memory.tag_counts() == recounted(store.memory) != {}
        store.delete(("docs",), "d")
        assert store.list_namespaces() == ALL[1:]
