"""Driver-free pieces both engines' SQL modules share: query checks, filter fields and
their column conditions, the parameter rows of sessions, schedules and notes, and the
schedule upsert's conflict clause, the same SQL on both (each engine keeps its own
statements)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from persistence.codecs import encode_json
from persistence.errors import InvalidInputError, InvalidTypeError
from persistence.note_records import Note, NoteVersion
from persistence.records import MemoryFilter, QueryOptions, RepetitionSchedule, SessionState
from persistence.validation import require_bool, require_int, require_str, require_str_tuple


def validate_query(options: QueryOptions, order_columns: Collection[str]) -> None:
    """Refuse options a query cannot honour, before anything runs."""
    if not isinstance(options, QueryOptions):
        raise InvalidTypeError(f"options must be QueryOptions, got {type(options).__name__}")
    if options.order_by not in order_columns:
        raise InvalidInputError(
            f"order_by must be one of {sorted(order_columns)}, got {options.order_by!r}"
        )
    for name in ("session_id", "agent_id", "category"):
        require_str(getattr(options, name), name, allow_none=True)
    require_str_tuple(options.tags, "tags")
    for name in ("created_after", "created_before"):
        require_int(getattr(options, name), name, allow_none=True)
    require_int(options.limit, "limit", allow_none=True, minimum=0)
    require_int(options.offset, "offset", minimum=0)
    require_bool(options.descending, "descending")
    require_bool(options.current, "current")
    require_int(options.as_of, "as_of", allow_none=True, minimum=0)


def query_filters(options: QueryOptions) -> dict[str, Any]:
    """The filters of ``options``, as an engine's ``conditions()`` takes them."""
    return {
        "session_id": options.session_id,
        "agent_id": options.agent_id,
        "category": options.category,
        "tags": options.tags,
        "created_after": options.created_after,
        "created_before": options.created_before,
        "current": options.current or None,
        "as_of": options.as_of,
    }


def filter_fields(where: MemoryFilter) -> dict[str, Any]:
    """The filters of ``where`` (its tier aside), as an engine's ``conditions()`` takes them."""
    return {
        "session_id": where.session_id,
        "agent_id": where.agent_id,
        "tags": where.tags,
        "created_after": where.created_after,
        "created_before": where.created_before,
        "min_retention": where.min_retention,
        "current": where.current or None,
        "as_of": where.as_of,
    }


_FIELD_CONDITIONS = (
    ("session_id", "t.session_id = {}"),
    ("agent_id", "t.agent_id = {}"),
    ("category", "t.category = {}"),
    ("created_after", "t.created_at >= {}"),
    ("created_before", "t.created_at < {}"),
    ("min_retention", "t.retention >= {}"),
)
"""Each plain filter and its condition on a memory table aliased ``t`` (same columns on
both engines); ``{}`` is the engine's placeholder."""


def field_conditions(filters: Mapping[str, Any], mark: str) -> tuple[list[str], list[Any]]:
    """The conditions of the plain filters ``filters`` sets (of :func:`query_filters` or
    :func:`filter_fields`; tags aside, each engine keeps its own) and their parameters,
    with the engine's placeholder ``mark`` (``?``, ``%s``)."""
    where: list[str] = []
    params: list[Any] = []
    for name, condition in _FIELD_CONDITIONS:
        value = filters.get(name)
        if value is not None:
            where.append(condition.format(mark))
            params.append(value)
    if filters.get("current"):
        where.append(CURRENT.format(alias="t."))
    as_of = filters.get("as_of")
    if as_of is not None:
        where.append(AS_OF.format(alias="t.", mark=mark))
        params += [as_of, as_of]
    return where, params


CURRENT = "{alias}superseded_by IS NULL"
"""A memory no newer one superseded (``{alias}``: its table's alias and a dot)."""
AS_OF = "{alias}created_at <= {mark} AND ({alias}valid_to IS NULL OR {alias}valid_to > {mark})"
"""A memory that existed and was not yet superseded at a time (its two parameters)."""


def index_backed(where: MemoryFilter) -> bool:
    """True if an index finds the memories ``where`` accepts (a session, agent, tag or
    time range is set): listing or counting them costs about what they number, not the
    whole store."""
    return not (
        where.session_id is None
        and where.agent_id is None
        and not where.tags
        and where.created_after is None
        and where.created_before is None
    )


SCHEDULE_COLUMNS = (
    "memory_id, next_review_at, interval_ms, review_count, ease_factor, stability_days, "
    "last_reviewed_at"
)
"""A schedule's columns, in :func:`schedule_row`'s order."""
SCHEDULE_CONFLICT = (
    "ON CONFLICT (memory_id) DO UPDATE SET next_review_at = excluded.next_review_at, "
    "interval_ms = excluded.interval_ms, review_count = excluded.review_count, "
    "ease_factor = excluded.ease_factor, stability_days = excluded.stability_days, "
    "last_reviewed_at = excluded.last_reviewed_at"
)
"""A schedule upsert's conflict clause: the new schedule replaces the old."""


def schedule_row(s: RepetitionSchedule) -> tuple[Any, ...]:
    """Parameter values of a schedule in :data:`SCHEDULE_COLUMNS` order (its two factors
    as ``float``)."""
    return (s.memory_id, s.next_review_at, s.interval_ms, s.review_count,
            float(s.ease_factor), float(s.stability_days), s.last_reviewed_at)  # fmt: skip


def session_row(session: SessionState) -> tuple[Any, ...]:
    """Column values of ``session`` (validated) in insert order, JSON as text (the two
    flags as ``bool``: SQLite binds them as 1 and 0)."""
    return (
        session.session_id,
        session.started_at,
        session.last_active_at,
        session.turn_number,
        encode_json(list(session.active_agents), "active_agents"),
        encode_json(list(session.scratchpad_state), "scratchpad_state"),
        encode_json(dict(session.metadata), "metadata"),
        bool(session.is_active),
        bool(session.pending_compaction),
        session.ended_at,
    )


def session_of(row: Sequence[Any], agents: Any, scratchpad: Any, metadata: Any) -> SessionState:
    """The session of a row of the session columns, its three JSON columns decoded (and
    checked) by the engine."""
    return SessionState(
        session_id=row[0],
        started_at=row[1],
        last_active_at=row[2],
        turn_number=row[3],
        active_agents=agents,
        scratchpad_state=scratchpad,
        metadata=metadata,
        is_active=bool(row[7]),
        pending_compaction=bool(row[8]),
        ended_at=row[9],
    )


def tags_text(tags: Sequence[str]) -> str:
    """A note's tags as the JSON text both engines store."""
    return encode_json(list(tags), "tags")


def note_row(note: Note) -> tuple[Any, ...]:
    """Column values of ``note`` in the notes table's order."""
    return (note.id, note.title, note.content, tags_text(note.tags), note.version,
            note.created_at, note.updated_at, note.created_by, note.updated_by,
            note.agent_id)  # fmt: skip


def note_version_row(version: NoteVersion) -> tuple[Any, ...]:
    """Column values of a note's ``version`` in the versions table's order."""
    return (version.note_id, version.version, version.title, version.content,
            tags_text(version.tags), version.author, version.at,
            encode_json(list(version.changed), "changed"))  # fmt: skip
