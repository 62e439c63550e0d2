"""Memories waiting for an embedding, worked off in batches.

The queue is the file itself: a memory whose ``embedding`` is NULL is pending, so a
crash loses nothing and ``remember()`` never waits for the model. Batches go through the
embedding cache (identical text is embedded once per model), on :meth:`flush` and, when
enabled, in a background thread woken by each commit that adds work.

The background thread is a :class:`~persistence.Worker`. A failure in it is logged
(logger ``tiered_memory.embedding``), counted in the file
(``statistics().embedding_errors`` / ``last_embedding_error``) and retried after a pause
that doubles from ``retry_seconds[0]`` up to ``retry_seconds[1]``; the thread never dies
of it.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from cachetools import LRUCache

from persistence import (
    EMBEDDING_MODEL_KEY,
    DatabaseBusyError,
    EmbeddingModelMismatchError,
    InvalidInputError,
    MemoryStorage,
    Progress,
    Retry,
    Tier,
    Worker,
    content_hash,
    work_right,
)
from tiered_memory.embedding import compact_model
from tiered_memory.embedding.clause_blend import ClauseBlendEmbedder
from tiered_memory.embedding.embedders import (
    DEFAULT_MODEL_ID,
    Embedder,
    EmbedderError,
    OnnxEmbedder,
)

BATCH_SIZE = 256
"""Memories per batch of flush() and the background thread: the model sorts a batch by
length before cutting it into its own small batches, so a bigger one pads less (a
3,000-memory backlog: 126-179 texts/s at 512 against 110-118 at 64, one loaded VM)."""
REBUILD_BATCH = 64
"""Memories per committed step of a re-embedding (each step survives a crash)."""
CATCH_UP_SECONDS = 0.25
"""How long ``recall()`` embeds pending memories before it searches without them."""
CATCH_UP_ALWAYS = 32
"""A backlog of at most this many memories when ``recall()`` begins is embedded whole
before it searches, however long that takes, waiting for the background thread's batch
if it is on one: what was just written is never missed by the vector search (a new
store's first batch, which warms the model up, took 0.2-0.45 s: longer than
``CATCH_UP_SECONDS``). A bigger one gets ``CATCH_UP_SECONDS``, as before."""
CATCH_UP_FIRST = 4
"""Recall's first batch when it catches up: small, as its pace is not known yet."""
CATCH_UP_BATCH = 64
"""Recall's largest batch when it catches up (the others are sized by the pace)."""
RETRY_SECONDS: Retry = (1.0, 60.0)
"""The default ``retry_seconds``: the first and the longest pause after a failure."""
_IDLE_SECONDS = 2.0
_QUERY_CACHE = 256
_log = logging.getLogger("tiered_memory.embedding")


class EmbeddingQueue:
    """Embeds pending memories for one store; thread-safe.

    ``on_embedded`` is called with the ``(id, tier)`` of each batch once it is stored,
    so RAM copies (cache, scratchpad) can refresh. ``retry_seconds`` is the background
    thread's first and longest pause after a failure (an attribute too: the next
    failure reads it).
    """

    def __init__(
        self,
        store: MemoryStorage,
        configured: Embedder | str | None,
        *,
        cache_size: int,
        reembed: bool,
        on_embedded: Callable[[list[tuple[str, Tier]]], None],
        on_replaced: Callable[[], None],
        retry_seconds: Retry = RETRY_SECONDS,
    ) -> None:
        self.store = store
        self.retry_seconds = retry_seconds
        self._configured = configured
        self._cache_size = cache_size
        self._reembed = reembed
        self._on_embedded = on_embedded
        self._on_replaced = on_replaced
        self._embedder: Embedder | None = None
        self._checked = False
        self._work_lock = threading.RLock()
        self._making = threading.Lock()
        self._loading = threading.Lock()
        self._loaded: Embedder | None = None  # the embedder whose model is loaded
        self._queries: LRUCache[str, np.ndarray] = LRUCache(_QUERY_CACHE)
        self._queries_lock = threading.Lock()
        self._worker = Worker(
            f"tiered-memory-embed {store.path}",
            self._background_batches,
            logger=_log,
            what=f"background embedding on {store.path}",
            wait_s=_idle_seconds,  # the timeout also sees other processes' writes
            retry=self._retry,
            busy=(DatabaseBusyError,),  # another process holds the file: try again later
            busy_s=_IDLE_SECONDS,
            closed=self._store_closed,
            on_failure=self._failed,
        )
        self._error: BaseException | None = None

    def loaded_embedder(self) -> Embedder | None:
        """The embedder if it is loaded already (never loads or checks it)."""
        return self._embedder

    def embedder(self) -> Embedder | None:
        """The embedder (loaded on first need), checked against the model the file records.

        With ``reembed`` a file of another model is re-embedded here first, once, however
        many threads ask at the same time.
        """
        embedder = self.made()
        if embedder is None or self._checked:
            return embedder
        recorded = self.store.get_meta(EMBEDDING_MODEL_KEY)
        if recorded is None and not self.store.read_only:
            self._load(embedder)  # a model that cannot load is not recorded as the file's
            self.store.set_meta(EMBEDDING_MODEL_KEY, embedder.model_id)
            recorded = embedder.model_id
        if recorded in (None, embedder.model_id):
            # The common cases take no lock: recall never queues behind a batch for this.
            self._checked = True
            return embedder
        with self._working():
            if self._checked:
                return embedder  # another thread checked (or re-embedded) meanwhile
            recorded = self.store.get_meta(EMBEDDING_MODEL_KEY)
            if recorded is None:
                if not self.store.read_only:
                    self._load(embedder)
                    self.store.set_meta(EMBEDDING_MODEL_KEY, embedder.model_id)
            elif recorded != embedder.model_id and self.store.read_only:
                raise EmbeddingModelMismatchError(
                    f"{self.store.path} was embedded with {recorded!r}, not "
                    f"{embedder.model_id!r}, and a read-only open cannot re-embed it: open it "
                    "with that model, or with embedder=None to recall by keywords only"
                )
            elif recorded != embedder.model_id and not self._reembed:
                raise EmbeddingModelMismatchError(
                    f"{self.store.path} was embedded with {recorded!r}, not "
                    f"{embedder.model_id!r}: open it with that model, with "
                    "reembed=True to re-embed every memory, or with embedder=None"
                )
            elif recorded != embedder.model_id:
                if self.store.in_transaction:
                    raise InvalidInputError(
                        f"{self.store.path} must be re-embedded with {embedder.model_id!r} "
                        "first, and that cannot run inside a transaction: call flush() "
                        "outside one"
                    )
                if not self._rebuild(embedder):
                    return embedder  # stopped by shutdown: resumes next time
            self._checked = True
        return embedder

    def ready(self) -> Embedder | None:
        """:meth:`embedder`, its model loaded (``load_model``, where it has that step;
        a load under way in the background is waited for). Recall asks for it before
        its searches run side by side, so the model never loads beside them."""
        embedder = self.embedder()
        if embedder is not None:
            self._load(embedder)
        return embedder

    def load_model(self) -> Embedder | None:
        """The embedder made and its model loaded, not checked against the file (nothing
        is written): what a background load at open does
        (:class:`~tiered_memory.embedding.preload.ModelPreload`)."""
        embedder = self.made()
        if embedder is not None:
            self._load(embedder)
        return embedder

    def _load(self, embedder: Embedder) -> None:
        """Load ``embedder``'s model once (:func:`load_model_of`), however many threads
        and recalls ask."""
        if embedder is self._loaded:
            return
        with self._loading:
            if embedder is not self._loaded:
                load_model_of(embedder)
                self._loaded = embedder

    def made(self) -> Embedder | None:
        """The embedder, made on first need (the default one is picked by the model the
        file records), not checked against the file: nothing is written."""
        if self._embedder is None and self._configured is not None:
            with self._making:  # one model per queue, however many threads ask first
                if self._embedder is None:
                    configured = self._configured
                    self._embedder = self._default() if configured == "default" else configured  # type: ignore[assignment]
        return self._embedder

    def _default(self) -> Embedder:
        """The default model for this file: the compact MiniLM with clause-blended
        vectors (:mod:`~tiered_memory.embedding.clause_blend`), except for a file an
        earlier default embedded (MiniLM, ``DEFAULT_MODEL_ID``, or the plain compact
        MiniLM), which keeps its model unless ``reembed`` converts it (vectors of two
        models never share one index)."""
        if not self._reembed:
            recorded = self.store.get_meta(EMBEDDING_MODEL_KEY)
            if recorded == DEFAULT_MODEL_ID:
                return OnnxEmbedder()
            if recorded == compact_model.MODEL_ID:
                return OnnxEmbedder.compact()
        return ClauseBlendEmbedder(OnnxEmbedder.compact())

    @contextmanager
    def _working(self) -> Iterator[None]:
        """The right to embed (:func:`~persistence.worker.work_right`)."""
        with work_right(self._work_lock, self.store.in_transaction):
            yield

    @contextmanager
    def _working_until(self, deadline: float) -> Iterator[bool]:
        """:meth:`_working`, waited for until ``deadline`` at most: yields whether it
        was obtained."""
        if self.store.in_transaction:
            yield True
            return
        acquired = self._work_lock.acquire(timeout=max(deadline - time.monotonic(), 0.0))
        try:
            yield acquired
        finally:
            if acquired:
                self._work_lock.release()

    def recheck(self) -> None:
        """Check the file's recorded model again on next use (its content was replaced)."""
        self._checked = False
        with self._queries_lock:
            self._queries.clear()

    def embed_query(self, text: str) -> np.ndarray | None:
        """The query's vector (recent queries are kept in RAM), or ``None`` without a model."""
        embedder = self.embedder()
        if embedder is None:
            return None
        with self._queries_lock:
            cached = self._queries.get(text)
        if cached is not None:
            return cached
        vector: np.ndarray = checked_vectors(embedder, [text])[0]
        with self._queries_lock:
            self._queries[text] = vector
        return vector

    def flush(
        self,
        batch_size: int = BATCH_SIZE,
        *,
        report: bool = True,
        progress: Progress | None = None,
    ) -> int:
        """Embed every pending memory now; returns how many were embedded.

        With ``report``, first raises (once) the error the background thread's last
        attempt failed with, if it has not succeeded since. ``progress(done, total)`` is
        called after each batch (``total``: what was pending when it started, plus what
        arrived meanwhile).
        """
        if report:
            self.raise_background_error()
        if progress is None:
            return self._work(batch_size, self._never)
        total = self.store.indexes.unembedded_count() if self.embedder() is not None else 0
        progress(0, total)

        def step(done: int) -> None:
            progress(done, max(total, done))

        return self._work(batch_size, self._never, step)

    def catch_up(self, seconds: float = CATCH_UP_SECONDS) -> int:
        """Embed pending memories for at most about ``seconds``, then stop; returns how
        many still wait (what a vector search cannot see yet; 0 without a model).

        Recall calls this: it never waits for a whole backlog. The first batch is small;
        each next one is sized by the pace measured so far to end before the deadline.
        The right to embed is waited for only until the deadline (the background thread
        may be on a batch; then the search goes on without the rest), except that a
        backlog of at most :data:`CATCH_UP_ALWAYS` when recall began is embedded whole,
        the background thread's batch waited for: a memory just written is always seen.
        """
        embedder = self.embedder()
        if embedder is None:
            return 0
        deadline = time.monotonic() + seconds
        size, per_text, done = CATCH_UP_FIRST, 0.0, 0
        while True:
            with self._working_until(deadline) as acquired:
                left = deadline - time.monotonic()
                if per_text:
                    size = min(CATCH_UP_BATCH, int(0.8 * left / per_text))  # a margin
                if not acquired or left <= 0 or size < 1:
                    break
                batch = self.store.indexes.unembedded(size)
                if not batch:
                    return 0
                started = time.monotonic()
                self._embed_batch(embedder, batch)
                per_text = max((time.monotonic() - started) / len(batch), 1e-6)
                done += len(batch)
        unseen = self.store.indexes.unembedded_count()
        if unseen > 0 and unseen + done <= CATCH_UP_ALWAYS:  # a small backlog to begin with
            with self._working():  # after the background thread's batch, if it is on one
                batch = self.store.indexes.unembedded(CATCH_UP_ALWAYS)
                if batch:
                    self._embed_batch(embedder, batch)
            unseen = self.store.indexes.unembedded_count()
        return unseen

    def _never(self) -> bool:
        return False

    def _work(
        self,
        batch_size: int,
        stop: Callable[[], bool],
        step: Callable[[int], None] | None = None,
    ) -> int:
        embedder = self.embedder()
        if embedder is None:
            return 0
        done = 0
        while not stop():
            with self._working():  # per batch: recall may take a turn between them
                batch = self.store.indexes.unembedded(batch_size)
                if not batch:
                    break
                self._embed_batch(embedder, batch)
            done += len(batch)
            if step is not None:
                step(done)
        return done

    def _embed_batch(self, embedder: Embedder, batch: list[tuple[str, Tier, str]]) -> None:
        contents = [content for _, _, content in batch]
        vectors = self._vectors(embedder, contents)
        with self.store.transaction():  # RAM copies follow in the same transaction
            self.store.indexes.set_embeddings(
                [(tier, i, v) for (i, tier, _), v in zip(batch, vectors, strict=True)],
                contents,
                model_id=embedder.model_id,
            )
            self._on_embedded([(memory_id, tier) for memory_id, tier, _ in batch])
            # The model works: no background failure is left to report. Cleared before
            # the commit, so no reader sees the queue empty and the error still pending.
            self._error = None

    def _vectors(self, embedder: Embedder, contents: list[str]) -> list[np.ndarray]:
        """One vector per text: from the embedding cache, else computed (and cached)."""
        hashes = [content_hash(content) for content in contents]
        known: dict[bytes, np.ndarray] = {}
        if self._cache_size:
            known = self.store.indexes.cached_embeddings(embedder.model_id, hashes)
        texts = dict(zip(hashes, contents, strict=True))
        missing = [h for h in texts if h not in known]
        if missing:
            computed = checked_vectors(embedder, [texts[h] for h in missing])
            known.update(zip(missing, computed, strict=True))
        if self._cache_size:
            entries = [(h, known[h]) for h in texts]
            self.store.indexes.cache_embeddings(embedder.model_id, entries, self._cache_size)
        return [known[h] for h in hashes]

    def _rebuild(self, embedder: Embedder) -> bool:
        """Re-embed every memory with ``embedder``: build new vectors beside the live ones
        in committed batches (resumable after a crash), then swap them in with ONE
        transaction. False if :meth:`stop` interrupted it (the staged work is kept)."""
        self.store.indexes.begin_rebuild(embedder.model_id, embedder.dim)
        while batch := self.store.indexes.unstaged_for_rebuild(REBUILD_BATCH):
            if self._worker.stopping:
                return False
            vectors = self._vectors(embedder, [content for _, content in batch])
            self.store.indexes.stage_rebuild(
                [(i, content, v) for (i, content), v in zip(batch, vectors, strict=True)]
            )
        with self.store.transaction():
            self.store.indexes.finish_rebuild(lambda texts: checked_vectors(embedder, texts))
            self._on_replaced()
        return True

    # --- the background thread ---------------------------------------------------------

    def start(self) -> None:
        """Start the background thread (once)."""
        if self._configured is not None and not self._worker.started:
            self._worker.start()

    def notify(self) -> None:
        """Tell the background thread that there may be new work."""
        self._worker.notify()

    def stop(self) -> None:
        """Stop the background thread after its current batch and wait for it."""
        self._worker.stop()

    def raise_background_error(self) -> None:
        """Re-raise (once) the error the background thread is retrying after (and start
        the thread again should it have died)."""
        error, self._error = self._error, None
        if error is None:
            return
        if self._worker.started and not self._worker.running:
            self._worker.start()
        raise EmbedderError(f"background embedding failed (retrying): {error}") from error

    def _retry(self) -> Retry:
        return self.retry_seconds

    def _store_closed(self) -> bool:
        return not self.store.is_open

    def _background_batches(self) -> None:
        """The background thread's job: embed what is pending, batch by batch."""
        self._work(BATCH_SIZE, self._worker_stopping)
        self._error = None  # also when there was nothing left to embed

    def _worker_stopping(self) -> bool:
        return self._worker.stopping

    def _failed(self, exc: Exception) -> None:
        """Count a background failure (logged already) in the file."""
        self._error = exc
        try:
            self.store.indexes.record_embedding_error(f"{type(exc).__name__}: {exc}")
        except Exception as record_exc:  # the file is busy, full, closing: the log has it
            _log.warning("could not count the embedding failure in the file: %s", record_exc)


def _idle_seconds() -> float:
    return _IDLE_SECONDS


def load_model_of(embedder: Embedder) -> None:
    """Load the embedder's model now, if it has that step: a ``load_model()`` that takes
    no arguments (the library's encoders have one; an embedder's own ``load_model(path)``
    is not the library's to call). Its failure is an ``EmbedderError`` (another error is
    wrapped in one), and it comes before the file records the model."""
    load = getattr(embedder, "load_model", None)
    if not callable(load) or not _without_arguments(load):
        return
    try:
        load()
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(
            f"the embedder's load_model() failed ({type(exc).__name__}: {exc}): check its "
            "model files, or open with embedder=None to recall by keywords only"
        ) from exc


def _without_arguments(function: Callable[..., object]) -> bool:
    """True if ``function`` can be called with no argument."""
    try:
        inspect.signature(function).bind()
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): call it as the library's
        return True
    return True


def checked_vectors(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """The embedder's output as float32 ``[len(texts), dim]``, or a clear error."""
    try:
        vectors = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    except EmbedderError:
        raise
    except Exception as exc:
        raise EmbedderError(f"embedder {embedder.model_id!r} failed: {exc}") from exc
    if vectors.shape != (len(texts), embedder.dim):
        raise EmbedderError(
            f"embedder {embedder.model_id!r} returned shape {vectors.shape} for "
            f"{len(texts)} texts; expected ({len(texts)}, {embedder.dim})"
        )
    return vectors
