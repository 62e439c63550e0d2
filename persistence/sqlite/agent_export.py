"""An agent-scoped export of a file: one agent's rows of every table.

:class:`AgentExportSource` is an :class:`~persistence.transfer.json_export.ExportSource`
over the same snapshot as :class:`~persistence.transfer.store_io.StoreExportSource`,
keeping only agent ``agent_id``'s data: its memories; the sessions it started and their
transcripts; schedules and promotion-log rows of its memories (live or forgotten); its
forgetting-log rows; and the knowledge graph its memories assert (their provenance,
the relations it names, the entities those name, their aliases, queued extractions).
Entities and relations added through the graph API without a supporting memory belong to
no agent on a file and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import apsw

from persistence.records import (
    ForgettingRecord,
    Memory,
    PromotionRecord,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.sqlite import json_io
from persistence.sqlite.sql import agent_sql, forgetting_sql, notes_sql, session_sql
from persistence.transfer.graph_io import GRAPH_FIELDS
from persistence.transfer.json_export import ExportHeader, ExportSource
from persistence.transfer.store_io import StoreExportSource
from persistence.transfer.store_io import pages as _pages
from persistence.transfer.store_io import records as _second

_R = TypeVar("_R")


@contextmanager
def export_source(conn: apsw.Connection, agent_id: str | None) -> Iterator[ExportSource]:
    """:func:`persistence.sqlite.json_io.export_source`, with ``agent_id`` only that
    agent's rows."""
    with json_io.export_source(conn) as source:
        yield source if agent_id is None else AgentExportSource(conn, source, agent_id)


def _kept(pages: Iterable[Sequence[_R]], keep: Callable[[_R], bool]) -> Iterator[list[_R]]:
    """``pages`` with only the records ``keep`` accepts (no empty page)."""
    for page in pages:
        if kept := [record for record in page if keep(record)]:
            yield kept


def _at(table: str, field: str) -> int:
    return GRAPH_FIELDS[table].index(field)


class AgentExportSource:
    """Agent ``agent_id``'s rows of ``inner``'s snapshot (see the module docstring)."""

    def __init__(self, conn: apsw.Connection, inner: StoreExportSource, agent_id: str) -> None:
        self._conn = conn
        self._inner = inner
        self._agent = agent_id
        self._page = inner.page_size
        self._live = agent_sql.memory_ids(conn, agent_id)
        self._audited = self._live | agent_sql.forgotten_ids(conn, agent_id)
        self._graph: dict[str, set[str]] | None = None

    def header(self) -> ExportHeader:
        return self._inner.header()

    def row_count(self) -> int:
        """An upper bound (the progress bar's total): the whole file's rows."""
        return self._inner.row_count()

    def has_graph(self) -> bool:
        return self._inner.has_graph()

    def memories(self, tier: Tier) -> Iterator[list[Memory]]:
        return _kept(self._inner.memories(tier), lambda m: m.agent_id == self._agent)

    def sessions(self) -> Iterator[list[SessionState]]:
        conn, size, agent = self._conn, self._page, self._agent
        return _pages(lambda a: session_sql.page(conn, a, size, agent), lambda s: s.session_id, "")

    def transcripts(self) -> Iterator[list[TranscriptEntry]]:
        conn, size, agent = self._conn, self._page, self._agent
        rows = _pages(lambda a: session_sql.transcript_page(conn, a, size, agent), _first, 0)
        return _second(rows)

    def schedules(self) -> Iterator[list[RepetitionSchedule]]:
        return _kept(self._inner.schedules(), lambda r: r.memory_id in self._live)

    def promotions(self) -> Iterator[list[PromotionRecord]]:
        return _kept(self._inner.promotions(), lambda p: p.memory_id in self._audited)

    def forgotten(self) -> Iterator[list[tuple[int, ForgettingRecord]]]:
        conn, size, agent = self._conn, self._page, self._agent
        return _pages(lambda a: forgetting_sql.page(conn, a, size, agent), _first, 0)

    def graph_rows(self, table: str) -> Iterator[list[apsw.SQLiteValues]]:
        keep = self._graph_ids()
        if table in ("memory_entities", "memory_relations", "graph_queue"):
            column, ids = _at(table, "memory_id"), self._live
        elif table == "relations":
            column, ids = _at(table, "id"), keep["relations"]
        elif table == "entities":
            column, ids = _at(table, "id"), keep["entities"]
        else:
            column, ids = _at(table, "entity_id"), keep["entities"]
        return _kept(self._inner.graph_rows(table), lambda row: row[column] in ids)

    def has_notes(self) -> bool:
        return self._inner.has_notes()

    def note_rows(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        """The notes this agent's handle wrote (with their versions and links), and the
        content history of its memories."""
        if table == "memory_versions":
            return _kept(self._inner.note_rows(table), lambda row: row[0] in self._live)
        rows = notes_sql.table_rows(self._conn, table, self._agent)
        return iter([rows] if rows else [])

    def _graph_ids(self) -> dict[str, set[str]]:
        """The relations this agent's memories support and the entities they or those
        relations name (read once, from the snapshot)."""
        if self._graph is None:
            relations: set[str] = set()
            entities: set[str] = set()
            for row in _rows(self._inner.graph_rows("memory_relations")):
                if row[_at("memory_relations", "memory_id")] in self._live:
                    relations.add(row[_at("memory_relations", "relation_id")])
            for row in _rows(self._inner.graph_rows("memory_entities")):
                if row[_at("memory_entities", "memory_id")] in self._live:
                    entities.add(row[_at("memory_entities", "entity_id")])
            for row in _rows(self._inner.graph_rows("relations")):
                if row[_at("relations", "id")] in relations:
                    entities.add(row[_at("relations", "subject_id")])
                    entities.add(row[_at("relations", "object_id")])
            self._graph = {"relations": relations, "entities": entities}
        return self._graph


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _rows(pages: Iterable[Sequence[Any]]) -> Iterator[Any]:
    for page in pages:
        yield from page
