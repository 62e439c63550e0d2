"""TieredMemoryStore: LangGraph's long-term memory (``BaseStore``) over a tiered-memory file.

``pip install 'tiered-memory[langgraph]'``; then ``StateGraph(...).compile(store=
TieredMemoryStore.open("agent.db"))`` instead of ``InMemoryStore()``.

Each item is one memory (in the semantic tier by default, which the forgetting pass
leaves alone unless ``decay_semantic``): its value is kept whole in the memory's
metadata, the text of its indexed fields (the whole value as JSON by default, as
LangGraph's own stores do; ``index=[...]`` per put, ``index=False`` for none) is its
content, which recall searches by keywords and embeddings. The namespace and key are
tags: one naming the item, one per namespace prefix, so a get and a prefix search use
the tag index. A batch's writes are one transaction, applied after its reads (reads see
the store as it was before the batch; of several writes to one item the last wins, as
in ``InMemoryStore``).

With LangGraph's ``index`` config (``dims``, ``embed``, ``fields``) each indexed field
gets its own vector, and ``search(query=...)`` ranks items by their best field's cosine
similarity: ``score`` is that similarity, as in LangGraph's stores; recall's fused score
and explanation ride along (:class:`TieredSearchItem`). Without it, ``search(query=...)``
is :meth:`AgentMemoryManager.recall` and ``score`` is recall's fused score. Without a
query items come back most recently updated first. TTLs (``ttl=`` minutes, ``TTLConfig``)
are deadlines kept with the item: never returned after it, forgotten by a sweep
(:mod:`.langgraph_ttl`). Listing namespaces reads the counts of the items' namespace
tags, kept in step by the store (:mod:`.langgraph_namespaces`), not the items. Only the
manager's public API is used.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

import orjson
from langgraph.store.base import (
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from persistence import InvalidInputError, Memory, Tier
from tiered_memory.aio import settled
from tiered_memory.arguments import typed_arguments
from tiered_memory.integrations.langgraph_arguments import CheckedCalls
from tiered_memory.integrations.langgraph_awaitable import Done, Stopped, SweeperFuture, Swept
from tiered_memory.integrations.langgraph_index import (
    FieldIndex,
    FieldVectors,
    best_similarities,
    field_texts,
)
from tiered_memory.integrations.langgraph_namespaces import (
    TTL_NS_TAG,
    fixed_prefix,
    list_namespaces,
    ns_tag,
)
from tiered_memory.integrations.langgraph_ttl import (
    TTL_KEY,
    TTL_TAG,
    Sweeper,
    check_ttl,
    expired,
    refreshable,
    ttl_entries,
)
from tiered_memory.integrations.langgraph_values import (
    matches,
    read_value,
    stored_value,
)
from tiered_memory.manager import AgentMemoryManager
from tiered_memory.recall.types import Explanation

log = logging.getLogger(__name__)

UNINDEXED_CONTENT = "(an item stored with index=False)"
"""The content of an item put with ``index=False`` (searches skip such items)."""

CATEGORY = "langgraph"
_ITEM_TAG = "langgraph:item:"
_MAX_K = 1000  # recall's largest k
_PAGE = 500


class TieredSearchItem(SearchItem):
    """A search result. ``score`` means what it means in LangGraph's stores (cosine
    similarity with an index configured); ``fused_score`` and ``explanation`` are
    recall's ranking of the item for the query (``None`` when recall did not return it
    in its top hits, or without a query: a listing has no ranking to explain)."""

    __slots__ = ("explanation", "fused_score", "memory_id")

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        created_at: datetime,
        updated_at: datetime,
        score: float | None = None,
        explanation: Explanation | None = None,
        memory_id: str = "",
        fused_score: float | None = None,
    ) -> None:
        super().__init__(namespace, key, value, created_at, updated_at, score)
        self.explanation = explanation
        self.memory_id = memory_id
        self.fused_score = fused_score


@dataclass(frozen=True, slots=True)
class _Write:
    """A put checked and prepared before the batch's transaction opens (embedding and
    encoding fail there, changing nothing)."""

    op: PutOp
    content: str
    stored: dict[str, Any]
    vectors: FieldVectors | None
    ttl: float | None


@typed_arguments
class TieredMemoryStore(CheckedCalls):
    """A LangGraph ``BaseStore`` whose items are memories in a tiered-memory file.

    Wrap an open :class:`AgentMemoryManager` (the caller keeps closing it), or use
    :meth:`open` for a store that owns its manager (``close()``, ``with`` or ``async
    with`` shuts it). ``index`` is LangGraph's ``IndexConfig``; ``ttl`` its
    ``TTLConfig``; ``index_fields`` the fields whose text recall searches without an
    ``index`` (default ``["$"]``: the whole value); ``tier`` is where new items go.
    """

    supports_ttl = True

    def __init__(
        self,
        memory: AgentMemoryManager,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        index_fields: Sequence[str] = ("$",),
        tier: Tier | str = Tier.SEMANTIC,
    ) -> None:
        if not isinstance(memory, AgentMemoryManager):
            raise InvalidInputError(
                f"memory must be an AgentMemoryManager, got {type(memory).__name__}"
            )
        if isinstance(index_fields, str) or not all(isinstance(f, str) for f in index_fields):
            raise InvalidInputError("index_fields must be a sequence of field paths (str)")
        if ttl is not None and not isinstance(ttl, Mapping):
            raise InvalidInputError("ttl must be LangGraph's TTLConfig (a dict) or None")
        self.memory = memory
        self.tier = Tier(tier)
        self._fields = None if index is None else FieldIndex.from_config(index)
        self.index_config = None if self._fields is None else self._fields.config
        self.index_fields = tuple(index_fields) if self._fields is None else self._fields.fields
        self.ttl_config = ttl
        check_ttl((ttl or {}).get("default_ttl"))
        self._owned = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="tiered-memory-langgraph")
        self._sweeper: Sweeper | None = None
        self._sweeping: SweeperFuture | None = None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        index_fields: Sequence[str] = ("$",),
        tier: Tier | str = Tier.SEMANTIC,
        **config: Any,
    ) -> Self:
        """A store on ``path`` (created or migrated; ``":memory:"`` for one in RAM)
        owning its manager; ``config`` goes to :meth:`AgentMemoryManager.open`."""
        in_ram = isinstance(path, str) and path == ":memory:"
        memory = (
            AgentMemoryManager.in_memory(**config)
            if in_ram
            else AgentMemoryManager.open(path, **config)
        )
        try:
            opened = cls(memory, index=index, ttl=ttl, index_fields=index_fields, tier=tier)
        except BaseException:
            memory.shutdown()
            raise
        opened._owned = True
        return opened

    @property
    def embeddings(self) -> Any:
        """The index's LangChain ``Embeddings`` (``None`` without an index), as on
        LangGraph's stores."""
        return None if self._fields is None else self._fields.embeddings

    def setup(self) -> Done:
        """Nothing to do (LangGraph's SQL stores create their tables here; the file was
        created or migrated when it was opened): kept so code calling it runs unchanged,
        ``await store.setup()`` (AsyncSqliteStore's form) included."""
        return Done()

    def close(self) -> None:
        """Stop the sweeper and the async worker; shut the manager down if owned."""
        self.stop_ttl_sweeper()
        self._executor.shutdown(wait=True)
        if self._owned:
            self.memory.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.close)

    # --- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops: reads first, then the writes (and TTL refreshes) in one
        transaction. Raw ``PutOp``s may write under ``("langgraph", ...)``: LangGraph
        refuses that root only in the public :meth:`put`, its own writes use batches."""
        ops = list(ops)
        writes: dict[tuple[tuple[str, ...], str], _Write] = {}
        for op in ops:
            _check_labels(op)
            if isinstance(op, PutOp):
                address = (tuple(op.namespace), op.key)
                writes.pop(address, None)  # written in the order of their last put
                writes[address] = self._prepare(op)
        results: list[Result] = []
        refresh: dict[str, Memory] = {}
        now = self.memory.clock()
        with self.memory.transaction() if writes else nullcontext():
            for op in ops:
                if isinstance(op, GetOp):
                    found = self._live(tuple(op.namespace), op.key, now)
                    results.append(None if found is None else _item(found))
                    if found is not None and self._refreshes(op) and refreshable(found.metadata):
                        refresh[found.id] = found
                elif isinstance(op, SearchOp):
                    hits = self._search(op, now)
                    results.append([item for item, _ in hits])
                    if self._refreshes(op):
                        refresh |= {m.id: m for _, m in hits if refreshable(m.metadata)}
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op, now))
                else:
                    results.append(None)
            refreshed = [
                m
                for m in refresh.values()
                if (tuple(m.metadata["namespace"]), m.metadata["key"]) not in writes
            ]
            grouped: AbstractContextManager[Any] = (
                self.memory.transaction() if refreshed and not writes else nullcontext()
            )
            with grouped:
                for memory in refreshed:
                    self._refresh(memory, now)
                for (namespace, key), write in writes.items():
                    self._write(namespace, key, write, now)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in the store's worker thread; a cancelled call still settles
        (its transaction commits or rolls back whole) before the cancellation is raised."""
        return await settled(self._executor, self.batch, list(ops))

    # --- TTL ------------------------------------------------------------------------------

    def _refreshes(self, op: GetOp | SearchOp) -> bool:
        """Whether a read moves its items' deadlines: as in LangGraph's SqliteStore, when
        the TTLConfig's ``refresh_on_read`` is true and the read does not pass
        ``refresh_ttl=False``."""
        return bool(op.refresh_ttl and (self.ttl_config or {}).get("refresh_on_read"))

    def sweep_ttl(self) -> Swept:
        """Forget every expired item (with ``forget()``: logged and audited as any
        forgotten memory); returns how many (``await`` gives the same number)."""
        now = self.memory.clock()
        count = 0
        with self.memory.transaction():
            expiring = self.memory.query(None, tags=(TTL_TAG,), limit=None, include_superseded=True)
            for memory in expiring:
                if memory.category == CATEGORY and expired(memory.metadata, now):
                    minutes = memory.metadata.get(TTL_KEY)
                    reason = f"expired: its LangGraph TTL of {minutes} min passed"
                    count += bool(self.memory.forget(memory.id, reason=reason))
        return Swept(count)

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` in the store's worker thread."""
        return await settled(self._executor, self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> SweeperFuture:
        """Sweep every ``sweep_interval_minutes`` (default: the TTLConfig's
        ``sweep_interval_minutes``) until :meth:`stop_ttl_sweeper`; the future
        completes when the sweeper stops (``await`` gives it at once, as
        AsyncSqliteStore's coroutine gives its task)."""
        if self._sweeping is not None:
            return self._sweeping
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        future = SweeperFuture()
        if not minutes:
            log.info("no sweep interval configured: the TTL sweeper does not start")
            future.set_result(None)
            return future
        self._sweeper = Sweeper(self.sweep_ttl, float(minutes) * 60)
        self._sweeping = future
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Stopped:
        """Stop the sweeper; true when it has stopped (or none was running); ``await``
        gives that bool (AsyncSqliteStore's form)."""
        sweeper, future = self._sweeper, self._sweeping
        if sweeper is None or future is None:
            return Stopped(True)
        stopped = sweeper.stop(timeout)
        if stopped:
            self._sweeper = self._sweeping = None
            future.set_result(None)
        return Stopped(stopped)

    # --- the mapping ----------------------------------------------------------------------

    def _find(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        """The item's memory, expired or not: looked up in the store's tier first, then
        in every tier (a memory may have been promoted since). By its tag alone, the
        category checked here: with the category in the query SQLite's planner walks
        every item of the category (34 ms a lookup at 35k items, against 0.1 ms)."""
        tag = (_item_tag(namespace, key),)
        for tier in (self.tier, None):
            found = self.memory.query(tier, tags=tag, limit=None, include_superseded=True)
            for memory in found:  # an item superseded by a memory is still the item
                if memory.category == CATEGORY:
                    return memory
        return None

    def _live(self, namespace: tuple[str, ...], key: str, now: int) -> Memory | None:
        found = self._find(namespace, key)
        return None if found is None or expired(found.metadata, now) else found

    def _prepare(self, op: PutOp) -> _Write:
        _check_put(op)
        if op.value is None:
            return _Write(op, "", {}, None, None)
        value = dict(op.value)
        stored = stored_value(value)
        ttl = check_ttl(op.ttl)
        if op.index is False:
            texts: list[str] = []
            content = UNINDEXED_CONTENT  # a memory's text is never empty
        else:
            fields = self.index_fields if op.index is None else op.index
            texts = field_texts(value, fields)
            content = "\n".join(texts)
            if texts and not content.strip():  # blank text refused, as remember() does
                raise InvalidInputError(
                    f"value of {op.key!r} has no text in its indexed fields {list(fields)}: "
                    "put it with index=False to store it unsearchable, or index other "
                    "fields (nothing was written)"
                )
            if not texts:  # none of the fields is there: kept, unsearchable (as LangGraph)
                content = UNINDEXED_CONTENT
        vectors = None if self._fields is None else self._fields.embed(texts)
        return _Write(op, content, stored, vectors, ttl)

    def _write(self, namespace: tuple[str, ...], key: str, write: _Write, now: int) -> None:
        existing = self._find(namespace, key)
        op = write.op
        if existing is not None and (op.value is None or expired(existing.metadata, now)):
            reason = "deleted through the LangGraph store" if op.value is None else "expired"
            self.memory.forget(existing.id, reason=reason)
            existing = None
        if op.value is None:
            return
        metadata = {
            "namespace": list(namespace),
            "key": key,
            **write.stored,
            "index": op.index if op.index is not None else list(self.index_fields),
            **ttl_entries(write.ttl, now),
        }
        if write.vectors is not None:
            metadata["vectors"] = write.vectors
        tags = [_item_tag(namespace, key), *_prefix_tags(namespace)]
        tags += [TTL_TAG, ns_tag(namespace, TTL_NS_TAG)] if write.ttl is not None else []
        if existing is None:
            self.memory.remember(
                write.content, self.tier, tags=tags, metadata=metadata, category=CATEGORY,
                dedup=False,  # items with the same value under other keys stay apart
            )  # fmt: skip
        else:
            changed = write.content if write.content != existing.content else None
            self.memory.update(existing.id, content=changed, metadata=metadata, tags=tags)

    def _refresh(self, memory: Memory, now: int) -> None:
        """Move an item's deadline to ``now + ttl`` (its value and text unchanged)."""
        metadata = {**memory.metadata, **ttl_entries(memory.metadata[TTL_KEY], now)}
        self.memory.update(memory.id, metadata=metadata)

    def _search(self, op: SearchOp, now: int) -> list[tuple[SearchItem, Memory]]:
        _check_page(op.limit, op.offset)
        prefix_tag = ns_tag(op.namespace_prefix)
        want = op.offset + op.limit
        if op.query and self._fields is not None:
            return self._similar(op, prefix_tag, now)
        if op.query:
            return self._recall(op, prefix_tag, want, now)
        found = self._scan(prefix_tag, lambda m: _keep(m, op, now), want)
        return [(_search_item(m), m) for m in found[op.offset : want]]

    def _scan(
        self, prefix_tag: str, keep: Callable[[Memory], bool], want: int | None
    ) -> list[Memory]:
        """Items under the prefix, most recently updated first, that ``keep`` accepts,
        read a page at a time until ``want`` are found (all with ``None``)."""
        if want is None:  # all of them: one read (pages would re-read each tier's head)
            every = self.memory.query(None, tags=(prefix_tag,), order_by="updated_at", limit=None)
            return [m for m in every if keep(m)]
        kept: list[Memory] = []
        offset = 0
        while len(kept) < want:
            page = self.memory.query(
                None, tags=(prefix_tag,), order_by="updated_at",
                limit=_PAGE, offset=offset,
            )  # fmt: skip
            kept += [m for m in page if keep(m)]
            if len(page) < _PAGE:
                break
            offset += _PAGE
        return kept

    def _similar(self, op: SearchOp, prefix_tag: str, now: int) -> list[tuple[SearchItem, Memory]]:
        """Items ranked by their best field's cosine similarity to the query, as
        LangGraph's stores rank them; unembedded items fill up after the scored ones."""
        assert op.query is not None and self._fields is not None
        query = self._fields.embed_query(op.query)
        scored: list[tuple[float, Memory]] = []
        unscored: list[Memory] = []
        found = self._scan(prefix_tag, lambda m: _keep(m, op, now), None)
        similarities = best_similarities(query, [m.metadata.get("vectors") or [] for m in found])
        for memory, score in zip(found, similarities, strict=True):
            if score is None:
                unscored.append(memory)
            else:
                scored.append((score, memory))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        page: list[tuple[float | None, Memory]] = list(scored[op.offset : op.offset + op.limit])
        page += [(None, m) for m in unscored[: op.limit - len(page)]]
        fused = self._fused(op.query, prefix_tag, min(max(op.offset + op.limit, 1), _MAX_K))
        results: list[tuple[SearchItem, Memory]] = []
        for score, memory in page:
            hit = fused.get(memory.id)
            item = _search_item(
                memory, score, hit.explanation if hit else None, hit.score if hit else None
            )
            results.append((item, memory))
        return results

    def _fused(self, query: str, prefix_tag: str, k: int) -> dict[str, Any]:
        return {h.memory.id: h for h in self.memory.recall(query, k=k, tags=(prefix_tag,))}

    def _recall(
        self, op: SearchOp, prefix_tag: str, want: int, now: int
    ) -> list[tuple[SearchItem, Memory]]:
        assert op.query is not None
        k = min(max(want, 1), _MAX_K)
        while True:
            hits = self.memory.recall(op.query, k=k, tags=(prefix_tag,))
            kept = [
                h
                for h in hits
                if h.memory.metadata.get("index") is not False and _keep(h.memory, op, now)
            ]
            if len(kept) >= want or len(hits) < k or k == _MAX_K:
                break
            k = min(k * 4, _MAX_K)
        return [
            (_search_item(h.memory, h.score, h.explanation, h.score), h.memory)
            for h in kept[op.offset : want]
        ]

    def _list_namespaces(self, op: ListNamespacesOp, now: int) -> list[tuple[str, ...]]:
        """From the namespace tags' counts (:mod:`.langgraph_namespaces`), not the items."""
        _check_page(op.limit, op.offset)
        conditions = op.match_conditions or ()
        under = fixed_prefix(conditions)
        counts = self.memory.tag_counts(ns_tag(under))
        expiring = self.memory.tag_counts(ns_tag(under, TTL_NS_TAG))

        def live(namespace: tuple[str, ...]) -> bool:
            tags = (ns_tag(namespace, TTL_NS_TAG),)
            for offset in itertools.count(0, _PAGE):
                page = self.memory.query(
                    None, tags=tags, limit=_PAGE, offset=offset, include_superseded=True
                )
                if any(m.category == CATEGORY and not expired(m.metadata, now) for m in page):
                    return True
                if len(page) < _PAGE:
                    return False
            raise AssertionError("unreachable")

        chosen = list_namespaces(counts, expiring, conditions, op.max_depth, live)
        return chosen[op.offset : op.offset + op.limit]


# --- helpers ---------------------------------------------------------------------------


def _keep(memory: Memory, op: SearchOp, now: int) -> bool:
    return (
        memory.category == CATEGORY
        and not expired(memory.metadata, now)
        and (not op.filter or matches(read_value(memory.metadata), op.filter))
    )


def _item_tag(namespace: tuple[str, ...], key: str) -> str:
    return _ITEM_TAG + orjson.dumps([list(namespace), key]).decode()


def _prefix_tags(namespace: tuple[str, ...]) -> list[str]:
    """One tag per prefix, the root included (counted: see :mod:`.langgraph_namespaces`)."""
    return [ns_tag(namespace[:n]) for n in range(len(namespace) + 1)]


def _check_labels(op: Op) -> None:
    """LangGraph's label rules (a str, not empty, no '.' or NUL), also for ops passed
    straight to :meth:`TieredMemoryStore.batch`, which skip ``BaseStore``'s checks."""
    if isinstance(op, GetOp | PutOp):
        paths: Sequence[tuple[str, ...]] = [op.namespace]
    elif isinstance(op, SearchOp):
        paths = [op.namespace_prefix]
    elif isinstance(op, ListNamespacesOp):
        paths = [c.path for c in op.match_conditions or ()]
    else:
        raise InvalidInputError(f"unknown operation {type(op).__name__}")
    for path in paths:
        for label in path:
            if not isinstance(label, str) or not label or "." in label or "\x00" in label:
                raise InvalidNamespaceError(
                    f"Invalid namespace label {label!r} in {path}: labels are non-empty "
                    "strings without '.' or NUL"
                )


def _check_put(op: PutOp) -> None:
    if not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if not isinstance(op.key, str) or not op.key:
        raise InvalidInputError(f"key must be a non-empty str, got {op.key!r}")
    if op.value is not None and not isinstance(op.value, Mapping):
        raise InvalidInputError(f"value must be a mapping or None, got {type(op.value).__name__}")


def _check_page(limit: int, offset: int) -> None:
    for name, number in (("limit", limit), ("offset", offset)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InvalidInputError(f"{name} must be an int >= 0, got {number!r}")


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _item(memory: Memory) -> Item:
    meta = memory.metadata
    return Item(
        value=read_value(meta),
        key=str(meta["key"]),
        namespace=tuple(meta["namespace"]),
        created_at=_when(memory.created_at),
        updated_at=_when(memory.updated_at or memory.created_at),
    )


def _search_item(
    memory: Memory,
    score: float | None = None,
    explanation: Explanation | None = None,
    fused_score: float | None = None,
) -> TieredSearchItem:
    meta = memory.metadata
    return TieredSearchItem(
        tuple(meta["namespace"]),
        str(meta["key"]),
        read_value(meta),
        _when(memory.created_at),
        _when(memory.updated_at or memory.created_at),
        score,
        explanation,
        memory.id,
        fused_score,
    )


__all__ = ["TieredMemoryStore", "TieredSearchItem"]
