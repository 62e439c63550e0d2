"""SQL of the memory family on PostgreSQL: ``tm_memories`` (one table, a ``tier``
column), each memory's vector in ``tm_vectors`` and the promotion log.

Functions build statements (:class:`~persistence.statements.Statement`) and decode the
rows they return; the stores run them (:mod:`persistence.statements`) inside the caller's
transaction or on a read connection. Every value is a bound parameter; the only text put
into SQL comes from closed sets (column names of :data:`ORDER_COLUMNS`, fixed fragments).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import orjson
from pgvector import Vector

from persistence.codecs import encode_json
from persistence.records import (
    SLOT_SETTERS,
    Memory,
    MemoryFilter,
    PromotionRecord,
    QueryOptions,
    Tier,
)
from persistence.statements import Statement
from persistence.stores.rows import field_conditions, filter_fields, query_filters, validate_query
from persistence.stores.scope import WHOLE, Scope

ORDER_COLUMNS = frozenset(
    {"created_at", "updated_at", "importance", "retention", "last_accessed_at"}
)
"""The columns a query may order by (the only names put into its text)."""

ID = 't.id COLLATE "C"'
"""A memory id compared and sorted byte-wise, as SQLite and Python's ``sorted`` do (the
database's own collation may be a language's)."""

_COLUMNS = (
    "id", "content", "tier", "key", "session_id", "agent_id", "category", "tags",
    "importance", "retention", "token_count", "source", "metadata", "linked_memories",
    "access_count", "last_accessed_at", "created_at", "updated_at", "speaker", "superseded_by",
    "valid_to", "superseded_reason",
)  # fmt: skip
_WRITTEN = ", ".join(_COLUMNS)
SELECT = (
    f"SELECT {', '.join(f't.{c}' for c in _COLUMNS)}, vector_send(v.embedding) "
    "FROM tm_memories AS t LEFT JOIN tm_vectors AS v ON v.memory_id = t.id"
)
"""Every column of a memory (its vector included): rows decode with :func:`to_memory`.
The vector comes in pgvector's binary form (``vector_send``): parsing its text took
most of a fetch's time."""

_INSERT = f"INSERT INTO tm_memories ({_WRITTEN}) VALUES ({', '.join('%s' for _ in _COLUMNS)})"
_ONCE = frozenset({"superseded_by", "valid_to", "superseded_reason"})
"""Columns an upsert sets only while the row is not superseded: a supersession, once
made (see :func:`mark_superseded`), is never undone by a write of an older copy."""
_UPSERT = (
    _INSERT
    + " ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(
        f"{c} = CASE WHEN tm_memories.superseded_by IS NULL THEN excluded.{c} "
        f"ELSE tm_memories.{c} END"
        if c in _ONCE
        else f"{c} = excluded.{c}"
        for c in _COLUMNS
        if c != "id"
    )
)
_PUT_VECTOR = (
    "INSERT INTO tm_vectors (memory_id, embedding) VALUES (%s, %s) "
    "ON CONFLICT (memory_id) DO UPDATE SET embedding = excluded.embedding"
)
_DROP_VECTOR = "DELETE FROM tm_vectors WHERE memory_id = %s"

_TIER_NAMED = {tier.value: tier for tier in Tier}
_NO_METADATA: MappingProxyType[str, Any] = MappingProxyType({})
_new = object.__new__
_SETTERS = tuple(SLOT_SETTERS[name] for name in (*_COLUMNS, "embedding"))
_TIER_AT, _TAGS_AT, _METADATA_AT, _LINKED_AT = (
    _COLUMNS.index(n) for n in ("tier", "tags", "metadata", "linked_memories")
)
_EMBEDDING_AT = len(_COLUMNS)


def read_only_vector(value: Any) -> np.ndarray | None:
    """A read-only float32 array of a ``vector`` value, or of its binary form
    (``vector_send``: dimension, unused, big-endian floats); ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, (bytes, memoryview)):
        return _from_binary(bytes(value))
    if isinstance(value, Vector):  # pgvector's loader type
        value = value.to_numpy()
    array = np.array(value, dtype=np.float32)
    array.setflags(write=False)
    return array


def _from_binary(value: bytes) -> np.ndarray:
    dim = int.from_bytes(value[:2], "big")
    array = np.frombuffer(value, dtype=">f4", count=dim, offset=4).astype(np.float32)
    array.setflags(write=False)
    return array


def to_memory(row: Sequence[Any]) -> Memory:
    """The memory a :data:`SELECT` row holds, decoded as SQLite's rows are: tags and
    links as tuples in their stored order, metadata a read-only mapping of its JSON,
    the embedding a read-only float32 array."""
    values = list(row)
    values[_TIER_AT] = _TIER_NAMED[values[_TIER_AT]]
    values[_TAGS_AT] = tuple(values[_TAGS_AT])
    values[_LINKED_AT] = tuple(values[_LINKED_AT])
    metadata = values[_METADATA_AT]
    values[_METADATA_AT] = (
        _NO_METADATA if metadata == "{}" else MappingProxyType(orjson.loads(metadata))
    )
    values[_EMBEDDING_AT] = read_only_vector(values[_EMBEDDING_AT])
    memory: Memory = _new(Memory)
    for setter, value in zip(_SETTERS, values, strict=True):
        setter(memory, value)
    return memory


def encode_row(memory: Memory) -> tuple[Any, ...]:
    """Column values of ``memory`` (validated; tags already de-duplicated) in
    :data:`_COLUMNS` order; a key is kept only in the scratchpad."""
    metadata = encode_json(dict(memory.metadata), "metadata") if memory.metadata else "{}"
    encode_json(list(memory.linked_memories), "linked_memories")  # the same checks as SQLite
    return (
        memory.id, memory.content, memory.tier.value,
        memory.key if memory.tier is Tier.SCRATCHPAD else None,
        memory.session_id, memory.agent_id, memory.category, list(memory.tags),
        float(memory.importance), float(memory.retention), memory.token_count, memory.source,
        metadata, list(memory.linked_memories), memory.access_count, memory.last_accessed_at,
        memory.created_at, memory.updated_at, memory.speaker, memory.superseded_by,
        memory.valid_to, memory.superseded_reason,
    )  # fmt: skip


def as_stored(memory: Memory, row: tuple[Any, ...], vector: np.ndarray | None) -> Memory:
    """``memory`` as it reads back: metadata decoded from its JSON (read-only), tags as
    written, the embedding a read-only float32 copy; nothing shared with the caller."""
    stored: Memory = _new(Memory)
    for name in SLOT_SETTERS:
        SLOT_SETTERS[name](stored, getattr(memory, name))
    metadata = row[_METADATA_AT]
    SLOT_SETTERS["metadata"](
        stored, _NO_METADATA if metadata == "{}" else MappingProxyType(orjson.loads(metadata))
    )
    SLOT_SETTERS["tags"](stored, tuple(row[_TAGS_AT]))
    SLOT_SETTERS["linked_memories"](stored, tuple(row[_LINKED_AT]))
    SLOT_SETTERS["embedding"](stored, vector)
    return stored


def stale_keys(row: tuple[Any, ...]) -> Statement:
    """Ids of other scratchpad memories under the key of a scratchpad ``row`` (a write
    evicts them with :func:`forget_rows`)."""
    return Statement("SELECT id FROM tm_memories WHERE key = %s AND id <> %s", (row[3], row[0]))


def upsert(row: tuple[Any, ...], vector: np.ndarray | None) -> list[Statement]:
    """Insert or update one memory row and its vector (none: the stored one goes); a
    scratchpad row's :func:`stale_keys` are evicted first."""
    memory_id = row[0]
    if vector is None:
        return [Statement(_UPSERT, row), Statement(_DROP_VECTOR, (memory_id,))]
    return [Statement(_UPSERT, row), Statement(_PUT_VECTOR, (memory_id, vector))]


def is_scratchpad(row: tuple[Any, ...]) -> bool:
    """Whether an :func:`encode_row` row is a scratchpad memory's."""
    return bool(row[2] == Tier.SCRATCHPAD.value)


def bulk_keyword_entries() -> Statement:
    """Let this transaction's new keyword entries wait in the GIN pending list up to
    PostgreSQL's default 4 MB (the connections keep it small for searches): a batch's
    entries are merged into the index in a few large steps, not many small ones."""
    return Statement("SELECT set_config('gin_pending_list_limit', '4096', true)")


MULTI_ROW = 1000
"""Rows per multi-row INSERT of :func:`insert_many` (22 parameters a memory row: far under
PostgreSQL's 65,535 a statement)."""


def insert_many(
    rows: Sequence[tuple[Any, ...]], vectors: Sequence[tuple[str, np.ndarray]]
) -> tuple[list[Statement], list[Statement]]:
    """New memory rows (ids unused) in the order given, then their vectors: one
    multi-row INSERT per :data:`MULTI_ROW` rows, so the tables' statement triggers (the
    keyword postings, the embedding queue) fire once per chunk, not once per row."""
    return _multi_row(_INSERT, rows), _multi_row(_PUT_VECTOR, vectors)


def _multi_row(sql: str, rows: Sequence[Sequence[Any]]) -> list[Statement]:
    """``sql`` (an INSERT with one ``VALUES (...)`` tuple) for every :data:`MULTI_ROW`
    of ``rows``: one statement each, its tuple repeated once per row."""
    head, _, rest = sql.partition(" VALUES ")
    one, _, tail = rest.partition(")")
    out = []
    for lo in range(0, len(rows), MULTI_ROW):
        chunk = rows[lo : lo + MULTI_ROW]
        values = ", ".join([one + ")"] * len(chunk))
        out.append(Statement(f"{head} VALUES {values}{tail}", [p for r in chunk for p in r]))
    return out


_SCHEDULE_COLUMNS = (
    "next_review_at, interval_ms, review_count, ease_factor, stability_days, last_reviewed_at"
)


def _insert_one_sql(vector: bool, schedule: bool) -> str:
    """One new memory with its vector, content key and schedule in one statement: the
    row goes in only if its id is unused (visible to this handle), and the other rows
    hang off its ``RETURNING``, so a taken id writes nothing. Returns 1 or 0 rows."""
    parts = [
        "WITH ins AS (",
        f"    INSERT INTO tm_memories ({_WRITTEN})",
        f"    SELECT {', '.join(f'%({c})s' for c in _COLUMNS)}",
        "    WHERE NOT EXISTS (SELECT 1 FROM tm_memories WHERE id = %(id)s)",
        "    RETURNING id",
        "), ckey AS (",
        "    INSERT INTO tm_content_keys (memory_id, key) SELECT id, %(ckey)s FROM ins",
        "    ON CONFLICT (memory_id) DO UPDATE SET key = excluded.key",
        ")",
    ]
    if vector:
        parts.append(
            ", vec AS (INSERT INTO tm_vectors (memory_id, embedding) SELECT id, %(vec)b FROM ins)"
        )
    if schedule:
        parts.append(
            f", sch AS (INSERT INTO tm_schedules (memory_id, {_SCHEDULE_COLUMNS}) "
            "SELECT id, %(s0)s, %(s1)s, %(s2)s, %(s3)s, %(s4)s, %(s5)s FROM ins)"
        )
    parts.append("SELECT id FROM ins")
    return "\n".join(parts)


_INSERT_ONE = {(v, s): _insert_one_sql(v, s) for v in (False, True) for s in (False, True)}


def insert_one(
    row: tuple[Any, ...],
    vector: np.ndarray | None,
    content_key: bytes,
    schedule: tuple[Any, ...] | None,
) -> Statement:
    """One new memory row, its vector (if any), its content key and its schedule
    (``(next_review_at, interval_ms, review_count, ease_factor, stability_days,
    last_reviewed_at)``, if any) in one round trip; no row (nothing written) if a memory
    this handle sees already has the id."""
    params: dict[str, Any] = dict(zip(_COLUMNS, row, strict=True))
    params["ckey"] = content_key
    if vector is not None:
        params["vec"] = vector
    if schedule is not None:
        params.update((f"s{i}", value) for i, value in enumerate(schedule))
    return Statement(_INSERT_ONE[vector is not None, schedule is not None], params)


def _remember_sql(vector: bool, session: bool, dedup: bool) -> str:
    """:func:`_insert_one_sql` with ``remember()``'s checks in the same statement: the
    row goes in only if its session (if any) is there and active and (with ``dedup``) no
    memory this handle sees has the same content key; the session's activity time moves
    forward with it. Returns one row: whether the checks passed, the id if inserted."""
    body = _insert_one_sql(vector, True).replace(
        "    WHERE NOT EXISTS (SELECT 1 FROM tm_memories WHERE id = %(id)s)",
        "    FROM ok WHERE ok.go AND NOT EXISTS (SELECT 1 FROM tm_memories WHERE id = %(id)s)",
    )
    checks = ["true"]
    if session:
        checks.append(
            "EXISTS (SELECT 1 FROM tm_sessions WHERE session_id = %(session_id)s AND is_active)"
        )
    if dedup:
        checks.append("NOT EXISTS (SELECT 1 FROM tm_content_keys WHERE key = %(ckey)s)")
    head = f"WITH ok AS (SELECT {' AND '.join(checks)} AS go), "
    body = head + body.removeprefix("WITH ")
    touch = (
        ", touch AS (UPDATE tm_sessions SET last_active_at = greatest(last_active_at, %(at)s) "
        "WHERE session_id = %(session_id)s AND last_active_at < %(at)s "
        "AND EXISTS (SELECT 1 FROM ins))\n"
        if session
        else ""
    )
    return body.replace(
        "SELECT id FROM ins", f"{touch}SELECT (SELECT go FROM ok), (SELECT id FROM ins)"
    )


_REMEMBER = {
    (v, s, d): _remember_sql(v, s, d) for v in (False, True) for s in (False, True)
    for d in (False, True)
}  # fmt: skip


def remember_statement(
    row: tuple[Any, ...],
    vector: np.ndarray | None,
    content_key: bytes,
    schedule: tuple[Any, ...],
    *,
    touch_at: int | None,
    dedup: bool,
) -> Statement:
    """The statement of :func:`_remember_sql` for one new memory (a
    :func:`insert_one` row and schedule); ``touch_at`` is the session's new activity time
    (the row's ``session_id`` names the session). Not run here: the caller sends it with
    its transaction in one round trip. Its row is ``(checks passed, id or None)``."""
    params: dict[str, Any] = dict(zip(_COLUMNS, row, strict=True))
    params["ckey"] = content_key
    params["at"] = touch_at
    if vector is not None:
        params["vec"] = vector
    params.update((f"s{i}", value) for i, value in enumerate(schedule))
    session = params["session_id"] is not None
    return Statement(_REMEMBER[vector is not None, session, dedup], params)


def inserted_condition(memory_id: str) -> tuple[str, tuple[str]]:
    """An SQL condition (and its parameter) true once the memory's row is there: the
    :func:`remember_statement` wrote (its ids are new)."""
    return "EXISTS (SELECT 1 FROM tm_memories WHERE id = %s)", (memory_id,)


def existing_ids(memory_ids: Sequence[str]) -> Statement:
    """Which of ``memory_ids`` some tier already holds (one id a row)."""
    return Statement("SELECT id FROM tm_memories WHERE id = ANY(%s)", (list(memory_ids),))


def _mine(scope: Scope, column: str = "t.scope") -> tuple[str, tuple[str, ...]]:
    """The scope's condition on a row's scope column, to append after ``WHERE ...``
    (row-level security keeps the same rows: this is the first wall, it the second)."""
    return scope.and_(column, "%s")


def fetch(tier: Tier | None, memory_id: str, scope: Scope = WHOLE) -> Statement:
    """The memory with ``memory_id`` (in ``tier``, if given, and ``scope``): a
    :func:`to_memory` row."""
    mine, agent = _mine(scope)
    if tier is None:
        return Statement(f"{SELECT} WHERE t.id = %s{mine}", (memory_id, *agent))
    return Statement(
        f"{SELECT} WHERE t.id = %s AND t.tier = %s{mine}", (memory_id, tier.value, *agent)
    )


def fetch_many(memory_ids: Sequence[str], scope: Scope = WHOLE) -> list[Statement]:
    """The memories (of ``scope``) with these ids (any order; missing ids left out):
    :func:`to_memory` rows of one statement."""
    if not memory_ids:
        return []
    mine, agent = _mine(scope)
    return [Statement(f"{SELECT} WHERE t.id = ANY(%s){mine}", (list(memory_ids), *agent))]


def fetch_by_key(key: str, scope: Scope = WHOLE) -> Statement:
    """The scratchpad memory (of ``scope``) under ``key``: a :func:`to_memory` row."""
    mine, agent = _mine(scope)
    return Statement(f"{SELECT} WHERE t.key = %s{mine}", (key, *agent))


def fetch_all(tier: Tier, scope: Scope = WHOLE) -> Statement:
    """Every memory of ``tier`` (in ``scope``), least recently written first (ties in
    insertion order): :func:`to_memory` rows."""
    mine, agent = _mine(scope)
    return Statement(
        f"{SELECT} WHERE t.tier = %s{mine} ORDER BY t.updated_at, t.seq", (tier.value, *agent)
    )


def content_and_tier(memory_id: str) -> Statement:
    """The stored content and tier name of ``memory_id`` (no row: none)."""
    return Statement("SELECT content, tier FROM tm_memories WHERE id = %s", (memory_id,))


def tier_of(memory_id: str, scope: Scope = WHOLE) -> Statement:
    """The name of the tier that holds ``memory_id`` (in ``scope``; no row: none)."""
    mine, agent = _mine(scope, "scope")
    return Statement(f"SELECT tier FROM tm_memories WHERE id = %s{mine}", (memory_id, *agent))


def ids_in(tier: Tier, scope: Scope = WHOLE) -> Statement:
    """The ids of ``tier``'s memories (in ``scope``)."""
    mine, agent = _mine(scope, "scope")
    return Statement(f"SELECT id FROM tm_memories WHERE tier = %s{mine}", (tier.value, *agent))


_FORGET = """
WITH gone AS (
    DELETE FROM tm_memories AS t
    USING unnest(%(ids)s::text[], %(retentions)s::float8[]) WITH ORDINALITY AS f(id, r, n)
    WHERE t.id = f.id AND (%(tier)s::text IS NULL OR t.tier = %(tier)s::text) {scope}
    RETURNING t.id, t.scope, t.tier, f.r, f.n
), logged AS (
    INSERT INTO tm_forgetting_log (memory_id, scope, tier, forgotten_at, retention, reason)
    SELECT id, scope, tier, %(at)s, r, %(reason)s FROM gone WHERE %(reason)s::text IS NOT NULL
    ORDER BY n
), schedules AS (
    DELETE FROM tm_schedules WHERE memory_id IN (SELECT id FROM gone)
), keys AS (
    DELETE FROM tm_content_keys WHERE memory_id IN (SELECT id FROM gone)
)
SELECT id, tier FROM gone ORDER BY n
"""


def forget_rows(
    memory_ids: Sequence[str],
    retentions: Sequence[float | None] | None,
    tier: Tier | None,
    reason: str | None,
    at: int | None,
    scope: Scope = WHOLE,
) -> Statement:
    """Delete memories (of ``tier``, if given, and ``scope``) with their vectors,
    schedules and content keys, and with a ``reason`` log one forgetting row each
    (stamped ``at``, in the order given); their promotion-log rows stay. Its rows are
    ``(id, tier name)`` of those deleted (:func:`forgotten`)."""
    mine, _ = scope.and_("t.scope", "%(scope)s")
    return Statement(
        _FORGET.replace("{scope}", mine),
        {
            "scope": scope.agent_id,
            "ids": list(memory_ids),
            "retentions": list(retentions) if retentions is not None else [None] * len(memory_ids),
            "tier": None if tier is None else tier.value,
            "reason": reason,
            "at": at,
        },
    )


def forgotten(rows: Sequence[Sequence[Any]]) -> list[tuple[str, Tier]]:
    """``(id, tier)`` of a :func:`forget_rows` statement's rows."""
    return [(r[0], _TIER_NAMED[r[1]]) for r in rows]


def conditions(filters: Mapping[str, Any]) -> tuple[list[str], list[Any]]:
    """WHERE conditions on ``tm_memories`` aliased ``t`` (joined with AND) and their
    parameters: the one place that turns filters into SQL, for queries and searches.
    The plain filters are the shared :func:`field_conditions`; tags must all be present
    (``@>``, served by the GIN index)."""
    where, params = field_conditions(filters, "%s")
    tags = filters.get("tags", ())
    if tags:
        where.append("t.tags @> %s::text[]")
        params.append(list(dict.fromkeys(tags)))
    return where, params


def filter_conditions(where: MemoryFilter) -> tuple[list[str], list[Any]]:
    """:func:`conditions` of a :class:`MemoryFilter`, its tier included."""
    found, params = conditions(filter_fields(where))
    if where.tier is not None:
        found.insert(0, "t.tier = %s")
        params.insert(0, where.tier.value)
    return found, params


def query(tier: Tier, options: QueryOptions, scope: Scope = WHOLE) -> Statement:
    """Memories of ``tier`` (in ``scope``) matching every filter ``options`` sets, ordered
    as SQLite orders them (a missing ``last_accessed_at`` sorts lowest): :func:`to_memory`
    rows (the options are validated here)."""
    validate_query(options, ORDER_COLUMNS)
    where, params = conditions(query_filters(options))
    if scope.scoped:
        mine, agent = scope.condition("t.scope", "%s")
        where, params = [*where, mine], [*params, *agent]
    direction = "DESC NULLS LAST" if options.descending else "ASC NULLS FIRST"
    id_direction = "DESC" if options.descending else "ASC"
    sql = (
        f"{SELECT} WHERE {' AND '.join(['t.tier = %s', *where])} "
        f"ORDER BY t.{options.order_by} {direction}, {ID} {id_direction} LIMIT %s OFFSET %s"
    )
    return Statement(sql, [tier.value, *params, options.limit, options.offset])


def page(tier: Tier, after_id: str, limit: int, scope: Scope = WHOLE) -> Statement:
    """The next ``limit`` memories of ``tier`` (in ``scope``) whose id sorts byte-wise
    after ``after_id`` (``COLLATE "C"``, SQLite's order), in that order: :func:`to_memory`
    rows."""
    mine, agent = _mine(scope)
    return Statement(
        f"{SELECT} WHERE t.tier = %s AND {ID} > %s{mine} ORDER BY {ID} LIMIT %s",
        (tier.value, after_id, *agent, limit),
    )


def any_superseded() -> Statement:
    """One value, true if any memory is superseded (a probe of the partial index)."""
    return Statement("SELECT EXISTS (SELECT 1 FROM tm_memories WHERE superseded_by IS NOT NULL)")


def mark_superseded(
    tier: Tier, memory_id: str, by: str, valid_to: int, reason: str, scope: Scope = WHOLE,
    *, earlier: bool = False,
) -> Statement:  # fmt: skip
    """Mark one memory (of ``scope``) superseded by ``by``, if nothing superseded it yet:
    a row comes back when it was marked (none: gone, or superseded meanwhile; ``earlier``: or
    superseded later than ``valid_to``, which a fact arriving late moves back to its time; the row
    lock makes a concurrent supersession wait, then find it taken)."""
    mine, agent = _mine(scope, "scope")
    free = "(superseded_by IS NULL OR valid_to > %s)" if earlier else "superseded_by IS NULL"
    later = (valid_to,) if earlier else ()
    return Statement(
        "UPDATE tm_memories SET superseded_by = %s, valid_to = %s, superseded_reason = %s "
        f"WHERE id = %s AND {free}{mine} RETURNING id",
        (by, valid_to, reason, memory_id, *later, *agent),
    )


def superseded_pairs(memory_ids: Sequence[str], scope: Scope = WHOLE) -> list[Statement]:
    """``(superseded_by, id)`` of the memories (of ``scope``) that any of ``memory_ids``
    superseded (through the partial index on ``superseded_by``)."""
    mine, agent = _mine(scope)
    return [
        Statement(
            f"SELECT t.superseded_by, t.id FROM tm_memories AS t "
            f"WHERE t.superseded_by = ANY(%s){mine}",
            (list(memory_ids), *agent),
        )
    ]


def count_superseded(scope: Scope = WHOLE) -> Statement:
    """How many memories (of ``scope``) are superseded: one value."""
    mine, agent = _mine(scope, "scope")
    return Statement(
        f"SELECT count(*) FROM tm_memories WHERE superseded_by IS NOT NULL{mine}", agent
    )


def superseded_of(memory_id: str, scope: Scope = WHOLE) -> list[Statement]:
    """The memories (of ``scope``) that ``memory_id`` superseded: :func:`to_memory` rows."""
    mine, agent = _mine(scope)
    return [Statement(f"{SELECT} WHERE t.superseded_by = %s{mine}", (memory_id, *agent))]


def count(tier: Tier, scope: Scope = WHOLE) -> Statement:
    """How many memories ``tier`` holds (in ``scope``): one value."""
    mine, agent = _mine(scope, "scope")
    return Statement(
        f"SELECT count(*) FROM tm_memories WHERE tier = %s{mine}", (tier.value, *agent)
    )


def move(memory_id: str, source: Tier, target: Tier, metadata: str, at: int) -> Statement:
    """Move a memory from ``source`` to ``target`` in place (key cleared, ``metadata``
    and ``updated_at`` set); no row if ``source`` does not hold it."""
    return Statement(
        "UPDATE tm_memories SET tier = %s, key = NULL, metadata = %s, "
        "updated_at = greatest(%s, created_at) WHERE id = %s AND tier = %s RETURNING id",
        (target.value, metadata, at, memory_id, source.value),
    )


_PROMOTION_COLUMNS = "id, memory_id, from_tier, to_tier, promoted_at, reason"


def log_promotion(
    memory_id: str, from_tier: Tier, to_tier: Tier, promoted_at: int, reason: str | None
) -> Statement:
    """A new row of ``tm_promotion_log``, returning its id."""
    return Statement(
        "INSERT INTO tm_promotion_log (memory_id, from_tier, to_tier, promoted_at, reason) "
        "VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (memory_id, from_tier.value, to_tier.value, promoted_at, reason),
    )


def to_promotion(row: Sequence[Any]) -> PromotionRecord:
    """The promotion-log record a row of :func:`promotion_history` holds."""
    return PromotionRecord(row[0], row[1], Tier(row[2]), Tier(row[3]), row[4], row[5])


def promotion_history(memory_id: str, scope: Scope = WHOLE) -> Statement:
    """Every logged promotion of ``memory_id`` (in ``scope``), oldest first:
    :func:`to_promotion` rows."""
    mine, agent = _mine(scope, "scope")
    return Statement(
        f"SELECT {_PROMOTION_COLUMNS} FROM tm_promotion_log WHERE memory_id = %s{mine} ORDER BY id",
        (memory_id, *agent),
    )
