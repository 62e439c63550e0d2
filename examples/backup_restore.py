"""An operator's backup, verify, restore and export script for a memory file.

What it shows: the steps an operator schedules (cron, a systemd timer) next to a running
agent, through the Python API (the same steps as commands: ``tiered-memory backup``,
``check``, ``restore``, ``export``; docs/guides/backups.md):

1. ``backup(keep=7)``: a ``VACUUM INTO`` snapshot taken while the agent keeps writing,
   checked before it gets its timestamped name; only the newest 7 are kept;
2. verify it: open the snapshot read-only (nothing in it changes), run
   ``check_integrity()`` and count its memories;
3. ``export_json()``: everything in one versioned JSON document, readable anywhere;
4. a mistake (a memory forgotten by accident), then ``restore(snapshot)``: all or
   nothing, and every process with the file open sees the restored content.

    python examples/backup_restore.py              # uses (or creates) ops-agent.db here
    python examples/backup_restore.py agent.db     # your file: backups go to agent-backups/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tiered_memory import AgentMemoryManager, Tier


def seed(memory: AgentMemoryManager) -> None:
    """A few memories, so that a new file has something to back up."""
    if memory.statistics().storage.episodic_count + memory.statistics().storage.semantic_count:
        return
    memory.remember("The user prefers dark mode", tier=Tier.SEMANTIC, importance=0.9)
    memory.remember("The deploy on Friday needs a sign-off from Dana", importance=0.7)
    memory.remember("The user's cat is called Miso")


def verify(snapshot: Path) -> int:
    """Open a snapshot read-only and check it; return how many memories it holds."""
    with AgentMemoryManager.open(snapshot, read_only=True, embedder=None) as copy:
        result = copy.check_integrity()
        if not result.ok:
            raise SystemExit(f"{snapshot} failed its check: {result.problems}")
        stats = copy.statistics().storage
        return stats.episodic_count + stats.semantic_count


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else "ops-agent.db")
    with AgentMemoryManager.open(path, embedder=None) as memory:  # an operator needs no model
        seed(memory)
        snapshot = memory.backup(keep=7)
        print(f"backup: {snapshot} ({snapshot.stat().st_size:,} bytes)")
        print(f"verified: {verify(snapshot)} memories, integrity ok")

        export = memory.export_json(path.with_suffix(".json"), overwrite=True)
        document = json.loads(export.read_text())
        print(f"export: {export} (format version {document['format_version']}, "
              f"{len(document['tables']['episodic'])} episodic, "
              f"{len(document['tables']['semantic'])} semantic)")  # fmt: skip

        [victim] = memory.semantic.query(limit=1)
        memory.forget(victim.id, "by accident")
        print(f"forgot {victim.content!r}: now {len(memory.semantic)} semantic")
        result = memory.restore(snapshot)
        print(f"restored {result.memories} memories from {Path(result.source).name}: "
              f"{victim.content!r} is back: {memory.get(victim.id) is not None}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
