"""benchmarks/never_pausing.py: its raw floor writes the keyword rows the library writes
(so the ratio compares the same work), and a second run continues the files of the first."""

from __future__ import annotations

import json
from pathlib import Path

import apsw

from benchmarks import never_pausing


def _docsizes(path: Path) -> list[bytes]:
    """Each keyword row's token counts per column (content, context, after), in rowid
    order: what FTS5 indexed for it."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            bytes(row[0]) for row in conn.execute("SELECT sz FROM memory_fts_docsize ORDER BY id")
        ]
    finally:
        conn.close()


def test_the_floor_indexes_the_librarys_window_and_a_rerun_continues(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    never_pausing.main(["--to", "120", "--window", "60", "--sessions", "7", "--dir", str(folder)])
    windows = [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]
    assert [(w["from"], w["to"]) for w in windows] == [(0, 60), (60, 120)]
    library, floor = _docsizes(folder / "library.db"), _docsizes(folder / "floor.db")
    assert len(library) == 120 and library == floor  # same rows, same windows
    never_pausing.main(["--to", "150", "--window", "60", "--sessions", "7", "--dir", str(folder)])
    windows = [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]
    assert (windows[-1]["from"], windows[-1]["to"]) == (120, 150)
    library, floor = _docsizes(folder / "library.db"), _docsizes(folder / "floor.db")
    assert len(library) == 150 and library == floor
