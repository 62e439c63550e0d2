"""The connection policy: pragmas, sqlite-vec, file modes, and refusing bad files."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import apsw
import pytest

from persistence import (
    ForeignDatabaseError,
    MissingDirectoryError,
    NotADatabaseError,
    StoreClosedError,
)
from persistence.errors import InvalidInputError
from persistence.sqlite import SQLiteStore
from persistence.sqlite.connection import ConnectionOptions, connect
from tests.conftest import file_digest


def _pragmas(conn: apsw.Connection) -> dict[str, object]:
    return {
        name: conn.pragma(name)
        for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
    } | {"wal_autocheckpoint": conn.pragma("wal_autocheckpoint")}


def test_writer_and_reader_connections_get_the_policy(file_store: SQLiteStore) -> None:
    with file_store.transaction() as writer:
        assert _pragmas(writer) == {
            "journal_mode": "wal",
            "synchronous": 1,
            "busy_timeout": 0,  # SteadyBusyWait waits the 5 s instead (test_busy_wait.py)
            "foreign_keys": 1,
            "wal_autocheckpoint": 0,  # the checkpointer's WAL hook replaces SQLite's
        }
        assert writer.pragma("cache_size") == -32768
    checkpointer = file_store.engine.background.checkpointer
    assert checkpointer is not None and checkpointer.pages == 1000 and checkpointer.running
    with file_store.engine.reading() as reader:
        assert reader is not file_store._writer
        assert _pragmas(reader)["synchronous"] == 1
        assert _pragmas(reader)["foreign_keys"] == 1


def test_synchronous_full_is_an_option(db_path: Path) -> None:
    with SQLiteStore(db_path, synchronous="FULL") as store, store.transaction() as conn:
        assert conn.pragma("synchronous") == 2


def test_bad_synchronous_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="synchronous"):
        ConnectionOptions(synchronous="OFF")  # type: ignore[arg-type]


def test_no_extension_is_loaded_into_a_connection(db_path: Path) -> None:
    """Since schema 16 the library keeps no sqlite-vec table: no connection loads it."""
    conn = connect(str(db_path), ConnectionOptions())
    with pytest.raises(apsw.SQLError, match="no such function"):
        conn.execute("SELECT vec_distance_l2('[0, 0]', '[3, 4]')").fetchone()
    conn.close()


def test_new_files_are_private(db_path: Path) -> None:
    with SQLiteStore(db_path):
        names = [db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")]
        for path in names:
            assert path.exists(), path
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_missing_directory_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "agent.db"
    with pytest.raises(MissingDirectoryError, match="does not exist"):
        SQLiteStore(target).open()
    assert not (tmp_path / "nope").exists()
    assert list(tmp_path.iterdir()) == []


def test_non_database_file_is_refused_untouched(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_bytes(b"these are my notes, not a database\n" * 200)
    before = file_digest(target)
    with pytest.raises(NotADatabaseError, match="not a SQLite database"):
        SQLiteStore(target).open()
    assert file_digest(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_damaged_header_beyond_the_magic_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "bad.db"
    target.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    before = file_digest(target)
    with pytest.raises(NotADatabaseError):
        SQLiteStore(target).open()
    assert file_digest(target) == before


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotADatabaseError, match="directory"):
        SQLiteStore(tmp_path).open()


def test_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    target = tmp_path / "other.db"
    with sqlite3.connect(target) as other:
        other.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        other.execute("INSERT INTO invoices (total) VALUES (9.5)")
    other.close()
    before = file_digest(target)
    with pytest.raises(ForeignDatabaseError, match="invoices"):
        SQLiteStore(target).open()
    assert file_digest(target) == before


def test_empty_file_becomes_a_new_store(tmp_path: Path) -> None:
    target = tmp_path / "empty.db"
    target.touch()
    with SQLiteStore(target) as store:
        assert store.schema_version >= 1


def test_wrong_path_type_is_refused() -> None:
    with pytest.raises(TypeError, match="path"):
        SQLiteStore(42)  # type: ignore[arg-type]


def test_closed_store_raises_and_close_twice_is_harmless(db_path: Path) -> None:
    store = SQLiteStore(db_path).open()
    store.close()
    store.close()
    with pytest.raises(StoreClosedError, match="closed"):
        store.get_episodic("x")
    with pytest.raises(StoreClosedError, match="not open"):
        SQLiteStore(db_path).get_all_scratchpad()


def test_reopen_after_close(db_path: Path) -> None:
    store = SQLiteStore(db_path).open()
    store.close()
    store.open()
    assert store.get_all_scratchpad() == []
    store.close()
