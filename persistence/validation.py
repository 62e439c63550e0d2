"""Validation of records before they are written: wrong types and values raise
``InvalidInputError`` subclasses with a message naming the field, and nothing is written.

One rule set for every way in: the store's writes and the JSON import call the same
validators, so an import can never hold a value that a later write would refuse or
overflow on. The rules beyond types:

- counters (``access_count``, ``token_count``, ``review_count``, turn numbers) are at most
  :data:`MAX_COUNT` (2**62), which leaves headroom below SQLite's 2**63 - 1 for
  increments (and the library's own increments stop there);
- timestamps (epoch milliseconds) are ``>= 0``, and a memory's ``updated_at`` is not
  before its ``created_at``;
- ids (memory, session, transcript) and a memory's ``session_id`` are non-empty;
- a memory's ``agent_id`` is non-empty when a caller writes it now (``new=True``); a
  stored memory may hold ``""`` (written through the store's API, or imported from an
  export that holds one), so the store's check and the JSON import accept it;
- a memory's content is at most ``max_content_bytes`` UTF-8 bytes (default
  :data:`DEFAULT_MAX_CONTENT_BYTES`, 1,000,000).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from persistence.errors import InvalidInputError, InvalidTypeError
from persistence.records import (
    ForgettingRecord,
    Memory,
    MemoryFilter,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)

MAX_COUNT = 2**62
"""Upper bound of every counter: incrementing one can never overflow 64 bits."""

DEFAULT_MAX_CONTENT_BYTES = 1_000_000
"""Default size limit of a memory's content: 1 MB (decimal), in UTF-8 bytes."""


def validate_memory(memory: Any, *, max_content_bytes: int | None = None) -> None:
    """Check every field of a :class:`Memory` (the embedding is checked when encoded);
    with ``max_content_bytes``, its content's size too."""
    if not _plain_memory(memory) or (
        max_content_bytes is not None and len(memory.content) * 4 > max_content_bytes
    ):  # (what remember() writes is plain: the checks would all pass)
        _check_memory(memory, max_content_bytes)


def _check_memory(memory: Any, max_content_bytes: int | None) -> None:
    """:func:`validate_memory` field by field, raising the error that names the field."""
    if not isinstance(memory, Memory):
        raise InvalidTypeError(f"expected a Memory, got {type(memory).__name__}")
    require_str(memory.id, "memory.id", allow_empty=False)
    require_str(memory.content, "memory.content")
    if max_content_bytes is not None:
        require_content_size(memory.content, "memory.content", max_content_bytes)
    if not isinstance(memory.tier, Tier):
        raise InvalidTypeError(f"memory.tier must be a Tier, got {memory.tier!r}")
    check_memory_fields(
        "memory.", session_id=memory.session_id, agent_id=memory.agent_id,
        importance=memory.importance, tags=memory.tags, metadata=memory.metadata,
        source=memory.source, category=memory.category, speaker=memory.speaker,
        key=memory.key,
    )  # fmt: skip
    require_str_tuple(memory.linked_memories, "memory.linked_memories")
    require_unit_float(memory.retention, "memory.retention")
    require_count(memory.token_count, "memory.token_count")
    require_count(memory.access_count, "memory.access_count")
    require_timestamp(memory.created_at, "memory.created_at")
    require_timestamp(memory.updated_at, "memory.updated_at")
    if memory.updated_at < memory.created_at:
        raise InvalidInputError(
            f"memory.updated_at must not be before created_at ({memory.created_at}), "
            f"got {memory.updated_at}"
        )
    require_timestamp(memory.last_accessed_at, "memory.last_accessed_at", allow_none=True)
    _check_supersession(memory)


def _check_supersession(memory: Memory) -> None:
    """A superseded memory names its successor and the time; a current one neither."""
    require_str(memory.superseded_by, "memory.superseded_by", allow_none=True, allow_empty=False)
    require_timestamp(memory.valid_to, "memory.valid_to", allow_none=True)
    require_str(memory.superseded_reason, "memory.superseded_reason", allow_none=True)
    if (memory.superseded_by is None) != (memory.valid_to is None):
        raise InvalidInputError(
            "memory.superseded_by and memory.valid_to are set together (a superseded "
            f"memory) or not at all (a current one), got {memory.superseded_by!r} and "
            f"{memory.valid_to!r}"
        )
    if memory.superseded_by is None and memory.superseded_reason is not None:
        raise InvalidInputError("memory.superseded_reason is set only on a superseded memory")
    if memory.superseded_by == memory.id:
        raise InvalidInputError(f"memory {memory.id} cannot supersede itself")


UNSET: Any = object()
"""A field :func:`check_memory_fields` was not given (and so does not check)."""


def check_memory_fields(
    prefix: str = "",
    *,
    session_id: Any = UNSET,
    agent_id: Any = UNSET,
    importance: Any = UNSET,
    tags: Any = UNSET,
    metadata: Any = UNSET,
    source: Any = UNSET,
    category: Any = UNSET,
    speaker: Any = UNSET,
    key: Any = UNSET,
    new: bool = False,
) -> None:
    """The rules on the fields a caller chooses for a memory, stated once: the store's
    check (``prefix="memory."``, naming the field) and the domain's early check of
    ``remember()``'s arguments (``prefix=""``, naming the argument) both call this. A
    field not given is not checked. ``new``: the fields of a write being made now, where
    an empty ``agent_id`` is refused too (it could never be opened as a scope); a stored
    or imported memory may hold one (see the module's docstring)."""
    # (``None`` and not given skip the call: most of a new memory's texts are ``None``)
    if session_id is not UNSET and session_id is not None:
        require_str(session_id, f"{prefix}session_id", allow_empty=False)
    if agent_id is not UNSET and agent_id is not None:
        require_str(agent_id, f"{prefix}agent_id", allow_empty=not new)
    for name, value in (("source", source), ("category", category), ("speaker", speaker),
                        ("key", key)):  # fmt: skip
        if value is not UNSET and value is not None:
            require_str(value, f"{prefix}{name}")
    if tags is not UNSET:
        require_str_tuple(tags, f"{prefix}tags")
    if importance is not UNSET:
        require_unit_float(importance, f"{prefix}importance")
    if metadata is not UNSET:
        require_mapping(metadata, f"{prefix}metadata")


def _plain_memory(memory: Any) -> bool:
    """True when every field of ``memory`` has the plainest valid form: ASCII strings,
    float importance and retention, int counters and times, a tuple or list of tags and
    links, a dict or read-only dict of metadata. Only a subset of what
    :func:`validate_memory` accepts (anything else takes its field-by-field checks), in
    one expression: the checks cost a tenth of a ``remember()``'s Python time."""
    m = memory
    return (
        type(m) is Memory
        and type(m.id) is str and m.id.isascii() and m.id != ""
        and type(m.content) is str and m.content.isascii()
        and type(m.tier) is Tier
        and _plain_str(m.key) and _plain_str(m.agent_id) and _plain_str(m.category)
        and _plain_str(m.source) and _plain_str(m.speaker)
        and (m.session_id is None or (_plain_str(m.session_id) and m.session_id != ""))
        and _plain_strs(m.tags) and _plain_strs(m.linked_memories)
        and type(m.importance) is float and 0.0 <= m.importance <= 1.0
        and type(m.retention) is float and 0.0 <= m.retention <= 1.0
        and type(m.token_count) is int and 0 <= m.token_count <= MAX_COUNT
        and type(m.access_count) is int and 0 <= m.access_count <= MAX_COUNT
        and type(m.created_at) is int and type(m.updated_at) is int
        and 0 <= m.created_at <= m.updated_at <= INT64_MAX
        and (m.last_accessed_at is None
             or (type(m.last_accessed_at) is int and 0 <= m.last_accessed_at <= INT64_MAX))
        and type(m.metadata) in _PLAIN_MAPPINGS
        and m.superseded_by is None and m.valid_to is None and m.superseded_reason is None
    )  # fmt: skip


def _plain_str(value: Any) -> bool:
    return value is None or (type(value) is str and value.isascii())


def _plain_strs(values: Any) -> bool:
    return type(values) in (tuple, list) and all(
        type(v) is str and v != "" and v.isascii() for v in values
    )


_PLAIN_MAPPINGS = (dict, MappingProxyType)


def validate_session(session: Any) -> None:
    """Check every field of a :class:`SessionState`."""
    if not isinstance(session, SessionState):
        raise InvalidTypeError(f"expected a SessionState, got {type(session).__name__}")
    require_str(session.session_id, "session.session_id", allow_empty=False)
    require_timestamp(session.started_at, "session.started_at")
    require_timestamp(session.last_active_at, "session.last_active_at")
    require_count(session.turn_number, "session.turn_number")
    require_timestamp(session.ended_at, "session.ended_at", allow_none=True)
    require_str_tuple(session.active_agents, "session.active_agents")
    require_str_tuple(session.scratchpad_state, "session.scratchpad_state")
    if not isinstance(session.metadata, Mapping):
        raise InvalidTypeError("session.metadata must be a mapping")
    for name in ("is_active", "pending_compaction"):
        if not isinstance(getattr(session, name), bool):
            raise InvalidTypeError(f"session.{name} must be a bool")


def validate_schedule(schedule: Any) -> None:
    """Check every field of a :class:`RepetitionSchedule`."""
    if not _plain_schedule(schedule):  # (new schedules are plain: the checks would pass)
        _check_schedule(schedule)


def _plain_schedule(schedule: Any) -> bool:
    """True when every field of ``schedule`` has the plainest valid form (ints, floats,
    an ASCII id): a subset of what :func:`validate_schedule` accepts, in one expression."""
    s = schedule
    return (
        type(s) is RepetitionSchedule
        and type(s.memory_id) is str and s.memory_id != "" and s.memory_id.isascii()
        and type(s.next_review_at) is int and 0 <= s.next_review_at <= INT64_MAX
        and type(s.interval_ms) is int and 0 <= s.interval_ms <= INT64_MAX
        and type(s.review_count) is int and 0 <= s.review_count <= MAX_COUNT
        and (s.last_reviewed_at is None
             or (type(s.last_reviewed_at) is int and 0 <= s.last_reviewed_at <= INT64_MAX))
        and type(s.ease_factor) is float and 0.0 < s.ease_factor < math.inf
        and type(s.stability_days) is float and 0.0 < s.stability_days < math.inf
    )  # fmt: skip


def _check_schedule(schedule: Any) -> None:
    """:func:`validate_schedule` field by field, raising the error that names the field."""
    if not isinstance(schedule, RepetitionSchedule):
        raise InvalidTypeError(f"expected a RepetitionSchedule, got {type(schedule).__name__}")
    require_str(schedule.memory_id, "schedule.memory_id", allow_empty=False)
    require_timestamp(schedule.next_review_at, "schedule.next_review_at")
    require_int(schedule.interval_ms, "schedule.interval_ms", minimum=0)
    require_count(schedule.review_count, "schedule.review_count")
    require_timestamp(schedule.last_reviewed_at, "schedule.last_reviewed_at", allow_none=True)
    require_positive_float(schedule.ease_factor, "schedule.ease_factor")
    require_positive_float(schedule.stability_days, "schedule.stability_days")


def validate_transcript(entry: Any) -> None:
    """Check every field of a :class:`TranscriptEntry`."""
    if not isinstance(entry, TranscriptEntry):
        raise InvalidTypeError(f"expected a TranscriptEntry, got {type(entry).__name__}")
    require_str(entry.id, "transcript.id", allow_empty=False)
    require_str(entry.session_id, "transcript.session_id", allow_empty=False)
    require_count(entry.turn_number, "transcript.turn_number")
    require_str(entry.role, "transcript.role", allow_empty=False)
    require_str(entry.content, "transcript.content")
    require_timestamp(entry.timestamp, "transcript.timestamp")
    require_str(entry.speaker, "transcript.speaker", allow_none=True)


def validate_promotion(record: Any) -> None:
    """Check a :class:`PromotionRecord`: a forward move of a named memory at a real time."""
    if not isinstance(record, PromotionRecord):
        raise InvalidTypeError(f"expected a PromotionRecord, got {type(record).__name__}")
    require_int(record.id, "promotion.id", minimum=1)
    require_str(record.memory_id, "promotion.memory_id", allow_empty=False)
    for name in ("from_tier", "to_tier"):
        if not isinstance(getattr(record, name), Tier):
            raise InvalidTypeError(f"promotion.{name} must be a Tier")
    if record.to_tier.rank <= record.from_tier.rank:
        raise InvalidInputError(
            f"promotion.to_tier must be after from_tier ({record.from_tier.value}), "
            f"got {record.to_tier.value}"
        )
    require_timestamp(record.promoted_at, "promotion.promoted_at")
    require_str(record.reason, "promotion.reason", allow_none=True)


def validate_forgetting(record: Any) -> None:
    """Check a :class:`ForgettingRecord`."""
    if not isinstance(record, ForgettingRecord):
        raise InvalidTypeError(f"expected a ForgettingRecord, got {type(record).__name__}")
    require_str(record.memory_id, "forgetting.memory_id", allow_empty=False)
    if not isinstance(record.tier, Tier):
        raise InvalidTypeError("forgetting.tier must be a Tier")
    require_timestamp(record.forgotten_at, "forgetting.forgotten_at")
    if record.retention is not None:
        require_unit_float(record.retention, "forgetting.retention")
    require_str(record.reason, "forgetting.reason", allow_empty=False)


def require_count(value: Any, what: str) -> None:
    """Refuse anything but an ``int`` within 0 and :data:`MAX_COUNT`."""
    require_int(value, what, minimum=0)
    if value > MAX_COUNT:
        raise InvalidInputError(f"{what} must be <= 2**62 ({MAX_COUNT}), got {value}")


def require_timestamp(value: Any, what: str, *, allow_none: bool = False) -> None:
    """Refuse anything but an ``int`` >= 0 (epoch milliseconds), or ``None`` if allowed."""
    require_int(value, what, allow_none=allow_none, minimum=0)


def require_content_size(content: str, what: str, limit: int) -> None:
    """Refuse content longer than ``limit`` UTF-8 bytes (without encoding short text)."""
    if len(content) * 4 <= limit:  # UTF-8 takes at most 4 bytes a character
        return
    size = len(content) if content.isascii() else len(content.encode("utf-8"))
    if size > limit:
        raise InvalidInputError(
            f"{what} is {size:,} bytes, more than max_content_bytes ({limit:,}): "
            "split it into several memories, or raise MemoryConfig.max_content_bytes"
        )


def require_positive_float(value: Any, what: str) -> None:
    """Refuse anything but a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(f"{what} must be a number, got {type(value).__name__}")
    if isinstance(value, int) and not 0 < value <= INT64_MAX:
        raise InvalidInputError(f"{what} must be a finite number > 0, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{what} must be a finite number > 0, got {value!r}")


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def require_str(
    value: Any, what: str, *, allow_none: bool = False, allow_empty: bool = True
) -> None:
    """Refuse anything but a ``str`` that SQLite can store as UTF-8 (or ``None`` if allowed)."""
    if value is None and allow_none:
        return
    if not isinstance(value, str):
        raise InvalidTypeError(f"{what} must be a str, got {type(value).__name__}")
    if not allow_empty and not value:
        raise InvalidInputError(f"{what} must not be empty")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(f"{what} is not valid Unicode (a lone surrogate)") from None


def require_content(value: Any, what: str = "content") -> None:
    """Refuse what cannot be a memory's text: not a ``str`` (:class:`InvalidTypeError`),
    or empty or whitespace only (:class:`InvalidInputError`: it would be a memory that no
    search can find). Only new text is checked: files may hold older empty memories."""
    require_str(value, what)
    if not value.strip():
        raise InvalidInputError(
            f"{what} is empty or only whitespace ({value!r}): a memory needs some text "
            "(nothing was written)"
        )


def require_int(
    value: Any,
    what: str,
    *,
    allow_none: bool = False,
    minimum: int | None = None,
    maximum: int | None = None,
) -> None:
    """Refuse anything but an ``int`` (bool excluded), optionally bounded."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{what} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{what} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidInputError(f"{what} must be <= {maximum}, got {value}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInputError(f"{what} does not fit in 64 bits: {value}")


def require_number(
    value: Any,
    what: str,
    *,
    minimum: float = -math.inf,
    maximum: float = math.inf,
    above_minimum: bool = False,
    below_maximum: bool = False,
) -> None:
    """Refuse anything but a finite real number (bool excluded) within the bounds
    (``above_minimum`` / ``below_maximum``: the bound itself is refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(f"{what} must be a number, got {type(value).__name__}")
    low_ok = value > minimum if above_minimum else value >= minimum
    high_ok = value < maximum if below_maximum else value <= maximum
    finite = not isinstance(value, float) or math.isfinite(value)
    if not finite or not (low_ok and high_ok):
        low = "(" if above_minimum else "["
        high = ")" if below_maximum else "]"
        raise InvalidInputError(
            f"{what} must be a finite number within {low}{minimum}, {maximum}{high}, got {value!r}"
        )


def require_choice(value: Any, what: str, choices: tuple[str, ...]) -> None:
    """Refuse anything but one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidInputError(f"{what} must be one of {', '.join(choices)}, got {value!r}")


def require_callable(value: Any, what: str, *, allow_none: bool = False) -> None:
    """Refuse anything that cannot be called (or ``None`` if allowed)."""
    if value is None and allow_none:
        return
    if not callable(value):
        raise InvalidTypeError(f"{what} must be callable, got {type(value).__name__}")


def require_path(value: Any, what: str, *, allow_none: bool = False) -> None:
    """Refuse anything but a ``str`` or ``os.PathLike`` naming a file (or ``None`` if
    allowed); bytes paths are refused too, as the rest of the API takes none."""
    if value is None and allow_none:
        return
    if not isinstance(value, str | os.PathLike):
        raise InvalidTypeError(f"{what} must be a str or os.PathLike, got {type(value).__name__}")
    require_str(os.fspath(value), what, allow_empty=False)


def require_unit_float(value: Any, what: str) -> None:
    """Refuse anything but a finite real number within [0, 1]."""
    require_number(value, what, minimum=0, maximum=1)


def parse_tier(value: Any, what: str = "tier") -> Tier:
    """A :class:`Tier` from a Tier or its name; anything else is a clear error."""
    try:
        return Tier(value)
    except ValueError:
        raise InvalidInputError(
            f"{what} must be one of {[t.value for t in Tier]}, got {value!r}"
        ) from None


def require_mapping(value: Any, what: str, *, allow_none: bool = False) -> None:
    """Refuse anything but a mapping (``dict`` and friends)."""
    if value is None and allow_none:
        return
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"{what} must be a mapping, got {type(value).__name__}")


def require_bool(value: Any, what: str) -> None:
    """Refuse anything but ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{what} must be a bool, got {type(value).__name__}")


def require_str_tuple(value: Any, what: str) -> None:
    """Refuse anything but a sequence of strings (a bare ``str`` is refused too)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidTypeError(f"{what} must be a sequence of str, got {type(value).__name__}")
    for item in value:
        require_str(item, f"each of {what}", allow_empty=False)


def validate_filter(where: MemoryFilter) -> None:
    """Refuse a filter the searches cannot honour, before anything runs."""
    if not isinstance(where, MemoryFilter):
        raise InvalidTypeError(f"where must be a MemoryFilter, got {type(where).__name__}")
    if where.tier is not None and not isinstance(where.tier, Tier):
        raise InvalidTypeError(f"where.tier must be a Tier, got {type(where.tier).__name__}")
    for name in ("session_id", "agent_id"):
        require_str(getattr(where, name), name, allow_none=True)
    require_str_tuple(where.tags, "tags")
    for name in ("created_after", "created_before"):
        require_int(getattr(where, name), name, allow_none=True)
    if where.min_retention is not None:
        require_unit_float(where.min_retention, "min_retention")
