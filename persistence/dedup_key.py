"""The deduplication key of a memory's content: the same on every backend, so a store
copied between backends finds the same duplicates (a byte-for-byte copy of
``persistence.sqlite.sql.dedup_sql.content_key``, which the SQLite side can import from
here; tests/test_pg_memory_store.py checks the two agree)."""

from __future__ import annotations

import functools
import hashlib
import unicodedata


@functools.lru_cache(maxsize=16)  # remember() looks a key up, then records it: computed once
def content_key(content: str, agent_id: str | None, session_id: str | None) -> bytes:
    """Same normalised text (NFKC, case-folded, whitespace collapsed), agent and session:
    same 16-byte key."""
    text = " ".join(unicodedata.normalize("NFKC", str(content)).casefold().split())
    scope = f"{agent_id or ''}\x1f{session_id or ''}\x1f"
    return hashlib.blake2b((scope + text).encode("utf-8", "surrogatepass"), digest_size=16).digest()
