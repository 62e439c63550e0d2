"""Forget means forgotten: the settings that leave no byte of deleted content behind.

SQLite keeps a deleted row's bytes in the page's free space and in free pages until they
are reused, and FTS5 keeps a deleted document's terms in its index segments until they
are merged. Three measures remove them as the delete commits:

- ``PRAGMA secure_delete = ON`` on every read-write connection: SQLite overwrites
  deleted cells and freed pages with zeros (the WAL holds the zeroed pages; the close
  checkpoints and truncates it, :func:`truncate_wal`).
- FTS5's ``secure-delete`` option on every full-text table: a delete removes the
  document's entries from the segments instead of adding a tombstone. It is stored in
  the table's config, so it is set once per file (an older file gets it at its first
  writable open, with one ``optimize`` that drops the terms its earlier deletes left).
- Temporary triggers on the writer that drop the embedding cache's entry of a deleted
  or rewritten memory's content (the cache is keyed by the content's SHA-256).

A memory's vector lives only in its tier row and its code row (``vector_codes``), both
plain tables that secure delete covers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import apsw

from persistence.records import content_hash

logger = logging.getLogger("tiered_memory")

FTS_TABLES = ("memory_fts", "entity_fts")
MEMORY_TABLES = ("scratchpad", "episodic", "semantic")
HASH_FUNCTION = "tm_content_hash"


@contextmanager
def _transaction(conn: apsw.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception (statements, not
    ``with conn``: the SQL tracer sees every statement as a cursor's)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def connection_secure_delete(conn: apsw.Connection) -> None:
    """Zero deleted content in this connection's writes (a per-connection pragma)."""
    conn.pragma("secure_delete", "ON")
    conn.create_scalar_function(HASH_FUNCTION, _hash, 1, deterministic=True)


def _hash(*args: Any) -> Any:
    """SQL ``tm_content_hash(text)``: the embedding cache's key of ``text``."""
    return content_hash(args[0]) if isinstance(args[0], str) else None


def _tables(conn: apsw.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM main.sqlite_schema")}


def fts_secure_delete(conn: apsw.Connection) -> list[str]:
    """Turn on FTS5 ``secure-delete`` for each full-text table that lacks it (one
    transaction; an ``optimize`` drops what earlier deletes left). The tables changed."""
    tables = _tables(conn)
    changed = []
    for table in FTS_TABLES:
        if table not in tables:
            continue
        row = conn.execute(
            f"SELECT v FROM main.{table}_config WHERE k = 'secure-delete'"
        ).fetchone()
        if row is not None and int(row[0]) == 1:
            continue
        changed.append(table)
    if changed:
        with _transaction(conn):
            for table in changed:
                conn.execute(
                    f"INSERT INTO main.{table} ({table}, rank) VALUES ('secure-delete', 1)"
                )
                conn.execute(f"INSERT INTO main.{table} ({table}) VALUES ('optimize')")
        logger.info("FTS5 secure-delete turned on for %s", ", ".join(changed))
    return changed


def cache_erasure_triggers(conn: apsw.Connection) -> None:
    """On this connection, drop the cached embedding of content that is deleted or
    rewritten (temporary triggers: they live as long as the connection)."""
    tables = _tables(conn)
    if "embedding_cache" not in tables:
        return
    drop = (  # every model's row: the models found by a skip-scan of the primary key
        "DELETE FROM main.embedding_cache WHERE model_id IN (WITH RECURSIVE m(id) AS ("
        "SELECT min(model_id) FROM main.embedding_cache UNION ALL SELECT (SELECT "
        "min(model_id) FROM main.embedding_cache WHERE model_id > m.id) FROM m "
        "WHERE m.id IS NOT NULL) SELECT id FROM m WHERE id IS NOT NULL) "
        f"AND content_hash = {HASH_FUNCTION}(OLD.content)"
    )
    for table in MEMORY_TABLES:
        if table not in tables:
            continue
        conn.execute(
            f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_forget_cache AFTER DELETE ON main.{table} "
            f"BEGIN {drop}; END"
        )
        conn.execute(
            f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_rewrite_cache "
            f"AFTER UPDATE OF content ON main.{table} WHEN OLD.content IS NOT NEW.content "
            f"BEGIN {drop}; END"
        )


PENDING_KEY = "erasure_pending"
"""``store_meta`` key set (in the deleting transaction) when a memory's keyword rows were
deleted: ``memory_fts`` is contentless, so FTS5 can only mark its rows deleted (the
``secure-delete`` option needs the original text); their terms stay in the segments
until :func:`erase_pending` merges them away (at close, or at the next writable open
after a crash)."""


def pending_triggers(conn: apsw.Connection) -> None:
    """On this connection, note :data:`PENDING_KEY` when a memory is deleted or its
    content rewritten (temporary triggers, like :func:`cache_erasure_triggers`)."""
    tables = _tables(conn)
    if "store_meta" not in tables:
        return
    note = (
        f"INSERT INTO main.store_meta (key, value) VALUES ('{PENDING_KEY}', '1') "
        "ON CONFLICT (key) DO NOTHING"
    )
    for table in MEMORY_TABLES:
        if table not in tables:
            continue
        conn.execute(
            f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_forget_pending AFTER DELETE ON "
            f"main.{table} BEGIN {note}; END"
        )
        conn.execute(
            f"CREATE TEMP TRIGGER IF NOT EXISTS {table}_rewrite_pending "
            f"AFTER UPDATE OF content ON main.{table} WHEN OLD.content IS NOT NEW.content "
            f"BEGIN {note}; END"
        )


def erase_pending(conn: apsw.Connection) -> bool:
    """If deletes left terms behind (:data:`PENDING_KEY`), rewrite the keyword index
    into one segment without them and clear the flag, in one transaction (a failure
    leaves the flag for the next try). True if it ran. Never waits for another writer."""
    tables = _tables(conn)
    if "store_meta" not in tables or "memory_fts" not in tables:
        return False
    row = conn.execute("SELECT 1 FROM main.store_meta WHERE key = ?", (PENDING_KEY,)).fetchone()
    if row is None:
        return False
    with _transaction(conn):
        conn.execute("INSERT INTO main.memory_fts (memory_fts) VALUES ('optimize')")
        conn.execute("DELETE FROM main.store_meta WHERE key = ?", (PENDING_KEY,))
    return True


def erase_at_close(conn: apsw.Connection) -> None:
    """:func:`erase_pending`, then :func:`truncate_wal`: what a writable close does. A
    busy or full file is logged and left for the next close or open."""
    try:
        erase_pending(conn)
    except (apsw.BusyError, apsw.LockedError, apsw.IOError, apsw.FullError) as exc:
        logger.warning("keyword index erasure left for the next open: %s", exc)
    truncate_wal(conn)


def truncate_wal(conn: apsw.Connection) -> None:
    """Copy the WAL into the file and truncate it to zero bytes, if no other connection
    is in the way (never waits: a busy file keeps its WAL until its last close)."""
    conn.set_busy_timeout(0)
    try:
        conn.pragma("wal_checkpoint", "TRUNCATE")
    except (apsw.BusyError, apsw.LockedError, apsw.IOError, apsw.FullError) as exc:
        logger.debug("closing checkpoint skipped: %s", exc)
