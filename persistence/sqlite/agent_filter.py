"""An agent-scoped view of a store without row-level security (SQLite).

:class:`AgentFilteredStore` wraps a :class:`~persistence.MemoryStorage` in the same shape
(``.memories``, ``.sessions``, ``.schedules``, ``.indexes``), each part passing every
call to the store's part, except the ones that read or remove memories: those see only
memories whose ``agent_id`` is the scope's (searches get the agent as a filter, reads by
id drop other agents' memories, paged walks skip them); sessions and their transcripts
are the ones the agent started (``sessions.agent_id``, schema version 12), the
forgetting log the rows of its memories, and the statistics count its rows.
:class:`AgentFilteredFiles` exports only the agent's data
(:mod:`persistence.sqlite.agent_export`) and refuses the file operations that would copy
or replace the whole file (backup, restore, import, rekey).
The graph's view is :mod:`persistence.sqlite.agent_graph`.

Scratchpad keys and session ids are one namespace per file (a key or id another agent
holds is refused). On PostgreSQL row-level security scopes every table instead, and
nothing here is used.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from persistence.errors import InvalidInputError, UnsupportedOperationError
from persistence.records import (
    ForgettingRecord,
    IntegrityResult,
    KeywordHits,
    KeywordParts,
    MaintenanceResult,
    Memory,
    MemoryFilter,
    PersistenceStatistics,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RetentionInput,
    Tier,
)
from persistence.sqlite.sql import agent_sql
from persistence.stores.reference_api import ReferenceTierAPI

_FILE_OPS = (
    "an agent-scoped handle on a file cannot {what}: the file holds every agent's data; "
    "open it without agent_id (export_json and copy give this agent's data alone)"
)


class AgentFilteredStore(ReferenceTierAPI):
    """``inner`` as agent ``agent_id`` sees it (see the module docstring): the same shape
    as the store, each part a filtered view of the store's part."""

    def __init__(self, inner: Any, agent_id: str, sessions: Any) -> None:
        self._inner = inner
        self.agent_id = agent_id
        self.memories = AgentMemories(inner.memories, agent_id)
        self.sessions = sessions
        """The agent's sessions (a :class:`~persistence.SessionRecords`)."""
        self.schedules = AgentSchedules(inner.schedules, self.memories)
        self.indexes = AgentIndexes(inner.indexes, self.memories)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"{self._inner!r} (agent {self.agent_id!r})"

    def get_statistics(self) -> PersistenceStatistics:
        """The file's statistics with this agent's row counts (sizes and the embedding
        cache's count are the file's)."""
        whole: PersistenceStatistics = self._inner.get_statistics()
        with self._inner.read_connection() as conn:
            counts: dict[str, Any] = dict(agent_sql.counts(conn, self.agent_id))
        return replace(whole, **counts)


class AgentMemories:
    """The store's memories part (``inner``) as agent ``agent_id`` sees it."""

    def __init__(self, inner: Any, agent_id: str) -> None:
        self._inner = inner
        self.agent_id = agent_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _mine(self, memory: Memory | None) -> Memory | None:
        return memory if memory is not None and memory.agent_id == self.agent_id else None

    def owns(self, memory_id: str) -> bool:
        """True if the memory exists and is this agent's."""
        return self._mine(self._inner.get_memory(memory_id)) is not None

    def get_memory(self, memory_id: str) -> Memory | None:
        """The memory if it is this agent's."""
        return self._mine(self._inner.get_memory(memory_id))

    def get_memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """This agent's memories among ``memory_ids``."""
        found: dict[str, Memory] = self._inner.get_memories(memory_ids)
        return {k: m for k, m in found.items() if m.agent_id == self.agent_id}

    def query(self, tier: Tier, options: QueryOptions | None = None) -> list[Memory]:
        """The query, for this agent's memories only."""
        options = options or QueryOptions()
        if options.agent_id not in (None, self.agent_id):
            return []
        return list(self._inner.query(tier, replace(options, agent_id=self.agent_id)))

    def count(self, tier: Tier) -> int:
        """How many of this agent's memories ``tier`` holds."""
        return len(self.query(tier, QueryOptions(limit=None)))

    def tag_counts(self, prefix: str) -> dict[str, int]:
        """Namespace tag counts over this agent's memories."""
        return dict(self._inner.tag_counts(prefix, agent_id=self.agent_id))

    def page(self, tier: Tier, after_id: str = "", limit: int = 500) -> list[Memory]:
        """The next ``limit`` of this agent's memories of ``tier`` after ``after_id``."""
        return self.walk(lambda after: self._inner.page(tier, after, limit), after_id, limit)

    def walk(self, fetch: Any, after_id: str, limit: int) -> list[Any]:
        """The next ``limit`` records ``fetch(after_id)`` pages through that are of this
        agent's memories."""
        kept: list[Any] = []
        while len(kept) < limit:
            batch = fetch(after_id)
            if not batch:
                break
            after_id = _id_of(batch[-1])
            owned = self._inner.get_memories([_id_of(x) for x in batch])
            kept.extend(
                x for x in batch if getattr(owned.get(_id_of(x)), "agent_id", None) == self.agent_id
            )
            if len(batch) < limit:
                break
        return kept[:limit]

    def forget_memory(
        self, memory_id: str, reason: str, retention: float | None = None
    ) -> Tier | None:
        """Forget the memory if it is this agent's."""
        if not self.owns(memory_id):
            return None
        result: Tier | None = self._inner.forget_memory(memory_id, reason, retention)
        return result

    def get_promotion_history(self, memory_id: str) -> list[PromotionRecord]:
        """The history of this agent's memory (``[]`` for another's)."""
        if not self.owns(memory_id):
            return []
        return list(self._inner.get_promotion_history(memory_id))

    # --- scratchpad ------------------------------------------------------------------------

    def get_scratchpad(self, key: str) -> Memory | None:
        """The entry under ``key`` if it is this agent's."""
        return self._mine(self._inner.get_scratchpad(key))

    def get_all_scratchpad(self) -> list[Memory]:
        """This agent's scratchpad entries."""
        return [m for m in self._inner.get_all_scratchpad() if m.agent_id == self.agent_id]

    def put_scratchpad(self, key: str, memory: Memory) -> Memory:
        """Store the entry; a key another agent holds is refused (one namespace per file)."""
        held = self._inner.get_scratchpad(key)
        if held is not None and held.agent_id != self.agent_id:
            raise InvalidInputError(f"scratchpad key {key!r} is taken in this file")
        result: Memory = self._inner.put_scratchpad(key, memory)
        return result

    def delete_scratchpad(self, key: str) -> bool:
        """Delete this agent's entry under ``key``."""
        if self.get_scratchpad(key) is None:
            return False
        return bool(self._inner.delete_scratchpad(key))

    def clear_scratchpad(self) -> int:
        """Delete this agent's scratchpad entries; how many."""
        return sum(bool(self._inner.delete_scratchpad(m.key)) for m in self.get_all_scratchpad())


class AgentSchedules:
    """The store's schedules part (``inner``) for the agent of ``memories``."""

    def __init__(self, inner: Any, memories: AgentMemories) -> None:
        self._inner = inner
        self._memories = memories

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_repetition_schedule(self, memory_id: str) -> RepetitionSchedule | None:
        """The schedule of this agent's memory."""
        if not self._memories.owns(memory_id):
            return None
        found: RepetitionSchedule | None = self._inner.get_repetition_schedule(memory_id)
        return found

    def get_schedules_due_for_review(
        self, before: int, limit: int | None = None
    ) -> list[RepetitionSchedule]:
        """This agent's schedules due at or before ``before``, most overdue first."""
        due = self._inner.get_schedules_due_for_review(before, None)
        owned = self._memories.get_memories([s.memory_id for s in due])
        mine = [s for s in due if s.memory_id in owned]
        return mine if limit is None else mine[:limit]

    def retention_batch(
        self, tier: Tier, after_id: str = "", limit: int = 500, min_reviews: int = 0
    ) -> list[RetentionInput]:
        """The next ``limit`` of this agent's memories for the forgetting curve."""
        return self._memories.walk(
            lambda after: self._inner.retention_batch(tier, after, limit, min_reviews),
            after_id,
            limit,
        )

    def get_forgetting_log(self, memory_id: str | None = None) -> list[ForgettingRecord]:
        """Audit rows of this agent's forgotten memories (rows written before schema
        version 12 name no agent: an unscoped handle reads them)."""
        agent_id = self._memories.agent_id
        return list(self._inner.get_forgetting_log(memory_id, agent_id=agent_id))


class AgentIndexes:
    """The store's recall indexes (``inner``) searching the agent of ``memories`` only."""

    def __init__(self, inner: Any, memories: AgentMemories) -> None:
        self._inner = inner
        self._memories = memories

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _where(self, where: MemoryFilter | None) -> MemoryFilter | None:
        agent_id = self._memories.agent_id
        where = where or MemoryFilter()
        if where.agent_id not in (None, agent_id):
            return None
        return replace(where, agent_id=agent_id)

    def keyword_search(
        self,
        words: Sequence[str],
        limit: int,
        tier: Tier | None = None,
        context_weight: float = 0.5,
        after_weight: float = 0.5,
        *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """The keyword search among this agent's memories."""
        scoped = self._where(where)
        if scoped is None:
            return []
        found = self._inner.keyword_search(
            words, limit, tier, context_weight, after_weight, where=scoped
        )
        return found if isinstance(found, KeywordHits) else list(found)

    def keyword_parts(
        self, words: Sequence[str], memory_ids: Sequence[str]
    ) -> dict[str, KeywordParts]:
        """Which parts of this agent's memories' keyword windows hold the words."""
        found = self._inner.keyword_parts(words, memory_ids)
        return {m: parts for m, parts in found.items() if self._memories.owns(m)}

    def vector_search(
        self, vector: object, limit: int, tier: Tier | None = None, *,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """The vector search among this agent's memories."""
        scoped = self._where(where)
        if scoped is None:
            return []
        return list(self._inner.vector_search(vector, limit, tier, where=scoped))


def _id_of(record: Any) -> str:
    return str(getattr(record, "memory_id", None) or record.id)


class AgentFilteredFiles:
    """A file's operations for an agent-scoped handle: exports hold the agent's data
    (``inner`` is built with its ``agent_id``); whole-file ones are refused."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def encrypted(self) -> bool:
        """True when the file was opened with a key."""
        return bool(self._inner.encrypted)

    def _refuse(self, what: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(_FILE_OPS.format(what=what))

    def create_backup(self, *args: Any, **kwargs: Any) -> Path:
        raise self._refuse("back it up")

    def restore_backup(self, source: str | os.PathLike[str]) -> Any:
        raise self._refuse("restore it")

    def import_json(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("import into it")

    def rekey(self, new_key: Any) -> None:
        raise self._refuse("rekey it")

    def export_json(self, *args: Any, **kwargs: Any) -> Path:
        """This agent's data as a JSON document (see :mod:`persistence.sqlite.agent_export`)."""
        path: Path = self._inner.export_json(*args, **kwargs)
        return path

    def export_source(self) -> AbstractContextManager[Any]:
        """This agent's data from one snapshot, for a copy."""
        source: AbstractContextManager[Any] = self._inner.export_source()
        return source

    def import_sink(self) -> AbstractContextManager[Any]:
        raise self._refuse("copy into it")

    def check_integrity(self) -> IntegrityResult:
        """The file's checks (whole-file; they report no memory's content)."""
        result: IntegrityResult = self._inner.check_integrity()
        return result

    def run_maintenance(self, *, vacuum: bool = False) -> MaintenanceResult:
        """The file's maintenance."""
        result: MaintenanceResult = self._inner.run_maintenance(vacuum=vacuum)
        return result

    def remove_leftovers(self, *more: Path) -> list[Path]:
        """Stale leftovers of interrupted backups and restores."""
        return list(self._inner.remove_leftovers(*more))
