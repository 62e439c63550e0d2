"""StampedCache: rows a store read, kept in RAM while nothing has committed since.

Recall asks the same questions of the store call after call (which turn follows which,
the memories naming an entity, when a session started): the answers change only when
something commits. A :class:`StampedCache` keeps them, keyed (a memory id, an entity
id), together with the engine's :meth:`~persistence.engine.Engine.change_stamp` they
were read at; when the stamp moves, everything is dropped and read again. Keys the
store had no row for are kept too (as absent), so asking again costs nothing.

It never serves what a fresh read would not: every look asks the engine for its stamp
first (SQLite: one ``PRAGMA data_version``; exact), a load that raced a commit is kept
only if no look saw the stamp move meanwhile (and the next look drops it anyway), and
inside a transaction nothing is cached or served (its reads see its own writes). The
values are shared: callers must not change them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

K = TypeVar("K")
V = TypeVar("V")

MAX_KEYS = 100_000
"""Keys kept at most (values and absences); past it the cache starts again empty."""


class Stamps(Protocol):
    """What the cache needs of an engine (:class:`~persistence.engine.Engine`)."""

    def change_stamp(self) -> object | None: ...


class StampedCache(Generic[K, V]):
    """Values by key, read through ``load`` and kept while the engine's stamp stays."""

    __slots__ = ("_engine", "_max_keys", "_lock", "_stamp", "_values", "_absent")

    def __init__(self, engine: Stamps, max_keys: int = MAX_KEYS) -> None:
        self._engine = engine
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._stamp: object | None = None
        self._values: dict[K, V] = {}
        self._absent: set[K] = set()

    def get_many(self, keys: Sequence[K], load: Callable[[list[K]], Mapping[K, V]]) -> dict[K, V]:
        """The values of those of ``keys`` that have one (in the order of ``keys``): kept
        ones where the stamp has not moved, the rest from one ``load(missing)`` call
        (which returns the keys it found, in any order)."""
        stamp = self._engine.change_stamp()
        if stamp is None:  # inside a transaction: its own writes are not committed
            found = load(list(dict.fromkeys(keys)))
            return {k: found[k] for k in keys if k in found}
        values, absent = self._values, self._absent
        with self._lock:
            if stamp != self._stamp:
                values.clear()
                absent.clear()
                self._stamp = stamp
            missing = [k for k in dict.fromkeys(keys) if k not in values and k not in absent]
            if not missing:
                return {k: values[k] for k in keys if k in values}
            kept = {k: values[k] for k in keys if k in values}
        loaded = load(missing)
        with self._lock:
            # Kept only if no look saw a commit meanwhile, and never past the bound (a
            # load larger than it is not kept at all).
            if self._stamp == stamp and len(missing) <= self._max_keys:
                if len(values) + len(absent) + len(missing) > self._max_keys:
                    values.clear()
                    absent.clear()
                for k in missing:
                    if k in loaded:
                        values[k] = loaded[k]
                    else:
                        absent.add(k)
        return {k: kept[k] if k in kept else loaded[k] for k in keys if k in kept or k in loaded}

    def clear(self) -> None:
        """Drop everything (the next look reads again)."""
        with self._lock:
            self._values.clear()
            self._absent.clear()
            self._stamp = None
