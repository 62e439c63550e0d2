"""``context()`` of :class:`~tiered_memory.manager.AgentMemoryManager`: the manager's thin
entry to :mod:`tiered_memory.context` (the filters are recall's)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from persistence import MemoryStorage, Tier
from tiered_memory.agent_scope import stamped
from tiered_memory.arguments import typed_arguments
from tiered_memory.config import MemoryConfig
from tiered_memory.context.assemble import NEIGHBOURS, Sources, build, check_request, depth_for
from tiered_memory.context.records import Context
from tiered_memory.memories import Memories
from tiered_memory.recall.recaller import Recaller, recall_filter
from tiered_memory.recall.types import RecallHit
from tiered_memory.scratchpad import Scratchpad
from tiered_memory.sessions import SessionManager


@typed_arguments
class ContextCalls:
    """The manager's ``context()``; the manager provides the recaller, its memories,
    scratchpad, sessions, store and configuration."""

    agent_id: str | None
    config: MemoryConfig
    store: MemoryStorage
    scratchpad: Scratchpad
    sessions: SessionManager
    _recall: Recaller
    _memories: Memories

    def _require_open(self) -> None:
        raise NotImplementedError  # the manager's

    def context(
        self,
        query: str,
        max_tokens: int = 1000,
        *,
        tier: Tier | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        created_after: int | None = None,
        created_before: int | None = None,
        min_retention: float | None = None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        include_superseded: bool = False,
        as_of: int | None = None,
        scratchpad: bool = True,
    ) -> Context:
        """The memories that answer ``query``, packed into ``max_tokens`` as text ready
        to paste into a prompt (see :class:`~tiered_memory.context.Context`).

        The scratchpad's entries come first where they fit (``scratchpad=False``: none),
        then recall's best hits (the filters are :meth:`recall`'s) grouped by session,
        each with the question it answers or the answer it gets where those fit too.
        ``tokens`` is counted with ``MemoryConfig.token_counter`` and is never above
        ``max_tokens``. A read: nothing is written (no recall review, no embedding of
        pending memories, which rank by keywords meanwhile). An empty query raises
        :class:`~tiered_memory.errors.EmptyQueryError`, a budget that is not an int of
        at least 1 :class:`~tiered_memory.errors.InvalidBudgetError`.
        """
        return self._context(
            query, max_tokens, tier=tier, session_id=session_id, agent_id=agent_id, tags=tags,
            created_after=created_after, created_before=created_before,
            min_retention=min_retention, min_score=min_score, relative_cut=relative_cut,
            include_superseded=include_superseded, as_of=as_of, scratchpad=scratchpad,
        )  # fmt: skip

    def _context(
        self,
        query: str,
        max_tokens: int,
        *,
        tier: Tier | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        tags: Sequence[str] = (),
        created_after: int | None = None,
        created_before: int | None = None,
        min_retention: float | None = None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        include_superseded: bool = False,
        as_of: int | None = None,
        scratchpad: bool = True,
        depth: int | None = None,
        neighbours: str = NEIGHBOURS,
    ) -> Context:
        """:meth:`context` with the packing's knobs (``depth``: recall hits to choose
        from, by default :func:`~tiered_memory.context.assemble.depth_for` the budget;
        ``neighbours``: see :mod:`tiered_memory.context.packing`), for measuring."""
        self._require_open()
        check_request(query, max_tokens)
        agent_id = stamped(self.agent_id, agent_id)
        found = self._recall.recall(
            query, depth or depth_for(max_tokens), tier=tier, session_id=session_id,
            agent_id=agent_id, tags=tags,
            created_after=created_after, created_before=created_before,
            min_retention=min_retention, min_score=min_score, relative_cut=relative_cut,
            include_superseded=include_superseded, as_of=as_of, writes=False, windows=False,
        )  # fmt: skip
        # The scratchpad's entries have their own place (first), or none.
        hits = [
            h for h in found if isinstance(h, RecallHit) and h.memory.tier is not Tier.SCRATCHPAD
        ]
        where = recall_filter(tier, session_id, agent_id, tags, created_after, created_before,
                              min_retention, include_superseded=include_superseded,
                              as_of=as_of)  # fmt: skip
        pad = []
        if scratchpad and where.tier in (None, Tier.SCRATCHPAD):
            pad = [m for _key, m in self.scratchpad.items() if where.accepts(m)]
        store = self.store
        sources = Sources(
            turns=partial(store.indexes.conversation_turns, before=True),
            get_many=self._memories.get_many, session=self.sessions.get,
            count=self.config.token_counter.count,
            explain=partial(self._recall.with_windows, query),
        )  # fmt: skip
        return build(query, max_tokens, hits, pad, sources, where,
                     threshold=self.config.near_duplicate_threshold,
                     neighbours=neighbours)  # fmt: skip
