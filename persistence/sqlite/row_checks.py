"""Rows read back checked against their columns' types.

SQLite does not check a value's type on reading, and a damaged page can leave NULL in a
NOT NULL column, or a value of another type (a text where a time was). Passed on, such a
value fails later as a ``TypeError`` deep in the domain (``max(now, None)``, ``sorted``
over ``None``). The decoders in ``persistence/sqlite/sql`` test the few columns of each
row with ``type(value) is`` first (a handful of comparisons per row: reads decode every
row) and call :func:`damaged_row` only on a miss; it names the first wrong column in a
:class:`~persistence.errors.CorruptDatabaseError`. What is read inside a transaction then
rolls it back: the file is left as it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from persistence.errors import CorruptDatabaseError
from persistence.records import Tier

TEXT: tuple[type, ...] = (str,)
INT: tuple[type, ...] = (int,)
REAL: tuple[type, ...] = (float,)  # REAL affinity reads every number back as a float
BLOB: tuple[type, ...] = (bytes,)
NULL_TEXT: tuple[type, ...] = (str, type(None))
NULL_INT: tuple[type, ...] = (int, type(None))
NULL_REAL: tuple[type, ...] = (float, type(None))
NULL_BLOB: tuple[type, ...] = (bytes, type(None))

_TIERS = {tier.value: tier for tier in Tier}
_NAMES = {str: "TEXT", int: "INTEGER", float: "REAL", bytes: "BLOB", type(None): "NULL"}
ADVICE = (
    "the file is damaged; nothing was changed. Run `tiered-memory check DB` to see what "
    "else is, and `tiered-memory salvage DB OUT` to copy every readable row to a new file"
)


def _kind(value: object) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def damaged_value(
    table: str, column: str, value: object, kinds: tuple[type, ...]
) -> CorruptDatabaseError:
    """The error for ``value`` read from ``table.column``, which holds ``kinds``."""
    wanted = " or ".join(_NAMES[k] for k in kinds if k is not type(None))
    null = "" if type(None) in kinds else " NOT NULL"
    return CorruptDatabaseError(
        f"reading {table}.{column} found {_kind(value)} where the column holds "
        f"{wanted}{null}: {ADVICE}"
    )


def damaged_row(
    table: str, columns: Sequence[str], kinds: Sequence[tuple[type, ...]], row: Sequence[Any]
) -> CorruptDatabaseError:
    """The error naming the first column of ``row`` whose value is not of its kind (the
    slow path: called once a decoder's own test failed)."""
    for column, kind, value in zip(columns, kinds, row, strict=False):
        if type(value) not in kind:
            return damaged_value(table, column, value, kind)
    return CorruptDatabaseError(f"reading {table} found a row it cannot decode: {ADVICE}")


def check_row(
    table: str, columns: Sequence[str], kinds: Sequence[tuple[type, ...]], row: Sequence[Any]
) -> Sequence[Any]:
    """``row`` if each value is of its column's kind, else :func:`damaged_row`'s error
    (for the decoders off the hottest paths: a loop over a few columns)."""
    for kind, value in zip(kinds, row, strict=False):
        if type(value) not in kind:
            raise damaged_row(table, columns, kinds, row)
    return row


def texts(table: str, column: str, values: Iterable[Any]) -> list[str]:
    """``values`` (ids read from ``table.column``) as a list, if every one is a text."""
    found = list(values)
    for value in found:
        if type(value) is not str:
            raise damaged_value(table, column, value, TEXT)
    return found


def tier_named(table: str, column: str, value: Any) -> Tier:
    """The tier ``table.column`` names (damage if it names none)."""
    tier = _TIERS.get(value) if type(value) is str else None
    if tier is None:
        raise CorruptDatabaseError(
            f"reading {table}.{column} found {value!r:.40}, which names no tier: {ADVICE}"
        )
    return tier


def json_texts(table: str, column: str, value: Any) -> tuple[str, ...]:
    """A JSON array of texts decoded from ``table.column``, as a tuple (damage if not)."""
    found = tuple(value) if type(value) is list else None
    if found is None:
        raise CorruptDatabaseError(
            f"reading {table}.{column} found JSON that is not a list: {ADVICE}"
        )
    for item in found:
        if type(item) is not str:
            raise damaged_value(table, column, item, TEXT)
    return found


def json_object(table: str, column: str, value: Any) -> dict[str, Any]:
    """A JSON object decoded from ``table.column`` (damage if it is not one)."""
    if type(value) is not dict:
        raise CorruptDatabaseError(
            f"reading {table}.{column} found JSON that is not an object: {ADVICE}"
        )
    return value
