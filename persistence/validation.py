"""Validation of records before they are written: wrong types and values raise
``InvalidInputError`` subclasses with a message naming the field, and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from persistence.errors import InvalidInputError, InvalidTypeError
from persistence.records import Memory, RepetitionSchedule, SessionState, Tier


def validate_memory(memory: Any) -> None:
    """Check every field of a :class:`Memory` (the embedding is checked when encoded)."""
    if not isinstance(memory, Memory):
        raise InvalidTypeError(f"expected a Memory, got {type(memory).__name__}")
    require_str(memory.id, "memory.id", allow_empty=False)
    require_str(memory.content, "memory.content")
    if not isinstance(memory.tier, Tier):
        raise InvalidTypeError(f"memory.tier must be a Tier, got {memory.tier!r}")
    for name in ("key", "session_id", "agent_id", "category", "source"):
        require_str(getattr(memory, name), f"memory.{name}", allow_none=True)
    require_str_tuple(memory.tags, "memory.tags")
    require_str_tuple(memory.linked_memories, "memory.linked_memories")
    require_unit_float(memory.importance, "memory.importance")
    require_unit_float(memory.retention, "memory.retention")
    require_int(memory.token_count, "memory.token_count", minimum=0)
    require_int(memory.access_count, "memory.access_count", minimum=0)
    require_int(memory.created_at, "memory.created_at")
    require_int(memory.updated_at, "memory.updated_at")
    require_int(memory.last_accessed_at, "memory.last_accessed_at", allow_none=True)
    if not isinstance(memory.metadata, Mapping):
        raise InvalidTypeError(
            f"memory.metadata must be a mapping, got {type(memory.metadata).__name__}"
        )


def validate_session(session: Any) -> None:
    """Check every field of a :class:`SessionState`."""
    if not isinstance(session, SessionState):
        raise InvalidTypeError(f"expected a SessionState, got {type(session).__name__}")
    require_str(session.session_id, "session.session_id", allow_empty=False)
    require_int(session.started_at, "session.started_at")
    require_int(session.last_active_at, "session.last_active_at")
    require_int(session.turn_number, "session.turn_number", minimum=0)
    require_int(session.ended_at, "session.ended_at", allow_none=True)
    require_str_tuple(session.active_agents, "session.active_agents")
    require_str_tuple(session.scratchpad_state, "session.scratchpad_state")
    if not isinstance(session.metadata, Mapping):
        raise InvalidTypeError("session.metadata must be a mapping")
    for name in ("is_active", "pending_compaction"):
        if not isinstance(getattr(session, name), bool):
            raise InvalidTypeError(f"session.{name} must be a bool")


def validate_schedule(schedule: Any) -> None:
    """Check every field of a :class:`RepetitionSchedule`."""
    if not isinstance(schedule, RepetitionSchedule):
        raise InvalidTypeError(f"expected a RepetitionSchedule, got {type(schedule).__name__}")
    require_str(schedule.memory_id, "schedule.memory_id", allow_empty=False)
    require_int(schedule.next_review_at, "schedule.next_review_at")
    require_int(schedule.interval_ms, "schedule.interval_ms", minimum=0)
    require_int(schedule.review_count, "schedule.review_count", minimum=0)
    require_int(schedule.last_reviewed_at, "schedule.last_reviewed_at", allow_none=True)
    require_positive_float(schedule.ease_factor, "schedule.ease_factor")
    require_positive_float(schedule.stability_days, "schedule.stability_days")


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


def require_int(
    value: Any, what: str, *, allow_none: bool = False, minimum: int | None = None
) -> None:
    """Refuse anything but an ``int`` (bool excluded), optionally bounded below."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{what} must be an int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{what} must be >= {minimum}, got {value}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInputError(f"{what} does not fit in 64 bits: {value}")


def require_unit_float(value: Any, what: str) -> None:
    """Refuse anything but a finite real number within [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTypeError(f"{what} must be a number, got {type(value).__name__}")
    if isinstance(value, int) and not 0 <= value <= 1:
        raise InvalidInputError(f"{what} must be within [0, 1], got {value!r}")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"{what} must be within [0, 1], got {value!r}")


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
