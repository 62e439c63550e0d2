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
load cannot be interrupted, and no thread outlives its manager. A fork waits for every
load under way too (``os.register_at_fork``): a child forked while the thread held
Python's import lock (onnxruntime's import) would hang at its first model load.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable

_log = logging.getLogger("tiered_memory.embedding")


class ModelPreload:
    """At most one background load of the embedding model at a time (module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        _PRELOADS.add(self)

    @property
    def running(self) -> bool:
        """True while a load started by :meth:`start` is under way."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, load: Callable[[], object]) -> None:
        """Run ``load`` (make the embedder and load its model) in a thread (none is
        started while one runs)."""
        with self._lock:
            if self.running:
                return
            self._thread = threading.Thread(target=_load, args=(load,), name=self.name, daemon=True)
            self._thread.start()

    def join(self) -> None:
        """Wait for the load under way, if any (it cannot be interrupted)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def wait(self) -> None:
        """Wait for the load under way, if any, keeping it as this preload's."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()


_PRELOADS: weakref.WeakSet[ModelPreload] = weakref.WeakSet()


def _before_fork() -> None:
    """Let every load under way finish before a fork (module docstring)."""
    for preload in list(_PRELOADS):
        preload.wait()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(before=_before_fork)


def _load(load: Callable[[], object]) -> None:
    try:
        load()
    except Exception as exc:  # the first use loads again and raises it there
        _log.debug("loading the embedding model ahead of use failed: %s", exc)
