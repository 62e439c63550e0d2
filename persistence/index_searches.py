"""The shape of a memory's conversation turn, as both engines' conversation SQL returns it."""

from __future__ import annotations

Turn = tuple[str | None, bool, str | None, str | None]
"""A memory's turn: (speaker, holds a question mark, id before it in its session, id after
it); both backends' conversation SQL returns it."""
