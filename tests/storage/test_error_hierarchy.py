"""What callers catch: storage failures (busy, aborted, damaged) are ``StorageError``s with
SQLite's result code; damage found while opening is also an open error, damage found in a
later call is not."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from persistence import (
    CorruptDatabaseError,
    CorruptDatabaseOpenError,
    DatabaseBusyError,
    DatabaseOpenError,
    Memory,
    StorageError,
    TransactionAbortedError,
)
from persistence.sqlite import SQLiteStore
from tiered_memory import AgentMemoryManager

NO_MODEL = {"embedder": None, "extractor": None}


def test_busy_and_aborted_are_storage_errors() -> None:
    for kind in (DatabaseBusyError, TransactionAbortedError, CorruptDatabaseError):
        assert issubclass(kind, StorageError)
    assert issubclass(CorruptDatabaseOpenError, CorruptDatabaseError)
    assert issubclass(CorruptDatabaseOpenError, DatabaseOpenError)
    assert not issubclass(CorruptDatabaseError, DatabaseOpenError)


def test_a_busy_write_is_a_storage_error_with_sqlites_code(db_path: Path) -> None:
    memory = AgentMemoryManager.open(db_path, **NO_MODEL)
    other = apsw.Connection(str(db_path))
    other.execute("PRAGMA busy_timeout = 0")
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with (
            SQLiteStore(db_path, busy_timeout_ms=30) as second,
            pytest.raises(StorageError) as raised,
        ):
            second.put_episodic(Memory.create("waits too long"))
        assert isinstance(raised.value, DatabaseBusyError)
        assert raised.value.result_code is not None
        assert raised.value.result_code & 0xFF == apsw.SQLITE_BUSY
    finally:
        other.execute("ROLLBACK")
        other.close()
        memory.close()


def _damage_a_table_page(path: Path) -> None:
    """Overwrite the middle pages of the file (the memories' b-tree, not the schema)."""
    conn = apsw.Connection(str(path))
    page = int(conn.execute("PRAGMA page_size").fetchall()[0][0])
    pages = int(conn.execute("PRAGMA page_count").fetchall()[0][0])
    conn.close()
    with path.open("r+b") as f:
        for n in range(pages // 2, pages - 1):
            f.seek(n * page)
            f.write(b"\xa5" * page)


def test_damage_found_mid_call_is_not_an_open_error(db_path: Path) -> None:
    with AgentMemoryManager.open(db_path, **NO_MODEL) as memory:
        memory.remember_many([f"memory number {i} about {i * 7} lighthouses" for i in range(3000)])
        memory.maintain()  # checkpointed: everything is in the main file
    _damage_a_table_page(db_path)
    memory = AgentMemoryManager.open(db_path, **NO_MODEL)  # opening reads the schema only
    try:
        with pytest.raises(CorruptDatabaseError) as raised:
            memory.query(limit=10_000)
            memory.recall("lighthouses", k=50)
        assert not isinstance(raised.value, DatabaseOpenError)
        assert isinstance(raised.value, StorageError)
        assert raised.value.result_code is not None
        assert raised.value.result_code & 0xFF in (apsw.SQLITE_CORRUPT, apsw.SQLITE_NOTADB)
    finally:
        memory.close()


def test_damage_found_while_opening_is_both(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        memory.remember("something")
        memory.maintain()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : 2 * page] = b"\xa5" * page  # the schema's second page
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDatabaseOpenError) as raised:
        AgentMemoryManager.open(path, **NO_MODEL)
    assert isinstance(raised.value, DatabaseOpenError | CorruptDatabaseError | StorageError)
    assert raised.value.result_code == apsw.SQLITE_CORRUPT


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_a_busy_postgres_write_carries_its_sqlstate(pg_url: str) -> None:
    import psycopg

    from persistence import PoolSettings

    settings = PoolSettings(lock_timeout_s=0.2)
    with AgentMemoryManager.open(pg_url, pool=settings, **NO_MODEL) as memory:
        held = memory.remember("a row another connection holds")
        with psycopg.connect(pg_url) as other:
            other.execute("SELECT 1 FROM tm_memories WHERE id = %s FOR UPDATE", (held.id,))
            with pytest.raises(StorageError) as raised:
                memory.update(held.id, content="changed meanwhile")
        assert isinstance(raised.value, DatabaseBusyError)
        assert raised.value.sqlstate == "55P03"  # lock_not_available
        assert memory.get(held.id).content == "a row another connection holds"  # type: ignore[union-attr]


def test_an_open_that_fails_after_the_store_opened_leaves_no_connection(tmp_path: Path) -> None:
    """A damaged scratchpad table fails the open after the store's connections exist
    (found by benchmarks/fuzz.py): the error is ours, every connection is closed, and
    the same path opens again once the file is good (a leaked connection made every
    later open of the path in the process fail with a disk I/O error)."""
    path = tmp_path / "scratch.db"
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        for n in range(40):
            memory.remember(f"a note on the scratchpad {n} " + "s" * 200, "scratchpad")
        notes = len(memory.query("scratchpad", limit=None))
        memory.maintain()
    good = path.read_bytes()
    conn = apsw.Connection(str(path))
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'scratchpad'").get
    conn.close()
    page = int.from_bytes(good[16:18], "big")
    damaged = bytearray(good)
    damaged[(root - 1) * page + 8 : root * page] = b"\xa5" * (page - 8)  # its cells
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(bytes(damaged))
    before = apsw.connections()
    with pytest.raises(CorruptDatabaseError):
        AgentMemoryManager.open(path, **NO_MODEL)
    assert apsw.connections() == before
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(good)
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        assert len(memory.query("scratchpad", limit=None)) == notes > 0


def _damage_table(path: Path, table: str) -> None:
    """Overwrite ``table``'s root page with a pattern SQLite reads as damage."""
    conn = apsw.Connection(str(path))
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?", (table,)).get
    conn.close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[(root - 1) * page : root * page] = b"\xa5" * page
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(bytes(data))


def test_damage_found_by_the_stores_last_open_step_leaves_no_connection(tmp_path: Path) -> None:
    """The keyword index's catch-up check reads graph_dirty after the connections are
    made (found by benchmarks/fuzz.py): the error is ours and nothing stays open."""
    path = tmp_path / "graph.db"
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        memory.remember("something")
        memory.maintain()
    _damage_table(path, "graph_dirty")
    before = apsw.connections()
    with pytest.raises(CorruptDatabaseError):
        AgentMemoryManager.open(path, **NO_MODEL)
    assert apsw.connections() == before


def test_a_text_value_that_is_not_utf8_is_damage_not_a_decode_error(tmp_path: Path) -> None:
    """A damaged page can leave bytes that are not UTF-8 in a TEXT column; reading it
    raised Python's UnicodeDecodeError (found by benchmarks/fuzz.py)."""
    path = tmp_path / "text.db"
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        stored = memory.remember("a lighthouse by the sea")
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE episodic SET content = CAST(x'6c69676874686f757365ff' AS TEXT)")
    conn.close()
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        with pytest.raises(CorruptDatabaseError, match="not UTF-8"):
            memory.get(stored.id)
        with pytest.raises(CorruptDatabaseError, match="not UTF-8"):
            memory.query("episodic", limit=None)


def test_a_json_column_that_is_not_json_is_damage_not_a_decode_error(tmp_path: Path) -> None:
    """Damaged bytes in a JSON column (linked memories, a session's agents) raised
    orjson's JSONDecodeError (found by benchmarks/fuzz.py)."""
    path = tmp_path / "json.db"
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        stored = memory.remember("a lighthouse by the sea")
        session = memory.start_session(session_id="s1")
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE episodic SET linked_memories = '[\\x01'")
    conn.execute("UPDATE sessions SET active_agents = '{'")
    conn.close()
    with AgentMemoryManager.open(path, **NO_MODEL) as memory:
        with pytest.raises(CorruptDatabaseError, match="not valid JSON"):
            memory.get(stored.id)
        with pytest.raises(CorruptDatabaseError, match="not valid JSON"):
            memory.query("episodic", limit=None)
        with pytest.raises(CorruptDatabaseError, match="not valid JSON"):
            memory.get_session(session.session_id)
