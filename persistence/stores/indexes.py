"""IndexStore: what recall searches (keyword and vector search, conversation turns) and
the embeddings that feed the vector search, written once for both engines.

It runs over the engine interface (:class:`~persistence.engine.Engine`) the statements
the engine's SQL builds (:class:`IndexSql`: modules of the same names on both engines),
with :mod:`persistence.statements`. What truly differs between the engines is handed in
as named objects:

- :class:`KeywordSearch`: FTS5 bm25 over the file (SQLite) or the same bm25 over the
  posting table ``tm_kw_postings`` (PostgreSQL); a search inside a transaction catches
  its writes up first (nothing waits on PostgreSQL).
- :class:`VectorIndex`: how a search reads the stored dimension and finds the nearest
  (SQLite's RAM copy of 3-bit codes, or its cells of them kept in the file, re-ranked
  exactly; PostgreSQL's HNSW), and what a
  new or swapped set of vectors must also update.
- :class:`~persistence.stores.empty_cache.EmptyCache`: whether "the embedding queue is
  empty" may be answered without a read (PostgreSQL's version row; SQLite always reads,
  it is local).

These and the SQL's shape are :mod:`persistence.stores.index_engine`.

On an agent-scoped handle (``config.scope``) the searches find that agent's memories
only: the search filter's ``agent_id`` is the scope's agent (a filter naming another
agent finds nothing), and keyword parts are read for its memories only. On PostgreSQL
row-level security filters the same rows again.

Vectors reach the SQL as float32 arrays (:func:`as_vector`); an engine stores them its
own way (a BLOB, a pgvector value).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Generic, TypeVar

import numpy as np

from persistence.codecs import encode_embedding
from persistence.engine import Connection, Engine
from persistence.errors import EmbeddingModelMismatchError, InvalidInputError, InvalidTypeError
from persistence.meta_keys import (
    EMBEDDING_ERRORS_KEY,
    EMBEDDING_MODEL_KEY,
    LAST_EMBEDDING_ERROR_KEY,
    REBUILD_DIM_KEY,
    REBUILD_MODEL_KEY,
)
from persistence.records import KeywordParts, MemoryFilter, Tier, Turn, content_hash
from persistence.statements import count, rows, run, run_all, run_batch, value
from persistence.stores.config import StoreConfig
from persistence.stores.empty_cache import EmptyCache, NothingCached
from persistence.stores.facts import rebuild_state, swapped_model
from persistence.stores.index_engine import (
    IndexSql,
    KeywordSearch,
    VectorIndex,
)
from persistence.stores.stamped import StampedCache
from persistence.validation import (
    require_int,
    require_str,
    require_str_tuple,
    require_unit_float,
    validate_filter,
)

NO_REBUILD = "no re-embedding under way: call begin_rebuild() first"


V = TypeVar("V", bound=VectorIndex)


class IndexStore(Generic[V]):
    """The recall indexes of one store and the embeddings behind them (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        sql: IndexSql,
        keywords: KeywordSearch,
        vectors: V,
        config: StoreConfig,
        *,
        location: str,
        exact_scan_max: int,
        queue: EmptyCache | None = None,
    ) -> None:
        self.engine = engine
        self.sql = sql
        self.keywords = keywords
        self.vectors = vectors
        self.config = config
        """The store's settings, read live (clock, embedding size, scope)."""
        self.location = location
        """Names the store in errors."""
        self.exact_scan_max = exact_scan_max
        """Settable: tests lower it to force the deeper search."""
        self.queue = queue if queue is not None else NothingCached()
        self._turns: StampedCache[str, Turn] = StampedCache(engine)

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
        """``(memory_id, score)`` of the memories holding any of ``words``, best (lowest,
        FTS5's bm25 or its equal) first; ``[]`` for no words. Words found only in the two
        memories before a memory in its session count ``context_weight`` as much as its
        own, in the two after it ``after_weight``. ``where`` restricts the search itself:
        the best ``limit`` memories it accepts come back. Inside a transaction its own
        writes are indexed first."""
        require_str_tuple(words, "words")
        require_int(limit, "limit", minimum=1)
        require_unit_float(context_weight, "context_weight")
        require_unit_float(after_weight, "after_weight")
        accepted = self._scoped(search_filter(tier, where))
        if not words or accepted is None:
            return []
        with self.engine.reading() as conn:
            if self.engine.in_transaction:  # this transaction's writes are not indexed yet
                self.keywords.catch_up(conn)
            return self.keywords.search(conn, words, limit, accepted, context_weight, after_weight)

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        """Which parts of each memory's keyword window hold any of ``words`` (see
        :meth:`persistence.storage.MemoryStorage.keyword_parts`)."""
        require_str_tuple(words, "words")
        require_str_tuple(memory_ids, "memory_ids")
        if not words or not memory_ids:
            return {}
        with self.engine.reading() as conn:
            if self.engine.in_transaction:
                self.keywords.catch_up(conn)
            return self.keywords.parts(conn, words, memory_ids, self.config.scope)

    def vector_search(
        self,
        vector: object,
        limit: int,
        tier: Tier | None = None,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine distance)`` nearest first ([] before any embedding exists).
        A filter an index serves (session, agent, tags, time range) that accepts at most
        ``exact_scan_max`` memories is compared exactly; otherwise the engine's index
        finds candidates that pass ``where`` (see :class:`VectorIndex`)."""
        require_int(limit, "limit", minimum=1)
        accepted = self._scoped(search_filter(tier, where))
        if accepted is None:
            return []

        def search(conn: Connection, dim: int) -> list[tuple[str, float]]:
            query = as_vector(vector, dim)
            return self.vectors.nearest(conn, query, limit, accepted, self.exact_scan_max)

        return self.vectors.searching(search, [])

    def _scoped(self, where: MemoryFilter) -> MemoryFilter | None:
        """``where`` within the scope: its agent the scope's (``None``: a filter naming
        another agent, which finds nothing here)."""
        agent_id = self.config.scope.agent_id
        if agent_id is None:
            return where
        if where.agent_id not in (None, agent_id):
            return None
        return replace(where, agent_id=agent_id)

    def vector_distances(self, vector: object, memory_ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine distance from ``vector`` to each of ``memory_ids`` that has an
        embedding (a memory without one is left out)."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        if not memory_ids:
            return {}
        ids = list(dict.fromkeys(memory_ids))

        def distances(conn: Connection, dim: int) -> dict[str, float]:
            return self.vectors.distances(conn, as_vector(vector, dim), ids)

        return self.vectors.searching(distances, {})

    def conversation_turns(
        self, memory_ids: Sequence[str], *, before: bool = False
    ) -> dict[str, Turn]:
        """Memory id -> (speaker, asks something, id before it (``None`` unless
        ``before``) and after it in its session), for those of ``memory_ids`` that
        exist, in the order asked (recall's conversation signals and reranking). Kept
        in RAM until something commits (:class:`~persistence.stores.stamped.StampedCache`):
        recall asks about mostly the same memories call after call."""
        for memory_id in memory_ids:
            require_str(memory_id, "memory_id")
        if not memory_ids:
            with self.engine.reading():  # a closed store still says so
                return {}
        found = self._turns.get_many(memory_ids, self._read_turns)
        if before:
            return found
        return {m: (t[0], t[1], None, t[3]) for m, t in found.items()}

    def _read_turns(self, ids: list[str]) -> dict[str, Turn]:
        with self.engine.reading() as conn:
            found = rows(conn, self.sql.conversation.turns(ids, True))
            return {r[0]: (r[1], bool(r[2]), r[3], r[4]) for r in found}

    # --- the embedding queue and cache ------------------------------------------------------

    def unembedded(self, limit: int = 256) -> list[tuple[str, Tier, str]]:
        """Memories still waiting for an embedding: ``(id, tier, content)``."""
        require_int(limit, "limit", minimum=1)
        if self.queue.known_empty():
            return []
        version = self.queue.version()
        statement = self.sql.embeddings.unembedded(limit)
        with self.engine.reading() as conn:
            found = [(r[0], Tier(r[1]), r[2]) for r in rows(conn, statement)]
        self.queue.found(not found, version)
        return found

    def unembedded_count(self) -> int:
        """How many memories wait for an embedding."""
        if self.queue.known_empty():
            return 0
        version = self.queue.version()
        with self.engine.reading() as conn:
            count = int(value(conn, self.sql.embeddings.unembedded_count()) or 0)
        self.queue.found(count == 0, version)
        return count

    def set_embeddings(
        self,
        rows: Sequence[tuple[Tier, str, object]],
        contents: Sequence[str] | None = None,
        *,
        model_id: str | None = None,
    ) -> None:
        """Store computed embeddings in one transaction. A memory that got an embedding
        meanwhile keeps it; with ``contents`` (the texts that were embedded, one per row),
        so does a memory whose content changed since. With ``model_id``, refused if the
        store records another model by then (another process may have re-embedded it).
        The first embedding fixes the dimension."""
        if contents is not None and len(contents) != len(rows):
            raise InvalidInputError("set_embeddings: one content per row, or none")
        texts: Sequence[str | None] = contents if contents is not None else [None] * len(rows)
        encoded = [
            (tier, memory_id, as_vector(vector, None), text)
            for (tier, memory_id, vector), text in zip(rows, texts, strict=True)
        ]
        with self.engine.transaction() as conn:
            recorded = value(conn, self.sql.meta.read(EMBEDDING_MODEL_KEY))
            if model_id is not None and recorded not in (None, model_id):
                raise EmbeddingModelMismatchError(
                    f"{self.location} is now embedded with {recorded!r}, not {model_id!r}"
                )
            for dim in dict.fromkeys(v.size for _, _, v, _ in encoded):
                self.vectors.fix_dimension(conn, dim, self.config.embedding_dim)
            for batch in self.sql.embeddings.set_embeddings(encoded):
                run_batch(conn, batch)
            self.vectors.written(conn)

    def cached_embeddings(self, model_id: str, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Embeddings cached for ``model_id`` by content hash
        (:func:`~persistence.records.content_hash`)."""
        require_str(model_id, "model_id", allow_empty=False)
        if not all(isinstance(h, bytes) for h in hashes):
            raise InvalidTypeError("hashes must be bytes (see content_hash)")
        with self.engine.reading() as conn:
            if not hashes:
                return {}
            return self.sql.cache.cached(rows(conn, self.sql.cache.lookup(model_id, hashes)))

    def cache_embeddings(
        self, model_id: str, entries: Sequence[tuple[bytes, object]], keep: int
    ) -> None:
        """Cache ``(content hash, vector)`` entries for ``model_id`` (a hit refreshes its
        age), then evict the least recently used beyond ``keep`` rows."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(keep, "keep", minimum=0)
        encoded = [(h, as_vector(vector, None)) for h, vector in entries]
        cache = self.sql.cache
        with self.engine.transaction() as conn:
            run_batch(conn, cache.remember(model_id, encoded, self.config.clock()))
            excess = int(value(conn, cache.COUNT) or 0) - keep
            if excess > 0:
                run(conn, cache.evict(excess))

    def record_embedding_error(self, message: str) -> int:
        """Count a failure of background embedding (with its message, stamped with the
        time); returns how many there have been."""
        require_str(message, "message")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.config.clock() / 1000))
        with self.engine.transaction() as conn:
            count = int(value(conn, self.sql.meta.add(EMBEDDING_ERRORS_KEY, 1)))
            run(conn, self.sql.meta.write(LAST_EMBEDDING_ERROR_KEY, f"{stamp} {message[:1000]}"))
            return count

    # --- re-embedding with another model ----------------------------------------------------

    def begin_rebuild(self, model_id: str, dim: int) -> bool:
        """Start (or resume) staging vectors of ``model_id``; True if staged work is kept."""
        require_str(model_id, "model_id", allow_empty=False)
        require_int(dim, "dim", minimum=1)
        with self.engine.transaction() as conn:
            if rebuild_state(conn, self.sql.meta) == (model_id, dim):
                return True
            run(conn, self.sql.rebuild.clear())
            run(conn, self.sql.meta.write(REBUILD_MODEL_KEY, model_id))
            run(conn, self.sql.meta.write(REBUILD_DIM_KEY, str(dim)))
            return False

    def rebuild_state(self) -> tuple[str, int] | None:
        """``(model id, dimension)`` of the re-embedding under way, or ``None``."""
        with self.engine.reading() as conn:
            return rebuild_state(conn, self.sql.meta)

    def unstaged_for_rebuild(self, limit: int = 256) -> list[tuple[str, str]]:
        """Memories the re-embedding has no vector for yet: ``(id, content)``."""
        require_int(limit, "limit", minimum=1)
        with self.engine.reading() as conn:
            return [(r[0], r[1]) for r in rows(conn, self.sql.rebuild.unstaged(limit))]

    def stage_rebuild(self, rows: Sequence[tuple[str, str, object]]) -> None:
        """Stage ``(memory id, embedded content, vector)`` in one transaction."""
        with self.engine.transaction() as conn:
            run_batch(conn, self.sql.rebuild.stage(self._staged(conn, rows)))

    def finish_rebuild(self, embed: Callable[[list[str]], object]) -> int:
        """Swap the staged vectors in, in ONE transaction, and return how many memories
        changed. Memories added or edited since they were staged are embedded here with
        ``embed(texts) -> [n, dim]``. Before it commits, the store is unchanged."""
        rebuild = self.sql.rebuild
        with self.engine.transaction() as conn:
            under_way = rebuild_state(conn, self.sql.meta)
            if under_way is None:
                raise InvalidInputError(NO_REBUILD)
            missing = [
                (i, c) for i, c, h in rows(conn, rebuild.staged())
                if h is None or bytes(h) != content_hash(c)
            ]  # fmt: skip
            if missing:
                vectors = embed([content for _, content in missing])
                staged = [(i, c, v) for (i, c), v in zip(missing, vectors, strict=True)]  # type: ignore[call-overload]
                run_batch(conn, rebuild.stage(self._staged(conn, staged)))
            model_id, dim = under_way
            self.vectors.swapping(conn)
            run_all(conn, rebuild.drop_unstaged())
            updated = sum(count(conn, statement) for statement in rebuild.swap())
            run_all(conn, swapped_model(self.sql.meta, model_id, dim))
            run(conn, rebuild.clear())
            self.vectors.swapped(conn, dim)
            return updated

    def _staged(
        self, conn: Connection, rows: Sequence[tuple[str, str, object]]
    ) -> list[tuple[str, bytes, np.ndarray]]:
        """Rows to stage, checked and encoded at the dimension of the re-embedding under way."""
        under_way = rebuild_state(conn, self.sql.meta)
        if under_way is None:
            raise InvalidInputError(NO_REBUILD)
        encoded = []
        for memory_id, content, vector in rows:
            require_str(memory_id, "memory_id")
            require_str(content, "content")
            encoded.append((memory_id, content_hash(content), as_vector(vector, under_way[1])))
        return encoded


def as_vector(vector: object, dim: int | None) -> np.ndarray:
    """A checked float32 vector (the errors of :func:`~persistence.codecs.encode_embedding`)."""
    return np.frombuffer(encode_embedding(vector, dim), dtype="<f4").astype(np.float32)


def search_filter(tier: Tier | None, where: MemoryFilter | None) -> MemoryFilter:
    """One filter from a search's ``tier`` and ``where`` arguments (checked)."""
    if where is None:
        return MemoryFilter(tier=tier)
    validate_filter(where)
    if tier is not None and where.tier not in (None, tier):
        raise InvalidInputError(f"tier {tier.value} contradicts where.tier {where.tier}")
    return where if tier is None else replace(where, tier=tier)
