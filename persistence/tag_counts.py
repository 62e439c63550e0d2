"""Namespace tags: tags of the form ``family:ns:a.b`` whose memories are counted.

The LangGraph store tags each item with one such tag per prefix of its namespace. Each
engine keeps, per namespace tag, how many memories carry it, in the transaction of every
write (SQLite: ``tag_counts``, schema 14; PostgreSQL: ``tm_tag_counts``, schema 10), so
listing the namespaces under a prefix reads one row per namespace, not every item.
"""

from __future__ import annotations

COUNTED_GLOB = "*:ns:*"
"""The tags counted, as a GLOB (SQLite)."""

COUNTED_LIKE = "%:ns:%"
"""The tags counted, as a LIKE pattern (PostgreSQL)."""


def is_counted(tag: str) -> bool:
    """Whether the engines count memories carrying ``tag``."""
    return ":ns:" in tag


def tag_range(prefix: str) -> tuple[str, str | None]:
    """``(low, high)``: the tags starting with ``prefix`` are those ``>= low`` and, unless
    ``high`` is ``None``, ``< high`` in byte order (UTF-8 orders as code points do)."""
    end = prefix.rstrip("\U0010ffff")
    if not end:
        return prefix, None
    last = ord(end[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:
        last = 0xE000
    return prefix, end[:-1] + chr(last)
