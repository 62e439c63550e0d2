"""PgIndexStore: what recall searches (keyword and vector search, conversation turns)
and the embeddings that feed the vector search, on PostgreSQL + pgvector.

One part of :class:`~persistence.postgres.store.PostgresStore`, over its
:class:`~persistence.postgres.database.PgDatabase`. Keyword data is kept by triggers in
``tm_keywords`` (migration v002; re-indexed at COMMIT, or early for a search inside the
transaction); vectors live in ``tm_vectors`` under an HNSW index (cosine), searched with
the filter inside the scan, or exactly when the filter accepts few memories. The SQL is
in :mod:`persistence.postgres.sql` (``keyword_sql``, ``vector_sql``,
``conversation_sql``, ``embedding_cache_sql``, ``rebuild_sql``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import psycopg

from persistence.codecs import encode_embedding
from persistence.errors import (
    EmbeddingDimensionError,
    EmbeddingModelMismatchError,
    InvalidInputError,
    InvalidTypeError,
)
from persistence.index_searches import Turn
from persistence.meta_keys import (
    EMBEDDING_DIM_KEY,
    EMBEDDING_ERRORS_KEY,
    EMBEDDING_MODEL_KEY,
    LAST_EMBEDDING_ERROR_KEY,
)
from persistence.postgres.config import StoreConfig
from persistence.postgres.database import DEFAULT_EF_SEARCH, PgDatabase
from persistence.postgres.empty_cache import EmptyAtVersion
from persistence.postgres.sql import (
    conversation_sql,
    embedding_cache_sql,
    keyword_sql,
    meta_sql,
    rebuild_sql,
    recall_filter_sql,
    vector_sql,
)
from persistence.postgres.translate import storage_errors
from persistence.records import KeywordParts, MemoryFilter, Tier, content_hash
from persistence.validation import (
    require_int,
    require_str,
    require_str_tuple,
    require_unit_float,
    validate_filter,
)

Connection = psycopg.Connection[Any]
T = TypeVar("T")

EXACT_SCAN_MAX = 2000
"""A filter an index serves that accepts at most this many memories is searched exactly."""
MIN_EF_SEARCH = DEFAULT_EF_SEARCH
"""``hnsw.ef_search`` is at least this (and at least the limit): recall@10 >= 0.95. Every
pooled connection starts with it (``PgDatabase``), so the usual search sets nothing."""


class PgIndexStore:
    """The recall indexes and embeddings of one database (see the module docstring)."""

    def __init__(self, db: PgDatabase, config: StoreConfig) -> None:
        self.db = db
        self.config = config
        self.exact_scan_max = EXACT_SCAN_MAX
        self._ef: dict[int, int] = {}  # id(pooled connection) -> its hnsw.ef_search
        self._dim: int | None = None  # the stored dimension as last read (searches only)
        self._queue_empty = EmptyAtVersion(db)  # recall asks at every call
        db.on_external_change(self.forget_dimension)

    def forget_dimension(self) -> None:
        """Read the stored dimension again at the next search."""
        self._dim = None

    def _search_dimension(self, conn: Connection) -> int | None:
        """The store's vector dimension for a search (``None`` before any embedding).
        Outside a transaction the value last read is used without a round trip: the
        search itself fails on a stale one (the column refuses another size), which
        :meth:`_searching` answers by reading it again."""
        if self._dim is not None and not self.db.in_transaction:
            return self._dim
        stored = meta_sql.read(conn, EMBEDDING_DIM_KEY)
        dim = None if stored is None else int(stored)
        if not self.db.in_transaction:
            self._dim = dim
        return dim

    def _searching(self, search: Callable[[Connection, int], T], empty: T) -> T:
        """``search(conn, dim)`` at the store's dimension (``empty`` before any
        embedding); a search refused because the dimension changed since it was last
        read (another process re-embedded) is redone once with the new one."""
        for attempt in (1, 2):
            cached = self._dim is not None and not self.db.in_transaction
            with self._read() as conn:
                dim = self._search_dimension(conn)
                if dim is None:
                    return empty
                try:
                    return search(conn, dim)
                except (psycopg.errors.DataException, EmbeddingDimensionError):
                    if not cached or attempt == 2:
                        raise
            self.forget_dimension()
        raise AssertionError("unreachable")

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.db.reading() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.db.transaction() as conn, storage_errors(self.db._url):
            yield conn

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
        """``(memory_id, score)`` best (lowest, <= 0) first for any of ``words``: FTS5's
        bm25 (see :mod:`~persistence.postgres.sql.keyword_sql`); words found only in the
        two memories before a memory in its session count ``context_weight`` as much as
        its own, in the two after it ``after_weight``. ``where`` restricts the search
        itself. Inside a transaction its own writes are indexed first."""
        if isinstance(words, str) or not all(isinstance(w, str) for w in words):
            raise InvalidTypeError("words must be a sequence of strings")
        require_int(limit, "limit", minimum=1)
        require_unit_float(context_weight, "context_weight")
        require_unit_float(after_weight, "after_weight")
        accepted = _filter(tier, where)
        if not words:
            return []
        with self._read() as conn:
            if self.db.in_transaction:
                keyword_sql.catch_up(conn)
            return keyword_sql.search(conn, words, limit, accepted, context_weight, after_weight)

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        """Which parts of each memory's keyword window hold any of ``words`` (see
        :meth:`persistence.storage.MemoryStorage.keyword_parts`)."""
        require_str_tuple(words, "words")
        require_str_tuple(memory_ids, "memory_ids")
        if not words or not memory_ids:
            return {}
        with self._read() as conn:
            if self.db.in_transaction:
                keyword_sql.catch_up(conn)
            return keyword_sql.parts(conn, words, memory_ids)

    def vector_search(
        self,
        vector: object,
        limit: int,
        tier: Tier | None = None,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine distance)`` nearest first ([] before any embedding).

        A filter an index serves (session, agent, tags, time range) that accepts at most
        ``exact_scan_max`` memories is compared exactly; otherwise HNSW is scanned with
        ``ef_search >= max(limit, MIN_EF_SEARCH)`` and the filter inside the scan
        (iterative scan); a filtered scan that comes back short is redone exactly.
        """
        require_int(limit, "limit", minimum=1)
        accepted = _filter(tier, where)

        def search(conn: Connection, dim: int) -> list[tuple[str, float]]:
            query = _vector(vector, dim)
            if (
                accepted.narrows
                and recall_filter_sql.index_backed(accepted)
                and vector_sql.accepted_at_most(conn, accepted, self.exact_scan_max)
            ):
                return vector_sql.nearest(conn, query, limit, accepted, exact=True)
            self._ef_search(conn, max(limit, MIN_EF_SEARCH))
            found = vector_sql.nearest(conn, query, limit, accepted, exact=False)
            if len(found) < limit and accepted != MemoryFilter():
                found = vector_sql.nearest(conn, query, limit, accepted, exact=True)
            return found

        return self._searching(search, [])

    def _ef_search(self, conn: Connection, ef: int) -> None:
        """Set ``hnsw.ef_search`` on ``conn`` unless its session value is ``ef`` already
        (every pooled connection opens with ``DEFAULT_EF_SEARCH``; a value set outside a
        transaction is remembered per connection); inside a transaction for that
        transaction only (a rollback would undo it)."""
        if self._ef.get(id(conn), DEFAULT_EF_SEARCH) == ef:
            return
        if self.db.in_transaction:
            vector_sql.set_ef_search(conn, ef, local=True)
        else:
            vector_sql.set_ef_search(conn, ef, local=False)
            self._ef[id(conn)] = ef

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine distance from ``vector`` to each of ``memory_ids`` that has an
        embedding (a memory without one is left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        if not memory_ids:
            return {}
        ids = list(dict.fromkeys(memory_ids))

        def distances(conn: Connection, dim: int) -> dict[str, float]:
            return vector_sql.distances(conn, _vector(vector, dim), ids)

        return self._searching(distances, {})

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, Turn]:
        """Memory id -> (speaker, asks something, id before it (``None`` unless
        ``before``) and after it in its session and tier), for those that exist."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        with self._read() as conn:
            return conversation_sql.turns(conn, list(dict.fromkeys(memory_ids)), before)

    # --- the embedding queue and cache ------------------------------------------------------

    def unembedded(self, limit: int = 256) -> list[tuple[str, Tier, str]]:
        """Memories still waiting for an embedding: ``(id, tier, content)`` (no round
        trip while the queue was last seen empty and nothing changed since)."""
        require_int(limit, "limit", minimum=1)
        if self._queue_empty.known_empty():
            return []
        version = self._queue_empty.version()
        with self._read() as conn:
            found = vector_sql.unembedded(conn, limit)
        self._queue_empty.found(not found, version)
        return found

    def unembedded_count(self) -> int:
        """How many memories wait for a vector (no round trip while the queue was last
        seen empty and nothing changed since: see :mod:`~persistence.postgres.empty_cache`)."""
        if self._queue_empty.known_empty():
            return 0
        version = self._queue_empty.version()
        with self._read() as conn:
            count = vector_sql.unembedded_count(conn)
        self._queue_empty.found(count == 0, version)
        return count

    def set_embeddings(
        self,
        rows: Sequence[tuple[Tier, str, object]],
        contents: Sequence[str] | None = None,
        *,
        model_id: str | None = None,
    ) -> None:
        """Store computed embeddings in one transaction. A memory that got one meanwhile
        keeps it; with ``contents`` (the texts embedded, one per row), so does a memory
        whose content changed since. With ``model_id``, refused if the store records
        another model by then. The first embedding fixes the dimension."""
        if contents is not None and len(contents) != len(rows):
            raise InvalidInputError("set_embeddings: one content per row, or none")
        texts: Sequence[str | None] = contents if contents is not None else [None] * len(rows)
        encoded = [
            (tier, memory_id, _vector(vector, None), text)
            for (tier, memory_id, vector), text in zip(rows, texts, strict=True)
        ]
        with self._write() as conn:
            recorded = meta_sql.read(conn, EMBEDDING_MODEL_KEY)
            if model_id is not None and recorded not in (None, model_id):
                raise EmbeddingModelMismatchError(
                    f"{self.db.location} is now embedded with {recorded!r}, not {model_id!r}"
                )
            for dim in dict.fromkeys(v.size for _, _, v, _ in encoded):
                fix_dimension(conn, dim, self.config.embedding_dim)
            vector_sql.set_embeddings(conn, encoded)

    def cached_embeddings(self, model_id: str, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Embeddings cached for ``model_id`` by content hash
        (:func:`~persistence.records.content_hash`)."""
        require_str(model_id, "model_id", allow_empty=False)
        if not all(isinstance(h, bytes) for h in hashes):
            raise InvalidTypeError("hashes must be bytes (see content_hash)")
        with self._read() as conn:
            return embedding_cache_sql.lookup(conn, model_id, list(hashes))

    def cache_embeddings(
        self, model_id: str, entries: Sequence[tuple[bytes, object]], keep: int
    ) -> None:
        """Cache ``(content hash, vector)`` entries for ``model_id`` (a hit refreshes its
        age), then evict the least recently used beyond ``keep`` rows."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(keep, "keep", minimum=0)
        encoded = [(h, _vector(vector, None)) for h, vector in entries]
        with self._write() as conn:
            embedding_cache_sql.remember(conn, model_id, encoded, self.config.clock())
            embedding_cache_sql.evict(conn, keep)

    def record_embedding_error(self, message: str) -> int:
        """Count a failure of background embedding (with its message, stamped with the
        time); returns how many there have been."""
        require_str(message, "message")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.config.clock() / 1000))
        with self._write() as conn:
            count = meta_sql.add(conn, EMBEDDING_ERRORS_KEY, 1)
            meta_sql.write(conn, LAST_EMBEDDING_ERROR_KEY, f"{stamp} {message[:1000]}")
            return count

    # --- re-embedding with another model ----------------------------------------------------

    def begin_rebuild(self, model_id: str, dim: int) -> bool:
        """Start (or resume) staging vectors of ``model_id``; True if staged work is kept."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(dim, "dim", minimum=1)
        with self._write() as conn:
            return rebuild_sql.begin(conn, model_id, dim)

    def rebuild_state(self) -> tuple[str, int] | None:
        """``(model id, dimension)`` of the re-embedding under way, or ``None``."""
        with self._read() as conn:
            return rebuild_sql.state(conn)

    def unstaged_for_rebuild(self, limit: int = 256) -> list[tuple[str, str]]:
        """Memories the re-embedding has no vector for yet: ``(id, content)``."""
        require_int(limit, "limit", minimum=1)
        with self._read() as conn:
            return rebuild_sql.unstaged(conn, limit)

    def stage_rebuild(self, rows: Sequence[tuple[str, str, object]]) -> None:
        """Stage ``(memory id, embedded content, vector)`` in one transaction."""
        with self._write() as conn:
            rebuild_sql.stage(conn, _staged(conn, rows))

    def finish_rebuild(self, embed: Callable[[list[str]], object]) -> int:
        """Swap the staged vectors in, in ONE transaction, and return how many memories
        changed. Memories added or edited since they were staged are embedded here with
        ``embed(texts) -> [n, dim]``. Before it commits, the store is unchanged."""
        with self._write() as conn:
            under_way = rebuild_sql.state(conn)
            if under_way is None:
                raise InvalidInputError("no re-embedding under way: call begin_rebuild() first")
            missing = rebuild_sql.stale(conn)
            if missing:
                vectors = embed([content for _, content in missing])
                staged = [(i, c, v) for (i, c), v in zip(missing, vectors, strict=True)]  # type: ignore[call-overload]
                rebuild_sql.stage(conn, _staged(conn, staged))
            return rebuild_sql.swap(conn, *under_way)


def fix_dimension(conn: Connection, dim: int, configured: int | None) -> None:
    """The first embedding fixes the store's dimension (``configured``, if the store was
    given one) and makes the vector index; later ones must match it."""
    stored = meta_sql.read(conn, EMBEDDING_DIM_KEY)
    expected = int(stored) if stored is not None else configured
    if expected is not None and dim != expected:
        raise EmbeddingDimensionError(dim, expected)
    if stored is None:
        meta_sql.write(conn, EMBEDDING_DIM_KEY, str(dim))
        vector_sql.ensure_vector_index(conn, dim)


def _vector(vector: object, dim: int | None) -> np.ndarray:
    """A checked float32 vector (the errors of :func:`~persistence.codecs.encode_embedding`)."""
    return np.frombuffer(encode_embedding(vector, dim), dtype="<f4").astype(np.float32)


def _staged(
    conn: Connection, rows: Sequence[tuple[str, str, object]]
) -> list[tuple[str, bytes, np.ndarray]]:
    """Rows to stage, checked and encoded at the dimension of the re-embedding under way."""
    under_way = rebuild_sql.state(conn)
    if under_way is None:
        raise InvalidInputError("no re-embedding under way: call begin_rebuild() first")
    encoded = []
    for memory_id, content, vector in rows:
        require_str(memory_id, "memory_id")
        require_str(content, "content")
        encoded.append((memory_id, content_hash(content), _vector(vector, under_way[1])))
    return encoded


def _filter(tier: Tier | None, where: MemoryFilter | None) -> MemoryFilter:
    """One filter from a search's ``tier`` and ``where`` arguments (checked)."""
    if where is None:
        return MemoryFilter(tier=tier)
    validate_filter(where)
    if tier is not None and where.tier not in (None, tier):
        raise InvalidInputError(f"tier {tier.value} contradicts where.tier {where.tier}")
    return where if tier is None else replace(where, tier=tier)
