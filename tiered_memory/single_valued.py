"""Single-valued facts supersede on their own (``MemoryConfig.single_valued``).

A single-valued predicate (``lives_in``, ``works_at``, ...) holds one object per subject
at a time. Once a memory asserts ``(s, p, o2)`` (through ``remember(relations=...)`` or
an extractor), :func:`settle` runs in the same transaction, by the memories' own times
(``created_at``), not by the order facts arrive in:

- A current ``(s, p, o1)`` asserted only by memories of the same agent, all of them no
  newer than the new memory, ends at the new memory's time (``valid_to``); the new
  relation starts then (``valid_from``). Each of those memories whose single-valued
  facts have now all ended is superseded by the new memory, for the reason
  ``"<s> <p> <o2> (was <o1>)"``.
- A fact arriving late (a memory older than one that asserts the current ``(s, p, o1)``:
  extracted after a newer memory was written, say) supersedes nothing: its relation is
  recorded as history, from its memory's time until the next newer memory's, and its
  memory, once all its single-valued facts are history, arrives already superseded by
  that newer memory.
- Left alone: the same object again (it joins the current relation), the objects one
  memory asserts for one predicate (all are kept: a memory does not contradict
  itself), a relation another agent's memory also asserts, one added directly through
  ``memory.graph`` (even with ``source=``: the caller bounds it, ``graph.invalidate``
  ends it), and memories of other agents.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from persistence import GraphStorage, Memory, Relation, Tier
from tiered_memory.memories import Memories
from tiered_memory.supersession import supersede


@dataclass(slots=True)
class _Ended:
    """What :func:`settle` found: relations the new memory ended, and the newer memory
    whose fact made one of the new memory's own relations history (if any)."""

    ended: dict[str, tuple[Relation, str]] = field(default_factory=dict)  # id -> (old, new obj)
    newer: tuple[Memory, tuple[Relation, Relation]] | None = None  # (memory, (its, ours))


def settle(
    memories: Memories, records: GraphStorage, memory_id: str, predicates: Collection[str]
) -> Memory | None:
    """Apply the single-valued rule (see the module docstring) to the facts memory
    ``memory_id`` asserts, in the caller's transaction; the memory as it is then."""
    memory = memories.get(memory_id)
    if not predicates or memory is None or memory.tier is Tier.SCRATCHPAD:
        return memory
    _, relations = records.facts_of(memory_id)
    own = [r for r in relations if r.predicate in predicates and r.valid_to is None]
    if not own:
        return memory
    at = memory.created_at
    found = _Ended()
    for relation in own:
        _settle_one(memories, records, memory, relation, at, found)
    supporters: dict[str, set[str]] = {}
    for rid, backers in records.asserting_memories(sorted(found.ended)).items():
        for backer_id in backers:
            supporters.setdefault(backer_id, set()).add(rid)
    names = _names(records, found)
    for backer_id in sorted(supporters):
        backer = memories.get(backer_id)
        if backer is None or backer.id == memory.id or not backer.current:
            continue
        if backer.tier is Tier.SCRATCHPAD:
            continue  # a scratchpad entry is replaced by its key, never superseded
        if _all_ended(records, backer_id, predicates):
            old, new_object = found.ended[sorted(supporters[backer_id])[0]]
            supersede(memories, [backer], memory, _reason(names, old, new_object), strict=False)
    if found.newer is not None and memory.current and _all_ended(records, memory.id, predicates):
        newer, (held, mine) = found.newer
        reason = _reason(names, mine, held.object_id)
        return next(iter(supersede(memories, [memory], newer, reason, strict=False)), memory)
    return memory


def _reason(names: dict[str, str], old: Relation, new_object: str) -> str:
    """``"<s> <p> <new object> (was <old object>)"``: the fact that superseded."""
    return (
        f"{names[old.subject_id]} {old.predicate} {names[new_object]} (was {names[old.object_id]})"
    )


def _settle_one(
    memories: Memories, records: GraphStorage, memory: Memory, relation: Relation, at: int,
    found: _Ended,
) -> None:  # fmt: skip
    """End the current rivals of ``relation`` that only this agent's memories assert,
    none newer than ``memory``; or, if one is newer, make ``relation`` history."""
    rivals: list[Relation] = []
    newer: list[tuple[Memory, Relation]] = []
    for rival, asserted_by in records.current_relations(relation.subject_id, relation.predicate):
        if rival.id == relation.id or rival.direct or not asserted_by:
            continue
        if memory.id in asserted_by:
            continue  # two objects of one memory: both kept
        backers = memories.get_many(list(asserted_by))
        if len(backers) != len(asserted_by):
            continue  # another agent's memory (out of scope) asserts it too
        if any(b.agent_id != memory.agent_id for b in backers.values()):
            continue
        later = [b for b in backers.values() if b.created_at > at]
        if later:
            newer.append((min(later, key=_time), rival))
        else:
            rivals.append(rival)
    alone = records.asserting_memories([relation.id]).get(relation.id) == [memory.id]
    if newer:  # a late fact: history from its memory's time to the next newer one's
        first, held = min(newer, key=lambda pair: _time(pair[0]))
        if alone:
            records.set_validity(relation.id, at, first.created_at)
            _interrupt(memories, records, memory, relation, at)
        if found.newer is None or _time(first) < _time(found.newer[0]):
            found.newer = (first, (held, relation))
        return
    for rival in rivals:
        records.set_validity(rival.id, rival.valid_from, max(at, rival.valid_from or at))
        found.ended[rival.id] = (rival, relation.object_id)
    if rivals and relation.valid_from is None and alone:
        records.set_validity(relation.id, at, None)


def _interrupt(
    memories: Memories, records: GraphStorage, memory: Memory, relation: Relation, at: int
) -> None:
    """A late fact ends the one it falls inside: a relation of this agent's older memories
    alone that held at ``at`` and has ended since ends at ``at``, and its memories,
    superseded later, are superseded by the late memory then (as_of answers one fact)."""
    for held, asserted_by in records.current_relations(relation.subject_id, relation.predicate, at):
        if held.id == relation.id or held.direct or held.valid_to is None or not asserted_by:
            continue
        if memory.id in asserted_by:
            continue
        backers = memories.get_many(list(asserted_by))
        if len(backers) != len(asserted_by) or any(
            b.agent_id != memory.agent_id or b.created_at > at for b in backers.values()
        ):
            continue
        records.set_validity(held.id, held.valid_from, at)
        entities = records.entities(sorted({held.subject_id, held.object_id, relation.object_id}))
        names = {i: (entities[i].name if i in entities else i) for i in entities} | {
            i: i for i in (held.subject_id, held.object_id, relation.object_id) if i not in entities
        }
        older = sorted(
            (b for b in backers.values() if b.tier is not Tier.SCRATCHPAD and not b.current),
            key=_time,
        )
        reason = _reason(names, held, relation.object_id)
        supersede(memories, older, memory, reason, strict=False, earlier=True)


def _time(memory: Memory) -> tuple[int, str]:
    return (memory.created_at, memory.id)


def _all_ended(records: GraphStorage, memory_id: str, predicates: Collection[str]) -> bool:
    """True if every single-valued relation the memory asserts has ended."""
    _, relations = records.facts_of(memory_id)
    mine = [r for r in relations if r.predicate in predicates]
    return bool(mine) and all(r.valid_to is not None for r in mine)


def _names(records: GraphStorage, found: _Ended) -> dict[str, str]:
    """Entity id -> name, for the reasons."""
    ids = {e for old, new in found.ended.values() for e in (old.subject_id, old.object_id, new)}
    if found.newer is not None:
        held, mine = found.newer[1]
        ids |= {held.object_id, mine.subject_id, mine.object_id}
    entities = records.entities(sorted(ids))
    return {i: (entities[i].name if i in entities else i) for i in ids}
