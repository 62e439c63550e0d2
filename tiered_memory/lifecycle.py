"""Opening and closing a manager's store together with the work that runs beside it.

Opening loads the scratchpad, deletes what interrupted backups left behind and starts
the background threads (embedding, extraction) a writable file wants, and the one that
loads the embedding model meanwhile (:mod:`~tiered_memory.embedding.preload`); closing
stops them and writes recall's pending reviews first. :meth:`Lifecycle.flush` does the
background work now instead.
"""

from __future__ import annotations

import logging

from persistence import Backend, InvalidInputError, Progress, require_callable, require_int
from tiered_memory.config import MemoryConfig
from tiered_memory.embedding.preload import ModelPreload
from tiered_memory.embedding.queue import EmbeddingQueue
from tiered_memory.graph.extraction import ExtractionQueue
from tiered_memory.memories import Memories
from tiered_memory.recall.recaller import Recaller
from tiered_memory.telemetry import CREATE_MEMORY_STORE, Telemetry

logger = logging.getLogger("tiered_memory")


class Lifecycle:
    """Start, catch up and stop one manager (see the module docstring)."""

    def __init__(
        self,
        backend: Backend,
        memories: Memories,
        config: MemoryConfig,
        embeddings: EmbeddingQueue,
        extraction: ExtractionQueue,
        recaller: Recaller,
    ) -> None:
        self.store = backend.store
        self._backups = backend.backups
        self._memories = memories
        self._config = config
        self._embeddings = embeddings
        self._extraction = extraction
        self._recaller = recaller
        self._preload = ModelPreload(f"tiered-memory-model {self.store.location}")

    def open(self, telemetry: Telemetry) -> None:
        """Open the store and start what runs beside it, in a ``create_memory_store``
        span of ``telemetry``; a second call does nothing."""
        if self.store.is_open:
            return
        with telemetry.span(CREATE_MEMORY_STORE) as span:
            self._open()
            span.opened(self.store.migrations_applied)

    def _open(self) -> None:
        self.store.open()
        try:
            self._backups.remove_leftovers()
            self._memories.scratchpad.load()
            if self._config.embed_in_background and not self.store.read_only:
                self._embeddings.start()
                self._embeddings.notify()  # work left over from an earlier run
            if self._config.extracts_in_background and not self.store.read_only:
                self._extraction.start()
                self._extraction.notify()  # an old file's memories, or an earlier run's
            # Last: the load runs while the caller does its own work after open(), and
            # never beside the open (onnxruntime holds the GIL while it loads: the two
            # took longer side by side than one after the other, on a busy 2-core VM).
            if self._config.load_model_at_open and self._config.embedder is not None:
                self._preload.start(self._embeddings.load_model)
        except BaseException:
            # A damaged table, say: close what was opened (the caller never gets a
            # manager to close), so no connection to the file outlives the error.
            try:
                self.close()
            except Exception as exc:  # the first error is the one to report
                logger.debug("closing after a failed open: %s", exc)
            raise

    def close(self) -> None:
        """Stop the background threads, write pending recall reviews, close the store."""
        if self.store.in_transaction:
            raise InvalidInputError("shutdown() inside a transaction: finish the transaction first")
        self._preload.join()  # a model load cannot be interrupted: no thread outlives us
        self._embeddings.stop()
        self._recaller.stop()
        self._extraction.stop()
        try:
            if self.store.is_open:
                self._recaller.apply_reviews(drop_if_busy=True)  # closing: never fails for busy
        finally:  # a full disk, say, must not leave the file open
            self.store.close()
            self._memories.cache.clear()

    def flush(self, batch_size: int, progress: Progress | None = None) -> int:
        """Write pending recall reviews, embed what waits for a vector, extract what waits
        for extraction; returns how many memories were embedded."""
        self._memories.require_open()
        require_int(batch_size, "batch_size", minimum=1)
        require_callable(progress, "progress", allow_none=True)
        self.store.engine.require_writable()
        self._recaller.apply_reviews()
        embedded = self._embeddings.flush(batch_size, progress=progress)
        self._extraction.flush()  # and the knowledge graph catches up
        return embedded
