"""The SQL tracer: ``AgentMemoryManager.open(..., trace=callback)`` reports each statement
the library runs, with its parameters' count and its time."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from persistence import InvalidTypeError, TracedStatement
from tiered_memory import AgentMemoryManager


def test_each_statement_is_reported_with_its_parameters_and_time(tmp_path: Path) -> None:
    seen: list[TracedStatement] = []
    with AgentMemoryManager.open(tmp_path / "a.db", trace=seen.append, embedder=None) as memory:
        seen.clear()  # opening the file ran its own statements
        m = memory.remember("the lighthouse keeper waves")
        inserts = [s for s in seen if s.sql.lstrip().upper().startswith("INSERT")]
        assert inserts, [s.sql for s in seen]
        assert all(s.nanoseconds > 0 for s in seen)
        [row] = [s for s in inserts if f"INTO {m.tier.value} " in s.sql]  # the tier's table
        assert row.parameters > 10  # one per column
        plain = [s for s in seen if "?" in s.sql and not re.search(r"\?\d|[:@$]\w", s.sql)]
        assert plain and all(s.parameters == s.sql.count("?") for s in plain)
        assert seen[-1].sql.strip().upper() == "COMMIT"
        assert seen[-1].parameters == 0
    with AgentMemoryManager.open(tmp_path / "a.db", trace=seen.append, embedder=None) as memory:
        seen.clear()
        assert memory.get(m.id) is not None  # not cached yet: read from the file
        reads = [s for s in seen if s.sql.lstrip().upper().startswith("SELECT")]
        assert reads and all(s.milliseconds == s.nanoseconds / 1e6 for s in reads)
        [read] = [s for s in reads if m.tier.value in s.sql]  # one statement looks it up
        assert read.parameters >= 1


def test_statements_run_inside_another_one_are_not_reported_on_their_own(
    tmp_path: Path,
) -> None:
    seen: list[TracedStatement] = []
    with AgentMemoryManager.open(tmp_path / "a.db", trace=seen.append, embedder=None) as memory:
        for i in range(5):
            memory.remember(f"keyword index {i}")
        memory.recall("keyword", k=3)
    assert seen
    # FTS5 keeps its segments in shadow tables: it writes and reads them inside the
    # statements that touch the index, which the tracer reports once each.
    assert not [s.sql for s in seen if "_data'" in s.sql or "_idx'" in s.sql]


def test_a_callback_that_raises_is_logged_and_breaks_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def broken(statement: TracedStatement) -> None:
        calls.append(statement)
        raise RuntimeError("tracer bug")

    path = tmp_path / "a.db"
    with (
        caplog.at_level(logging.ERROR, logger="tiered_memory.trace"),
        AgentMemoryManager.open(path, trace=broken, embedder=None) as memory,
    ):
        m = memory.remember("still stored")
        assert memory.recall("stored", k=1)
    assert len(calls) > 3
    assert len([r for r in caplog.records if "trace callback failed" in r.message]) == 1
    with AgentMemoryManager.open(tmp_path / "a.db", embedder=None) as memory:
        assert memory.get(m.id) is not None


def test_a_trace_that_is_not_callable_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvalidTypeError, match="trace must be callable"):
        AgentMemoryManager.open(tmp_path / "a.db", trace="print")  # type: ignore[arg-type]
    assert not (tmp_path / "a.db").exists()


def test_without_a_trace_no_connection_is_traced(tmp_path: Path) -> None:
    seen: list[TracedStatement] = []
    with AgentMemoryManager.open(tmp_path / "a.db", embedder=None) as memory:
        memory.remember("untraced")
        assert memory.store.engine.writer is not None
        assert memory.store.engine.writer.exec_trace is None
    with AgentMemoryManager.open(tmp_path / "a.db", trace=seen.append, embedder=None) as memory:
        assert memory.store.engine.writer is not None
        assert memory.store.engine.writer.exec_trace is not None
        assert memory.query() and seen


def test_an_in_memory_manager_traces_too() -> None:
    seen: list[TracedStatement] = []
    with AgentMemoryManager.in_memory(trace=seen.append, embedder=None) as memory:
        memory.remember("in RAM")
    assert any(s.sql.lstrip().upper().startswith("INSERT") for s in seen)


def test_a_key_is_never_handed_to_the_trace(tmp_path: Path) -> None:
    seen: list[TracedStatement] = []
    path = tmp_path / "secret.db"
    with AgentMemoryManager.open(path, key="old key", trace=seen.append, embedder=None) as memory:
        memory.remember("kept under a key")
        memory.rekey("NEW-SECRET-KEY")
        memory.remember("after the rekey")
    assert seen
    texts = " ".join(s.sql for s in seen).lower()
    for secret in ("old key", "new-secret-key", b"old key".hex(), b"NEW-SECRET-KEY".hex()):
        assert secret.lower() not in texts
    assert "key" not in {s.sql.split("(")[0].split()[-1].strip('"').lower() for s in seen}
    with AgentMemoryManager.open(path, key="NEW-SECRET-KEY", embedder=None) as memory:
        assert len(memory.query()) == 2


def test_both_engines_report_each_statement_with_its_parameters_and_time(
    any_location: str,
) -> None:
    seen: list[TracedStatement] = []
    with AgentMemoryManager.open(any_location, trace=seen.append, embedder=None) as memory:
        seen.clear()  # opening ran its own statements
        m = memory.remember("the lighthouse keeper waves")
        with memory.transaction():
            memory.remember("a second one, in a transaction")
        assert memory.recall("lighthouse", k=1)
    texts = [s.sql.lstrip().upper() for s in seen]
    assert any(t.startswith("INSERT") or "INSERT INTO" in t for t in texts), texts
    assert any("COMMIT" in t for t in texts), texts
    assert all(s.nanoseconds > 0 for s in seen)
    marks = "?" if any_location.endswith(".db") else "%s"
    # statements with one kind of mark and no quoted text: one parameter per mark
    plain = [s for s in seen if marks in s.sql and not re.search(r"'|\?\d|[:@$]\w|%\(", s.sql)]
    assert plain and all(s.parameters == s.sql.count(marks) for s in plain)
    with AgentMemoryManager.open(any_location, trace=seen.append, embedder=None) as memory:
        seen.clear()
        assert memory.get(m.id) is not None
    assert any(s.sql.lstrip().upper().startswith("SELECT") and s.parameters >= 1 for s in seen)


def test_a_traced_server_store_reports_a_broken_callback_once(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(statement: TracedStatement) -> None:
        raise RuntimeError("tracer bug")

    with (
        caplog.at_level(logging.ERROR, logger="tiered_memory.trace"),
        AgentMemoryManager.open(pg_url, trace=broken, embedder=None) as memory,
    ):
        m = memory.remember("still stored")
        assert memory.get(m.id) is not None
    assert len([r for r in caplog.records if "trace callback failed" in r.message]) == 1


def test_an_untraced_server_store_uses_plain_connections(pg_url: str) -> None:
    from persistence.postgres.tracing import TracedConnection

    with (
        AgentMemoryManager.open(pg_url, embedder=None) as memory,
        memory.store.engine.reading() as conn,
    ):
        assert not isinstance(conn, TracedConnection)
    with (
        AgentMemoryManager.open(pg_url, trace=lambda s: None, embedder=None) as traced,
        traced.store.engine.reading() as conn,
    ):
        assert isinstance(conn, TracedConnection) and conn.tracer is not None
