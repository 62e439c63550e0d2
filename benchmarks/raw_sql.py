"""Raw APSW statements the benchmarks use as floors (the SQL the library must run)."""

from __future__ import annotations

from pathlib import Path

import apsw

from persistence.sqlite.sql import memory_sql

_COLUMNS = ", ".join(memory_sql._COLUMNS)


_PLACES = ", ".join("?" for _ in memory_sql._COLUMNS)


def raw_promote(conn: apsw.Connection, memory_id: str) -> None:
    """Move one row from episodic to semantic and log it, in one transaction.

    Read, delete, then insert, as the library does: the keyword-index triggers give
    every memory one ``memory_index`` row, so the row cannot be in both tiers at once.
    """
    conn.execute("BEGIN IMMEDIATE")
    row = conn.execute(f"SELECT {_COLUMNS} FROM episodic WHERE id = ?", (memory_id,)).fetchone()
    conn.execute("DELETE FROM episodic WHERE id = ?", (memory_id,))
    conn.execute(f"INSERT INTO semantic ({_COLUMNS}) VALUES ({_PLACES})", row)
    conn.execute(
        "INSERT INTO promotion_log (memory_id, from_tier, to_tier, promoted_at) "
        "VALUES (?, 'episodic', 'semantic', 0)",
        (memory_id,),
    )
    conn.execute("COMMIT")


def raw_keyword(conn: apsw.Connection, match: str, limit: int) -> list[tuple[str, float]]:
    """FTS5 bm25 candidates, as the library asks for them."""
    return conn.execute(
        "SELECT i.memory_id, bm25(memory_fts) AS score FROM memory_fts "
        "JOIN memory_index AS i ON i.rowid = memory_fts.rowid WHERE memory_fts MATCH ? "
        "ORDER BY score LIMIT ?",
        (match, limit),
    ).fetchall()


def raw_vec0_knn(conn: apsw.Connection, vector: bytes, k: int) -> list[tuple[str, float]]:
    """sqlite-vec's own bit KNN over the file's ``memory_vec`` table (no re-rank)."""
    return conn.execute(
        "SELECT memory_id, distance FROM memory_vec "
        "WHERE embedding_bits MATCH vec_quantize_binary(?) AND k = ?",
        (vector, k),
    ).fetchall()


def load_sqlite_vec(conn: apsw.Connection) -> None:
    """Load the sqlite-vec extension (a dev/bench dependency since schema 16: the library
    keeps no sqlite-vec table; the raw baselines build their own)."""
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        conn.load_extension(sqlite_vec.loadable_path())
    finally:
        conn.enable_load_extension(False)


def build_raw_vec0(library: Path, target: Path) -> Path:
    """A file beside ``library`` holding raw sqlite-vec's bit index of its vectors (the
    table ``memory_vec`` the library kept before schema 16), for :func:`raw_vec0_knn`
    through :func:`attach_raw_vec0`."""
    conn = apsw.Connection(str(target))
    load_sqlite_vec(conn)
    conn.execute("ATTACH DATABASE ? AS lib", (str(library),))
    row = conn.execute("SELECT value FROM lib.store_meta WHERE key = 'embedding_dim'").fetchone()
    assert row is not None, f"{library} records no embedding dimension"
    dim = int(row[0])
    conn.execute(
        "CREATE VIRTUAL TABLE memory_vec USING vec0(memory_id text primary key, tier text, "
        f"embedding_bits bit[{dim}])"
    )
    with conn:
        for table in memory_sql.TABLE.values():
            conn.execute(
                "INSERT INTO memory_vec (memory_id, tier, embedding_bits) SELECT id, ?, "
                f"vec_quantize_binary(embedding) FROM lib.{table} WHERE embedding IS NOT NULL",
                (table,),
            )
    conn.execute("DETACH DATABASE lib")
    conn.close()
    return target


def attach_raw_vec0(conn: apsw.Connection, vec_file: Path) -> apsw.Connection:
    """Load sqlite-vec into ``conn`` and attach ``vec_file`` (:func:`build_raw_vec0`):
    :func:`raw_vec0_knn` then runs on ``conn``."""
    load_sqlite_vec(conn)
    conn.execute("ATTACH DATABASE ? AS rawvec", (str(vec_file),))
    return conn
