"""AsyncAgentMemoryManager: the manager's API as coroutines, for asyncio agent runtimes.

Every call runs in a worker thread the async manager owns (not the loop's default
executor), so the event loop only waits for a future. One worker by default: writes are
serialized by the store's lock anyway, and the library's Python work holds the GIL, so
more workers added no throughput in ``benchmarks/test_aio_bench.py`` and made the loop
wait longer for the GIL (p99 lag 5-46 ms with 2 and 4 workers, 4-7 ms with one, on a
busy 2-core VM). ``workers=`` raises it where calls mostly wait outside Python
(recall with an embedding model: onnxruntime and SQLite release the GIL);
the manager is thread-safe, so they then run side by side.

Cancellation never leaves a call half done. A call still queued is dropped and never
runs; a call already running in a worker is finished first (its transaction commits or
rolls back whole), then :class:`asyncio.CancelledError` is raised. So once a cancelled
``await memory.remember(...)`` has raised, the memory is either fully stored or absent,
and later calls see which.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from persistence import InvalidInputError, InvalidTypeError, Memory, StoreClosedError, Tier
from tiered_memory.aio_notes import AsyncNotes
from tiered_memory.arguments import typed_arguments
from tiered_memory.config import MemoryConfig
from tiered_memory.manager import AgentMemoryManager

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_WORKERS = 1


async def settled(
    executor: ThreadPoolExecutor, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    """``fn(*args, **kwargs)`` in ``executor``; a cancelled caller waits until it settled.

    A call not yet started is withdrawn (it never runs). A running call cannot be
    stopped halfway, so the caller waits for it to finish, then raises
    :class:`asyncio.CancelledError` (once, however often it was cancelled meanwhile).
    The call runs in a copy of the caller's context (as :func:`asyncio.to_thread`), so
    its OpenTelemetry span is a child of the caller's current span.
    """
    context = contextvars.copy_context()
    try:
        submitted: Future[R] = executor.submit(partial(context.run, fn, *args, **kwargs))
    except RuntimeError as exc:  # the pool was shut down with the manager
        raise StoreClosedError("memory manager is closed") from exc
    waiting = asyncio.wrap_future(submitted)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        if submitted.cancel():
            raise  # still queued: it will never run
        while not waiting.done():
            try:
                await asyncio.wait((waiting,))
            except asyncio.CancelledError:
                continue  # cancelled again: still wait for the call to settle
        if not waiting.cancelled():
            waiting.exception()  # retrieved: the caller asked to cancel, not for the result
        raise


def _coroutine(
    method: Callable[Concatenate[AgentMemoryManager, P], R],
) -> Callable[Concatenate[AsyncAgentMemoryManager, P], Coroutine[Any, Any, R]]:
    """The async form of an :class:`AgentMemoryManager` method, same arguments."""

    async def call(self: AsyncAgentMemoryManager, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await settled(self._executor, method, self.manager, *args, **kwargs)

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    return call


@typed_arguments
class AsyncAgentMemoryManager:
    """:class:`AgentMemoryManager` for asyncio: each method is a coroutine of the same name.

    Build one with ``await AsyncAgentMemoryManager.open(path, **config)`` (or
    :meth:`in_memory`, or wrap an open manager), use ``async with``, and group calls into
    one transaction with :meth:`run` (``await memory.run(lambda m: ...)`` runs a function
    of the manager in a worker, where ``with m.transaction():`` works as usual).
    """

    def __init__(self, manager: AgentMemoryManager, *, workers: int = DEFAULT_WORKERS) -> None:
        if not isinstance(manager, AgentMemoryManager):
            raise InvalidTypeError(
                f"manager must be an AgentMemoryManager, got {type(manager).__name__}"
            )
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
            raise InvalidInputError(f"workers must be an int from 1 to 64, got {workers!r}")
        self.manager = manager
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="tiered-memory-aio")
        self.notes = AsyncNotes(manager.notes, partial(settled, self._executor))
        """The notes (``await memory.notes.create(...)``; see :mod:`tiered_memory.notes`)."""

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        read_only: bool = False,
        workers: int = DEFAULT_WORKERS,
        **overrides: Any,
    ) -> Self:
        """Open (create or migrate) a durable file off the event loop; see
        :meth:`AgentMemoryManager.open`."""
        manager = await asyncio.to_thread(
            AgentMemoryManager.open, path, config, read_only=read_only, **overrides
        )
        return cls(manager, workers=workers)

    @classmethod
    async def in_memory(
        cls, config: MemoryConfig | None = None, *, workers: int = DEFAULT_WORKERS, **overrides: Any
    ) -> Self:
        """The same API with nothing on disk."""
        manager = await asyncio.to_thread(AgentMemoryManager.in_memory, config, **overrides)
        return cls(manager, workers=workers)

    async def shutdown(self) -> None:
        """Wait for calls under way, then shut the manager down (closing twice is harmless)."""
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        await asyncio.to_thread(self.manager.shutdown)

    close = shutdown

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    @property
    def read_only(self) -> bool:
        """True when opened with ``read_only=True``."""
        return self.manager.read_only

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` in memory."""
        return self.manager.path

    @property
    def location(self) -> str:
        """Where the memory lives, safe to print or log (see ``AgentMemoryManager``)."""
        return self.manager.location

    async def run(
        self, fn: Callable[Concatenate[AgentMemoryManager, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """``fn(manager, *args, **kwargs)`` in a worker, with the same cancellation rule.

        For work that must be one transaction (``with manager.transaction():``) or the
        parts of the API that are not methods of the manager (``manager.scratchpad``).
        """
        return await settled(self._executor, fn, self.manager, *args, **kwargs)

    async def remember_many(
        self,
        records: Sequence[str | Mapping[str, Any]],
        tier: Tier | str = Tier.EPISODIC,
        **fields: Any,
    ) -> list[Memory]:
        """See :meth:`AgentMemoryManager.remember_many`."""
        return await self.run(lambda m: m.remember_many(records, tier, **fields))

    async def query(self, tier: Tier | str | None = None, **filters: Any) -> list[Memory]:
        """See :meth:`AgentMemoryManager.query`."""
        return await self.run(lambda m: m.query(tier, **filters))

    remember = _coroutine(AgentMemoryManager.remember)
    tag_counts = _coroutine(AgentMemoryManager.tag_counts)
    get = _coroutine(AgentMemoryManager.get)
    update = _coroutine(AgentMemoryManager.update)
    forget = _coroutine(AgentMemoryManager.forget)
    forget_many = _coroutine(AgentMemoryManager.forget_many)
    forget_session = _coroutine(AgentMemoryManager.forget_session)
    forget_agent = _coroutine(AgentMemoryManager.forget_agent)
    link = _coroutine(AgentMemoryManager.link)
    unlink = _coroutine(AgentMemoryManager.unlink)
    linked = _coroutine(AgentMemoryManager.linked)
    start_session = _coroutine(AgentMemoryManager.start_session)
    end_session = _coroutine(AgentMemoryManager.end_session)
    get_session = _coroutine(AgentMemoryManager.get_session)
    active_sessions = _coroutine(AgentMemoryManager.active_sessions)
    append_transcript = _coroutine(AgentMemoryManager.append_transcript)
    get_transcript = _coroutine(AgentMemoryManager.get_transcript)
    promote = _coroutine(AgentMemoryManager.promote)
    promotion_history = _coroutine(AgentMemoryManager.promotion_history)
    consolidate = _coroutine(AgentMemoryManager.consolidate)
    review = _coroutine(AgentMemoryManager.review)
    schedule = _coroutine(AgentMemoryManager.schedule)
    due_for_review = _coroutine(AgentMemoryManager.due_for_review)
    decay = _coroutine(AgentMemoryManager.decay)
    forgetting_log = _coroutine(AgentMemoryManager.forgetting_log)
    statistics = _coroutine(AgentMemoryManager.statistics)
    backup = _coroutine(AgentMemoryManager.backup)
    restore = _coroutine(AgentMemoryManager.restore)
    export_json = _coroutine(AgentMemoryManager.export_json)
    import_json = _coroutine(AgentMemoryManager.import_json)
    check_integrity = _coroutine(AgentMemoryManager.check_integrity)
    maintain = _coroutine(AgentMemoryManager.maintain)
    rekey = _coroutine(AgentMemoryManager.rekey)
    embedder = _coroutine(AgentMemoryManager.embedder)
    flush = _coroutine(AgentMemoryManager.flush)
    recall = _coroutine(AgentMemoryManager.recall)
    context = _coroutine(AgentMemoryManager.context)
    history = _coroutine(AgentMemoryManager.history)
    timeline = _coroutine(AgentMemoryManager.timeline)
