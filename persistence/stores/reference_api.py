"""The reference design's lower-level per-tier API, written once for every engine's store.

The reference design (``reference/wundr-agent-memory-persistence.md``, the "Storage" table
of the architecture) names one method per tier and record (``put_episodic``,
``get_session``, ``get_schedules_due_for_review``, ...). The store is the composition of
its parts (:attr:`memories`, :attr:`sessions`, :attr:`schedules`, :attr:`indexes`), and
the domain calls the parts; these methods stay as the public, documented lower-level API
of :class:`~persistence.sqlite.SQLiteStore` and ``PostgresStore``: each is one call to the
part that owns it, kept here, in one place, instead of on each engine's store (the
episodic and semantic ones name their tier to the memories part's calls that take one:
``memories.write(memory, Tier.EPISODIC)``, ...).
"""

from __future__ import annotations

from typing import Protocol

from persistence.records import (
    Memory,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)


class TierMemories(Protocol):
    """What the per-tier API asks of the memories part."""

    def put_scratchpad(self, key: str, memory: Memory) -> Memory: ...
    def get_scratchpad(self, key: str) -> Memory | None: ...
    def delete_scratchpad(self, key: str) -> bool: ...
    def get_all_scratchpad(self) -> list[Memory]: ...
    def clear_scratchpad(self) -> int: ...
    def write(self, memory: Memory, tier: Tier) -> Memory: ...
    def get(self, tier: Tier, memory_id: str) -> Memory | None: ...
    def delete(self, tier: Tier, memory_id: str) -> bool: ...
    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]: ...

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord: ...


class TierSessions(Protocol):
    """What the per-tier API asks of the sessions part."""

    def put_session(self, session: SessionState) -> None: ...
    def get_session(self, session_id: str) -> SessionState | None: ...
    def delete_session(self, session_id: str) -> bool: ...
    def get_active_sessions(self) -> list[SessionState]: ...
    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]: ...

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry: ...


class TierSchedules(Protocol):
    """What the per-tier API asks of the schedules part."""

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None: ...
    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None: ...

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]: ...


class ReferenceTierAPI:
    """The reference design's lower-level API, each a call to the part that owns it.

    A store mixes this in next to its parts; the domain (``tiered_memory``) never uses it
    and calls the parts (``store.memories.put_memory(...)``)."""

    memories: TierMemories
    sessions: TierSessions
    schedules: TierSchedules

    # --- scratchpad ------------------------------------------------------------------------

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store ``memory`` under ``key``; return it as stored."""
        return self.memories.put_scratchpad(key, memory)

    def get_scratchpad(self, key: str) -> Memory | None:
        """The scratchpad memory under ``key``, or ``None``."""
        return self.memories.get_scratchpad(key)

    def delete_scratchpad(self, key: str) -> bool:
        """Delete the entry under ``key``; True if there was one."""
        return self.memories.delete_scratchpad(key)

    def get_all_scratchpad(self) -> list[Memory]:
        """Every scratchpad entry, least recently written first."""
        return self.memories.get_all_scratchpad()

    def clear_scratchpad(self) -> int:
        """Delete every scratchpad entry; how many."""
        return self.memories.clear_scratchpad()

    # --- episodic and semantic -------------------------------------------------------------

    def put_episodic(self, memory: Memory) -> Memory:
        """Insert or update an episodic memory; return it as stored."""
        return self.memories.write(memory, Tier.EPISODIC)

    def get_episodic(self, memory_id: str) -> Memory | None:
        """The episodic memory with that id, or ``None``."""
        return self.memories.get(Tier.EPISODIC, memory_id)

    def delete_episodic(self, memory_id: str) -> bool:
        """Delete an episodic memory with its tags and schedule; True if it existed.

        Like ``memories.forget_memory`` (reason ``"deleted"``): the forgetting log records
        it and its promotion-log rows stay.
        """
        return self.memories.delete(Tier.EPISODIC, memory_id)

    def query_episodic(self, options: QueryOptions | None = None) -> list[Memory]:
        """Episodic memories matching every filter set in ``options``."""
        return self.memories.query(Tier.EPISODIC, options)

    def put_semantic(self, memory: Memory) -> Memory:
        """Insert or update a semantic memory; return it as stored."""
        return self.memories.write(memory, Tier.SEMANTIC)

    def get_semantic(self, memory_id: str) -> Memory | None:
        """The semantic memory with that id, or ``None``."""
        return self.memories.get(Tier.SEMANTIC, memory_id)

    def delete_semantic(self, memory_id: str) -> bool:
        """Delete a semantic memory with its tags and schedule; True if it existed (audited
        like :meth:`delete_episodic`)."""
        return self.memories.delete(Tier.SEMANTIC, memory_id)

    def query_semantic(self, options: QueryOptions | None = None) -> list[Memory]:
        """Semantic memories matching every filter set in ``options``."""
        return self.memories.query(Tier.SEMANTIC, options)

    def promote_memory(
        self, memory_id: str, from_tier: Tier, to_tier: Tier, reason: str | None = None
    ) -> PromotionRecord:
        """Move a memory forward a tier and log it, in one transaction."""
        return self.memories.promote_memory(memory_id, from_tier, to_tier, reason)

    # --- sessions and transcripts ----------------------------------------------------------

    def put_session(self, session: SessionState) -> None:
        """Insert or update a session."""
        self.sessions.put_session(session)

    def get_session(self, session_id: str) -> SessionState | None:
        """The session, or ``None``."""
        return self.sessions.get_session(session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its transcript (its memories stay); True if it existed."""
        return self.sessions.delete_session(session_id)

    def get_active_sessions(self) -> list[SessionState]:
        """Sessions not yet ended, most recently active first."""
        return self.sessions.get_active_sessions()

    def append_transcript(
        self, session_id: str, turn: int, role: str, content: str, *, speaker: str | None = None
    ) -> TranscriptEntry:
        """Add one line to a session's transcript."""
        return self.sessions.append_transcript(session_id, turn, role, content, speaker=speaker)

    def get_transcripts(self, session_id: str) -> list[TranscriptEntry]:
        """A session's transcript, in turn order."""
        return self.sessions.get_transcripts(session_id)

    # --- repetition schedules --------------------------------------------------------------

    def put_repetition_schedule(self, schedule: RepetitionSchedule) -> None:
        """Insert or update a memory's review schedule."""
        self.schedules.put_repetition_schedule(schedule)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """A memory's review schedule, or ``None``."""
        return self.schedules.get_repetition_schedule(memory_id)

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """Schedules due at or before ``before``, most overdue first."""
        return self.schedules.get_schedules_due_for_review(before, limit)
