"""The knowledge graph facade: ``memory.graph``.

Entities, relations between them and which memories asserted what live in the same
SQLite file as the memories, written in the same transactions. Every argument is checked
here before anything is read or written (bad input raises a specific
:class:`~persistence.TieredMemoryError` and changes nothing); the record API underneath
is a :class:`persistence.GraphStorage` (:class:`persistence.sqlite.GraphStore` on SQLite).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from persistence import (
    Entity,
    EntityFact,
    EntityNotFoundError,
    ExtractorError,
    GraphPath,
    GraphStatistics,
    GraphStorage,
    InvalidDepthError,
    InvalidEntityNameError,
    InvalidInputError,
    InvalidPredicateError,
    InvalidTypeError,
    Memory,
    Neighbor,
    Relation,
    RelationFact,
    RelationNotFoundError,
    graph_records,
    require_int,
    require_number,
    require_str,
    require_str_tuple,
)
from tiered_memory.arguments import typed_arguments

__all__ = [
    "Entity", "EntityFact", "EntityNotFoundError", "ExtractorError", "GraphPath",
    "GraphStatistics", "InvalidDepthError", "InvalidEntityNameError", "InvalidPredicateError",
    "KnowledgeGraph", "Neighbor", "Relation", "RelationFact", "RelationNotFoundError",
]  # fmt: skip

MAX_DEPTH = 3
MAX_LIMIT = 10_000
DEFAULT_FANOUT = 50

EntityRef = str | Entity


@typed_arguments
class KnowledgeGraph:
    """Entities and relations of one manager's file (``memory.graph``).

    Entities are named by id, by any of their names (case- and accent-insensitive) or
    by an :class:`Entity`. What is added here directly is kept until removed here;
    what memories assert (``remember(entities=..., relations=...)``, the extractor, or
    ``source=memory_id``) goes when the last memory supporting it is forgotten.
    """

    def __init__(
        self,
        records: GraphStorage,
        clock: Callable[[], int],
        get_memories: Callable[[list[str]], dict[str, Memory]],
        require_open: Callable[[], None],
    ) -> None:
        self.records = records
        self._clock = clock
        self._get_memories = get_memories
        self._require_open = require_open

    # --- writing ------------------------------------------------------------------------

    def add_entity(
        self,
        name: str,
        type: str = graph_records.DEFAULT_TYPE,  # noqa: A002 - the issue's name for it
        description: str | None = None,
        *,
        source: str | None = None,
    ) -> Entity:
        """Add an entity (or find the one this name and type already name) and return it.

        The id derives from the normalised name and type, so adding it again changes
        nothing but a given ``description``. With ``source`` (a memory id) it is derived
        from that memory instead of kept until removed directly.
        """
        self._require_open()
        name = check_name(name)
        type_ = check_type(type)
        require_str(description, "description", allow_none=True)
        if description is not None and len(description) > graph_records.MAX_DESCRIPTION_CHARS:
            raise InvalidInputError(
                f"description is {len(description)} characters, more than "
                f"{graph_records.MAX_DESCRIPTION_CHARS}"
            )
        require_str(source, "source", allow_none=True, allow_empty=False)
        return self.records.add_entity(name, type_, description, self._clock(), source=source)

    def relate(
        self,
        subject: EntityRef,
        predicate: str,
        object: EntityRef,  # noqa: A002 - subject, predicate, object
        *,
        confidence: float = 1.0,
        valid_from: int | None = None,
        valid_to: int | None = None,
        source: str | None = None,
        subject_type: str = graph_records.DEFAULT_TYPE,
        object_type: str = graph_records.DEFAULT_TYPE,
    ) -> Relation:
        """Assert ``subject -predicate-> object`` and return the relation.

        Ends named by id must exist (:class:`EntityNotFoundError`); ends named by name
        are created when new. Asserting a relation that holds already joins it
        (confidence = the larger). ``valid_from``/``valid_to`` bound when it holds
        (epoch ms); ``source`` records the memory that asserted it.
        """
        self._require_open()
        s, o = self._ref(subject, "subject"), self._ref(object, "object")
        predicate = check_predicate(predicate)
        require_unit_float(confidence, "confidence")
        require_timestamp(valid_from, "valid_from", allow_none=True)
        require_timestamp(valid_to, "valid_to", allow_none=True)
        if valid_from is not None and valid_to is not None and valid_to <= valid_from:
            raise InvalidInputError(
                f"valid_to ({valid_to}) must be after valid_from ({valid_from})"
            )
        require_str(source, "source", allow_none=True, allow_empty=False)
        s_type, o_type = check_type(subject_type), check_type(object_type)
        return self.records.relate(
            s, predicate, o, self._clock(), subject_type=s_type, object_type=o_type,
            confidence=float(confidence), valid_from=valid_from, valid_to=valid_to,
            source=source,
        )  # fmt: skip

    def merge_entities(self, keep: EntityRef, drop: EntityRef) -> Entity:
        """Fold ``drop`` into ``keep``: its names become aliases of ``keep`` (so writing
        them again finds ``keep``), its relations and provenance move over."""
        self._require_open()
        return self.records.merge(self._ref(keep, "keep"), self._ref(drop, "drop"), self._clock())

    def invalidate(self, relation: str | Relation, at: int | None = None) -> Relation:
        """The relation stops being true at ``at`` (default: now); it is not deleted, so
        queries ``as_of`` an earlier time still see it."""
        self._require_open()
        rid = relation.id if isinstance(relation, Relation) else relation
        require_str(rid, "relation", allow_empty=False)
        require_timestamp(at, "at", allow_none=True)
        return self.records.invalidate(rid, self._clock() if at is None else at)

    def remove_entity(self, entity: EntityRef) -> bool:
        """Delete an entity with its relations and provenance; False if there is none."""
        self._require_open()
        return self.records.remove_entity(self._ref(entity, "entity"))

    def remove_relation(self, relation: str | Relation) -> bool:
        """Delete a relation; False if there is none."""
        self._require_open()
        rid = relation.id if isinstance(relation, Relation) else relation
        require_str(rid, "relation", allow_empty=False)
        return self.records.remove_relation(rid)

    # --- reading ------------------------------------------------------------------------

    def entity(self, name_or_id: EntityRef, type: str | None = None) -> Entity | None:  # noqa: A002
        """The entity with that id or name (of that type), or ``None``."""
        self._require_open()
        ref = self._ref(name_or_id, "name_or_id")
        return self.records.entity(ref, None if type is None else check_type(type))

    def relations(self, entity: EntityRef) -> list[Relation]:
        """Every relation of an entity, including invalidated ones (history)."""
        self._require_open()
        return self.records.relations(self._ref(entity, "entity"))

    def neighbors(
        self,
        entity: EntityRef,
        depth: int = 1,
        predicates: Sequence[str] | None = None,
        limit: int = 50,
        *,
        as_of: int | None = None,
        fanout: int = DEFAULT_FANOUT,
    ) -> list[Neighbor]:
        """Entities up to ``depth`` (1..3) hops away, nearest first, each with the
        relations followed to reach it.

        Relations are followed both ways; ``predicates`` keeps only those; ``as_of``
        (epoch ms, default now) sees the relations valid then. Each entity follows at
        most ``fanout`` relations per direction (the best supported), so a hub cannot
        blow up the walk; a path never visits an entity twice. Each entity comes with its
        shallowest path, the best supported (most memories) of those; ties go by id.
        """
        self._require_open()
        ref = self._ref(entity, "entity")
        depth = check_depth(depth)
        preds = None if predicates is None else check_predicates(predicates)
        check_limit(limit, "limit")
        check_limit(fanout, "fanout")
        require_timestamp(as_of, "as_of", allow_none=True)
        at = self._clock() if as_of is None else as_of
        return self.records.neighbors(ref, depth, preds, limit, fanout, at)

    def path(
        self, a: EntityRef, b: EntityRef, max_depth: int = MAX_DEPTH, *, as_of: int | None = None
    ) -> GraphPath | None:
        """The shortest chain of relations from ``a`` to ``b`` within ``max_depth``
        (1..3) hops (of several, the best supported), or ``None``."""
        self._require_open()
        start, end = self._ref(a, "a"), self._ref(b, "b")
        max_depth = check_depth(max_depth, "max_depth")
        require_timestamp(as_of, "as_of", allow_none=True)
        return self.records.path(start, end, max_depth, self._clock() if as_of is None else as_of)

    def memories_about(self, entity: EntityRef, limit: int = 100) -> list[Memory]:
        """The memories that name the entity (that still exist)."""
        self._require_open()
        ref = self._ref(entity, "entity")
        check_limit(limit, "limit")
        ids = self.records.memory_ids_about(ref, limit)
        found = self._get_memories(ids)
        memories = [found[i] for i in ids if i in found]
        memories.sort(key=lambda m: (-m.created_at, m.id))
        return memories

    def asserted_by(self, relations: Sequence[str | Relation]) -> dict[str, list[str]]:
        """Provenance: the ids of the memories asserting each relation, by relation id
        (a relation only added directly has none and is left out)."""
        self._require_open()
        if isinstance(relations, str | Relation) or not isinstance(relations, Sequence):
            raise InvalidTypeError("relations must be a list of relation ids or Relations")
        ids = [r.id if isinstance(r, Relation) else r for r in relations]
        require_str_tuple(ids, "relations")
        return self.records.asserting_memories(ids)

    def facts_of(self, memory_id: str) -> tuple[list[Entity], list[Relation]]:
        """The entities and relations the memory asserts (none for an unknown id)."""
        self._require_open()
        require_str(memory_id, "memory_id")
        return self.records.facts_of(memory_id)

    def entities(self, type: str | None = None, limit: int = 1000) -> list[Entity]:  # noqa: A002
        """Entities (of one type, or all), in id order."""
        self._require_open()
        check_limit(limit, "limit")
        return self.records.list_entities(None if type is None else check_type(type), limit)

    def statistics(self) -> GraphStatistics:
        """Counts of entities, relations, provenance and the extraction queue."""
        self._require_open()
        return self.records.statistics()

    def _ref(self, value: object, what: str) -> str:
        if isinstance(value, Entity):
            return value.id
        if not isinstance(value, str):
            raise InvalidTypeError(
                f"{what} must be an entity name, id or Entity, got {type(value).__name__}"
            )
        if graph_records.is_entity_id(value):
            return value
        return check_name(value, what)


# --- checks ------------------------------------------------------------------------------


def require_timestamp(value: object, what: str, *, allow_none: bool = False) -> None:
    """An epoch-ms timestamp: an int >= 0 (or ``None`` if allowed)."""
    require_int(value, what, allow_none=allow_none, minimum=0)


def require_unit_float(value: object, what: str) -> None:
    """A number within [0, 1]."""
    require_number(value, what, minimum=0, maximum=1)


def check_name(name: object, what: str = "name") -> str:
    """An entity name: a non-empty str (after normalisation) of at most 200 characters."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"{what} must be a str, got {type(name).__name__}")
    require_str(name, what)
    if not graph_records.normalise(name):
        raise InvalidEntityNameError(f"{what} is empty: an entity needs a name")
    if len(name) > graph_records.MAX_NAME_CHARS:
        raise InvalidEntityNameError(
            f"{what} is {len(name)} characters, more than {graph_records.MAX_NAME_CHARS}: "
            "name the entity shortly and put the rest in its description"
        )
    return name


def _identifier(
    value: object, what: str, pattern: re.Pattern[str], most: int,
    error: type[InvalidInputError], example: str = "",
) -> str:  # fmt: skip
    """A short identifier matching ``pattern`` (of at most ``most`` characters), lower-cased."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{what} must be a str, got {type(value).__name__}")
    lowered = value.lower()
    if not pattern.match(lowered):
        raise error(
            f"{what} {value!r} is not a short identifier (a letter, then letters, digits or _; "
            f"at most {most}){example}"
        )
    return lowered


def check_type(value: object) -> str:
    """An entity type: a short lower-case identifier (``person``, ``place``)."""
    return _identifier(value, "type", graph_records.TYPE, 32, InvalidInputError)


def check_predicate(value: object) -> str:
    """A predicate: a short identifier such as ``works_with`` (stored lower-case)."""
    return _identifier(
        value,
        "predicate",
        graph_records.PREDICATE,
        64,
        InvalidPredicateError,
        ", e.g. 'works_with'",
    )


def check_predicates(values: object) -> list[str]:
    """A list of predicates."""
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidTypeError("predicates must be a sequence of str (or None)")
    return [check_predicate(v) for v in values]


def check_depth(value: object, what: str = "depth") -> int:
    """A traversal depth within 1..3."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{what} must be an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_DEPTH:
        raise InvalidDepthError(f"{what} must be from 1 to {MAX_DEPTH}, got {value}")
    return value


def check_limit(value: object, what: str) -> None:
    """A positive count no larger than 10,000."""
    require_int(value, what, minimum=1)
    assert isinstance(value, int)
    if value > MAX_LIMIT:
        raise InvalidInputError(f"{what} must be <= {MAX_LIMIT}, got {value}")


def entity_facts(values: object) -> list[EntityFact]:
    """``remember(entities=...)``: names, ``(name, type)`` pairs, mappings with
    ``name``/``type`` or :class:`EntityFact` records."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidTypeError("entities must be a sequence of names, (name, type) or mappings")
    facts = []
    for n, value in enumerate(values):
        where = f"entities[{n}]"
        name: object
        type_: object
        if isinstance(value, EntityFact):
            name, type_ = value.name, value.type
        elif isinstance(value, str):
            name, type_ = value, graph_records.DEFAULT_TYPE
        elif isinstance(value, tuple) and len(value) == 2:
            name, type_ = value
        elif isinstance(value, Mapping):
            _only(value, {"name", "type"}, where)
            name, type_ = value.get("name"), value.get("type", graph_records.DEFAULT_TYPE)
        else:
            raise InvalidTypeError(f"{where} must be a name, (name, type) or a mapping")
        facts.append(EntityFact(check_name(name, f"{where}.name"), check_type(type_)))
    return facts


def relation_facts(values: object) -> list[RelationFact]:
    """``remember(relations=...)``: ``(subject, predicate, object)`` triples, mappings
    with ``subject``/``predicate``/``object`` (and ``confidence``, ``subject_type``,
    ``object_type``) or :class:`RelationFact` records."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidTypeError("relations must be a sequence of (subject, predicate, object)")
    facts = []
    for n, value in enumerate(values):
        where = f"relations[{n}]"
        fields: dict[str, Any]
        if isinstance(value, RelationFact):
            fields = {
                "subject": value.subject, "predicate": value.predicate, "object": value.object,
                "confidence": value.confidence, "subject_type": value.subject_type,
                "object_type": value.object_type,
            }  # fmt: skip
        elif isinstance(value, tuple) and len(value) == 3:
            fields = dict(zip(("subject", "predicate", "object"), value, strict=True))
        elif isinstance(value, Mapping):
            _only(value, {"subject", "predicate", "object", "confidence", "subject_type",
                          "object_type"}, where)  # fmt: skip
            fields = dict(value)
        else:
            raise InvalidTypeError(f"{where} must be a (subject, predicate, object) triple")
        confidence = fields.get("confidence", 1.0)
        require_unit_float(confidence, f"{where}.confidence")
        facts.append(
            RelationFact(
                check_name(fields.get("subject"), f"{where}.subject"),
                check_predicate(fields.get("predicate")),
                check_name(fields.get("object"), f"{where}.object"),
                float(confidence),
                check_type(fields.get("subject_type", graph_records.DEFAULT_TYPE)),
                check_type(fields.get("object_type", graph_records.DEFAULT_TYPE)),
            )
        )
    return facts


def _only(value: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise InvalidInputError(f"{where} has unknown field(s) {unknown}; use {sorted(allowed)}")
