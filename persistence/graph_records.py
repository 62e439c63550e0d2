"""Records of the knowledge graph, shared by the store and the domain layer.

Timestamps are epoch milliseconds. ``valid_from``/``valid_to`` bound when a relation
holds (``None``: since always / still true); an invalidated relation keeps its row.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 4000
PREDICATE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
DEFAULT_TYPE = "entity"
CALLER = "caller"  # provenance origin: facts the caller gave remember()
EXTRACTOR = "extractor"  # provenance origin: facts the background extractor found
MENTIONED_WITH = "mentioned_with"


def normalise(name: str) -> str:
    """The form names are compared in: accents removed, case folded, spaces collapsed."""
    if name.isascii():  # nothing to decompose (recall normalises hundreds a call)
        return " ".join(name.casefold().split())
    decomposed = unicodedata.normalize("NFKD", name)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(bare.casefold().split())


def is_entity_id(text: str) -> bool:
    """True if ``text`` has the shape of an entity id."""
    return (
        len(text) == 28
        and text.startswith("ent_")
        and all(c in "0123456789abcdef" for c in text[4:])
    )


@dataclass(frozen=True, slots=True)
class Entity:
    """One thing the memories talk about.

    ``id`` derives from the normalised name and type of its first writing, so writing
    the same entity again finds this row. ``aliases`` are every name that resolves to
    it (merging keeps the dropped entity's). ``direct`` is True when it was added
    through the graph API (kept until removed there); derived entities go when no
    memory supports them any more.
    """

    id: str
    name: str
    type: str
    description: str | None = None
    aliases: tuple[str, ...] = ()
    direct: bool = False
    created_at: int = 0
    updated_at: int = 0


@dataclass(frozen=True, slots=True)
class Relation:
    """``subject -predicate-> object``; ``weight`` counts the memories supporting it."""

    id: str
    subject_id: str
    predicate: str
    object_id: str
    confidence: float = 1.0
    weight: float = 0.0
    valid_from: int | None = None
    valid_to: int | None = None
    direct: bool = False
    created_at: int = 0

    def holds_at(self, at: int) -> bool:
        """True if the relation was valid at epoch ms ``at``."""
        started = self.valid_from is None or self.valid_from <= at
        return started and (self.valid_to is None or at < self.valid_to)


@dataclass(frozen=True, slots=True)
class Neighbor:
    """An entity reached from the start of a walk, ``depth`` hops away, and the
    relations followed to reach it (first hop first)."""

    entity: Entity
    depth: int
    via: tuple[Relation, ...]


@dataclass(frozen=True, slots=True)
class Reach:
    """An entity a walk reached: ``depth`` hops away along ``via`` (first hop first),
    whose weights sum to ``support``."""

    entity_id: str
    depth: int
    via: tuple[Relation, ...]
    support: float


@dataclass(frozen=True, slots=True)
class GraphPath:
    """The entities from one end to the other and the relation between each pair."""

    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]

    @property
    def length(self) -> int:
        """Hops along the path."""
        return len(self.relations)


@dataclass(frozen=True, slots=True)
class EntityFact:
    """An entity a memory names (given to ``remember()`` or found by an extractor)."""

    name: str
    type: str = "entity"


@dataclass(frozen=True, slots=True)
class RelationFact:
    """A relation a memory asserts, between entities named by name (and type)."""

    subject: str
    predicate: str
    object: str
    confidence: float = 1.0
    subject_type: str = "entity"
    object_type: str = "entity"


@dataclass(frozen=True, slots=True)
class GraphStatistics:
    """Counts of the graph and of its background extraction."""

    entities: int = 0
    aliases: int = 0
    relations: int = 0
    current_relations: int = 0
    provenance: int = 0
    extraction_pending: int = 0
    extraction_failed: int = 0
    extraction_errors: int = 0
    last_extraction_error: str | None = None
    deduplicated: int = 0
    near_duplicates_merged: int = 0
