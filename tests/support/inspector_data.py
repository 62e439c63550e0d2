"""A small memory file with a bit of everything the inspector shows: a conversation whose
turns produced memories, promotions, reviews, graph facts asserted by memories, a hub
entity with many relations, a memory holding a script tag, and notes (one edited by two
people, linked to a memory and an entity; one holding a script tag; a few to page)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiered_memory import AgentMemoryManager, Tier

DAY = 86_400_000
START = 1_767_000_000_000
SCRIPT = (
    '<script>window.__pwned = 1; document.title = "pwned"</script>'
    '<img src=x onerror="window.__pwned = 2">'
)

TURNS = [
    (
        "user",
        "Caroline",
        "I went to the adoption agency on Tuesday, it was emotional.",
        "Caroline visited the adoption agency on Tuesday",
        [("Caroline", "visited", "adoption agency")],
        ["family", "adoption"],
    ),
    ("assistant", None, "That sounds like a big step. How did it go?", None, [], []),
    (
        "user",
        "Caroline",
        "Good! Melanie came with me, she paints landscapes in her free time.",
        "Melanie paints landscapes as a hobby",
        [("Melanie", "paints", "landscapes"), ("Melanie", "friend_of", "Caroline")],
        ["hobby"],
    ),
    (
        "user",
        "Caroline",
        "Also my sister moved to Lisbon last month for work.",
        "Caroline's sister moved to Lisbon for work",
        [("Caroline", "sister_lives_in", "Lisbon")],
        ["family"],
    ),
]


class Clock:
    """A clock the builder moves forward by hand."""

    def __init__(self, start: int) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


def open_inspected(location: str | Path, **config: Any) -> AgentMemoryManager:
    """A manager as the inspector's tests open one: read-only unless told, embedding and
    recall's reviews off."""
    config.setdefault("read_only", True)
    return AgentMemoryManager.open(
        location, embed_in_background=False, recall_review_quality=None, **config
    )


def build(
    path: Path | str, *, start: int = START, hub_relations: int = 300, **config: Any
) -> dict[str, Any]:
    """Write the file (or server database) at ``path``; return the ids tests look for."""
    clock = Clock(start)
    with AgentMemoryManager.open(path, clock=clock, embed_in_background=False, **config) as memory:
        return fill(memory, clock, hub_relations=hub_relations)


def fill(memory: AgentMemoryManager, clock: Clock, *, hub_relations: int = 300) -> dict[str, Any]:
    """Write the data through ``memory`` (whose clock is ``clock``); return the ids."""
    ids: dict[str, Any] = {}
    session = memory.start_session(metadata={"user": "caroline"})
    ids["session"] = session.session_id
    for n, (role, speaker, said, fact, relations, tags) in enumerate(TURNS):
        clock.now += 60_000
        memory.append_transcript(session.session_id, role, said, speaker=speaker)
        if fact is not None:
            clock.now += 1000
            m = memory.remember(
                fact, session_id=session.session_id, speaker=speaker, tags=tags,
                importance=0.6 + 0.1 * (n % 3), relations=relations,
                metadata={"turn_text": said[:20]},
            )  # fmt: skip
            ids.setdefault("facts", []).append(m.id)
    again = memory.remember(
        "Caroline went to the adoption agency again with her partner",
        relations=[("Caroline", "visited", "adoption agency")],
        tags=["adoption"],
    )
    ids["again"] = again.id
    prefs = memory.remember(
        "The user prefers dark mode in every editor", Tier.EPISODIC,
        importance=0.9, tags=["preference", "ui"], category="preference",
    )  # fmt: skip
    ids["prefs"] = prefs.id
    clock.now += 2 * DAY
    memory.review(prefs.id, 5)
    memory.promote(prefs.id, Tier.SEMANTIC, reason="stated twice, stable preference")
    ids["script"] = memory.remember(SCRIPT, tags=["<b>odd</b>"], speaker="mallory").id
    ids["weak"] = memory.remember("A passing remark about the weather", importance=0.0).id
    clock.now += 1000
    memory.update(ids["weak"], content="A passing remark about the rainy weather", author="ana")
    for i in range(12):
        memory.remember(f"Filler note {i} about project Atlas milestone {i}",
                        tags=["atlas", f"m{i % 3}"], importance=(i % 5) / 5)  # fmt: skip
    hub = memory.remember(
        "Atlas depends on many services",
        relations=[("Atlas", "depends_on", f"service-{i:03d}") for i in range(hub_relations)],
    )
    ids["hub_memory"] = hub.id
    memory.scratchpad.put("goal", "Ship the inspector by Friday")
    ids["notes"] = write_notes(memory, clock, ids)
    clock.now += 3 * DAY
    memory.flush()
    ids["caroline"] = memory.graph.entity("Caroline").id  # type: ignore[union-attr]
    ids["atlas"] = memory.graph.entity("Atlas").id  # type: ignore[union-attr]
    return ids


ATLAS_NOTES = 6


def write_notes(memory: AgentMemoryManager, clock: Clock, ids: dict[str, Any]) -> dict[str, str]:
    """The sample notes; returns their ids by name."""
    notes = memory.notes
    clock.now += 60_000
    lisbon = notes.create(
        "Lisbon move checklist", "Find a flat near the office\nBook the movers",
        tags=["move", "family"], author="ana", memories=[ids["facts"][2]], entities=["Lisbon"],
    )  # fmt: skip
    clock.now += 60_000
    notes.update(lisbon.id, content="Find a flat near the river\nBook the movers\nNew bank",
                 tags=["move", "family", "urgent"], author="bo")  # fmt: skip
    clock.now += 60_000
    adoption = notes.create(
        "Adoption agency follow-up", "Call the adoption agency on Monday",
        tags=["adoption"], author="caroline", entities=["Caroline"],
    )  # fmt: skip
    clock.now += 60_000
    script = notes.create(SCRIPT, f"pwned note {SCRIPT}", tags=["<b>odd</b>"], author="mallory")
    for i in range(ATLAS_NOTES):
        clock.now += 1000
        notes.create(f"Atlas standup {i}", f"Standup notes for project Atlas, day {i}",
                     tags=["atlas"])  # fmt: skip
    return {"lisbon": lisbon.id, "adoption": adoption.id, "script": script.id}
