"""A short demo of tiered-memory: ``python -m tiered_memory.demo [PATH]``.

Runs the README's quick start against PATH (default ``tiered-memory-demo.db`` in the
current directory, replaced on each run), then reopens the file and shows what survived.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tiered_memory import AgentMemoryManager, Tier

DEFAULT_PATH = "tiered-memory-demo.db"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("path", nargs="?", default=DEFAULT_PATH)
    path = Path(parser.parse_args(argv).path)
    if path == Path(DEFAULT_PATH):
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            leftover.unlink(missing_ok=True)
    print(f"writing the demo to {path.resolve()}\n")

    with AgentMemoryManager.open(path) as memory:
        session = memory.start_session()
        memory.scratchpad.put("goal", "Ship v1 on Friday")
        m = memory.remember(
            "The user prefers dark mode",
            tier=Tier.EPISODIC,
            session_id=session.session_id,
            importance=0.8,
            tags=["ui"],
        )
        memory.remember("The user's cat is called Miso", session_id=session.session_id)
        memory.remember("Quarterly revenue grew 5%", tier=Tier.SEMANTIC)
        memory.append_transcript(session.session_id, "user", "Switch to dark mode please")
        print("recall('which theme does the user like?'):")
        for hit in memory.recall("which theme does the user like?", k=2):
            print(f"  {hit.score:.4f}  {hit.memory.content}\n          why: {hit.explanation}")
        memory.promote(m.id, Tier.SEMANTIC, reason="confirmed")
        schedule = memory.review(m.id, quality=5)
        report = memory.decay()
        memory.end_session(session.session_id)
        print(f"remembered {m.id[:8]}… and promoted it to semantic")
        print(f"next review in {schedule.interval_ms // 86_400_000} day(s), "
              f"ease factor {schedule.ease_factor:.2f}")  # fmt: skip
        print(f"decay pass: checked {report.checked}, forgot {report.forgotten}")

    with AgentMemoryManager.open(path) as memory:  # a restart: everything is durable
        print(f"\nreopened {path.resolve()}")
        goal = memory.scratchpad.get("goal")
        print(f"scratchpad goal: {goal.content if goal else None}")
        fact = memory.get(m.id)
        if fact is not None:
            print(f"memory {m.id[:8]}…: {fact.content!r} in {fact.tier}")
        for record in memory.promotion_history(m.id):
            print(f"promotion log: {record.from_tier} -> {record.to_tier} ({record.reason})")
        for line in memory.get_transcript(session.session_id):
            print(f"transcript turn {line.turn_number} {line.role}: {line.content}")
        counts = memory.statistics().tier_counts
        print("tiers: " + ", ".join(f"{tier.value}={n}" for tier, n in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
