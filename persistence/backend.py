"""The storage parts a manager is built from, chosen in one place.

:func:`build_backend` is the only place that names an engine's classes for the domain:
``AgentMemoryManager`` takes a :class:`Backend` and uses its parts through their
Protocols (:class:`~persistence.MemoryStorage`, :class:`~persistence.GraphStorage`,
:class:`~persistence.StoreFiles` for the operator's file operations, and one per record family:
:class:`~persistence.MemoryRecords`, :class:`~persistence.SessionRecords`,
:class:`~persistence.ScheduleRecords`, :class:`~persistence.RecallIndex`). A second
backend (PostgreSQL + pgvector, say) is one more branch here, picked by the location (a
``postgresql://`` URL), and the domain does not change. :func:`migrate` and
:func:`check_current` are the operator's two file commands, picked the same way;
:func:`salvage` and :func:`inspect_damage` work on files only.

Nothing here imports an engine at import time: each engine's package is imported inside
the function that serves a location of its kind, so a PostgreSQL user's process never
loads the SQLite engine (nor apsw), and a file user's never loads psycopg.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from persistence.errors import ExtraMissingError, UnsupportedOperationError
from persistence.locations import is_server_url
from persistence.records import Key, PoolSettings, SalvageResult, Synchronous, TracedStatement
from persistence.storage import (
    GraphStorage,
    MemoryRecords,
    MemoryStorage,
    NoteStorage,
    RecallIndex,
    ScheduleRecords,
    SessionRecords,
    StoreFiles,
)
from persistence.stores.scope import Scope
from persistence.validation import DEFAULT_MAX_CONTENT_BYTES


@dataclass(frozen=True, slots=True)
class Backend:
    """One store's parts: its records, its graph's records and the file operations
    (backup, restore, JSON, integrity, maintenance). ``memories``, ``sessions``,
    ``schedules`` and ``indexes`` are the record families of ``store`` (the same data
    and transactions), each by its own Protocol, for a part of the domain that needs
    only one of them. ``notes`` are the notes and memories' content history, over the
    same data and transactions. The transactions' hooks a cache keeps in step with are
    the store's engine's (``store.engine``)."""

    store: MemoryStorage
    graph: GraphStorage
    backups: StoreFiles
    memories: MemoryRecords
    sessions: SessionRecords
    schedules: ScheduleRecords
    indexes: RecallIndex
    notes: NoteStorage


def build_backend(
    location: str | os.PathLike[str],
    *,
    synchronous: Synchronous = "NORMAL",
    clock: Callable[[], int] | None = None,
    change_check_interval_ms: int = 50,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    read_only: bool = False,
    key: Key | None = None,
    backup_dir: str | os.PathLike[str] | None = None,
    idle_merge_s: float | None = None,
    reset_after_changes: int | None = None,
    vector_resort_after: int | None = None,
    trace: Callable[[TracedStatement], None] | None = None,
    pool: PoolSettings | None = None,
    scope: str = "",
    vector_index: str = "cells",
) -> Backend:
    """The parts for ``location`` (a file path or ``":memory:"``), not yet opened.
    ``idle_merge_s``, ``reset_after_changes`` and ``vector_resort_after`` are the file
    engine's tunables (``None``: its defaults, see :class:`~persistence.sqlite.SQLiteStore`);
    ``vector_index`` picks the file engine's vector search (``"cells"``, the default, or ``"ram"``);
    ``trace`` is told of every statement the store runs on either engine
    (:class:`~persistence.TracedStatement`).
    ``scope`` names the agent a scoped handle is for (``''``: the whole store): row-level
    security on a server as a second wall, and on both engines the predicate every
    store's SQL carries (:mod:`persistence.stores.scope`)."""
    if is_server_url(location):
        if key is not None:
            from persistence.postgres.files import NO_KEYS

            raise UnsupportedOperationError(f"key= is refused: {NO_KEYS}")
        return _server_backend(
            str(location), clock=clock, read_only=read_only, max_content_bytes=max_content_bytes,
            backup_dir=backup_dir, pool=pool, scope=scope, synchronous=synchronous,
            change_check_interval_ms=change_check_interval_ms, trace=trace,
        )  # fmt: skip
    from persistence.sqlite.backup import BackupManager
    from persistence.sqlite.graph_store import sqlite_graph_store
    from persistence.sqlite.note_store import NoteStore
    from persistence.sqlite.store import SQLiteStore

    tunables: dict[str, int] = {
        name: value
        for name, value in (("reset_after_changes", reset_after_changes),
                            ("vector_resort_after", vector_resort_after))
        if value is not None
    }  # fmt: skip
    store = SQLiteStore(
        location,
        synchronous=synchronous,
        clock=clock,
        change_check_interval_ms=change_check_interval_ms,
        read_only=read_only,
        key=key,
        max_content_bytes=max_content_bytes,
        idle_merge_s=idle_merge_s,
        trace=trace,
        scope=scope,
        vector_index=vector_index,
        **tunables,  # type: ignore[arg-type]  # the engine's defaults where None
    )
    # ``store`` and every part carry the scope (an agent-scoped handle, if ``scope``):
    # its SQL adds the agent's predicate (:mod:`persistence.stores.scope`); the file
    # operations refuse whole-file copies and export the agent's data.
    return Backend(
        store,
        sqlite_graph_store(store.engine, Scope.of(scope)),
        BackupManager(store, backup_dir, agent_id=scope or None),
        memories=store.memories,
        sessions=store.sessions,
        schedules=store.schedules,
        indexes=store.indexes,
        notes=NoteStore(store.engine, scope or None),
    )


def _postgres() -> Any:
    """The PostgreSQL backend's package, imported on first use (extra ``[postgres]``)."""
    try:
        import persistence.postgres as backend
    except ImportError as exc:
        raise ExtraMissingError(
            f"a postgresql:// location needs the postgres extra ({exc.name} is missing): "
            "pip install 'tiered-memory[postgres]'"
        ) from None
    return backend


def _server_backend(
    url: str,
    *,
    clock: Callable[[], int] | None,
    read_only: bool,
    max_content_bytes: int,
    backup_dir: str | os.PathLike[str] | None,
    pool: PoolSettings | None,
    scope: str,
    change_check_interval_ms: int,
    synchronous: Synchronous,
    trace: Callable[[TracedStatement], None] | None,
) -> Backend:
    """The PostgreSQL parts for ``url`` (not yet opened)."""
    pg = _postgres()
    store = pg.PostgresStore(url, scope=scope, read_only=read_only, clock=clock,
                             max_content_bytes=max_content_bytes, pool=pool,
                             change_check_interval_ms=change_check_interval_ms,
                             synchronous=synchronous, trace=trace)  # fmt: skip
    return Backend(
        store,
        pg.pg_graph_store(store.engine),
        pg.PgFiles(store, backup_dir),
        memories=store.memories,
        sessions=store.sessions,
        schedules=store.schedules,
        indexes=store.indexes,
        notes=pg.PgNoteStore(store.engine, store.config.scope),
    )


def migrate(location: str | os.PathLike[str], *, key: Key | None = None) -> tuple[int, int]:
    """Bring an existing database to the current schema: ``(version before, after)``.
    Nothing is created: a missing, empty or foreign database is refused as it was."""
    if is_server_url(location):
        return _postgres().PostgresStore.migrate(str(location))  # type: ignore[no-any-return]
    from persistence.sqlite.store import SQLiteStore

    return SQLiteStore.migrate(location, key)


def check_current(location: str | os.PathLike[str], *, key: Key | None = None) -> None:
    """Raise the specific :class:`~persistence.TieredMemoryError` if ``location`` is not
    an existing database at the current schema that ``key`` opens (read-only: nothing is
    created, migrated or written)."""
    if is_server_url(location):
        _postgres().PostgresStore(str(location), read_only=True).open().close()
        return
    from persistence.sqlite.store import SQLiteStore

    SQLiteStore(location, read_only=True, key=key).open().close()


def salvage(
    source: str | os.PathLike[str], target: str | os.PathLike[str], *, key: Key | None = None
) -> SalvageResult:
    """Copy every readable row of a damaged file into a new file; say what was lost
    (:mod:`persistence.sqlite.salvage`). Files only."""
    _file_only(source, "salvage")
    _file_only(target, "salvage")
    from persistence.sqlite.salvage import salvage_file

    return salvage_file(source, target, key)


def inspect_damage(location: str | os.PathLike[str], *, key: Key | None = None) -> SalvageResult:
    """What :func:`salvage` would save of a damaged file, writing nothing. Files only."""
    _file_only(location, "inspecting a damaged file")
    from persistence.sqlite.salvage import inspect_damage as inspect_file

    return inspect_file(location, key)


def _file_only(location: str | os.PathLike[str], doing: str) -> None:
    if is_server_url(location):
        raise UnsupportedOperationError(
            f"{doing} reads the pages of a SQLite file; a PostgreSQL database is repaired "
            "with the server's own tools (pg_dump what is readable, or restore a backup)"
        )


__all__ = [
    "Backend", "Key", "build_backend", "check_current", "inspect_damage", "migrate", "salvage",
]  # fmt: skip
