"""A database with a bit of everything in it, for backup and import tests."""

from __future__ import annotations

from persistence import Tier
from tests.conftest import FakeClock
from tiered_memory import AgentMemoryManager

DAY = 86_400_000


def populate(memory: AgentMemoryManager, clock: FakeClock, n: int = 5) -> None:
    """A bit of everything: all tiers, embeddings, sessions, transcripts, logs."""
    session = memory.start_session(metadata={"user": "ann"})
    for i in range(n):
        clock.advance(1000)
        m = memory.remember(
            f"fact {i} ünïcode",
            session_id=session.session_id,
            tags=[f"t{i % 2}"],
            embedding=[0.5 * i, 1.0, -2.0],
            metadata={"i": i, "nested": [1, {"x": None}]},
            importance=(i % 10) / 10,
        )
        if i % 2:
            memory.promote(m.id, Tier.SEMANTIC, reason=f"because {i}")
        memory.review(m.id, i % 6)
        memory.append_transcript(session.session_id, "user", f"line {i}")
    memory.scratchpad.put("goal", "Ship it", tags=["plan"])
    doomed = memory.remember("doomed", importance=0.0)
    memory.link(doomed.id, memory.scratchpad.get("goal").id)  # type: ignore[union-attr]
    clock.advance(30 * DAY)
    memory.decay()
    fresh = memory.remember("fresh after decay", embedding=[1.0, 2.0, 3.0], tags=["t0"])
    memory.review(fresh.id, 5)
