"""The embedding model loaded in a thread once a file is open, so the first recall finds
it ready.

Loading the default model (onnxruntime's import, its session, the tokenizer) takes
0.2-0.4 s, more than opening a file of a million memories. At the end of an open the
manager starts :class:`ModelPreload`: a thread that makes the embedder (the default one
is picked by the model the file records) and calls its ``load_model()``, if it has one
(:class:`~tiered_memory.embedding.onnx_encoder.OnnxEncoder` and
:class:`~tiered_memory.embedding.clause_blend.ClauseBlendEmbedder` do). The load runs
while the caller does its own work after ``open()`` (an agent waiting for its user or
its LLM); a recall that comes first waits for it before its searches start
(:meth:`~tiered_memory.embedding.queue.EmbeddingQueue.ready`). Not beside the open or
the searches: onnxruntime holds the GIL while it loads, and on a busy 2-core VM the two
side by side took longer than one after the other.

A load that fails here is logged at debug level and forgotten: the first use loads
again and raises its error (``EmbedderError``) where it is used, as without the thread.
The thread writes nothing, and :meth:`ModelPreload.join` (at close) waits for it: a
load cannot be interrupted, and no thread outlives its manager.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tiered_memory.embedding.onnx_encoder import Embedder

_log = logging.getLogger("tiered_memory.embedding")


class ModelPreload:
    """At most one background load of the embedding model at a time (module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """True while a load started by :meth:`start` is under way."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, make: Callable[[], Embedder | None]) -> None:
        """Make the embedder with ``make`` and load its model, in a thread (none is
        started while one runs)."""
        with self._lock:
            if self.running:
                return
            self._thread = threading.Thread(target=_load, args=(make,), name=self.name, daemon=True)
            self._thread.start()

    def join(self) -> None:
        """Wait for the load under way, if any (it cannot be interrupted)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()


def _load(make: Callable[[], Embedder | None]) -> None:
    try:
        embedder = make()
        load = getattr(embedder, "load_model", None)
        if callable(load):
            load()
    except Exception as exc:  # the first use loads again and raises it there
        _log.debug("loading the embedding model ahead of use failed: %s", exc)
