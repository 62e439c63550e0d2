"""Pool connections that count their statements that changed rows, so a failed joined
block can tell whether *it* wrote (SQLite compares ``total_changes``). The transaction's
id says only whether the transaction wrote, not the block: a block that fails before
writing, after earlier blocks wrote, must leave the transaction usable, as on SQLite.

A statement counts when its command tag is ``INSERT``/``UPDATE``/``DELETE``/``MERGE`` with
a row count above zero, any other changing command (``CREATE`` ...), an ``executemany``
that changed rows (or reports no count), a ``SELECT`` of one of the library's writing
functions (:data:`WRITING_FUNCTIONS`), or a ``WITH`` statement with a data-modifying part
that returned rows (its statements return what they wrote). ``SET CONSTRAINTS ...
IMMEDIATE`` (the keyword index catching up with earlier writes) does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg.abc import Params, Query

ROW_TAGS = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "COPY"})
READ_TAGS = frozenset(
    {"SELECT", "SHOW", "SET", "RESET", "BEGIN", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT",
     "LISTEN", "UNLISTEN", "NOTIFY", "DISCARD", "PREPARE", "DEALLOCATE", "FETCH"}
)  # fmt: skip
WRITING_FUNCTIONS = ("tm_graph_collect(", "tm_kw_rebuild(")
"""Functions of the migrations that write, called with ``SELECT``."""
_MODIFYING = re.compile(r"^\s*WITH\b.*\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+)\b", re.I | re.S)


def changed_rows(status: str | None, query: Query) -> bool:
    """True if a statement with command tag ``status`` (and text ``query``) wrote."""
    if not status:
        return False
    words = status.split()
    tag = words[0].upper()
    if tag in ROW_TAGS:
        return not words[-1].isdigit() or int(words[-1]) > 0
    if tag == "SELECT":
        text = query.decode() if isinstance(query, bytes) else query
        if not isinstance(text, str):
            return False
        if any(f in text for f in WRITING_FUNCTIONS):
            return True
        return words[-1].isdigit() and int(words[-1]) > 0 and bool(_MODIFYING.match(text))
    return tag not in READ_TAGS


class CountingCursor(psycopg.Cursor[Any]):
    """A cursor that adds the statements that wrote to its connection's ``writes``."""

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> CountingCursor:
        super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[arg-type, misc]
        if changed_rows(self.statusmessage, query):
            _bump(self.connection)
        return self

    def executemany(
        self, query: Query, params_seq: Iterable[Params], *, returning: bool = False
    ) -> None:
        super().executemany(query, params_seq, returning=returning)
        if self.rowcount != 0:
            _bump(self.connection)


class CountingConnection(psycopg.Connection[Any]):
    """A connection whose cursors count its writes in :attr:`writes`."""

    writes: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursor_factory = CountingCursor


def _bump(conn: psycopg.Connection[Any]) -> None:
    if isinstance(conn, CountingConnection):
        conn.writes += 1


def writes(conn: psycopg.Connection[Any]) -> int | None:
    """How many statements of ``conn`` wrote so far; None if it does not count."""
    return conn.writes if isinstance(conn, CountingConnection) else None
