"""statistics(): the file and its WAL are both reported (recent commits live in the WAL)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tiered_memory import AgentMemoryManager

pytestmark = [pytest.mark.subprocess]

CLI = str(Path(sys.executable).with_name("tiered-memory"))


def test_statistics_report_the_file_and_its_wal_beside_a_running_agent(db_path: Path) -> None:
    wal = Path(f"{db_path}-wal")
    with AgentMemoryManager.open(db_path, embedder=None) as memory:
        with memory.transaction():
            for i in range(300):
                memory.remember(f"note {i} " + "words " * 300)
        statistics = memory.statistics()
        assert statistics.wal_size_bytes == wal.stat().st_size > 500_000
        assert statistics.file_size_bytes == db_path.stat().st_size
        assert statistics.storage.backend_details["wal_size_bytes"] == statistics.wal_size_bytes
        assert statistics.size_bytes == statistics.storage.size_bytes
        assert statistics.size_bytes == statistics.file_size_bytes + statistics.wal_size_bytes
        shown = subprocess.run([CLI, "stats", str(db_path)], capture_output=True, text=True,
                               timeout=120, check=True).stdout  # fmt: skip
        [size] = re.findall(r"size +(\d+) bytes \(sqlite\)", shown)
        [file_bytes] = re.findall(r"file_size_bytes +(\d+)", shown)
        [wal_bytes] = re.findall(r"wal_size_bytes +(\d+)", shown)
        assert int(wal_bytes) > 500_000 and int(file_bytes) > 0
        assert int(size) == int(file_bytes) + int(wal_bytes)
        as_json = subprocess.run([CLI, "stats", str(db_path), "--json"], capture_output=True,
                                 text=True, timeout=120, check=True).stdout  # fmt: skip
        storage = orjson.loads(as_json)["storage"]
        assert storage["backend"] == "sqlite" and storage["size_bytes"] > 500_000
        assert storage["backend_details"]["wal_size_bytes"] > 500_000
        assert set(storage["backend_details"]) == {
            "file_size_bytes",
            "wal_size_bytes",
            "page_size",
            "page_count",
        }
        memory.maintain()  # checkpoints and truncates the WAL
        after = memory.statistics()
        assert after.wal_size_bytes == 0 and after.file_size_bytes == db_path.stat().st_size
        assert after.file_size_bytes > 500_000
