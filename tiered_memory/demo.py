"""A short demo of the durable store: ``python -m tiered_memory.demo [PATH]``.

Writes a few memories, a session with its transcript and a promotion to PATH
(default ``tiered-memory-demo.db`` in the current directory), reopens the file and
prints what survived.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from persistence import Memory, QueryOptions, SessionState, SQLiteStore, Tier


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default="tiered-memory-demo.db")
    args = parser.parse_args(argv)
    path = Path(args.path)

    with SQLiteStore(path) as store:
        now = store.clock()
        store.put_session(SessionState("demo-session", started_at=now, last_active_at=now))
        store.append_transcript("demo-session", 1, "user", "Please switch to dark mode")
        store.put_scratchpad("goal", Memory.create("Ship v1 on Friday", Tier.SCRATCHPAD))
        fact = store.put_episodic(
            Memory.create(
                "The user prefers dark mode",
                session_id="demo-session",
                importance=0.8,
                tags=("ui", "preferences"),
            )
        )
        store.promote_memory(fact.id, Tier.EPISODIC, Tier.SEMANTIC, reason="confirmed twice")

    with SQLiteStore(path) as store:  # reopen: everything above is durable
        print(f"database: {path.resolve()}")
        goal = store.get_scratchpad("goal")
        print(f"scratchpad goal: {goal.content if goal else None}")
        for memory in store.query_semantic(QueryOptions(tags=("ui",))):
            print(f"semantic [{', '.join(memory.tags)}]: {memory.content}")
        for record in store.get_promotion_history(fact.id):
            print(f"promoted {record.from_tier} -> {record.to_tier}: {record.reason}")
        for line in store.get_transcripts("demo-session"):
            print(f"transcript turn {line.turn_number} {line.role}: {line.content}")
        stats = store.get_statistics()
        print(
            f"counts: scratchpad={stats.scratchpad_count} episodic={stats.episodic_count} "
            f"semantic={stats.semantic_count} sessions={stats.session_count} "
            f"schema=v{stats.schema_version}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
