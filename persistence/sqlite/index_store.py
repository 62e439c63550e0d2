"""IndexStore: what recall searches (keyword and vector indexes, conversation turns)
and the embeddings that feed the vector index.

One part of :class:`~persistence.sqlite.store.SQLiteStore`, over its
:class:`~persistence.sqlite.database.Database`. It owns the in-RAM copy of the vector
index (:class:`~persistence.sqlite.vector_mirror.VectorMirror`), the embedding queue
(:meth:`unembedded`, :meth:`set_embeddings`), the embedding cache and the staged
re-embedding with another model. The SQL is :mod:`~persistence.sqlite.sql.index_sql`,
``conversation_sql``, ``embedding_cache_sql`` and ``rebuild_sql``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import apsw
import numpy as np

from persistence.codecs import encode_embedding
from persistence.errors import EmbeddingModelMismatchError, InvalidInputError, InvalidTypeError
from persistence.index_searches import Turn
from persistence.records import KeywordParts, MemoryFilter, Tier, content_hash
from persistence.sqlite import code_sync
from persistence.sqlite.connection import read_snapshot
from persistence.sqlite.database import Database
from persistence.sqlite.keyword_index import KeywordIndex
from persistence.sqlite.memory_store import check_dimension
from persistence.sqlite.sql import (
    conversation_sql,
    embedding_cache_sql,
    index_sql,
    rebuild_sql,
    vector_codes_sql,
)
from persistence.sqlite.sql.meta_sql import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_MODEL_KEY,
    read_meta,
    record_embedding_error,
)
from persistence.sqlite.vector_mirror import RESORT_AFTER, VectorMirror
from persistence.validation import (
    require_int,
    require_str,
    require_str_tuple,
    require_unit_float,
    validate_filter,
)

VECTOR_OVERSAMPLE = 2
VECTOR_MIN_CANDIDATES = 128
"""Re-ranked exactly at least: the RAM copy's second stage orders them closely enough."""
EXACT_SCAN_MAX = 4096
"""A filtered vector search compares every accepted memory exactly up to this many."""


VectorCandidates = Callable[[apsw.Connection, np.ndarray, int, Tier | None], list[tuple[str, Tier]]]
"""The first stage of vector search: ``(conn, query, count, tier) -> (id, tier)`` pairs."""


class IndexStore:
    """The recall indexes of one file and the embeddings behind them.

    ``path`` names the file in errors; ``clock`` returns epoch milliseconds;
    ``embedding_dim`` is the size the store was configured with (``None``: the first
    embedding fixes it); ``keywords`` keeps the keyword index up to date (a search inside
    a transaction catches it up first); ``resort_after`` tunes the vector copy.
    """

    def __init__(
        self,
        db: Database,
        path: str,
        clock: Callable[[], int],
        embedding_dim: int | None,
        keywords: KeywordIndex,
        resort_after: int = RESORT_AFTER,
    ) -> None:
        self.db = db
        self.path = path
        self.clock = clock
        self.embedding_dim = embedding_dim
        self.vectors = VectorMirror(resort_after)
        self.keywords = keywords
        self.first_stage: VectorCandidates = self.vector_candidates
        """The first stage of :meth:`vector_search` (a test swaps in a spy)."""
        self.exact_scan_max = EXACT_SCAN_MAX
        self._reading = db.reading
        self._transaction = db.transaction

    # --- searching --------------------------------------------------------------------------

    def keyword_search(
        self,
        words: Sequence[str],
        limit: int,
        tier: Tier | None = None,
        context_weight: float = 0.5,
        after_weight: float = 0.5,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, bm25)`` of the memories holding any of ``words``, best (lowest)
        first; ``[]`` for no words. The words become one FTS5 expression
        (:func:`~persistence.sqlite.sql.index_sql.fts5_match`: each quoted, joined with
        ``OR``). Words found only in the two memories before a memory in its session count
        ``context_weight`` as much as its own, in the two after it ``after_weight``.
        ``where`` restricts the search itself: the best ``limit`` memories it accepts come
        back."""
        require_str_tuple(words, "words")
        require_int(limit, "limit", minimum=1)
        require_unit_float(context_weight, "context_weight")
        require_unit_float(after_weight, "after_weight")
        accepted = _filter(tier, where)
        if not words:
            return []
        with self._reading() as conn:
            if self.db.in_transaction:  # this transaction's writes are not indexed yet
                self.keywords.catch_up(conn)
            return index_sql.keyword_search(
                conn, words, limit, accepted, context_weight, after_weight
            )

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        """Which parts of each memory's keyword window hold any of ``words`` (see
        :meth:`persistence.storage.MemoryStorage.keyword_parts`)."""
        require_str_tuple(words, "words")
        require_str_tuple(memory_ids, "memory_ids")
        if not words or not memory_ids:
            return {}
        match = index_sql.fts5_match(words)
        with self._reading() as conn:
            if self.db.in_transaction:
                self.keywords.catch_up(conn)
            return index_sql.keyword_parts(conn, match, memory_ids)

    def vector_search(
        self,
        vector: object,
        limit: int,
        tier: Tier | None = None,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine distance)`` nearest first ([] before any embedding exists).

        Candidates (``limit * VECTOR_OVERSAMPLE``, at least ``VECTOR_MIN_CANDIDATES``) come
        from the in-RAM copy of the index (3-bit codes, searched in two stages: see
        :mod:`persistence.sqlite.vector_mirror`); exact cosine re-ranks them. With a
        filter ``where``, the candidates that pass it count: when too few do, the share
        that passed estimates how many the filter accepts; at most ``exact_scan_max``
        (default ``EXACT_SCAN_MAX``): all of them are compared exactly, else the copy is
        searched deeper until enough pass. A filter an index serves (session, agent, tags,
        time range) that accepts at most ``exact_scan_max`` is compared exactly at once.
        """
        require_int(limit, "limit", minimum=1)
        accepted = _filter(tier, where)
        with self._reading() as conn, read_snapshot(conn):
            dim = read_meta(conn, EMBEDDING_DIM_KEY)
            if dim is None:
                return []
            query = np.frombuffer(encode_embedding(vector, int(dim)), dtype="<f4")
            if accepted.narrows and index_sql.index_backed(accepted):
                # Few accepted (a session, say): compare them all, before searching the copy.
                everything = index_sql.accepted_embeddings(conn, accepted, self.exact_scan_max)
                if everything is not None:
                    return index_sql.nearest(everything, query, limit)
            wanted = count = max(limit * VECTOR_OVERSAMPLE, VECTOR_MIN_CANDIDATES)
            candidates = self.first_stage(conn, query, count, accepted.tier)
            while accepted.narrows:
                passed = index_sql.accepted_among(conn, accepted, candidates)
                total = self.vectors.size
                if len(passed) >= wanted or len(candidates) < count or count >= total:
                    candidates = passed
                    break
                share = max(len(passed), 1) / len(candidates)  # of the file the filter accepts
                if share * total <= self.exact_scan_max:
                    everything = index_sql.accepted_embeddings(conn, accepted, self.exact_scan_max)
                    if everything is not None:
                        return index_sql.nearest(everything, query, limit)
                count = min(max(count * 4, int(2 * wanted / share)), total)
                candidates = self.first_stage(conn, query, count, accepted.tier)
            return index_sql.rerank(conn, candidates, query, limit)

    def vector_candidates(
        self, conn: apsw.Connection, query: np.ndarray, count: int, tier: Tier | None
    ) -> list[tuple[str, Tier]]:
        """The RAM copy's ``count`` nearest, seeing this thread's own uncommitted vectors."""
        if self.db.in_transaction:
            candidates = self.vectors.candidates_in_write(conn, query, count, tier)
            if candidates is not None:
                return candidates
            self.db.after_rollback(self.vectors.reset)  # it will see uncommitted rows
        return self.vectors.candidates(conn, query, count, tier)

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        """Cosine distance from ``vector`` to each of ``memory_ids`` that has an embedding
        (exact, from the float vectors in the file; a memory without one is left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        if not memory_ids:
            return {}
        with self._reading() as conn, read_snapshot(conn):
            dim = read_meta(conn, EMBEDDING_DIM_KEY)
            if dim is None:
                return {}
            query = np.frombuffer(encode_embedding(vector, int(dim)), dtype="<f4")
            found = index_sql.embeddings_of(conn, list(dict.fromkeys(memory_ids)))
            if not found:
                return {}
            ids, distances = index_sql.cosine_distances(found, query)
            return {memory_id: float(d) for memory_id, d in zip(ids, distances, strict=True)}

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, Turn]:
        """Memory id -> (speaker, asks something, id before it (``None`` unless
        ``before``) and after it in its session), for those of ``memory_ids`` that
        exist (recall's conversation signals and reranking)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        with self._reading() as conn, read_snapshot(conn):
            return conversation_sql.turns(conn, list(dict.fromkeys(memory_ids)), before)

    # --- the embedding queue and cache ------------------------------------------------------

    def unembedded(self, limit: int = 256) -> list[tuple[str, Tier, str]]:
        """Memories still waiting for an embedding: ``(id, tier, content)``."""
        require_int(limit, "limit", minimum=1)
        with self._reading() as conn:
            return index_sql.unembedded(conn, limit)

    def unembedded_count(self) -> int:
        """How many memories wait for an embedding."""
        with self._reading() as conn:
            return index_sql.unembedded_count(conn)

    def set_embeddings(
        self,
        rows: Sequence[tuple[Tier, str, object]],
        contents: Sequence[str] | None = None,
        *,
        model_id: str | None = None,
    ) -> None:
        """Store computed embeddings in one transaction (the indexes follow by trigger).

        A memory that got an embedding meanwhile keeps it; with ``contents`` (the texts
        that were embedded, one per row), so does a memory whose content changed since.
        With ``model_id``, refused if the file records another model by then (another
        process may have re-embedded it).
        """
        if contents is not None and len(contents) != len(rows):
            raise InvalidInputError("set_embeddings: one content per row, or none")
        texts: Sequence[str | None] = contents if contents is not None else [None] * len(rows)
        encoded = [
            (tier, memory_id, encode_embedding(vector, None), text)
            for (tier, memory_id, vector), text in zip(rows, texts, strict=True)
        ]
        with self._transaction() as conn:
            recorded = read_meta(conn, EMBEDDING_MODEL_KEY)
            if model_id is not None and recorded not in (None, model_id):
                raise EmbeddingModelMismatchError(
                    f"{self.path} is now embedded with {recorded!r}, not {model_id!r}"
                )
            for _, _, blob, _ in encoded:
                check_dimension(conn, len(blob) // 4, self.embedding_dim)
            index_sql.set_embeddings(conn, encoded)
            code_sync.sync(conn)  # new processes load these codes instead of encoding

    def cached_embeddings(self, model_id: str, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Embeddings cached for ``model_id`` by content hash
        (:func:`~persistence.records.content_hash`)."""
        require_str(model_id, "model_id", allow_empty=False)
        if not all(isinstance(h, bytes) for h in hashes):
            raise InvalidTypeError("hashes must be bytes (see content_hash)")
        with self._reading() as conn:
            found = embedding_cache_sql.lookup(conn, model_id, hashes)
        return {h: np.frombuffer(blob, dtype="<f4") for h, blob in found.items()}

    def cache_embeddings(
        self, model_id: str, entries: Sequence[tuple[bytes, object]], keep: int
    ) -> None:
        """Cache ``(content hash, vector)`` entries for ``model_id`` (a hit refreshes its
        age), then evict the least recently used beyond ``keep`` rows."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(keep, "keep", minimum=0)
        encoded = [(h, encode_embedding(vector, None)) for h, vector in entries]
        with self._transaction() as conn:
            embedding_cache_sql.remember(conn, model_id, encoded, self.clock())
            embedding_cache_sql.evict(conn, keep)

    def record_embedding_error(self, message: str) -> int:
        """Count a failure of background embedding in the file (with its message, stamped
        with the time); returns how many there have been."""
        require_str(message, "message")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock() / 1000))
        with self._transaction() as conn:
            return record_embedding_error(conn, f"{stamp} {message[:1000]}")

    # --- re-embedding with another model ----------------------------------------------------

    def begin_rebuild(self, model_id: str, dim: int) -> bool:
        """Start (or resume) staging vectors of ``model_id``; True if staged work is kept."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(dim, "dim", minimum=1)
        with self._transaction() as conn:
            return rebuild_sql.begin(conn, model_id, dim)

    def rebuild_state(self) -> tuple[str, int] | None:
        """``(model id, dimension)`` of the re-embedding under way, or ``None``."""
        with self._reading() as conn:
            return rebuild_sql.state(conn)

    def unstaged_for_rebuild(self, limit: int = 256) -> list[tuple[str, str]]:
        """Memories the re-embedding has no vector for yet: ``(id, content)``."""
        require_int(limit, "limit", minimum=1)
        with self._reading() as conn:
            return rebuild_sql.unstaged(conn, limit)

    def stage_rebuild(self, rows: Sequence[tuple[str, str, object]]) -> None:
        """Stage ``(memory id, embedded content, vector)`` in one transaction."""
        with self._transaction() as conn:
            rebuild_sql.stage(conn, _staged(conn, rows))

    def finish_rebuild(self, embed: Callable[[list[str]], object]) -> int:
        """Swap the staged vectors in, in ONE transaction, and return how many memories
        changed. Memories added or edited since they were staged are embedded here
        with ``embed(texts) -> [n, dim]``. Before it commits, the file is unchanged."""
        with self._transaction() as conn:
            under_way = rebuild_sql.state(conn)
            if under_way is None:
                raise InvalidInputError("no re-embedding under way: call begin_rebuild() first")
            missing = rebuild_sql.stale(conn)
            if missing:
                vectors = embed([content for _, content in missing])
                staged = [(i, c, v) for (i, c), v in zip(missing, vectors, strict=True)]  # type: ignore[call-overload]
                rebuild_sql.stage(conn, _staged(conn, staged))
            self.db.after_commit(self.vectors.reset)
            vector_codes_sql.drop_all(conn)  # made for the old model's vectors
            return rebuild_sql.swap(conn, *under_way)


def _staged(
    conn: apsw.Connection, rows: Sequence[tuple[str, str, object]]
) -> list[tuple[str, bytes, bytes]]:
    """Rows to stage, checked and encoded at the dimension of the re-embedding under way."""
    under_way = rebuild_sql.state(conn)
    if under_way is None:
        raise InvalidInputError("no re-embedding under way: call begin_rebuild() first")
    encoded = []
    for memory_id, content, vector in rows:
        require_str(memory_id, "memory_id")
        require_str(content, "content")
        blob = encode_embedding(vector, under_way[1])
        encoded.append((memory_id, content_hash(content), blob))
    return encoded


def _filter(tier: Tier | None, where: MemoryFilter | None) -> MemoryFilter:
    """One filter from a search's ``tier`` and ``where`` arguments (checked)."""
    if where is None:
        return MemoryFilter(tier=tier)
    validate_filter(where)
    if tier is not None and where.tier not in (None, tier):
        raise InvalidInputError(f"tier {tier.value} contradicts where.tier {where.tier}")
    return where if tier is None else replace(where, tier=tier)
