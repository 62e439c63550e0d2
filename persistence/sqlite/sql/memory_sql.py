"""SQL for the memory family: the three tier tables, their tags and the promotion log.

Functions build statements (:class:`~persistence.statements.Statement`) and decode the
rows they return; the stores run them (:mod:`persistence.statements`), in the caller's
transaction. Table names come only from the closed :class:`Tier` enum; every value is a
bound parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import orjson

from persistence.codecs import decode_embedding, encode_json
from persistence.records import (  # with the slot setters, for straight-line code
    Memory,
    MemoryFilter,
    PromotionRecord,
    QueryOptions,
    Tier,
    _set_access_count,
    _set_agent_id,
    _set_category,
    _set_content,
    _set_created_at,
    _set_embedding,
    _set_id,
    _set_importance,
    _set_key,
    _set_last_accessed_at,
    _set_linked,
    _set_metadata,
    _set_retention,
    _set_session_id,
    _set_source,
    _set_speaker,
    _set_superseded_by,
    _set_superseded_reason,
    _set_tags,
    _set_tier,
    _set_token_count,
    _set_updated_at,
    _set_valid_to,
)
from persistence.sqlite.row_checks import (
    INT,
    NULL_BLOB,
    NULL_INT,
    NULL_TEXT,
    REAL,
    TEXT,
    check_row,
    damaged_row,
    json_object,
    json_texts,
    tier_named,
)
from persistence.statements import Batch, Statement
from persistence.stores.rows import field_conditions, filter_fields, query_filters, validate_query
from persistence.stores.scope import WHOLE, Scope

TABLE = {Tier.SCRATCHPAD: "scratchpad", Tier.EPISODIC: "episodic", Tier.SEMANTIC: "semantic"}

_COLUMNS = (
    "id", "content", "token_count", "metadata", "embedding", "linked_memories", "session_id",
    "agent_id", "category", "source", "importance", "retention", "access_count",
    "last_accessed_at", "created_at", "updated_at", "speaker", "superseded_by", "valid_to",
    "superseded_reason",
)  # fmt: skip
_METADATA = _COLUMNS.index("metadata")
_EMBEDDING = _COLUMNS.index("embedding")
_LINKED = _COLUMNS.index("linked_memories")
_ORDER_COLUMNS = frozenset(
    {"created_at", "updated_at", "importance", "retention", "last_accessed_at"}
)
_TAGS = (
    "(SELECT json_group_array(tag) FROM "
    "(SELECT tag FROM memory_tags WHERE memory_id = t.id ORDER BY position))"
)


def _select(tier: Tier, with_tier: bool = False) -> str:
    key = "t.key" if tier is Tier.SCRATCHPAD else "NULL"
    cols = ", ".join(f"t.{c}" for c in _COLUMNS)
    tier_name = f", '{tier.value}'" if with_tier else ""
    return f"SELECT {cols}, {key}, {_TAGS}{tier_name} FROM {TABLE[tier]} AS t"


_ONCE = frozenset({"superseded_by", "valid_to", "superseded_reason"})
"""Columns an upsert sets only while the row is not superseded: a supersession, once
made (see :func:`mark_superseded`), is never undone by a write of an older copy."""


def _set(column: str) -> str:
    if column in _ONCE:
        return (
            f"{column} = CASE WHEN superseded_by IS NULL THEN excluded.{column} ELSE {column} END"
        )
    return f"{column} = excluded.{column}"


def _upsert(tier: Tier) -> str:
    cols = list(_COLUMNS) + (["key"] if tier is Tier.SCRATCHPAD else [])
    updates = ", ".join(_set(c) for c in cols if c != "id")
    marks = ", ".join("?" for _ in cols)
    return (
        f"INSERT INTO {TABLE[tier]} ({', '.join(cols)}) VALUES ({marks}) "
        f"ON CONFLICT (id) DO UPDATE SET {updates}"
    )


_SELECT = {tier: _select(tier, with_tier=True) for tier in Tier}  # rows decode alike
_UPSERT = {tier: _upsert(tier) for tier in Tier}
_SELECT_ANY_TIER = " UNION ALL ".join(
    f"{_select(tier, with_tier=True)} WHERE t.id = ?"
    for tier in (Tier.EPISODIC, Tier.SEMANTIC, Tier.SCRATCHPAD)
)
_SELECT_ANY_TIER_SCOPED = " UNION ALL ".join(
    f"{_select(tier, with_tier=True)} WHERE t.id = ? AND t.agent_id = ?"
    for tier in (Tier.EPISODIC, Tier.SEMANTIC, Tier.SCRATCHPAD)
)


_TIER_NAMED = {tier.value: tier for tier in Tier}


def _mine(scope: Scope, alias: str = "t.") -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a memory's ``agent_id``, to append after ``WHERE ...``."""
    return scope.and_(f"{alias}agent_id")


def scoped_ids(scope: Scope) -> tuple[str, tuple[str, ...]]:
    """A subquery of the live memory ids ``scope`` holds, and its parameters."""
    mine, agent = scope.condition()
    return " UNION ALL ".join(f"SELECT id FROM {TABLE[t]} WHERE {mine}" for t in Tier), agent * 3


_new = object.__new__
_loads = orjson.loads  # codecs.decode_json without its call: every uncached read decodes
_NO_METADATA: MappingProxyType[str, Any] = MappingProxyType({})  # read-only: one for all


_ROW_COLUMNS = (*_COLUMNS, "key", "tags")
_KINDS = (
    TEXT, TEXT, INT, TEXT, NULL_BLOB, TEXT, NULL_TEXT, NULL_TEXT, NULL_TEXT, NULL_TEXT, REAL,
    REAL, INT, NULL_INT, INT, INT, NULL_TEXT, NULL_TEXT, NULL_INT, NULL_TEXT,
)  # fmt: skip
_ROW_KINDS = {
    tier.value: (*_KINDS, TEXT if tier is Tier.SCRATCHPAD else NULL_TEXT, TEXT) for tier in Tier
}


def to_memory(row: Sequence[Any]) -> Memory:
    """The memory a ``_select`` row holds. Written after validation, so only the types
    are checked (a damaged page can leave NULL or another type in a column: a
    :class:`CorruptDatabaseError` naming the column, not a ``TypeError`` later).

    Fills the frozen dataclass's slots one by one, in straight-line code: its
    ``__init__`` sets each field with ``object.__setattr__`` (twice the cost), and a loop
    over the slots costs a third more than this (every uncached read decodes a row).
    The empty JSON values (most rows' tags, links, metadata) are not parsed.
    tests/test_hot_paths.py checks that every field is filled, from its own column.
    """
    (id_, content, token_count, metadata, embedding, linked, session_id, agent_id, category,
     source, importance, retention, access_count, last_accessed_at, created_at, updated_at,
     speaker, superseded_by, valid_to, superseded_reason, key, tags, tier) = row  # fmt: skip
    if (
        type(id_) is not str or type(content) is not str or type(created_at) is not int
        or type(updated_at) is not int or type(importance) is not float
        or type(retention) is not float or type(token_count) is not int
        or type(access_count) is not int or type(metadata) is not str
        or type(linked) is not str or type(tags) is not str
        or (embedding is not None and type(embedding) is not bytes)
        or (session_id is not None and type(session_id) is not str)
        or (agent_id is not None and type(agent_id) is not str)
        or (category is not None and type(category) is not str)
        or (source is not None and type(source) is not str)
        or (speaker is not None and type(speaker) is not str)
        or (last_accessed_at is not None and type(last_accessed_at) is not int)
        or (superseded_by is not None and (type(superseded_by) is not str
                                           or type(valid_to) is not int))
        or (superseded_reason is not None and type(superseded_reason) is not str)
        or (type(key) is not str and (key is not None or tier == "scratchpad"))
    ):  # fmt: skip
        raise damaged_row(tier, _ROW_COLUMNS, _ROW_KINDS[tier], row)
    memory: Memory = _new(Memory)
    _set_id(memory, id_)
    _set_content(memory, content)
    _set_tier(memory, _TIER_NAMED[tier])
    _set_key(memory, key)
    _set_session_id(memory, session_id)
    _set_agent_id(memory, agent_id)
    _set_category(memory, category)
    _set_tags(memory, () if tags == "[]" else json_texts("memory_tags", "tag", _loads(tags)))
    _set_importance(memory, importance)
    _set_retention(memory, retention)
    _set_token_count(memory, token_count)
    _set_source(memory, source)
    _set_metadata(
        memory,
        _NO_METADATA
        if metadata == "{}"
        else MappingProxyType(json_object(tier, "metadata", _loads(metadata))),
    )
    _set_linked(
        memory, () if linked == "[]" else json_texts(tier, "linked_memories", _loads(linked))
    )
    _set_embedding(memory, None if embedding is None else decode_embedding(embedding))
    _set_access_count(memory, access_count)
    _set_last_accessed_at(memory, last_accessed_at)
    _set_created_at(memory, created_at)
    _set_updated_at(memory, updated_at)
    _set_speaker(memory, speaker)
    _set_superseded_by(memory, superseded_by)
    _set_valid_to(memory, valid_to)
    _set_superseded_reason(memory, superseded_reason)
    return memory


def encode_row(memory: Memory, embedding: bytes | None) -> tuple[Any, ...]:
    """Column values for ``memory`` (already validated) in upsert order."""
    # Most memories have no metadata and no links: their JSON is known without orjson.
    metadata = encode_json(dict(memory.metadata), "metadata") if memory.metadata else "{}"
    links = memory.linked_memories
    linked = encode_json(list(links), "linked_memories") if links else "[]"
    row: tuple[Any, ...] = (
        memory.id, memory.content, memory.token_count, metadata, embedding, linked,
        memory.session_id, memory.agent_id, memory.category, memory.source,
        float(memory.importance), float(memory.retention), memory.access_count,
        memory.last_accessed_at, memory.created_at, memory.updated_at, memory.speaker,
        memory.superseded_by, memory.valid_to, memory.superseded_reason,
    )  # fmt: skip
    return row + ((memory.key,) if memory.tier is Tier.SCRATCHPAD else ())


def as_stored(memory: Memory, row: tuple[Any, ...], tags: tuple[str, ...] | None = None) -> Memory:
    """``memory`` as it reads back from ``row``: decoded JSON, read-only metadata (and
    ``tags``, de-duplicated, in the same copy).

    What the store returns (and the cache keeps) never shares mutable state with the
    caller's object, and never holds a value the file does not.
    """
    # Slots filled in straight-line code, as to_memory does (every remember() makes
    # one copy; dataclasses.replace costs twice as much, a loop over the fields half
    # again); Memory has no __post_init__ that replace() would run.
    blob, metadata, linked = row[_EMBEDDING], row[_METADATA], row[_LINKED]
    stored: Memory = _new(Memory)
    _set_id(stored, memory.id)
    _set_content(stored, memory.content)
    _set_tier(stored, memory.tier)
    _set_key(stored, memory.key)
    _set_session_id(stored, memory.session_id)
    _set_agent_id(stored, memory.agent_id)
    _set_category(stored, memory.category)
    _set_tags(stored, memory.tags if tags is None else tags)
    _set_importance(stored, memory.importance)
    _set_retention(stored, memory.retention)
    _set_token_count(stored, memory.token_count)
    _set_source(stored, memory.source)
    _set_metadata(stored, _NO_METADATA if metadata == "{}" else MappingProxyType(_loads(metadata)))
    _set_linked(stored, () if linked == "[]" else tuple(_loads(linked)))
    _set_embedding(stored, None if blob is None else decode_embedding(blob))
    _set_access_count(stored, memory.access_count)
    _set_last_accessed_at(stored, memory.last_accessed_at)
    _set_created_at(stored, memory.created_at)
    _set_updated_at(stored, memory.updated_at)
    _set_speaker(stored, memory.speaker)
    _set_superseded_by(stored, memory.superseded_by)
    _set_valid_to(stored, memory.valid_to)
    _set_superseded_reason(stored, memory.superseded_reason)
    return stored


def stale_keys(memory: Memory) -> Statement:
    """Ids of other scratchpad memories under ``memory``'s key (a write evicts them)."""
    return Statement(_STALE_KEYS, (memory.key, memory.id))


def write(memory: Memory, row: tuple[Any, ...]) -> tuple[Statement, Statement, Batch]:
    """Insert or update ``memory`` in its tier's table (``row``: :func:`encode_row`) and
    replace its tags (the caller first evicts the :func:`stale_keys` of a scratchpad one)."""
    return (
        Statement(_UPSERT[memory.tier], row),
        Statement(_DELETE_TAGS, (memory.id,)),
        Batch(_INSERT_TAG, [(memory.id, tag, n) for n, tag in enumerate(memory.tags)]),
    )


_STALE_KEYS = "SELECT id FROM scratchpad WHERE key = ? AND id <> ?"
_DELETE_TAGS = "DELETE FROM memory_tags WHERE memory_id = ?"
_INSERT = {tier: _UPSERT[tier].split(" ON CONFLICT")[0] for tier in Tier}
_INSERT_TAG = "INSERT INTO memory_tags (memory_id, tag, position) VALUES (?, ?, ?)"
_TIERS = tuple(Tier)  # iterating the enum class itself runs a generator in Python


def insert_new(prepared: Sequence[tuple[Memory, tuple[Any, ...]]]) -> list[Batch]:
    """New memories (``(memory, encode_row(...))``, ids unused) with their tags, tier by
    tier in the order given (each session's order is kept)."""
    if len(prepared) == 1:  # remember(): one row, its tags
        ((memory, row),) = prepared
        tags = [(memory.id, tag, n) for n, tag in enumerate(memory.tags)]
        return [Batch(_INSERT[memory.tier], (row,)), Batch(_INSERT_TAG, tags)]
    batches = [
        Batch(_INSERT[tier], [row for memory, row in prepared if memory.tier is tier])
        for tier in _TIERS
    ]
    tags = [(m.id, tag, n) for m, _ in prepared for n, tag in enumerate(m.tags)]
    return [*batches, Batch(_INSERT_TAG, tags)]


_ID_USED = "SELECT ?1 WHERE " + " OR ".join(
    f"EXISTS (SELECT 1 FROM {table} WHERE id = ?1)" for table in TABLE.values()
)
_IDS_USED = " UNION ALL ".join(
    f"SELECT id FROM {table} WHERE id IN (SELECT value FROM json_each(?1))"
    for table in TABLE.values()
)


def existing_ids(memory_ids: Sequence[str]) -> Statement:
    """Which of ``memory_ids`` some tier already holds (one id a row)."""
    if len(memory_ids) == 1:  # remember(): every tier probed by its primary key
        return Statement(_ID_USED, (memory_ids[0],))
    return Statement(_IDS_USED, (encode_json(list(memory_ids), "memory_ids"),))


def fetch(tier: Tier, memory_id: str, scope: Scope = WHOLE) -> Statement:
    """The memory with ``memory_id`` in ``tier`` (and ``scope``): a :func:`to_memory` row."""
    mine, agent = _mine(scope)
    return Statement(f"{_SELECT[tier]} WHERE t.id = ?{mine}", (memory_id, *agent))


def fetch_any_query(memory_id: str, scope: Scope = WHOLE) -> tuple[str, tuple[str, ...]]:
    """The memory with ``memory_id`` in whichever tier holds it, in one statement: its
    text and parameters, for :meth:`Database.read_row` (its row: :func:`any_tier_memory`)."""
    if scope.agent_id is None:
        return _SELECT_ANY_TIER, (memory_id, memory_id, memory_id)
    return _SELECT_ANY_TIER_SCOPED, (memory_id, scope.agent_id) * 3


def any_tier_memory(row: Sequence[Any] | None) -> Memory | None:
    """The memory a :func:`fetch_any_query` row holds (``None`` for no row)."""
    return None if row is None else to_memory(row)


def fetch_many(memory_ids: Sequence[str], scope: Scope = WHOLE) -> list[Statement]:
    """The memories (of ``scope``) with these ids, one statement per tier (any order;
    missing ids left out): :func:`to_memory` rows."""
    if not memory_ids:
        return []
    marks = ", ".join("?" for _ in memory_ids)
    mine, agent = _mine(scope)
    return [
        Statement(f"{_SELECT[tier]} WHERE t.id IN ({marks}){mine}", [*memory_ids, *agent])
        for tier in _TIERS
    ]


def fetch_by_key(key: str, scope: Scope = WHOLE) -> Statement:
    """The scratchpad memory (of ``scope``) stored under ``key``: a :func:`to_memory` row."""
    mine, agent = _mine(scope)
    return Statement(f"{_SELECT[Tier.SCRATCHPAD]} WHERE t.key = ?{mine}", (key, *agent))


def fetch_all(tier: Tier, scope: Scope = WHOLE) -> Statement:
    """Every memory of ``tier`` (in ``scope``), least recently written first (ties in
    insertion order): :func:`to_memory` rows."""
    mine, agent = scope.condition("t.agent_id")
    return Statement(f"{_SELECT[tier]} WHERE {mine} ORDER BY t.updated_at, t.rowid", agent)


_CONTENT_AND_TIER = (
    " UNION ALL ".join(
        f"SELECT content, '{tier.value}' FROM {TABLE[tier]} WHERE id = ?1" for tier in _TIERS
    )
    + " LIMIT 1"
)


def content_and_tier(memory_id: str) -> Statement:
    """The stored content and tier name of ``memory_id`` (no row: none)."""
    return Statement(_CONTENT_AND_TIER, (memory_id,))


def tier_of(memory_id: str, scope: Scope = WHOLE) -> Statement:
    """The name of the tier that holds ``memory_id`` (in ``scope``; no row: none)."""
    mine, agent = _mine(scope, "")
    sql = " UNION ALL ".join(f"{select}{mine}" for select in _TIER_OF) + " LIMIT 1"
    return Statement(sql, (memory_id, *agent) * len(_TIER_OF))


_TIER_OF = tuple(f"SELECT '{tier.value}' FROM {TABLE[tier]} WHERE id = ?" for tier in _TIERS)


def ids_in(tier: Tier, scope: Scope = WHOLE) -> Statement:
    """The ids of ``tier``'s memories (in ``scope``)."""
    mine, agent = scope.condition()
    return Statement(f"SELECT id FROM {TABLE[tier]} WHERE {mine}", agent)


def delete_row(tier: Tier, memory_id: str) -> Statement:
    """Delete the tier row; its row (``RETURNING``) says it was there."""
    return Statement(f"DELETE FROM {TABLE[tier]} WHERE id = ? RETURNING id", (memory_id,))


def delete_attached(memory_id: str) -> list[Statement]:
    """Delete a deleted memory's tags and schedule; its promotion-log rows stay.

    The audit outlives the content: promotion-log rows (ids, tiers, reasons, times) are
    kept, and the caller writes a forgetting-log row, which the integrity checks accept
    as the reason a logged memory is gone.
    """
    return [
        Statement(f"DELETE FROM {table} WHERE memory_id = ?", (memory_id,))
        for table in ("memory_tags", "repetition_schedules")
    ]


def remove_row(tier: Tier, memory_id: str) -> Statement:
    """Delete only the tier row (tags, schedule and log stay): for moves between tiers."""
    return Statement(f"DELETE FROM {TABLE[tier]} WHERE id = ?", (memory_id,))


def conditions(filters: Mapping[str, Any], probe_tags: bool = False) -> tuple[list[str], list[Any]]:
    """WHERE conditions on a tier table aliased ``t`` (joined with AND) and their
    parameters: the one place that turns filters into SQL, for queries and searches.

    The plain filters are the shared :func:`field_conditions`. A tag is a set to look
    ids up in (a listing: it may drive the query), or with ``probe_tags`` one index probe
    per row (a search checks each candidate it finds).
    """
    where, params = field_conditions(filters, "?")
    for tag in dict.fromkeys(filters.get("tags", ())):
        if probe_tags:
            where.append("EXISTS (SELECT 1 FROM memory_tags WHERE memory_id = t.id AND tag = ?)")
        else:
            where.append("t.id IN (SELECT memory_id FROM memory_tags WHERE tag = ?)")
        params.append(tag)
    return where, params


def filter_conditions(where: MemoryFilter, probe_tags: bool = False) -> tuple[list[str], list[Any]]:
    """:func:`conditions` for a :class:`MemoryFilter` (its tier aside)."""
    return conditions(filter_fields(where), probe_tags)


def accepts(where: MemoryFilter, memory_id: str, tier: str) -> tuple[str, list[Any]]:
    """A condition that holds when ``where`` accepts the memory whose id and tier name
    are the SQL expressions ``memory_id`` and ``tier``: a few index probes per row, for
    checking the rows a search finds."""
    found, params = filter_conditions(where, probe_tags=True)
    tiers = list(Tier) if where.tier is None else [where.tier]
    parts = [
        f"({tier} = '{t.value}' AND EXISTS (SELECT 1 FROM {TABLE[t]} AS t "
        f"WHERE {' AND '.join([f't.id = {memory_id}', *found])}))"
        for t in tiers
    ]
    return f"({' OR '.join(parts)})", params * len(tiers)


def query(tier: Tier, options: QueryOptions, scope: Scope = WHOLE) -> Statement:
    """Memories of ``tier`` (in ``scope``) matching every filter that ``options`` sets:
    :func:`to_memory` rows (the options are validated here)."""
    validate_query(options, _ORDER_COLUMNS)
    where, params = conditions(query_filters(options))
    if scope.scoped:
        mine, agent = scope.condition("t.agent_id")
        where, params = [*where, mine], [*params, *agent]
    sql = _SELECT[tier]
    if where:
        sql += " WHERE " + " AND ".join(where)
    direction = "DESC" if options.descending else "ASC"
    sql += f" ORDER BY t.{options.order_by} {direction}, t.id {direction} LIMIT ? OFFSET ?"
    params += [-1 if options.limit is None else options.limit, options.offset]
    return Statement(sql, params)


def page(tier: Tier, after_id: str, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` rows of ``tier``'s table (in ``scope``) with id > ``after_id``,
    in id order (:meth:`MemoryStore.page`'s keyset paging): :func:`to_memory` rows."""
    mine, agent = _mine(scope)
    return Statement(
        f"{_SELECT[tier]} WHERE t.id > ?{mine} ORDER BY t.id LIMIT ?", (after_id, *agent, limit)
    )


def page_in_order(tier: Tier, after_rowid: int, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` memories of ``tier`` (in ``scope``) in insertion order (rowid >
    ``after_rowid``): rows of the rowid then a :func:`to_memory` row. An export in this
    order keeps each session's order on import."""
    mine, agent = _mine(scope)
    select = _SELECT[tier].removeprefix("SELECT ")
    return Statement(
        f"SELECT t.rowid, {select} WHERE t.rowid > ?{mine} ORDER BY t.rowid LIMIT ?",
        (after_rowid, *agent, limit),
    )


def count(tier: Tier, scope: Scope = WHOLE) -> Statement:
    """How many memories ``tier`` holds (in ``scope``): one value."""
    mine, agent = scope.condition()
    return Statement(f"SELECT count(*) FROM {TABLE[tier]} WHERE {mine}", agent)


_ANY_SUPERSEDED = "SELECT " + " OR ".join(
    f"EXISTS (SELECT 1 FROM {table} WHERE superseded_by IS NOT NULL)" for table in TABLE.values()
)


def any_superseded() -> Statement:
    """One value, true if any memory is superseded (a probe of each partial index)."""
    return Statement(_ANY_SUPERSEDED)


def mark_superseded(
    tier: Tier, memory_id: str, by: str, valid_to: int, reason: str, scope: Scope = WHOLE,
    *, earlier: bool = False,
) -> Statement:  # fmt: skip
    """Mark one memory (of ``scope``) superseded by ``by``, if nothing superseded it yet:
    a row comes back when it was marked (none: gone, or superseded meanwhile; ``earlier``: or
    superseded later than ``valid_to``, which a fact arriving late moves back to its time)."""
    mine, agent = _mine(scope, "")
    free = "(superseded_by IS NULL OR valid_to > ?)" if earlier else "superseded_by IS NULL"
    later = (valid_to,) if earlier else ()
    return Statement(
        f"UPDATE {TABLE[tier]} SET superseded_by = ?, valid_to = ?, superseded_reason = ? "
        f"WHERE id = ? AND {free}{mine} RETURNING id",
        (by, valid_to, reason, memory_id, *later, *agent),
    )


def superseded_pairs(memory_ids: Sequence[str], scope: Scope = WHOLE) -> list[Statement]:
    """``(superseded_by, id)`` of the memories (of ``scope``) that any of ``memory_ids``
    superseded, one statement per tier (through the partial index on ``superseded_by``)."""
    mine, agent = _mine(scope)
    ids = encode_json(list(memory_ids), "memory_ids")
    return [
        Statement(
            f"SELECT t.superseded_by, t.id FROM {TABLE[tier]} AS t WHERE t.superseded_by IN "
            f"(SELECT value FROM json_each(?)){mine}",
            (ids, *agent),
        )
        for tier in _TIERS
    ]


def count_superseded(scope: Scope = WHOLE) -> Statement:
    """How many memories (of ``scope``) are superseded: one value."""
    mine, agent = _mine(scope, "")
    counts = " + ".join(
        f"(SELECT count(*) FROM {table} WHERE superseded_by IS NOT NULL{mine})"
        for table in TABLE.values()
    )
    return Statement(f"SELECT {counts}", agent * len(TABLE))


def superseded_of(memory_id: str, scope: Scope = WHOLE) -> list[Statement]:
    """The memories (of ``scope``) that ``memory_id`` superseded, one statement per
    tier: :func:`to_memory` rows."""
    mine, agent = _mine(scope)
    return [
        Statement(f"{_SELECT[tier]} WHERE t.superseded_by = ?{mine}", (memory_id, *agent))
        for tier in _TIERS
    ]


def log_promotion(
    memory_id: str, from_tier: Tier, to_tier: Tier, promoted_at: int, reason: str | None
) -> Statement:
    """Append one row to the promotion log; its value is the row's id."""
    return Statement(
        "INSERT INTO promotion_log (memory_id, from_tier, to_tier, promoted_at, reason) "
        "VALUES (?, ?, ?, ?, ?) RETURNING id",
        (memory_id, from_tier.value, to_tier.value, promoted_at, reason),
    )


_PROMOTION_NAMES = ("id", "memory_id", "from_tier", "to_tier", "promoted_at", "reason")
_PROMOTION_KINDS = (INT, TEXT, TEXT, TEXT, INT, NULL_TEXT)
_PROMOTIONS = f"SELECT {', '.join(_PROMOTION_NAMES)} FROM promotion_log"


def to_promotion(row: Sequence[Any]) -> PromotionRecord:
    """The promotion-log record a row holds (damage if a column's type is not its own)."""
    id_, memory_id, source, target, promoted_at, reason = check_row(
        "promotion_log", _PROMOTION_NAMES, _PROMOTION_KINDS, row
    )
    return PromotionRecord(id_, memory_id, tier_named("promotion_log", "from_tier", source),
                           tier_named("promotion_log", "to_tier", target), promoted_at,
                           reason)  # fmt: skip


def promotion_history(memory_id: str, scope: Scope = WHOLE) -> Statement:
    """Every logged promotion of ``memory_id``, oldest first (none unless ``scope``
    holds the memory, live): :func:`to_promotion` rows."""
    mine, agent = ("", ()) if not scope.scoped else scoped_ids(scope)
    return Statement(
        f"{_PROMOTIONS} WHERE memory_id = ?{mine and f' AND memory_id IN ({mine})'} ORDER BY id",
        (memory_id, *agent),
    )


def promotion_page(
    after_id: int, limit: int, held: tuple[str, tuple[str, ...]] | None = None
) -> Statement:
    """The next ``limit`` promotion-log rows with id > ``after_id`` (``held``: of the
    memory ids this subquery and its parameters give): :func:`to_promotion` rows."""
    mine, params = ("", ()) if held is None else (f" AND memory_id IN ({held[0]})", held[1])
    return Statement(
        f"{_PROMOTIONS} WHERE id > ?{mine} ORDER BY id LIMIT ?", (after_id, *params, limit)
    )


def insert_promotion(record: PromotionRecord, keep_id: bool) -> Statement:
    """Insert a promotion-log row as it was exported (a fresh id unless ``keep_id``)."""
    return Statement(
        "INSERT INTO promotion_log (id, memory_id, from_tier, to_tier, promoted_at, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            record.id if keep_id else None,
            record.memory_id,
            record.from_tier.value,
            record.to_tier.value,
            record.promoted_at,
            record.reason,
        ),
    )


def has_promotion(record: PromotionRecord) -> Statement:
    """A row if the log already holds this event (same memory, tiers and time)."""
    return Statement(
        "SELECT 1 FROM promotion_log WHERE memory_id = ? AND from_tier = ? AND to_tier = ? "
        "AND promoted_at = ?",
        (record.memory_id, record.from_tier.value, record.to_tier.value, record.promoted_at),
    )


_ALL_IDS = " UNION ALL ".join(f"SELECT id FROM {table}" for table in TABLE.values())


def all_ids() -> Statement:
    """Ids of every memory in every tier."""
    return Statement(_ALL_IDS)


def delete_all() -> list[Statement]:
    """Delete every memory, tag and promotion-log row."""
    return [
        Statement(f"DELETE FROM {table}")
        for table in (*TABLE.values(), "memory_tags", "promotion_log")
    ]
