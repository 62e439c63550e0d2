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
in ``InMemoryStore``). ``search(query=...)`` is :meth:`AgentMemoryManager.recall`
filtered to the namespace prefix: the items come back best first, each with its score
and the recall explanation (:class:`TieredSearchItem`); without a query they come back
most recently updated first. Listing namespaces reads every item's namespace (a scan).
TTLs are not supported (``supports_ttl`` is false: a put with a ``ttl`` is refused).
Only the manager's public API is used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any, Literal, Self

import orjson
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

from persistence import InvalidInputError, Memory, Tier
from tiered_memory.aio import settled
from tiered_memory.manager import AgentMemoryManager
from tiered_memory.recall.types import Explanation

log = logging.getLogger(__name__)

UNINDEXED_CONTENT = "(an item stored with index=False)"
"""The content of an item put with ``index=False`` (searches skip such items)."""

CATEGORY = "langgraph"
_ITEM_TAG = "langgraph:item:"
_NS_TAG = "langgraph:ns:"
_MAX_K = 1000  # recall's largest k
_PAGE = 500


class TieredSearchItem(SearchItem):
    """A search result; ``explanation`` says why recall returned it (``None`` without a
    query: a listing has no ranking to explain)."""

    __slots__ = ("explanation", "memory_id")

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
    ) -> None:
        super().__init__(namespace, key, value, created_at, updated_at, score)
        self.explanation = explanation
        self.memory_id = memory_id


class TieredMemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memories in a tiered-memory file.

    Wrap an open :class:`AgentMemoryManager` (the caller keeps closing it), or use
    :meth:`open` for a store that owns its manager (``close()`` or ``with`` shuts it).
    ``index_fields`` are the fields whose text is searched (default ``["$"]``: the
    whole value); ``tier`` is where new items go.
    """

    supports_ttl = False

    def __init__(
        self,
        memory: AgentMemoryManager,
        *,
        index_fields: Sequence[str] = ("$",),
        tier: Tier | str = Tier.SEMANTIC,
    ) -> None:
        if not isinstance(memory, AgentMemoryManager):
            raise InvalidInputError(
                f"memory must be an AgentMemoryManager, got {type(memory).__name__}"
            )
        if isinstance(index_fields, str) or not all(isinstance(f, str) for f in index_fields):
            raise InvalidInputError("index_fields must be a sequence of field paths (str)")
        self.memory = memory
        self.tier = Tier(tier)
        self.index_fields = tuple(index_fields)
        self._owned = False
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="tiered-memory-langgraph")

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        index_fields: Sequence[str] = ("$",),
        tier: Tier | str = Tier.SEMANTIC,
        **config: Any,
    ) -> Self:
        """A store on ``path`` (created or migrated) owning its manager; ``config`` goes
        to :meth:`AgentMemoryManager.open`."""
        memory = AgentMemoryManager.open(path, **config)
        try:
            opened = cls(memory, index_fields=index_fields, tier=tier)
        except BaseException:
            memory.shutdown()
            raise
        opened._owned = True
        return opened

    def close(self) -> None:
        """Stop the async worker; shut the manager down if this store opened it."""
        self._executor.shutdown(wait=True)
        if self._owned:
            self.memory.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops: reads first, then the writes in one transaction."""
        ops = list(ops)
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            _check_labels(op)
            if isinstance(op, PutOp):
                _check_put(op)
                if op.value is not None and op.index is not False:
                    self._require_text(op)
                address = (tuple(op.namespace), op.key)
                writes.pop(address, None)  # written in the order of their last put
                writes[address] = op
        grouped: AbstractContextManager[Any] = (
            self.memory.transaction() if writes else nullcontext()
        )
        results: list[Result] = []
        with grouped:
            for op in ops:
                if isinstance(op, GetOp):
                    found = self._find(tuple(op.namespace), op.key)
                    results.append(None if found is None else _item(found))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                else:
                    results.append(None)
            for (namespace, key), put in writes.items():
                self._write(namespace, key, put)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in the store's worker thread; a cancelled call still settles
        (its transaction commits or rolls back whole) before the cancellation is raised."""
        return await settled(self._executor, self.batch, list(ops))

    # --- the mapping ----------------------------------------------------------------------

    def _find(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        """The item's memory: looked up in the store's tier first, then in every tier (a
        memory may have been promoted since)."""
        tag = (_item_tag(namespace, key),)
        for tier in (self.tier, None):
            found = self.memory.query(tier, tags=tag, category=CATEGORY, limit=1)
            if found:
                return found[0]
        return None

    def _write(self, namespace: tuple[str, ...], key: str, op: PutOp) -> None:
        existing = self._find(namespace, key)
        if op.value is None:
            if existing is not None:
                self.memory.forget(existing.id, reason="deleted through the LangGraph store")
            return
        value = dict(op.value)
        content = self._text(value, op.index)
        metadata = {
            "namespace": list(namespace),
            "key": key,
            "value": value,
            "index": op.index if op.index is not None else list(self.index_fields),
        }
        if existing is None:
            tags = [_item_tag(namespace, key), *_prefix_tags(namespace)]
            self.memory.remember(
                content,
                self.tier,
                tags=tags,
                metadata=metadata,
                category=CATEGORY,
                dedup=False,  # items with the same value under other keys stay apart
            )
        else:
            changed = content if content != existing.content else None
            self.memory.update(existing.id, content=changed, metadata=metadata)

    def _require_text(self, op: PutOp) -> None:
        """Refuse an indexed put whose indexed fields hold no text (nothing is written):
        it would be an item no search finds; ``index=False`` stores one on purpose."""
        assert op.value is not None
        if not self._text(dict(op.value), op.index).strip():
            fields = op.index if op.index is not None else list(self.index_fields)
            raise InvalidInputError(
                f"value of {op.key!r} has no text in its indexed fields {fields}: put it "
                "with index=False to store it unsearchable, or index other fields "
                "(nothing was written)"
            )

    def _text(self, value: dict[str, Any], index: Literal[False] | list[str] | None) -> str:
        """The searchable text of a value: its indexed fields' text, one per line (an
        unindexed item's is a fixed stand-in: a memory's text is never empty, and
        searches skip unindexed items)."""
        if index is False:
            return UNINDEXED_CONTENT
        fields = self.index_fields if index is None else index
        texts: list[str] = []
        for field in fields:
            path: str | list[str] = field if field == "$" else tokenize_path(field)
            texts += get_text_at_path(value, path)
        return "\n".join(texts)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        _check_page(op.limit, op.offset)
        prefix_tag = _NS_TAG + ".".join(op.namespace_prefix)
        want = op.offset + op.limit
        if op.query:
            return self._recall(op, prefix_tag, want)
        if not op.filter:
            found = self.memory.query(
                None, tags=(prefix_tag,), category=CATEGORY, order_by="updated_at",
                limit=op.limit, offset=op.offset,
            )  # fmt: skip
            return [_search_item(m) for m in found]
        matched: list[SearchItem] = []
        offset = 0
        while len(matched) < want:
            page = self.memory.query(
                None, tags=(prefix_tag,), category=CATEGORY, order_by="updated_at",
                limit=_PAGE, offset=offset,
            )  # fmt: skip
            matched += [_search_item(m) for m in page if _matches(_value(m), op.filter)]
            if len(page) < _PAGE:
                break
            offset += _PAGE
        return matched[op.offset : want]

    def _recall(self, op: SearchOp, prefix_tag: str, want: int) -> list[SearchItem]:
        assert op.query is not None
        k = min(max(want, 1), _MAX_K)
        while True:
            hits = self.memory.recall(op.query, k=k, tags=(prefix_tag,))
            kept = [
                h
                for h in hits
                if h.memory.category == CATEGORY
                and h.memory.metadata.get("index") is not False
                and (not op.filter or _matches(_value(h.memory), op.filter))
            ]
            if len(kept) >= want or len(hits) < k or k == _MAX_K:
                break
            k = min(k * 4, _MAX_K)
        return [
            _search_item(h.memory, score=h.score, explanation=h.explanation)
            for h in kept[op.offset : want]
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        _check_page(op.limit, op.offset)
        seen: set[tuple[str, ...]] = set()
        offset = 0
        while True:
            page = self.memory.query(
                None, tags=(_NS_TAG,), category=CATEGORY, limit=_PAGE, offset=offset
            )
            seen |= {tuple(m.metadata["namespace"]) for m in page}
            if len(page) < _PAGE:
                break
            offset += _PAGE
        conditions = op.match_conditions or ()
        chosen = [ns for ns in seen if all(_namespace_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            chosen = list({ns[: op.max_depth] for ns in chosen})
        return sorted(chosen)[op.offset : op.offset + op.limit]


# --- helpers ---------------------------------------------------------------------------


def _item_tag(namespace: tuple[str, ...], key: str) -> str:
    return _ITEM_TAG + orjson.dumps([list(namespace), key]).decode()


def _prefix_tags(namespace: tuple[str, ...]) -> list[str]:
    """One tag per prefix (labels hold no '.', LangGraph refuses them), the root included."""
    return [_NS_TAG + ".".join(namespace[:n]) for n in range(len(namespace) + 1)]


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
    if op.namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {op.namespace}'
        )
    if not isinstance(op.key, str) or not op.key:
        raise InvalidInputError(f"key must be a non-empty str, got {op.key!r}")
    if op.value is not None and not isinstance(op.value, Mapping):
        raise InvalidInputError(f"value must be a mapping or None, got {type(op.value).__name__}")
    if op.value is not None:
        try:
            orjson.dumps(op.value)
        except TypeError as exc:
            raise InvalidInputError(
                f"value of {op.key!r} is not JSON ({exc}); use dict, list, str, int, float, "
                "bool and None"
            ) from None
    if op.ttl is not None:
        raise NotImplementedError(
            "TTL is not supported by TieredMemoryStore: forget items with delete(), or let "
            "decay() forget episodic ones (tier=Tier.EPISODIC)"
        )


def _check_page(limit: int, offset: int) -> None:
    for name, number in (("limit", limit), ("offset", offset)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InvalidInputError(f"{name} must be an int >= 0, got {number!r}")


def _value(memory: Memory) -> dict[str, Any]:
    value = memory.metadata.get("value")
    return value if isinstance(value, dict) else {}


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _item(memory: Memory) -> Item:
    meta = memory.metadata
    return Item(
        value=_value(memory),
        key=str(meta["key"]),
        namespace=tuple(meta["namespace"]),
        created_at=_when(memory.created_at),
        updated_at=_when(memory.updated_at or memory.created_at),
    )


def _search_item(
    memory: Memory, score: float | None = None, explanation: Explanation | None = None
) -> TieredSearchItem:
    meta = memory.metadata
    return TieredSearchItem(
        tuple(meta["namespace"]),
        str(meta["key"]),
        _value(memory),
        _when(memory.created_at),
        _when(memory.updated_at or memory.created_at),
        score,
        explanation,
        memory.id,
    )


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInputError(f"unknown namespace match type {condition.match_type!r}")
    return all(want == "*" or have == want for have, want in pairs)


_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """LangGraph's filter rules: exact match, nested objects, ``$eq``/``$ne``/``$gt``/
    ``$gte``/``$lt``/``$lte`` (numeric comparisons)."""
    return all(_compare(value.get(key), wanted) for key, wanted in filter.items())


def _compare(have: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(have, op, operand) for op, operand in wanted.items())
        return isinstance(have, dict) and all(_compare(have.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(wanted)
            and all(_compare(h, w) for h, w in zip(have, wanted, strict=True))
        )
    return bool(have == wanted)


def _operator(have: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(have == operand)
    if op == "$ne":
        return bool(have != operand)
    if op not in _OPERATORS:
        raise InvalidInputError(f"unsupported filter operator {op!r}; use one of {_OPERATORS}")
    try:
        a, b = float(have), float(operand)
    except (TypeError, ValueError):
        return False  # not comparable as numbers: no match
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


__all__ = ["TieredMemoryStore", "TieredSearchItem"]
