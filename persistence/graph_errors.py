"""Errors of the knowledge graph (part of the :class:`TieredMemoryError` hierarchy)."""

from __future__ import annotations

from persistence.errors import InvalidInputError, NotFoundError, TieredMemoryError


class InvalidEntityNameError(InvalidInputError):
    """An entity name that is empty (after normalisation) or too long; nothing was written."""


class InvalidPredicateError(InvalidInputError):
    """A relation predicate that is not a short identifier; nothing was written."""


class InvalidDepthError(InvalidInputError):
    """A traversal depth outside 1..3; nothing was read."""


class EntityNotFoundError(NotFoundError):
    """No entity with that id or name."""


class RelationNotFoundError(NotFoundError):
    """No relation with that id."""


class ExtractorError(TieredMemoryError):
    """An entity extractor raised or returned something that is not an extraction; the
    memory was kept, and its extraction is retried later."""
