"""The "Engine differences" table (docs/engine-differences.md), row by row, on both engines.

Each row of the table names its test here (``test_<key>``, the key in backticks in the
row's first cell); :func:`test_every_row_of_the_readme_table_has_its_test` keeps the table
and this file in step. Each test runs on a new file and on a new PostgreSQL database
(``any_location``) through ``AgentMemoryManager.open``, and asserts what each engine does.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from persistence import TracedStatement, salvage
from tiered_memory import AgentMemoryManager
from tiered_memory.errors import InvalidInputError, UnsupportedOperationError

PAGE = Path(__file__).resolve().parents[2] / "docs" / "engine-differences.md"
_ROW_KEY = re.compile(r"^\|\s*[^|]*?\(`(\w+)`\)\s*\|")


def _on_server(location: str) -> bool:
    return location.startswith("postgresql://")


def _table_keys() -> list[str]:
    """The keys of the rows of the "Engine differences" table."""
    section = PAGE.read_text(encoding="utf-8")
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # head, rule
    keys = [m.group(1) for m in map(_ROW_KEY.match, rows) if m]
    assert len(keys) == len(rows), "every row's first cell ends with its key: (`key`)"
    return keys


def test_every_row_of_the_table_has_its_test() -> None:
    keys = _table_keys()
    assert 8 <= len(keys) <= 25, keys
    tests = {name for name in vars(sys.modules[__name__]) if name.startswith("test_")}
    assert [k for k in keys if f"test_{k}" not in tests] == []
    assert len(set(keys)) == len(keys)


def test_encryption(any_location: str, tmp_path: Path) -> None:
    if _on_server(any_location):
        with pytest.raises(UnsupportedOperationError, match="key="):
            AgentMemoryManager.open(any_location, key="secret", embedder=None)
        with AgentMemoryManager.open(any_location, embedder=None) as memory:
            assert not memory.encrypted
            with pytest.raises(UnsupportedOperationError):
                memory.rekey("secret")
        return
    with AgentMemoryManager.open(any_location, key="secret", embedder=None) as memory:
        memory.remember("under a key")
        assert memory.encrypted
        memory.rekey("another")
    assert b"under a key" not in Path(any_location).read_bytes()
    with AgentMemoryManager.open(any_location, key="another", embedder=None) as memory:
        assert [m.content for m in memory.query()] == ["under a key"]


def test_backup(any_location: str, tmp_path: Path) -> None:
    with AgentMemoryManager.open(any_location, embedder=None, backup_dir=tmp_path) as memory:
        memory.remember("kept in the backup")
        path = memory.backup()
    if _on_server(any_location):
        assert path.suffix == ".json"  # the export format, one REPEATABLE READ snapshot
        assert "kept in the backup" in path.read_text(encoding="utf-8")
    else:
        assert path.suffix == ".db"  # VACUUM INTO: a whole SQLite file
        assert path.read_bytes().startswith(b"SQLite format 3\0")


def test_restore(any_location: str, tmp_path: Path) -> None:
    with AgentMemoryManager.open(any_location, embedder=None, backup_dir=tmp_path) as memory:
        memory.remember("in the backup")
        path = memory.backup()
        memory.remember("written after it")
        if _on_server(any_location):
            with pytest.raises(InvalidInputError, match="empty"):
                memory.restore(path)  # only into an empty database
            assert len(memory.query()) == 2
        else:
            memory.restore(path)  # the file's content is replaced
            assert [m.content for m in memory.query()] == ["in the backup"]


def test_salvage(any_location: str, tmp_path: Path) -> None:
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        memory.remember("readable")
    if _on_server(any_location):
        with pytest.raises(UnsupportedOperationError, match="server's own tools"):
            salvage(any_location, tmp_path / "saved.db")
        return
    result = salvage(any_location, tmp_path / "saved.db")
    assert result.memories == 1 and result.complete
    with AgentMemoryManager.open(tmp_path / "saved.db", embedder=None) as memory:
        assert [m.content for m in memory.query()] == ["readable"]


def test_maintenance(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        memory.remember("something to maintain")
        done = memory.maintain()
    if _on_server(any_location):
        # VACUUM (ANALYZE) of the library's tables every time; the server keeps its WAL
        assert done.vacuumed and done.wal_bytes_before == done.wal_bytes_after == 0
    else:
        assert not done.vacuumed  # checkpoint and statistics; VACUUM only when asked
        assert done.optimized


def test_diacritics(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        memory.remember("We met at the café on the corner")
        found = [r.memory.content for r in memory.recall("cafe", k=3)]
    if _on_server(any_location):
        assert found == []  # PostgreSQL's text search keeps the accent
    else:
        assert found == ["We met at the café on the corner"]  # FTS5's unicode61 folds it


def test_phrase_order(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, embedder=None) as memory:
        adjacent = memory.remember("we baked an apple pie").id
        apart = memory.remember("the pie had no apple in it").id
        found = dict(memory.store.indexes.keyword_search(["apple-pie"], 10))
    if _on_server(any_location):
        assert set(found) == {adjacent, apart}  # both tokens in the window: a match
    else:
        assert set(found) == {adjacent}  # FTS5's phrase: adjacent, in order


def test_scoped_graph(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, agent_id="a", embedder=None) as memory:
        if _on_server(any_location):
            entity = memory.graph.add_entity("Lisbon", "place")  # its rows carry scope 'a'
            assert memory.graph.entity(entity.id) is not None
        else:
            with pytest.raises(UnsupportedOperationError):
                memory.graph.add_entity("Lisbon", "place")  # a file cannot tell whose


def test_scope_enforcement(any_location: str) -> None:
    with AgentMemoryManager.open(any_location, agent_id="a", embedder=None) as a:
        mine = a.remember("a's own")
    with AgentMemoryManager.open(any_location, agent_id="b", embedder=None) as b:
        assert b.get(mine.id) is None and b.query() == []  # the same on both
        assert b.store.config.scope.agent_id == "b"  # every store's SQL carries it
        if _on_server(any_location):
            with b.store.engine.reading() as conn:
                (forced,) = conn.execute(
                    "SELECT relforcerowsecurity FROM pg_class WHERE relname = 'tm_memories'"
                ).fetchone()
            assert forced  # row-level security: the server hides a's rows (second wall)


def test_trace(any_location: str) -> None:
    seen: list[TracedStatement] = []
    with AgentMemoryManager.open(any_location, trace=seen.append, embedder=None) as memory:
        seen.clear()
        memory.remember("traced")
    inserts = [s for s in seen if "INSERT" in s.sql.upper()]
    assert inserts and all(s.nanoseconds > 0 for s in seen)
    mark = r"%s|%\(\w+\)s" if _on_server(any_location) else r"\?"
    assert any(re.search(mark, s.sql) and s.parameters >= 1 for s in inserts)  # its dialect
