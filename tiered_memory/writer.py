"""Writing memories: ``remember()``, ``remember_many()`` and ``update()``.

Each write is checked, redacted and deduplicated before anything lands, then stored in
one transaction with its review schedule, its session's activity time and its graph
facts; the embedding and extraction queues are woken once it commits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from persistence import (
    GraphStorage,
    InvalidInputError,
    InvalidTypeError,
    Memory,
    MemoryVersion,
    NoteStorage,
    RepetitionSchedule,
    Tier,
    graph_records,
    new_id,
    parse_tier,
    require_bool,
    require_content,
    require_str,
)
from tiered_memory import dedup as duplicates
from tiered_memory.config import MemoryConfig
from tiered_memory.drafts import Drafter, ScratchpadDraft, check_new_fields, check_record_fields
from tiered_memory.embedding.queue import EmbeddingQueue
from tiered_memory.forgetting import ForgettingCurve
from tiered_memory.graph.extraction import ExtractionQueue
from tiered_memory.graph.facade import entity_facts, relation_facts
from tiered_memory.memories import Memories, touched
from tiered_memory.redaction import Redactor, count_in_file, redact_fields, with_count
from tiered_memory.sessions import SessionManager
from tiered_memory.single_valued import settle
from tiered_memory.supersession import (
    EXPLICIT,
    check_supersedes,
    supersede,
    superseded_memories,
)


class MemoryWriter:
    """New and changed memories of one manager (see the module docstring)."""

    def __init__(
        self,
        memories: Memories,
        sessions: SessionManager,
        records: GraphStorage,
        curve: ForgettingCurve,
        config: MemoryConfig,
        clock: Callable[[], int],
        *,
        redactor: Redactor | None,
        review: Callable[[str, int], RepetitionSchedule],
        embeddings: EmbeddingQueue,
        extraction: ExtractionQueue,
    ) -> None:
        self._memories = memories
        self.store = memories.store
        self._sessions = sessions
        self.records = records  # the knowledge graph's
        self._curve = curve
        self._config = config
        self._clock = clock
        self._redactor = redactor
        self._review = review  # a duplicate is reinforced by a review
        self._embeddings = embeddings
        self._extraction = extraction
        self._drafter = Drafter(memories.store, redactor, config.token_counter)
        self.notebook: NoteStorage | None = None
        """Where memories' content history is kept (set by the manager)."""

    def remember(
        self,
        content: str,
        tier: Tier | str = Tier.EPISODIC,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        importance: float = 0.5,
        tags: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        source: str | None = None,
        category: str | None = None,
        key: str | None = None,
        embedding: Sequence[float] | None = None,
        speaker: str | None = None,
        entities: Sequence[Any] | None = None,
        relations: Sequence[Any] | None = None,
        dedup: bool | None = None,
        supersedes: str | Sequence[str] | None = None,
    ) -> Memory:
        """``AgentMemoryManager.remember`` (same arguments, same defaults)."""
        self._memories.require_open()
        if type(tier) is not Tier:
            tier = parse_tier(tier)
        if dedup is not None:
            require_bool(dedup, "dedup")
        require_content(content)
        replaced = check_supersedes(supersedes, tier)
        check_new_fields(session_id=session_id, agent_id=agent_id, importance=importance,
                         tags=tags, metadata=metadata, source=source, category=category,
                         key=key, speaker=speaker, embedding=embedding)  # fmt: skip
        content, tags, metadata, redacted = redact_fields(self._redactor, content, tags, metadata)
        self.store.memories.check_content_size(content)
        if key is not None and tier is not Tier.SCRATCHPAD:
            raise InvalidInputError("key= names a scratchpad entry: pass tier=Tier.SCRATCHPAD")
        no_facts = entities is None and relations is None
        facts = ([], []) if no_facts else (entity_facts(entities), relation_facts(relations))
        now = self._clock()
        if type(tags) is not tuple:  # stored as a tuple without repeats: made so here, the
            tags = tuple(dict.fromkeys(tags))  # store then keeps the memory as it is
        chosen: dict[str, Any] = {  # NEW_MEMORY_FIELDS (tests/test_memory_fields.py)
            "session_id": session_id, "agent_id": agent_id, "importance": importance,
            "tags": tags, "metadata": metadata, "source": source, "category": category,
            "embedding": embedding, "speaker": speaker,
        }  # fmt: skip
        deduplicate = (self._config.dedup if dedup is None else dedup) and not replaced
        if tier is not Tier.SCRATCHPAD:
            memory = self._new_memory(content, tier, now, chosen)
            schedule = self._curve.schedule_for(memory.id, memory.importance, now)
            if no_facts and not redacted and not replaced and not self.store.in_transaction:
                stored = self.store.memories.remember_new(  # the store's quick path, if it has one
                    memory, schedule, touch_at=now if session_id is not None else None,
                    dedup=deduplicate,
                )  # fmt: skip
                if stored is not None:
                    self._memories.cache.set(stored.id, stored)
                    self._extraction.notify()
                    if stored.embedding is None:
                        self._embeddings.notify()
                    return stored
            # else (or a check failed): the step-by-step path, which raises or reinforces
        # Joined: no savepoints (see SQLiteStore.transaction); checks before writes.
        with self.store.transaction(join=True):
            if session_id is not None:
                self._sessions.check_active(session_id)
            count_in_file(self.store, redacted)
            older = superseded_memories(self._memories, self.store, replaced, agent_id)
            if deduplicate and tier is not Tier.SCRATCHPAD:
                twin = duplicates.find_twin(
                    self.store, content, tier, agent_id, session_id, self._memories.get_many
                )
                if twin is not None:  # the same fact again: reinforce it instead
                    return self._reinforce(twin, importance, facts, now)
            if tier is Tier.SCRATCHPAD:
                stored = self._memories.scratchpad.put(key or new_id(), content, **chosen)
            else:
                supersede(self._memories, older, memory, EXPLICIT)  # first: its row locks
                (stored,) = self.store.memories.insert_memories([memory], [schedule])
                self._memories.cache.set(stored.id, stored)
            if (
                stored.tier is Tier.SCRATCHPAD
                and self.store.schedules.get_repetition_schedule(stored.id) is None
            ):
                self.store.schedules.put_repetition_schedule(
                    self._curve.schedule_for(stored.id, stored.importance, now)
                )
            if session_id is not None:
                self.store.sessions.touch_session(session_id, self._clock())
            if facts[0] or facts[1]:
                self.records.assert_facts(stored.id, *facts, graph_records.CALLER, now)
            if stored.tier is not Tier.SCRATCHPAD and self._single_valued(facts[1]):
                stored = self.settle(stored.id) or stored
            self.store.engine.after_commit(self._extraction.notify)
            if stored.embedding is None:
                self.store.engine.after_commit(self._embeddings.notify)
        return stored

    def settle(self, memory_id: str) -> Memory | None:
        """The single-valued facts rule on what ``memory_id`` asserts (in the caller's
        transaction; see :mod:`tiered_memory.single_valued`)."""
        return settle(self._memories, self.records, memory_id, self._config.single_valued)

    def _single_valued(self, relations: Sequence[Any]) -> bool:
        """Whether any of these checked relation facts has a single-valued predicate."""
        return any(r.predicate in self._config.single_valued for r in relations)

    def _new_memory(self, content: str, tier: Tier, now: int, chosen: dict[str, Any]) -> Memory:
        """A new episodic or semantic memory of ``remember()``'s checked fields."""
        fields = dict(chosen)
        metadata = fields["metadata"]
        fields["metadata"] = dict(metadata) if metadata is not None else {}
        return Memory.create(
            content, tier, now=now, token_count=self._config.token_counter.count(content),
            **fields,
        )  # fmt: skip

    def _reinforce(
        self,
        memory: Memory,
        importance: float,
        facts: tuple[list[Any], list[Any]],
        now: int,
    ) -> Memory:
        """``remember()`` of a memory already there: a review, importance the larger,
        the new facts added; counted in ``statistics().graph.deduplicated``
        (``importance`` was checked by ``remember()``)."""
        self._review(memory.id, 4)
        current = self._memories.require(memory.id)
        if importance > current.importance:
            current = self._memories.rewrite(replace(current, importance=importance,
                                                     updated_at=touched(current, now)))  # fmt: skip
        if facts[0] or facts[1]:
            self.records.assert_facts(memory.id, *facts, graph_records.CALLER, now)
        if self._single_valued(facts[1]):
            current = self.settle(memory.id) or current
        if memory.session_id is not None:
            self.store.sessions.touch_session(memory.session_id, self._clock())
        duplicates.count_duplicate(self.store)
        return current

    def remember_many(
        self,
        records: Sequence[str | Mapping[str, Any]],
        tier: Tier | str,
        fields: Mapping[str, Any],
    ) -> list[Memory]:
        """``AgentMemoryManager.remember_many`` up to its commit: every record checked
        first, then all of them written in one transaction; returned as stored."""
        self._memories.require_open()
        if isinstance(records, str | bytes) or not isinstance(records, Sequence):
            raise InvalidTypeError(
                "remember_many() takes a sequence of texts or mappings, "
                f"not {type(records).__name__}"
            )
        check_record_fields(fields, "remember_many()")
        now = self._clock()
        redacted: list[int] = []
        draft = self._drafter.draft
        drafts = [draft(record, tier, fields, now, n, redacted) for n, record in enumerate(records)]
        sessions = {d.session_id for d in drafts if isinstance(d, Memory) and d.session_id}
        with self.store.transaction(join=True):
            for session_id in sorted(sessions):
                self._sessions.check_active(session_id)
            count_in_file(self.store, sum(redacted))
            stored = {}
            for n, each in enumerate(drafts):
                if isinstance(each, ScratchpadDraft):
                    stored[n] = self.remember(each.content, Tier.SCRATCHPAD, **each.fields)
            rest = [(n, d) for n, d in enumerate(drafts) if isinstance(d, Memory)]
            if rest:
                memories = [memory for _, memory in rest]
                schedules = [self._curve.schedule_for(m.id, m.importance, now) for m in memories]
                written = self.store.memories.insert_memories(memories, schedules)
                for (n, _), memory in zip(rest, written, strict=True):
                    stored[n] = memory
                    self._memories.cache.set(memory.id, memory)
            touched_at = self._clock()
            for session_id in sorted(sessions):
                self.store.sessions.touch_session(session_id, touched_at)
            self.store.engine.after_commit(self._extraction.notify)
            if any(m.embedding is None for m in stored.values()):
                self.store.engine.after_commit(self._embeddings.notify)
        return [stored[n] for n in range(len(drafts))]

    def update(
        self,
        memory_id: str,
        *,
        content: str | None,
        metadata: Mapping[str, Any] | None,
        tags: Sequence[str] | None,
        importance: float | None,
        author: str | None = None,
        keep_history: bool = True,
    ) -> Memory:
        """``AgentMemoryManager.update``: the changes checked, then one transaction. A
        new content is kept in the memory's history (with the one it replaces, the first
        time), written by ``author``; ``keep_history=False`` keeps neither."""
        self._memories.require_open()
        require_str(memory_id, "memory_id")
        if content is not None:
            require_content(content)
        check_new_fields(importance=importance, tags=tags, metadata=metadata, updating=True)
        require_str(author, "author", allow_none=True)
        require_bool(keep_history, "keep_history")
        content, tags, metadata, redacted = redact_fields(
            self._redactor, content, tags, metadata, record=False
        )
        changes: dict[str, Any] = {}
        if content is not None:
            self.store.memories.check_content_size(content)
            changes |= {
                "content": content,
                "token_count": self._config.token_counter.count(content),
            }
            changes["embedding"] = None  # queued: embedded again in the background or on flush()
        if metadata is not None:
            changes["metadata"] = dict(metadata)
        if tags is not None:
            changes["tags"] = tags
        if importance is not None:
            changes["importance"] = importance
        with self.store.transaction():
            memory = self._memories.require(memory_id)
            if redacted:
                changes["metadata"] = with_count(changes.get("metadata", memory.metadata), redacted)
                count_in_file(self.store, redacted)
            if content is not None:
                self.store.engine.after_commit(self._embeddings.notify)
                if content != memory.content:  # re-extracted: the old findings go now
                    self.records.drop_extracted(memory_id)
                    self.store.engine.after_commit(self._extraction.notify)
                    if keep_history:
                        self._keep_version(memory, content, author)
            updated = self._memories.rewrite(
                replace(memory, updated_at=touched(memory, self._clock()), **changes)
            )
            if content is not None and updated.tier is not Tier.SCRATCHPAD:
                self.store.memories.record_content_keys([updated])  # found by its new content now
            return updated

    def _keep_version(self, memory: Memory, content: str, author: str | None) -> None:
        """Add ``content`` to the memory's history (its first content too, the first time)."""
        if self.notebook is None:
            return
        kept = len(self.notebook.memory_versions(memory.id))
        if not kept:
            self.notebook.add_memory_version(
                MemoryVersion(memory.id, 1, memory.content, None, memory.created_at)
            )
            kept = 1
        at = touched(memory, self._clock())
        self.notebook.add_memory_version(MemoryVersion(memory.id, kept + 1, content, author, at))
