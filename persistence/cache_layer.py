"""CacheLayer: a thread-safe, write-through LRU cache (``cachetools.LRUCache``) in front of
the store, which holds only committed values.

A write goes to the store first; the cache drops the key at once and is filled only
after COMMIT (a rollback drops it again), so it never serves a value the file does not
have. A generation counter stops a read that raced a write from caching the old value.
Inside a transaction the owning thread bypasses the cache and reads the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from cachetools import LRUCache

from persistence.errors import InvalidInputError
from persistence.records import CacheStatistics

K = TypeVar("K")
V = TypeVar("V")


class TransactionHooks(Protocol):
    """What the cache needs of a store's transactions: its engine (``store.engine``)
    provides it."""

    @property
    def in_transaction(self) -> bool: ...

    def after_commit(self, callback: Callable[[], None]) -> None: ...

    def after_rollback(self, callback: Callable[[], None]) -> None: ...


class _NoTransactions:
    in_transaction = False

    def after_commit(self, callback: Callable[[], None]) -> None:
        callback()

    def after_rollback(self, callback: Callable[[], None]) -> None:
        pass


class _CountingLRU(LRUCache[Any, Any]):
    """``LRUCache`` that counts evictions (cachetools' documented popitem override)."""

    evictions = 0

    def popitem(self) -> tuple[Any, Any]:
        item = super().popitem()
        self.evictions += 1
        return item


class CacheLayer(Generic[K, V]):
    """An LRU cache of ``maxsize`` entries over a store.

    ``writer(key, value)`` and ``deleter(key) -> bool``, when given, make :meth:`set` and
    :meth:`delete` write through; ``transactions`` (a store's engine, ``store.engine``)
    defers filling to COMMIT. Without them it is a plain committed-values cache.
    """

    def __init__(
        self,
        maxsize: int = 500,
        *,
        transactions: TransactionHooks | None = None,
        writer: Callable[[K, V], None] | None = None,
        deleter: Callable[[K], bool] | None = None,
    ) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise InvalidInputError(f"maxsize must be an int >= 1, got {maxsize!r}")
        self._cache = _CountingLRU(maxsize=maxsize)
        self._lock = threading.Lock()
        self._tx: TransactionHooks = transactions or _NoTransactions()
        self._writer = writer
        self._deleter = deleter
        self._generation = 0
        self._hits = 0
        self._misses = 0

    def get(self, key: K) -> V | None:
        """The cached value, or ``None`` on a miss (counted)."""
        cache = self._cache
        in_transaction = self._tx.in_transaction
        with self._lock:
            if not in_transaction and key in cache:  # a miss raises nothing
                self._hits += 1
                value: V = cache[key]
                return value
            self._misses += 1
            return None

    def get_many_or_load(
        self,
        keys: list[K],
        loader: Callable[[list[K]], dict[K, V]],
        cacheable: Callable[[V], bool] | None = None,
    ) -> dict[K, V]:
        """Cached values for ``keys``; the misses come from one ``loader`` call and are cached."""
        found: dict[K, V] = {}
        missing: list[K] = []
        for key in keys:
            value = self.get(key)
            if value is None:
                missing.append(key)
            else:
                found[key] = value
        if missing:
            generation = self._generation
            loaded = loader(missing)
            found.update(loaded)
            if not self._tx.in_transaction:
                with self._lock:
                    if generation == self._generation:
                        for key, value in loaded.items():
                            if cacheable is None or cacheable(value):
                                self._cache[key] = value
        return found

    def has(self, key: K) -> bool:
        """True if ``key`` is cached (does not count as a lookup or refresh recency)."""
        with self._lock:
            return key in self._cache

    def get_or_load(
        self,
        key: K,
        loader: Callable[[K], V | None],
        cacheable: Callable[[V], bool] | None = None,
    ) -> V | None:
        """The cached value, or ``loader(key)``: cached unless ``None`` or not ``cacheable``.

        Every ``get`` of the manager comes here. A miss takes the lock once, to cache
        what was loaded: the first look is a lock-free ``in`` (one dict lookup under the
        GIL); a hit is looked up again under the lock, which recency changes need. The
        transaction is looked at once: ``loader`` must not begin or end one.
        """
        cache = self._cache
        in_transaction = self._tx.in_transaction
        if not in_transaction and key in cache:
            with self._lock:
                if key in cache:  # (evicted meanwhile: a miss after all)
                    self._hits += 1
                    found: V = cache[key]
                    return found
        generation = self._generation  # before the load: a write meanwhile changes it
        try:
            value = loader(key)
        except BaseException:
            with self._lock:
                self._misses += 1
            raise
        keep = not (
            value is None or in_transaction or (cacheable is not None and not cacheable(value))
        )
        with self._lock:
            self._misses += 1
            if keep and generation == self._generation:
                cache[key] = value
        return value

    def set(self, key: K, value: V) -> None:
        """Write through (if a writer was given), then cache ``value`` once committed."""
        if self._writer is not None:
            self._writer(key, value)
        self._stage(key, value)

    def delete(self, key: K) -> bool:
        """Delete through (if a deleter was given) and drop ``key``; True if it existed."""
        existed = self._deleter(key) if self._deleter is not None else self.has(key)
        self.invalidate(key)
        return existed

    def invalidate(self, key: K) -> None:
        """Drop ``key`` now and again when the current transaction ends."""
        self._drop(key)
        self._tx.after_commit(lambda: self._drop(key))
        self._tx.after_rollback(lambda: self._drop(key))

    def _stage(self, key: K, value: V) -> None:
        self._drop(key)
        self._tx.after_commit(lambda: self._fill(key, value))
        self._tx.after_rollback(lambda: self._drop(key))

    def _fill(self, key: K, value: V) -> None:
        with self._lock:
            self._generation += 1
            self._cache[key] = value

    def _drop(self, key: K) -> None:
        cache = self._cache
        with self._lock:
            self._generation += 1
            if key in cache:  # (pop(key, None) looks first too, one call deeper)
                del cache[key]

    def clear(self) -> None:
        """Empty the cache (the store is not touched)."""
        with self._lock:
            self._generation += 1
            self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)

    def get_statistics(self) -> CacheStatistics:
        """Hits, misses, evictions, size and capacity; ``hit_rate`` is derived."""
        with self._lock:
            return CacheStatistics(
                hits=self._hits,
                misses=self._misses,
                evictions=self._cache.evictions,
                size=len(self._cache),
                maxsize=int(self._cache.maxsize),
            )
