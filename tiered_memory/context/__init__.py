"""``memory.context(query, max_tokens=N)``: the memories an agent pastes into its prompt,
packed into a token budget (:class:`Context`).

Recall's best :data:`~tiered_memory.context.assemble.DEPTH` hits are the candidates,
best first; near-duplicates count once; each is added, with the question it answers or
the answer it gets where both fit, while the rendered text (headers and citations
included) still fits the budget (:mod:`~tiered_memory.context.packing`); the chosen
ones are shown grouped by session, in conversation order, under one header each
(:mod:`~tiered_memory.context.render`). ``Context`` is exported here, not from
``tiered_memory`` (its top level is kept to the 40 names most users import).
"""

from tiered_memory.context.records import Context, ContextEntry

__all__ = ["Context", "ContextEntry"]
