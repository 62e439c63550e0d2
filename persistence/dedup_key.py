"""The deduplication rule, stated once for every engine and the domain: two memories say
the same thing when their normalised content (:func:`normalised`), agent and session
are equal. :func:`content_key` is its 16-byte index key, the same on every backend (so a
store copied between backends finds the same duplicates); each engine's ``dedup_sql``
only stores and probes the keys, and the domain compares the content itself
(``tiered_memory.dedup``), since a key may be stale after an edit."""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Sequence

from persistence.records import Memory


def normalised(content: str) -> str:
    """Content as deduplication compares it: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", str(content)).casefold().split())


@functools.lru_cache(maxsize=16)  # remember() looks a key up, then records it: computed once
def content_key(content: str, agent_id: str | None, session_id: str | None) -> bytes:
    """Same normalised text, agent and session: same 16-byte key."""
    scope = f"{agent_id or ''}\x1f{session_id or ''}\x1f"
    text = normalised(content)
    return hashlib.blake2b((scope + text).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def content_key_rows(memories: Sequence[Memory]) -> list[tuple[str, bytes]]:
    """``(memory id, content key)`` of each memory: the rows an engine's ``dedup_sql``
    writes."""
    return [(m.id, content_key(m.content, m.agent_id, m.session_id)) for m in memories]
