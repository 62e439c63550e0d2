"""From recall's hits to a :class:`~tiered_memory.context.records.Context`: each hit's
neighbouring turns, near-duplicates once, the budget packed, the entries explained.
Everything here reads; nothing is written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

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

MIN_DEPTH, MAX_DEPTH, TOKENS_PER_HIT = 20, 100, 25
"""A context chooses from recall's best ``max_tokens // TOKENS_PER_HIT`` hits (within
``MIN_DEPTH`` and ``MAX_DEPTH``): a LoCoMo turn takes some 37 tokens with its citation,
so a budget holds about two thirds as many. On LoCoMo (both halves) this depth held the
same evidence at 250-2,000 tokens as 40-100 hits did; 30 hits at 2,000 lost 0.01-0.016
(``benchmarks/eval_locomo.py --budgets``); fewer hits are fewer to fetch and explain."""
NEIGHBOURS = "after"
"""Neighbouring turns fill what the candidates left of the budget: on LoCoMo's tuning half
adding them with each candidate cost 0.02-0.06 of evidence recall at 250-1,000 tokens
(they crowd out better hits), after the candidates they cost nothing and add a little
at 2,000 (``benchmarks/eval_locomo.py --budgets``, docs/concepts/context.md)."""


def depth_for(max_tokens: int) -> int:
    """Recall hits a context chooses from: one per :data:`TOKENS_PER_HIT` tokens of
    budget, at least :data:`MIN_DEPTH`, at most :data:`MAX_DEPTH`."""
    return max(MIN_DEPTH, min(MAX_DEPTH, max_tokens // TOKENS_PER_HIT))


Turns = Callable[[list[str]], dict[str, tuple[str | None, bool, str | None, str | None]]]
"""Memory ids -> (speaker, asks something, id before, id after) in their sessions."""


@dataclass(frozen=True, slots=True)
class Sources:
    """What a context reads: the turns' links, memories (through the manager's RAM),
    sessions, the token counter, and the explanations of the hits shown (recall's
    ``with_windows``: where each keyword match lies, looked up for those only)."""

    turns: Turns
    get_many: Callable[[list[str]], dict[str, Memory]]
    session: Callable[[str], SessionState | None]
    count: Callable[[str], int]
    explain: Callable[[Sequence[RecallHit]], list[RecallHit]] = list


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
    links = Neighbourhood(sources, where, wanted=neighbours != "none")
    if neighbours == "with":
        links.load([hit.memory for hit in hits])
    candidates = [
        Candidate(hit.memory, rank, hit.explanation) for rank, hit in enumerate(hits, start=1)
    ]
    starts: dict[str, int | None] = {}

    def started(session_id: str) -> int | None:
        if session_id not in starts:
            session = sources.session(session_id)
            starts[session_id] = None if session is None else session.started_at
        return starts[session_id]

    packed = pack(scratchpad, distinct(candidates, threshold), started=started, links=links,
                  count=sources.count, max_tokens=max_tokens, neighbours=neighbours)  # fmt: skip
    shown = [h for h in hits if isinstance(packed.reasons.get(h.memory.id), Candidate)]
    explained = {h.memory.id: h.explanation for h in sources.explain(shown)}
    reasons = {
        i: r if isinstance(r, str) else replace(r, why=explained.get(i, r.why)).reason
        for i, r in packed.reasons.items()
    }
    refs = citations(packed.order)
    sessions = {m.id: m.session_id for m in [*scratchpad, *links.memories.values()]}
    sessions.update({hit.memory.id: hit.memory.session_id for hit in hits})
    entries = tuple(
        ContextEntry(i, f"m:{refs[i]}", reasons[i], sessions.get(i)) for i in packed.order
    )
    return Context(query, packed.text, tuple(packed.order), packed.tokens, max_tokens,
                   packed.omitted, entries)  # fmt: skip


class Neighbourhood:
    """The turn links (which memory follows which) and the neighbouring turns worth
    showing of the memories asked about, read once per batch: for the chosen memories
    only, unless every candidate's neighbours are wanted up front."""

    def __init__(self, sources: Sources, where: MemoryFilter, *, wanted: bool) -> None:
        self._sources, self._where, self._wanted = sources, where, wanted
        self.after: dict[str, str | None] = {}
        """Memory id -> the id of the turn after it in its session."""
        self.memories: dict[str, Memory] = {}
        """The neighbouring turns read so far, by id."""
        self._of: dict[str, tuple[Memory, ...]] = {}

    def load(self, memories: Sequence[Memory]) -> None:
        """Read the links (and, if wanted, the neighbours) of those not read yet."""
        new = [m for m in memories if m.id not in self._of]
        if not new:
            return
        turns = self._sources.turns([m.id for m in new])
        for memory_id, (_speaker, _asks, before, following) in turns.items():
            self.after[memory_id] = following
            if before is not None:
                self.after.setdefault(before, memory_id)
        if self._wanted:
            near = {i for t in turns.values() for i in (t[2], t[3]) if i is not None}
            missing = sorted(near - set(self.memories) - {m.id for m in new})
            self.memories.update(self._sources.get_many(missing) if missing else {})
            self.memories.update({m.id: m for m in new})
        for memory in new:
            turn = turns.get(memory.id)
            found: list[Memory] = []
            if turn is not None and self._wanted:
                question = self.memories.get(turn[2]) if turn[2] is not None else None
                if question is not None and "?" in question.content and _others(question, memory):
                    found.append(question)  # the question this memory answers
                answer = self.memories.get(turn[3]) if turn[3] is not None else None
                if answer is not None and turn[1] and _others(memory, answer):
                    found.append(answer)  # the answer this memory's question gets
            self._of[memory.id] = tuple(n for n in found if self._where.accepts(n))

    def of(self, memory: Memory) -> tuple[Memory, ...]:
        """The neighbouring turns worth showing with ``memory`` (after :meth:`load`)."""
        return self._of.get(memory.id, ())


def _others(first: Memory, second: Memory) -> bool:
    """Two turns by different speakers (or of unknown speakers): a question and its answer."""
    return first.speaker is None or second.speaker is None or first.speaker != second.speaker
