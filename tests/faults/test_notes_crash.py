"""A note write that returned survives SIGKILL: a real process writes and edits notes and
is killed mid-stream; every note it reported is in the file at the version it reported
(with that many versions), and the file is consistent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import spawn_worker
from tiered_memory import AgentMemoryManager


@pytest.mark.crash
@pytest.mark.subprocess
def test_returned_note_writes_survive_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    worker = spawn_worker(str(path), script="notes_worker.py")
    lines = worker.kill(after=1.5)
    reported: dict[str, int] = {}
    for line in lines:
        if line.startswith("NOTE "):
            _, note_id, version = line.split()
            reported[note_id] = max(reported.get(note_id, 0), int(version))
    assert len(reported) >= 3, lines[-5:]
    with AgentMemoryManager.open(path, embedder=None) as memory:
        for note_id, version in reported.items():
            note = memory.notes.get(note_id)
            assert note is not None and note.version >= version
            assert len(memory.notes.history(note_id)) == note.version
        assert memory.check_integrity().ok
        for note in memory.notes.list():
            assert [v.version for v in memory.notes.history(note.id)] == list(
                range(1, note.version + 1)
            )
