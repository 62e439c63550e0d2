"""benchmarks/never_pausing.py: its raw floors write the keyword rows the library writes,
the write floor also the same rows in every other table (so the ratios compare the same
work), and a second run continues the files of the first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from benchmarks import never_pausing
from tests.support.data_checks import open_raw


def _query(path: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows of ``sql`` on the file at ``path``, opened read-only."""
    conn = open_raw(path, readonly=True)
    try:
        return [tuple(row) for row in conn.execute(sql)]
    finally:
        conn.close()


def _docsizes(path: Path) -> list[bytes]:
    """Each keyword row's token counts per column (content, context, after), in rowid
    order: what FTS5 indexed for it."""
    rows = _query(path, "SELECT sz FROM memory_fts_docsize ORDER BY id")
    return [cast(bytes, row[0]) for row in rows]


_ROWS = (
    "SELECT (SELECT count(*) FROM episodic), (SELECT count(*) FROM memory_index), "
    "(SELECT count(*) FROM content_keys), (SELECT count(*) FROM repetition_schedules), "
    "(SELECT count(*) FROM graph_queue), (SELECT count(*) FROM keyword_dirty), "
    "(SELECT group_concat(session_id || ':' || (last_active_at > 0), ',') FROM "
    "(SELECT * FROM sessions ORDER BY session_id))"
)
"""How many rows each table the write path touches holds, and which sessions were
touched."""

_VALUES = (
    "SELECT e.content, e.token_count, e.session_id, e.importance, e.access_count, "
    "s.interval_ms, s.review_count, s.ease_factor, s.stability_days, "
    "s.next_review_at - e.created_at FROM episodic AS e "
    "JOIN repetition_schedules AS s ON s.memory_id = e.id ORDER BY e.rowid"
)
"""What each memory's row and schedule hold (ids and times aside)."""


def _rows(path: Path) -> tuple[object, ...]:
    return _query(path, _ROWS)[0]


def _values(path: Path) -> list[tuple[object, ...]]:
    return _query(path, _VALUES)


@pytest.mark.slow  # 3.3 s measured on a busy machine
def test_the_floor_indexes_the_librarys_window_and_a_rerun_continues(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    never_pausing.main(["--to", "120", "--window", "60", "--sessions", "7", "--dir", str(folder)])
    windows = [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]
    assert [(w["from"], w["to"]) for w in windows] == [(0, 60), (60, 120)]
    library, floor = _docsizes(folder / "library.db"), _docsizes(folder / "floor.db")
    assert len(library) == 120 and library == floor  # same rows, same windows
    assert _docsizes(folder / "write_floor.db") == library
    assert _rows(folder / "write_floor.db") == _rows(folder / "library.db")
    assert _values(folder / "write_floor.db") == _values(folder / "library.db")
    assert _rows(folder / "library.db")[:6] == (120, 120, 120, 120, 120, 0)
    assert set(windows[0]) >= {"library", "floor", "write_floor"}
    never_pausing.main(["--to", "150", "--window", "60", "--sessions", "7", "--dir", str(folder)])
    windows = [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]
    assert (windows[-1]["from"], windows[-1]["to"]) == (120, 150)
    library, floor = _docsizes(folder / "library.db"), _docsizes(folder / "floor.db")
    assert len(library) == 150 and library == floor
    assert _docsizes(folder / "write_floor.db") == library


def test_a_folder_from_before_the_write_floor_gets_one(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    never_pausing.main(["--to", "40", "--window", "20", "--sessions", "3", "--dir", str(folder)])
    (folder / "write_floor.db").unlink()  # as a run of the two-sided benchmark left it
    for extra in ("-wal", "-shm"):
        (folder / f"write_floor.db{extra}").unlink(missing_ok=True)
    never_pausing.main(["--to", "60", "--window", "20", "--sessions", "3", "--dir", str(folder)])
    assert _docsizes(folder / "write_floor.db") == _docsizes(folder / "library.db")
    assert _rows(folder / "write_floor.db")[0] == 60
