"""Logging: SQLite's own log reaches ``tiered_memory.sqlite``; nothing is printed unless
the application configures logging (the library installs no handler)."""

from __future__ import annotations

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
            with memory.store.read_connection() as conn, pytest.raises(apsw.SQLError):
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
            with memory.store.read_connection() as conn:
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
