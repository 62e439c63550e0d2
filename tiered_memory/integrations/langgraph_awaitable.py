"""Answers of the store's lifecycle calls that also work with ``await``.

LangGraph's ``SqliteStore`` has ``setup()``, ``start_ttl_sweeper()`` and
``stop_ttl_sweeper()`` as plain calls; its ``AsyncSqliteStore`` has the same names as
coroutines (``await store.setup()``). One :class:`TieredMemoryStore` serves both: each
call does its work at once and returns a value that can also be awaited, which gives
what the async store's coroutine gives, without waiting for anything.
"""

from __future__ import annotations

from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Self


class Done:
    """``setup()``'s answer: nothing left to do; ``await`` gives ``None``."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return None
        yield  # a generator that finishes at once


class SweeperFuture(Future[None]):
    """The TTL sweeper's future (done when it stops). ``await`` gives the future itself
    at once, as awaiting ``AsyncSqliteStore.start_ttl_sweeper()`` gives its task."""

    def __await__(self) -> Generator[Any, None, Self]:
        return self
        yield  # a generator that finishes at once


@dataclass(frozen=True, slots=True)
class Stopped:
    """``stop_ttl_sweeper()``'s answer: true when the sweeper has stopped (or none ran);
    ``await`` gives that bool."""

    stopped: bool

    def __bool__(self) -> bool:
        return self.stopped

    def __await__(self) -> Generator[Any, None, bool]:
        return self.stopped
        yield  # a generator that finishes at once


class Swept(int):
    """``sweep_ttl()``'s answer: how many items were forgotten (an ``int``); ``await``
    gives the same number, as awaiting ``AsyncSqliteStore.sweep_ttl()`` does."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, int]:
        return int(self)
        yield  # a generator that finishes at once
