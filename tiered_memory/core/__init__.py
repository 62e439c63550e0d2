"""The core of the domain: the manager and the tiers it manages.

:mod:`~tiered_memory.core.manager` (``AgentMemoryManager``, the facade) wires the
collaborators that do its work: :mod:`~tiered_memory.core.memories` (memories read and
written through the scratchpad and the cache), :mod:`~tiered_memory.core.writer`
(``remember``, ``remember_many``, ``update``; :mod:`~tiered_memory.core.drafts` checks
``remember_many``'s records), :mod:`~tiered_memory.core.links` (links between memories),
:mod:`~tiered_memory.core.retention` (reviews, decay, consolidation),
:mod:`~tiered_memory.core.files` (backup, restore, JSON, integrity, maintenance) and
:mod:`~tiered_memory.core.lifecycle` (open, flush, close). Beside them:
:mod:`~tiered_memory.core.config` (``MemoryConfig``), :mod:`~tiered_memory.core.tiers`
(episodic and semantic views), :mod:`~tiered_memory.core.scratchpad` (working memory),
:mod:`~tiered_memory.core.sessions` (sessions and transcripts),
:mod:`~tiered_memory.core.forgetting` (Ebbinghaus + SM-2), :mod:`~tiered_memory.core.dedup`
(the same fact twice), :mod:`~tiered_memory.core.redaction` (secrets out before writing)
and :mod:`~tiered_memory.core.tokens` (the scratchpad's budget). Import from the modules;
this package imports nothing, so importing one of them loads no more than it needs.
"""
