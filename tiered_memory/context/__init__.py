"""``memory.context(query, max_tokens=N)``: the memories an agent pastes into its prompt,
packed into a token budget (:class:`Context`).

Recall's best 20-100 hits (more for a larger budget) are the candidates, best first;
near-duplicates count once; each is added while the text (headers and citations
included) still fits the budget, then the question a chosen memory answers or the
answer it gets where those still fit (:mod:`~tiered_memory.context.packing`); the chosen
ones are shown grouped by session, in conversation order, under one header each
(:mod:`~tiered_memory.context.render`). ``Context`` is exported here, not from
``tiered_memory`` (its top level is kept to the 40 names most users import).
"""

from tiered_memory.context.records import Context, ContextEntry

__all__ = ["Context", "ContextEntry"]
