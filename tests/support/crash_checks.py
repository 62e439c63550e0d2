"""Invariants a store must keep after any crash, shared by the crash-recovery tests: the
state of a file (read with APSW) or of a PostgreSQL database (read with psycopg)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from persistence import Tier
from persistence.locations import is_server_url
from tests.support.data_checks import open_raw


@dataclass
class FileState:
    """What a crashed file holds, read with a plain APSW connection."""

    where: dict[str, list[Tier]] = field(default_factory=dict)
    origin: dict[str, Tier] = field(default_factory=dict)
    log: dict[str, list[tuple[Tier, Tier]]] = field(default_factory=dict)
    tag_counts: dict[str, int] = field(default_factory=dict)
    scheduled: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)


def read_state(path: Path | str) -> FileState:
    """Check ``integrity_check`` and read every memory's tier, log, tags and schedule.

    A file killed before its first migration committed has no tables yet: that reads as
    empty, which the callers' checks of reported writes then judge.
    """
    if isinstance(path, str) and is_server_url(path):
        return read_server_state(path)
    path = Path(path)
    state = FileState()
    if not path.exists():
        return state
    conn = open_raw(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if "promotion_log" not in tables:
            return state
        for tier in Tier:
            for memory_id, metadata in conn.execute(f"SELECT id, metadata FROM {tier.value}"):
                state.where.setdefault(memory_id, []).append(tier)
                state.origin[memory_id] = Tier(orjson.loads(metadata)["origin"])
        for memory_id, src, dst in conn.execute(
            "SELECT memory_id, from_tier, to_tier FROM promotion_log ORDER BY id"
        ):
            state.log.setdefault(memory_id, []).append((Tier(src), Tier(dst)))
        state.tag_counts = dict(
            conn.execute("SELECT memory_id, count(*) FROM memory_tags GROUP BY memory_id")
        )
        state.scheduled = {r[0] for r in conn.execute("SELECT memory_id FROM repetition_schedules")}
        if "forgetting_log" in tables:
            state.forgotten = {r[0] for r in conn.execute("SELECT memory_id FROM forgetting_log")}
        return state
    finally:
        conn.close()


def read_server_state(url: str) -> FileState:
    """:func:`read_state` of a PostgreSQL database (a fresh connection of its own: only
    committed rows). A database killed before its first migration committed reads empty."""
    import psycopg

    state = FileState()
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('tm_promotion_log')").fetchone() == (None,):
            return state
        with conn.transaction():  # one snapshot (REPEATABLE READ) for every table
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            for memory_id, tier, metadata, tags in conn.execute(
                "SELECT id, tier, metadata, cardinality(tags) FROM tm_memories"
            ):
                state.where.setdefault(memory_id, []).append(Tier(tier))
                state.origin[memory_id] = Tier(orjson.loads(metadata)["origin"])
                if tags:
                    state.tag_counts[memory_id] = tags
            for memory_id, src, dst in conn.execute(
                "SELECT memory_id, from_tier, to_tier FROM tm_promotion_log ORDER BY id"
            ):
                state.log.setdefault(memory_id, []).append((Tier(src), Tier(dst)))
            state.scheduled = {r[0] for r in conn.execute("SELECT memory_id FROM tm_schedules")}
            state.forgotten = {
                r[0] for r in conn.execute("SELECT memory_id FROM tm_forgetting_log")
            }
    return state


def open_transactions(url: str, wait_s: float = 10.0) -> int:
    """How many sessions of ``url``'s database other than this one are still in a
    transaction, polled for up to ``wait_s`` (the server notices a killed client's
    closed socket and rolls its transaction back)."""
    import time

    import psycopg

    deadline = time.monotonic() + wait_s
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            ).fetchone()
            count = int(row[0]) if row else 0
            if count == 0 or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


def assert_no_half_done_promotion(state: FileState, tags_per_memory: int) -> None:
    """Each memory is in one tier, its log chains from its origin to it, tags are whole."""
    for memory_id, tiers in state.where.items():
        assert len(tiers) == 1, f"{memory_id} is in {tiers}"
        current = state.origin[memory_id]
        for src, dst in state.log.get(memory_id, []):
            assert src is current, f"log of {memory_id} does not chain: {state.log[memory_id]}"
            current = dst
        assert current is tiers[0], f"{memory_id} is in {tiers[0]} but its log ends at {current}"
        assert state.tag_counts.get(memory_id) == tags_per_memory, f"{memory_id} lost tags"
    assert set(state.log) <= set(state.where) | state.forgotten, "log names an unknown memory"


def server_problems(url: str, *checks: str) -> list[str]:
    """What the named checks of :mod:`persistence.postgres.integrity` find in
    ``url``'s committed state (a connection of its own, the whole store in view)."""
    import psycopg

    from persistence.postgres import integrity

    with psycopg.connect(url, autocommit=True) as conn:
        return [problem for name in checks for problem in integrity.CHECKS[name](conn)]


def batch_index_state(location: str) -> tuple[dict[str, int], int, int]:
    """Of the ``batch`` worker's store: memories per batch tag (the tag ``batch`` aside),
    keyword-index work left waiting, and memories in the keyword index."""
    if is_server_url(location):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('tm_kw_docs')").fetchone() == (None,):
                return {}, 0, 0
            sizes = dict(
                conn.execute(
                    "SELECT tag, count(*) FROM tm_memories, unnest(tags) AS tag "
                    "WHERE tag <> 'batch' GROUP BY tag"
                ).fetchall()
            )
            waiting = 0  # indexed in the writing statement: nothing waits (v012)
            (indexed,) = conn.execute("SELECT count(*) FROM tm_kw_docs").fetchone() or (0,)
            return sizes, int(waiting), int(indexed)
    conn = open_raw(Path(location))
    try:
        sizes = dict(
            conn.execute("SELECT tag, count(*) FROM memory_tags WHERE tag <> 'batch' GROUP BY tag")
        )
        (waiting,) = conn.execute("SELECT count(*) FROM keyword_dirty").fetchone()
        (indexed,) = conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()
        return sizes, waiting, indexed
    finally:
        conn.close()


def server_checksum(url: str) -> dict[str, str]:
    """Per table of ``url``'s database but ``tm_version`` (its counter moves with any
    commit) and ``tm_embedding_cache`` (a cache: its rows carry when each text was last
    embedded, which differs between two runs of the same work): sha256 over its rows
    in a stable order, read from one snapshot. The
    PostgreSQL twin of :func:`tests.support.data_checks.data_checksum` (a failed comparison
    names the tables that differ)."""
    import hashlib

    import psycopg

    sums: dict[str, str] = {}
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                "AND table_type = 'BASE TABLE' "
                "AND table_name NOT IN ('tm_version', 'tm_embedding_cache') ORDER BY 1"
            )
        ]
        for table in tables:
            digest = hashlib.sha256()
            for row in sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{table}"')):
                digest.update(row.encode())
            sums[table] = digest.hexdigest()[:16]
    return sums
