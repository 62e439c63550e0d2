"""Salvage: every row still readable of a damaged file, copied into a new one.

A damaged page makes SQLite stop a table scan where it sits. :func:`salvage_file` reads
each table of the source in rowid order; where a read fails it finds the next rowid it
can read from (rowid by rowid for up to ``_STEP_PROBES`` rowids, since lost and kept
leaves may alternate in rowid order; past that doubling the jump, then halving back to
the damage's edge) and reads on,
noting the rowid range it could not read. Rows whose values damage made impossible (a
NULL where the schema allows none) are rejected by the schema's own constraints; rows
that point at something lost (the tags of a lost memory, a transcript of a lost session)
are dropped. All of it lands in a scratch file beside the target (encrypted with the
source's key), which is then copied into the new file with the same code and the same
checks as ``tiered-memory copy`` (:func:`~persistence.transfer.copy_store`), in one
transaction: the keyword index, vectors and invariants are rebuilt there, not copied.

:func:`inspect_damage` is the same reading without a target: what ``check`` reports on
a file too damaged to open.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from migrations.sqlite import LATEST_VERSION, read_schema_version
from persistence import leftovers
from persistence.errors import (
    BackupError,
    CorruptDatabaseError,
    MissingDirectoryError,
    MissingFileError,
    SameDatabaseError,
    SchemaError,
    SchemaTooNewError,
)
from persistence.records import Key, SalvageResult, TableSalvage, Tier
from persistence.sqlite import json_io
from persistence.sqlite.connection import connection_key
from persistence.sqlite.encryption import check_file_for_key, key_bytes, wrong_key
from persistence.sqlite.integrity import sqlite_integrity
from persistence.sqlite.sql import salvage_sql as sql
from persistence.sqlite.store import SQLiteStore
from persistence.sqlite.translate import storage_errors
from persistence.statements import count, rows, run, stream, value
from persistence.transfer import copy_store

logger = logging.getLogger("tiered_memory")

_LOWEST = -(2**63)
_HIGHEST = 2**63 - 1
_DAMAGE = (apsw.CorruptError, apsw.NotADBError, apsw.IOError)
_STEP_PROBES = 20_000
"""Past a damaged row, the next rowids probed one by one before jumping ahead (a failing
probe takes about 25 us: a lost tail costs about 0.5 s a table)."""


def salvage_file(source: str | os.PathLike[str], target: str | os.PathLike[str],
                 key: Key | None = None) -> SalvageResult:  # fmt: skip
    """Copy every readable row of the damaged file ``source`` into the new file
    ``target`` (a tiered-memory database at this version's schema); say what was lost.

    ``target`` must not exist; it is encrypted with ``key`` if the source is. A failure
    leaves no ``target``. The source is only read.
    """
    src_path, dst = Path(source), Path(target)
    if dst.exists():
        raise BackupError(f"{dst} already exists: salvage writes a new file (nothing written)")
    if not dst.parent.is_dir():
        raise MissingDirectoryError(f"directory {dst.parent} does not exist (nothing written)")
    kb = _check_source(src_path, key)
    if src_path.resolve() == dst.resolve():
        raise SameDatabaseError(f"{dst} is the damaged file itself: choose a new file")
    with (
        storage_errors(f"salvaging {src_path} into {dst}", dst),
        _whole_pages(src_path, dst.parent) as readable,
    ):
        src = _open_source(readable, kb, shown=src_path)
        try:
            with leftovers.held_temp(dst.parent, f".{dst.name}.", ".partial") as scratch_path:
                scratch = apsw.Connection(str(scratch_path))
                try:
                    connection_key(scratch, kb)
                    damage, tables, lost = _read_into(src, scratch, src_path)
                    memories = _write_target(scratch, dst, kb)
                finally:
                    scratch.close()
        finally:
            src.close()
    logger.info("salvaged %d memories from %s into %s", memories, src_path, dst)
    return SalvageResult(str(src_path), str(dst), memories, tables, damage, lost)


def inspect_damage(source: str | os.PathLike[str], key: Key | None = None) -> SalvageResult:
    """What :func:`salvage_file` would save of ``source``, writing nothing: per table the
    rows it can read, the rows it would reject or drop and the ranges it cannot read."""
    src_path = Path(source)
    kb = _check_source(src_path, key)
    with storage_errors(f"inspecting {src_path}", None), _whole_pages(src_path) as readable:
        src = _open_source(readable, kb, shown=src_path)
        scratch = apsw.Connection(":memory:")
        try:
            damage, tables, lost = _read_into(src, scratch, src_path)
            memories = sum(int(value(scratch, sql.memory_count(tier.value))) for tier in Tier)
        finally:
            scratch.close()
            src.close()
    return SalvageResult(str(src_path), None, memories, tables, damage, lost)


def _check_source(path: Path, key: Key | None) -> bytes | None:
    if not path.is_file():
        raise MissingFileError(f"{path} does not exist")
    kb = key_bytes(key)
    check_file_for_key(path, kb, doing="salvaged")
    return kb


def _page_size(path: Path) -> int:
    """The page size the file's header states (bytes 16-17; 1 means 65536), or 4096 when
    it states none that SQLite could use (an encrypted header, say)."""
    with path.open("rb") as f:
        header = f.read(18)
    stated = int.from_bytes(header[16:18], "big") if len(header) == 18 else 0
    size = 65536 if stated == 1 else stated
    return size if 512 <= size <= 65536 and size & (size - 1) == 0 else 4096


@contextmanager
def _whole_pages(path: Path, scratch_dir: Path | None = None) -> Iterator[Path]:
    """``path``, or if it ends inside a page (a copy cut short, a disk that filled) a
    temporary copy of its whole pages (with its ``-wal``) in ``scratch_dir``. SQLite reads
    a page cut short as zeros past the cut, so the rows whose bytes straddle it would come
    back with their ends zeroed; read from whole pages, that page counts as lost."""
    size, page = path.stat().st_size, _page_size(path)
    if size % page == 0:
        yield path
        return
    if size < page:
        raise CorruptDatabaseError(
            f"{path} is damaged: it is shorter than one page ({size} bytes): nothing can be "
            "salvaged; restore a backup"
        )
    with tempfile.TemporaryDirectory(prefix=".tm-salvage-", dir=scratch_dir) as folder:
        copy = Path(folder) / path.name
        with path.open("rb") as src, copy.open("wb") as dst:
            left = size - size % page
            while left and (chunk := src.read(min(left, 1 << 20))):
                dst.write(chunk)
                left -= len(chunk)
        if Path(f"{path}-wal").exists():
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        logger.info("%s ends inside a page: its last %d bytes are left out", path, size % page)
        yield copy


def _open_source(path: Path, key: bytes | None, *, shown: Path | None = None) -> apsw.Connection:
    """The source, read-only (``immutable`` without a ``-wal``: nothing is created beside
    it); refused if not even its schema can be read (a schema naming pages past the end of
    a truncated file is read with ``writable_schema``). Messages name ``shown`` (the file
    the caller named), if given."""
    shown = shown or path
    if Path(f"{path}-wal").exists():
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    else:
        uri = "file:" + urllib.parse.quote(str(path)) + "?immutable=1"
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        connection_key(conn, key)
    except BaseException:
        conn.close()
        raise
    try:
        try:
            rows(conn, sql.SCHEMA)
        except _DAMAGE:  # a truncated file: its schema names pages past the end
            run(conn, sql.TOLERATE_SCHEMA)
            rows(conn, sql.SCHEMA)
        try:
            version = read_schema_version(conn)
        except _DAMAGE:  # the version's own page: read the rest as this version's
            version = 0
    except _DAMAGE as exc:
        conn.close()
        if key is not None and isinstance(exc, apsw.NotADBError):
            raise wrong_key(shown, "salvaged") from None
        raise CorruptDatabaseError(
            f"{shown} is damaged: SQLite cannot read even its schema ({exc}): nothing can be "
            "salvaged; restore a backup"
        ) from exc
    except BaseException:
        conn.close()
        raise
    if version > LATEST_VERSION:
        conn.close()
        raise SchemaTooNewError(version, LATEST_VERSION, str(shown))
    if version not in (0, LATEST_VERSION):
        conn.close()
        raise SchemaError(
            f"{shown} has schema version {version}; salvage reads version {LATEST_VERSION} "
            "files: salvage it with the tiered-memory that wrote it (nothing was written)"
        )
    return conn


_DERIVED = frozenset({"vector_codes", "vector_code_packs", "vector_fit"})
"""Tables made again from the others (a reader without them encodes the vectors)."""


def _read_into(src: apsw.Connection, scratch: apsw.Connection, path: Path
               ) -> tuple[tuple[str, ...], tuple[TableSalvage, ...], tuple[str, ...]]:  # fmt: skip
    """Copy the readable rows of every table of ``src`` into ``scratch`` (created with
    the source's own table definitions) and drop what points at lost rows."""
    try:
        damage = tuple(sqlite_integrity(src))
    except _DAMAGE as exc:
        damage = (f"integrity_check stopped: {exc}",)
    entries = rows(src, sql.SCHEMA)
    virtual = [name for kind, name, _, ddl in entries if kind == "table" and _is_virtual(ddl)]
    tables = [
        (name, ddl) for kind, name, _, ddl in entries
        if kind == "table" and not name.startswith("sqlite_") and not _is_virtual(ddl)
        and not any(name.startswith(f"{v}_") for v in virtual)
    ]  # fmt: skip
    results: dict[str, TableSalvage] = {}
    run(scratch, sql.BEGIN)
    for name, ddl in tables:
        run(scratch, sql.create(ddl))
        if name not in _DERIVED:
            results[name] = _copy_table(src, scratch, name)
    if not value(scratch, sql.SCHEMA_VERSIONS):
        at = int(time.time() * 1000)
        run(scratch, sql.stamp_version(LATEST_VERSION, at, f"salvaged from {path.name}"))
    dropped = _drop_dangling(scratch)
    for name, lost in dropped.items():
        if name in results:
            old = results[name]
            results[name] = TableSalvage(old.table, old.copied - lost, old.rejected,
                                         old.dropped + lost, old.unreadable)  # fmt: skip
    run(scratch, sql.COMMIT)
    return damage, tuple(results.values()), _lost_memories(src, scratch)


def _lost_memories(src: apsw.Connection, scratch: apsw.Connection) -> tuple[str, ...]:
    """Memories the source's keyword index lists that were not saved (best effort: the
    index may be damaged too)."""
    try:
        listed = [r[0] for r in rows(src, sql.INDEXED_IDS)]
    except (*_DAMAGE, apsw.SQLError):
        return ()
    saved = {r[0] for r in rows(scratch, sql.SAVED_IDS)}
    return tuple(sorted(i for i in listed if i not in saved))


def _is_virtual(ddl: str) -> bool:
    return ddl.lstrip().upper().startswith("CREATE VIRTUAL TABLE")


def _copy_table(src: apsw.Connection, scratch: apsw.Connection, table: str) -> TableSalvage:
    try:
        names = sql.column_names(rows(src, sql.columns(table)))
        rowid = _has_rowid(src, table)
    except _DAMAGE as exc:
        return TableSalvage(table, 0, unreadable=(f"the whole table ({exc})",))
    insert = sql.inserter(table, names)
    copied = rejected = 0
    unreadable: list[str] = []

    def keep(values: tuple[object, ...]) -> None:
        nonlocal copied, rejected
        try:
            run(scratch, insert(values))
            copied += 1
        except apsw.ConstraintError:
            rejected += 1

    if not rowid:  # WITHOUT ROWID: read in key order until damage stops it
        try:
            for row in stream(src, sql.all_rows(table, names)):
                keep(row)
        except _DAMAGE as exc:
            unreadable.append(f"the rows after the first {copied + rejected} ({exc})")
        return TableSalvage(table, copied, rejected, 0, tuple(unreadable))
    after = _LOWEST
    while True:
        try:
            for row in stream(src, sql.rows_after(table, names, after)):
                if not isinstance(row[0], int) or row[0] <= after:
                    raise apsw.CorruptError(f"rowid {row[0]!r} out of order")  # a bad page
                after = row[0]
                keep(row[1:])
            break
        except _DAMAGE:
            resume = _next_readable(src, table, names, after)
            shown = "the first" if after == _LOWEST else f"rowid {after}"
            if resume is None:
                unreadable.append(f"every row after {shown}" if after != _LOWEST else "every row")
                break
            unreadable.append(f"rows after {shown} up to rowid {resume}")
            after = resume
    return TableSalvage(table, copied, rejected, 0, tuple(unreadable))


def _has_rowid(src: apsw.Connection, table: str) -> bool:
    try:
        rows(src, sql.rowid_probe(table))
    except apsw.SQLError:
        return False
    return True


def _next_readable(src: apsw.Connection, table: str, names: list[str], bad: int) -> int | None:
    """The smallest ``x > bad`` from which the rows above ``x`` read without damage (the
    rows in ``(bad, x]`` are lost); ``None`` if none is found."""

    def readable(after: int) -> bool:
        if after >= _HIGHEST:
            return False  # nothing lies above: no readable row was found
        try:
            rows(src, sql.first_after(table, names, after))
        except _DAMAGE:
            return False
        return True

    # Rowid by rowid first: lost leaves and readable ones may alternate in rowid order (a
    # page's place in the file is not its place in the tree), and a jump could land past
    # a readable island. Rowids the library writes start at 1: from the very first row,
    # the probes start there (rows at or below 0 count only past a readable one).
    start = -1 if bad == _LOWEST else bad
    for hi in range(start + 1, min(start + 1 + _STEP_PROBES, _HIGHEST)):
        if readable(hi):
            return hi
    lo = base = min(start + _STEP_PROBES, _HIGHEST)
    step = 1
    while True:  # a long run lost: jump ahead, doubling, until a read works
        hi = min(base + step, _HIGHEST)
        if readable(hi):
            break
        if hi == _HIGHEST:
            return None
        lo, step = hi, step * 2
    while hi - lo > 1:  # then back to the edge of the damage
        mid = (lo + hi) // 2
        if readable(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _drop_dangling(scratch: apsw.Connection) -> dict[str, int]:
    """Delete the rows that point at lost rows; how many per table."""
    existing = {r[1] for r in rows(scratch, sql.SCHEMA)}
    dropped: dict[str, int] = {}
    for table, statement in sql.ORPHANS.items():
        if table in existing and existing >= sql.ORPHAN_PARENTS:
            dropped[table] = dropped.get(table, 0) + count(scratch, statement)
    for _ in range(10):  # a deleted parent may orphan a grandchild: a few rounds
        violations = sql.violations(rows(scratch, sql.FK_VIOLATIONS))
        if not violations:
            break
        for table, rowid in violations:
            run(scratch, sql.delete_rowid(table, rowid))
            dropped[table] = dropped.get(table, 0) + 1
    if "store_meta" in existing:
        for tier in Tier:
            if tier.value in existing:
                run(scratch, sql.wrong_size_embeddings(tier.value))
    return {t: n for t, n in dropped.items() if n}


def _write_target(scratch: apsw.Connection, dst: Path, key: bytes | None) -> int:
    """Copy the scratch file's content into the new file ``dst``; memories written."""
    with (
        _removed_on_failure(dst),
        SQLiteStore(dst, key=key) as store,
        json_io.export_source(scratch) as source,
    ):
        result = copy_store(
            source, functools.partial(json_io.import_sink, store.engine),
            source_name="the salvaged rows", destination_name=str(dst),
        )  # fmt: skip
    return result.memories


@contextmanager
def _removed_on_failure(path: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise
