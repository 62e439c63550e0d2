"""From recall's hits to a :class:`~tiered_memory.context.records.Context`: each hit's
neighbouring turns, near-duplicates once, the budget packed, the entries explained.
Everything here reads; nothing is written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from persistence import (
    EmptyQueryError,
    InvalidBudgetError,
    Memory,
    MemoryFilter,
    SessionState,
    require_str,
)
from tiered_memory.context.packing import POLICIES, Candidate, distinct, pack
from tiered_memory.context.records import Context, ContextEntry
from tiered_memory.context.render import citations
from tiered_memory.recall.types import RecallHit

MIN_DEPTH, MAX_DEPTH = 40, 100
NEIGHBOURS = "after"
"""Neighbouring turns fill what the candidates left of the budget: on LoCoMo's tuning half
adding them with each candidate cost 0.02-0.06 of evidence recall at 250-1,000 tokens
(they crowd out better hits), after the candidates they cost nothing and add a little
at 2,000 (``benchmarks/eval_locomo.py --budgets``, docs/concepts/context.md)."""


def depth_for(max_tokens: int) -> int:
    """Recall hits a context chooses from: about one per 20 tokens of budget (a
    conversation turn takes 30-40), at least :data:`MIN_DEPTH`, at most :data:`MAX_DEPTH`."""
    return max(MIN_DEPTH, min(MAX_DEPTH, max_tokens // 20))


Turns = Callable[[list[str]], dict[str, tuple[str | None, bool, str | None, str | None]]]
"""Memory ids -> (speaker, asks something, id before, id after) in their sessions."""


@dataclass(frozen=True, slots=True)
class Sources:
    """What a context reads: the turns' links, memories (through the manager's RAM),
    sessions, and the token counter."""

    turns: Turns
    get_many: Callable[[list[str]], dict[str, Memory]]
    session: Callable[[str], SessionState | None]
    count: Callable[[str], int]


def check_request(query: str, max_tokens: int) -> None:
    """Refuse a request that is not a text query and a token budget of at least 1."""
    require_str(query, "query")
    if not query.strip():
        raise EmptyQueryError("query is empty: pass the text to find memories for")
    if type(max_tokens) is not int:
        raise InvalidBudgetError(
            f"max_tokens must be an int (a token budget), got {type(max_tokens).__name__}"
        )
    if max_tokens < 1:
        raise InvalidBudgetError(f"max_tokens must be at least 1, got {max_tokens}")


def build(
    query: str,
    max_tokens: int,
    hits: Sequence[RecallHit],
    scratchpad: Sequence[Memory],
    sources: Sources,
    where: MemoryFilter,
    *,
    threshold: float | None,
    neighbours: str = NEIGHBOURS,
) -> Context:
    """The context of ``query`` within ``max_tokens`` (see :mod:`tiered_memory.context`)."""
    if neighbours not in POLICIES:
        raise ValueError(f"neighbours must be one of {POLICIES}, got {neighbours!r}")
    ids = [hit.memory.id for hit in hits]
    turns = sources.turns(ids) if ids else {}
    after: dict[str, str | None] = {}
    for memory_id, (_speaker, _asks, before, following) in turns.items():
        after[memory_id] = following
        if before is not None:
            after.setdefault(before, memory_id)
    near_ids = {i for t in turns.values() for i in (t[2], t[3]) if i is not None}
    near = sources.get_many(sorted(near_ids - set(ids))) if neighbours != "none" else {}
    near.update({hit.memory.id: hit.memory for hit in hits})
    candidates = []
    for rank, hit in enumerate(hits, start=1):
        memory = hit.memory
        found: list[Memory] = []
        turn = turns.get(memory.id)
        if turn is not None and neighbours != "none":
            question = near.get(turn[2]) if turn[2] is not None else None
            if question is not None and "?" in question.content and _others(question, memory):
                found.append(question)  # the question this memory answers
            answer = near.get(turn[3]) if turn[3] is not None else None
            if answer is not None and turn[1] and _others(memory, answer):
                found.append(answer)  # the answer this memory's question gets
        shown = tuple(n for n in found if where.accepts(n))
        reason = f"recall #{rank}: {hit.explanation}"
        candidates.append(Candidate(memory, reason, shown))
    starts: dict[str, int | None] = {}

    def started(session_id: str) -> int | None:
        if session_id not in starts:
            session = sources.session(session_id)
            starts[session_id] = None if session is None else session.started_at
        return starts[session_id]

    packed = pack(scratchpad, distinct(candidates, threshold), started=started, after=after,
                  count=sources.count, max_tokens=max_tokens, neighbours=neighbours)  # fmt: skip
    refs = citations(packed.order)
    sessions = {m.id: m.session_id for m in [*scratchpad, *near.values()]}
    entries = tuple(
        ContextEntry(i, f"m:{refs[i]}", packed.reasons[i], sessions.get(i)) for i in packed.order
    )
    return Context(query, packed.text, tuple(packed.order), packed.tokens, max_tokens,
                   packed.omitted, entries)  # fmt: skip


def _others(first: Memory, second: Memory) -> bool:
    """Two turns by different speakers (or of unknown speakers): a question and its answer."""
    return first.speaker is None or second.speaker is None or first.speaker != second.speaker
