"""Logging: SQLite's own log reaches ``tiered_memory.sqlite``; nothing is printed unless
the application configures logging (the library installs no handler)."""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from persistence.sqlite.log import route_sqlite_log
from tiered_memory import AgentMemoryManager


def test_sqlite_log_messages_reach_the_tiered_memory_sqlite_logger(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tiered_memory")
    with AgentMemoryManager.open(db_path, embedder=None) as memory:  # opening routes it
        for table in ("no_such_table_here", "nor_this_one"):
            with memory.store.engine.reading() as conn, pytest.raises(apsw.SQLError):
                conn.execute(f"SELECT * FROM {table}")
            route_sqlite_log()  # a second call is harmless: routing stays as it was
    for table in ("no_such_table_here", "nor_this_one"):
        logged = [r for r in caplog.records if table in r.getMessage()]
        assert logged and {r.name for r in logged} == {"tiered_memory.sqlite"}
        assert max(r.levelno for r in logged) <= logging.INFO  # routine: not printed by default


@pytest.mark.slow
@pytest.mark.subprocess
def test_nothing_is_printed_when_the_application_configures_no_logging(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import apsw
        from tiered_memory import AgentMemoryManager
        with AgentMemoryManager.open({str(tmp_path / "a.db")!r}, embedder=None) as memory:
            memory.remember("x")
            with memory.store.engine.reading() as conn:
                try:
                    conn.execute("SELECT * FROM no_such_table_here")
                except apsw.SQLError:
                    pass
        import logging
        assert logging.getLogger("tiered_memory").handlers == []
        assert logging.getLogger().handlers == []
        print("done")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, "done\n", "")


_ROUTINE = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)  # as an MCP server does
import apsw
from tiered_memory import AgentMemoryManager
path = sys.argv[1]
with AgentMemoryManager.open(path, embedder=None) as memory:  # migrating changes the schema
    memory.remember("a memory")
    one, two = apsw.Connection(path), apsw.Connection(path)
    one.execute("CREATE TABLE x(a); CREATE TABLE y(b); INSERT INTO x VALUES (1), (2);"
                "INSERT INTO y VALUES (1)")
    join = "SELECT count(*) FROM x JOIN y ON x.a = y.b"  # an automatic index on y(b)
    one.execute(join).fetchall()
    two.execute("CREATE TABLE z(c)")
    one.execute(join).fetchall()  # re-prepared: the schema changed
    apsw.log(apsw.SQLITE_NOTICE_RECOVER_WAL, "a message worth showing")
    one.close(); two.close()
print("done")
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_routine_sqlite_notices_stay_off_an_info_stderr(tmp_path: Path) -> None:
    """Schema-changed and automatic-index notices go at DEBUG: an application showing
    INFO on stderr (an MCP server) does not print them; other SQLite messages it does."""
    result = subprocess.run(
        [sys.executable, "-c", _ROUTINE, str(tmp_path / "a.db")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "database schema has changed" not in result.stderr
    assert "automatic index" not in result.stderr
    assert "INFO:tiered_memory.sqlite:SQLITE_LOG: a message worth showing" in result.stderr


def test_routine_notices_are_debug_and_others_info(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tiered_memory")
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        with memory.store.engine.reading() as conn:
            conn.execute("CREATE TEMP TABLE x(a); CREATE TEMP TABLE y(b)")
            conn.execute("INSERT INTO x VALUES (1); INSERT INTO y VALUES (1)")
            conn.execute("SELECT count(*) FROM x JOIN y ON x.a = y.b").fetchall()
        apsw.log(apsw.SQLITE_NOTICE_RECOVER_WAL, "recovered frames")
    levels = {
        r.getMessage().split(" (")[0]: r.levelno
        for r in caplog.records
        if r.name == "tiered_memory.sqlite"
    }
    assert levels["SQLITE_LOG: automatic index on y(b)"] == logging.DEBUG
    assert levels["SQLITE_LOG: recovered frames"] == logging.INFO


@pytest.mark.slow  # 2.9 s measured on a busy machine
def test_every_logger_of_the_library_is_under_tiered_memory() -> None:
    """Every ``getLogger(...)`` in the packages names a logger in the ``tiered_memory``
    tree (``__name__`` only where the module itself is in it)."""
    root = Path(__file__).resolve().parents[3]
    wrong = []
    for package in ("tiered_memory", "persistence", "migrations"):
        for file in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(file.read_text())):
                if not (
                    isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "getLogger"
                ):
                    continue
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("tiered_memory"):
                    continue
                if (
                    isinstance(arg, ast.Name)
                    and arg.id == "__name__"
                    and package == "tiered_memory"
                ):
                    continue
                wrong.append(f"{file.relative_to(root)}:{node.lineno}")
    assert wrong == []


@pytest.mark.slow
@pytest.mark.subprocess
def test_building_the_compact_model_logs_nothing_on_the_root_logger(tmp_path: Path) -> None:
    """onnxruntime's quantizer logs on the root logger (and so would install a handler on
    it with basicConfig): its records go under ``tiered_memory.compact_model`` instead."""
    script = textwrap.dedent(
        f"""
        import logging
        from pathlib import Path
        seen = []
        class Keep(logging.Handler):
            def emit(self, record):
                seen.append(record.name)
        logging.getLogger("tiered_memory").addHandler(Keep())
        logging.getLogger("tiered_memory").setLevel(logging.DEBUG)
        from tiered_memory.embedding import compact_model
        compact_model.build(Path({str(tmp_path)!r}))
        assert logging.getLogger().handlers == [], logging.getLogger().handlers
        assert set(seen) == {{"tiered_memory.compact_model"}} and len(seen) >= 3, seen
        print("done")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, "done\n", "")


_OPEN_DAMAGED = """
import sys
from tiered_memory import AgentMemoryManager, TieredMemoryError
try:
    AgentMemoryManager.open(sys.argv[1], embedder=None)
except TieredMemoryError as exc:
    print(type(exc).__name__)
"""


@pytest.mark.slow  # 7.9 s measured on a busy machine
@pytest.mark.subprocess
def test_a_schema_that_is_not_utf8_prints_no_traceback(tmp_path: Path) -> None:
    """SQLite quotes a damaged schema's text in its log; APSW could not decode it and
    printed a traceback per message on stderr (14 for one ``tiered-memory check``, found
    by ``benchmarks/fuzz.py``'s damaged pages). The call's own error is unchanged."""
    db = tmp_path / "schema.db"
    with AgentMemoryManager.open(db, embedder=None) as memory:
        memory.remember("hello")
    data = bytearray(db.read_bytes())
    at = data.index(b"CREATE TABLE schema_version")
    data[at + 20] = 0xCE  # not UTF-8
    db.write_bytes(bytes(data))
    root = Path(__file__).resolve().parents[3]
    for args in (["-c", _OPEN_DAMAGED, str(db)], ["-m", "tiered_memory", "check", str(db)],
                 ["-m", "tiered_memory", "check", str(db), "--json"]):  # fmt: skip
        result = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                timeout=120, cwd=root)  # fmt: skip
        assert "Traceback" not in result.stderr, result.stderr[-2000:]
        assert "UnicodeDecodeError" not in result.stderr
        if args[0] == "-c":
            assert result.stdout.strip() == "CorruptDatabaseOpenError"
        else:
            said = (result.stdout + result.stderr).replace(str(db), "DB")  # not the path's words
            assert result.returncode == 1 and "damaged" in said
