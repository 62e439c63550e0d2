"""Facts that change: ``remember(supersedes=)``, recall of what is true now or then
(``include_superseded``, ``as_of``), the timeline, on every engine (issue 43)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FakeClock
from tests.support.backends import snapshot
from tiered_memory import AgentMemoryManager, RecallSettings, Tier
from tiered_memory.errors import InvalidSupersessionError, InvalidTypeError

DIM = 32


class WordEmbedder:
    """A deterministic model: a text's vector is the normalised sum of its words' own
    random vectors, so texts sharing words are near."""

    model_id = "test-words"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([_text_vector(t) for t in texts])


def _word_vector(word: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def _text_vector(text: str) -> np.ndarray:
    total = sum((_word_vector(w) for w in text.lower().split()), np.zeros(DIM, np.float32))
    return (total / max(float(np.linalg.norm(total)), 1e-9)).astype(np.float32)


def test_supersedes_marks_the_older_memory_and_keeps_it(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    old = memory.remember("The user lives in Paris", importance=0.7, source="chat")
    schedule = memory.schedule(old.id)
    clock.advance(60_000)
    new = memory.remember("The user lives in Berlin now", supersedes=old.id)
    kept = memory.get(old.id)
    assert kept is not None and not kept.current
    assert (kept.superseded_by, kept.valid_to, kept.superseded_reason) == (
        new.id, new.created_at, "supersedes"
    )  # fmt: skip
    assert kept.valid_from == old.created_at
    assert (kept.content, kept.importance, kept.source) == (old.content, 0.7, "chat")
    assert memory.schedule(old.id) == schedule
    assert new.current and new.valid_to is None
    assert [m.id for m in memory.store.memories.superseded_of(new.id)] == [old.id]


def test_supersedes_several_at_once_and_survives_a_reopen(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory()
    a = memory.remember("Ana works at Acme")
    b = memory.remember("Ana works at Acme in sales", tier=Tier.SEMANTIC)
    clock.advance(1000)
    new = memory.remember("Ana works at Initech", supersedes=[a.id, b.id, a.id])
    location = memory.location
    if location != ":memory:":
        memory.shutdown()
        memory = make_memory()
    for old in (a, b):
        found = memory.get(old.id)
        assert found is not None and found.superseded_by == new.id
        assert found.valid_to == new.created_at
    assert memory.store.memories.has_superseded()


@pytest.mark.parametrize(
    "case", ["unknown", "forgotten", "other agent", "scratchpad", "twice", "empty", "type"]
)
def test_a_bad_supersedes_raises_and_changes_nothing(memory: AgentMemoryManager, case: str) -> None:
    old = memory.remember("The user prefers dark mode")
    gone = memory.remember("A forgotten fact")
    memory.forget(gone.id)
    theirs = memory.remember("Bo prefers tea", agent_id="bo")
    pad = memory.remember("scratch", tier=Tier.SCRATCHPAD, key="k")
    taken = memory.remember("The user prefers light mode", supersedes=old.id)
    target: Any = {
        "unknown": "no-such-id", "forgotten": gone.id, "other agent": theirs.id,
        "scratchpad": pad.id, "twice": old.id, "empty": [], "type": 7,
    }[case]  # fmt: skip
    before = snapshot(memory.store)
    error = InvalidTypeError if case == "type" else InvalidSupersessionError
    with pytest.raises(error) as caught:
        memory.remember("The user prefers solarized", supersedes=target)
    assert snapshot(memory.store) == before
    if case == "forgotten":
        assert "forgotten" in str(caught.value)
    if case == "twice":
        assert taken.id in str(caught.value)
    assert memory.get(old.id).superseded_by == taken.id  # type: ignore[union-attr]


def test_a_scratchpad_entry_cannot_supersede(memory: AgentMemoryManager) -> None:
    old = memory.remember("The user lives in Paris")
    with pytest.raises(InvalidSupersessionError):
        memory.remember("Berlin", tier=Tier.SCRATCHPAD, key="city", supersedes=old.id)
    assert memory.get(old.id).current  # type: ignore[union-attr]


def _history(memory: AgentMemoryManager, clock: FakeClock) -> tuple[list[str], list[str], int]:
    """Twelve memories about tea, all superseded at ``moment`` by one that mentions tea
    once, and two other current tea memories: the superseded ones are the best matches."""
    old = [memory.remember(f"tea tea tea at breakfast day {i}").id for i in range(12)]
    clock.advance(10_000)
    moment = clock.now
    clock.advance(10_000)
    new = memory.remember("no tea anymore: coffee", supersedes=old)
    others = [memory.remember("tea sometimes in winter").id,
              memory.remember("green tea for guests").id]  # fmt: skip
    memory.flush()
    return old, [new.id, *others], moment


@pytest.mark.parametrize("embedder", [None, "words"])
def test_recall_answers_with_current_memories_exactly(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock, embedder: str | None
) -> None:
    """Each search leg is cut to 4 candidates and the 12 best matches are superseded: a
    filter after the legs' LIMIT would leave nothing; inside them, the 3 current ones."""
    settings = RecallSettings(depth=4, vector_depth=4)
    memory = make_memory(embedder=WordEmbedder() if embedder else None, recall=settings)
    old, current, moment = _history(memory, clock)
    hits = memory.recall("tea", 3)
    assert sorted(h.memory.id for h in hits) == sorted(current)
    (newest,) = [h for h in hits if h.memory.id == current[0]]
    assert any(n.startswith("supersedes ") and old[0] in n for n in newest.explanation.notes)

    everything = memory.recall("tea", 5, include_superseded=True)
    superseded = [h for h in everything if h.memory.id in old]
    assert superseded, "the superseded memories compete again"
    for hit in superseded:
        assert any(n.startswith(f"superseded by {current[0]} on ") for n in hit.explanation.notes)

    then = memory.recall("tea", 3, as_of=moment)  # before the change: the old ones only
    assert {h.memory.id for h in then} <= set(old) and len(then) == 3


def test_as_of_before_anything_finds_nothing_and_bad_values_raise(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    first = memory.remember("The user lives in Paris")
    assert memory.recall("Paris", 3, as_of=first.created_at - 1) == []
    assert [h.memory.id for h in memory.recall("Paris", 3, as_of=first.created_at)] == [first.id]
    for bad in (-1, "yesterday", 1.5):
        with pytest.raises(InvalidTypeError if not isinstance(bad, int) else ValueError):
            memory.recall("Paris", as_of=bad)
    with pytest.raises(InvalidTypeError):
        memory.recall("Paris", include_superseded="yes")  # type: ignore[call-overload]


def test_timeline_follows_the_chain_both_ways(memory: AgentMemoryManager, clock: FakeClock) -> None:
    a = memory.remember("Ana lives in Lisbon")
    clock.advance(1000)
    b = memory.remember("Ana lives in Porto", supersedes=a.id)
    clock.advance(1000)
    c = memory.remember("Ana lives in Faro", supersedes=b.id)
    for start in (a, b, c):
        chain = memory.timeline(start.id)
        assert [e.memory_id for e in chain] == [a.id, b.id, c.id]
    first, middle, last = memory.timeline(b.id)
    assert (first.valid_to, first.superseded_by, first.reason) == (b.created_at, b.id, "supersedes")
    assert middle.supersedes == (a.id,) and middle.superseded_by == c.id
    assert last.current and last.valid_from == c.created_at and last.supersedes == (b.id,)
    assert memory.timeline("unknown") == []
    lone = memory.remember("unrelated")
    assert [e.memory_id for e in memory.timeline(lone.id)] == [lone.id]


def test_forgetting_a_superseded_memory_leaves_the_chain_readable(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    a = memory.remember("Ana lives in Lisbon")
    clock.advance(1000)
    b = memory.remember("Ana lives in Porto", supersedes=a.id)
    assert memory.forget(a.id)
    assert [e.memory_id for e in memory.timeline(b.id)] == [b.id]
    assert memory.get(b.id).current  # type: ignore[union-attr]
    assert [h.memory.id for h in memory.recall("Ana lives", 3)] == [b.id]


def test_erasing_a_session_or_an_agent_forgets_superseded_memories_too(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    """forget_session/forget_agent collect ids with query(), which lists current memories
    by default: a superseded memory must be erased with the rest."""
    session = memory.start_session().session_id
    old = memory.remember("Ana lives in Lisbon", agent_id="ana", session_id=session)
    clock.advance(1000)
    new = memory.remember("Ana lives in Porto", agent_id="ana", supersedes=old.id)
    assert set(memory.forget_session(session).memories) == {old.id}
    assert memory.get(old.id) is None
    clock.advance(1000)
    older = memory.remember("Ana works at the bakery", agent_id="ana")
    clock.advance(1000)
    newer = memory.remember("Ana works at the library", agent_id="ana", supersedes=older.id)
    assert set(memory.forget_agent("ana").memories) == {new.id, older.id, newer.id}
    assert memory.query(include_superseded=True) == []
    assert memory.recall("Ana", 5, include_superseded=True) == []


def test_export_and_import_carry_supersession(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock, tmp_path: Path
) -> None:
    memory = make_memory()
    a = memory.remember("The user lives in Paris")
    clock.advance(5000)
    b = memory.remember("The user lives in Berlin", supersedes=a.id)
    exported = memory.export_json(tmp_path / "out.json")
    memory.import_json(exported, "replace")
    again = memory.get(a.id)
    assert again is not None
    assert (again.superseded_by, again.valid_to, again.superseded_reason) == (
        b.id, b.created_at, "supersedes"
    )  # fmt: skip
    assert [h.memory.id for h in memory.recall("user lives", 3)] == [b.id]


def test_forgetting_the_newer_memory_leaves_the_older_superseded(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    a = memory.remember("Ana lives in Lisbon")
    clock.advance(1000)
    b = memory.remember("Ana lives in Porto", supersedes=a.id)
    assert memory.forget(b.id)
    old = memory.get(a.id)
    assert old is not None and old.superseded_by == b.id and not old.current
    assert memory.recall("Ana lives", 3) == []
    assert [e.memory_id for e in memory.timeline(a.id)] == [a.id]
    assert [h.memory.id for h in memory.recall("Ana lives", 3, include_superseded=True)] == [a.id]


def test_copy_memory_carries_supersession_between_engines(
    any_location: str, clock: FakeClock, tmp_path: Path
) -> None:
    """From a file or a PostgreSQL database into a new file."""
    from tiered_memory.copying import copy_memory

    with AgentMemoryManager.open(any_location, clock=clock, embedder=None) as memory:
        a = memory.remember("The user lives in Paris")
        clock.advance(5000)
        b = memory.remember("The user lives in Berlin", supersedes=a.id)
    copy_memory(any_location, tmp_path / "copy.db")
    with AgentMemoryManager.open(tmp_path / "copy.db", embedder=None) as copied:
        again = copied.get(a.id)
        assert again is not None and (again.superseded_by, again.valid_to) == (
            b.id, b.created_at
        )  # fmt: skip
        assert [e.memory_id for e in copied.timeline(b.id)] == [a.id, b.id]


def test_a_fact_true_again_is_a_new_current_memory_not_the_superseded_twin(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    paris = memory.remember("Ana lives in Paris")
    clock.advance(1000)
    berlin = memory.remember("Ana lives in Berlin", supersedes=paris.id)
    clock.advance(1000)
    again = memory.remember("Ana lives in Paris")  # deduplicated, but not into the old one
    assert again.id != paris.id and again.current
    assert {h.memory.id for h in memory.recall("Ana lives", 3)} == {again.id, berlin.id}
    memory.consolidate()  # no near-duplicate merge across a supersession
    assert memory.get(again.id) is not None and memory.get(paris.id) is not None
    assert {h.memory.id for h in memory.recall("Ana lives", 3)} == {again.id, berlin.id}


def test_the_forgetting_curve_still_retires_a_superseded_memory(
    memory: AgentMemoryManager, clock: FakeClock
) -> None:
    """A superseded memory is not forgotten, but it is not kept forever either: decay
    walks it like any memory (issue 43, point 1)."""
    old = memory.remember("Ana lives in Lisbon")
    clock.advance(1000)
    new = memory.remember("Ana lives in Porto", supersedes=old.id)
    clock.advance(400 * 86_400_000)
    report = memory.decay()
    assert set(report.forgotten_ids) == {old.id, new.id}
    assert memory.get(old.id) is None and memory.timeline(new.id) == []
    [logged] = memory.forgetting_log(old.id)
    assert logged.reason.startswith("decay")


def test_promotion_keeps_the_chain(memory: AgentMemoryManager, clock: FakeClock) -> None:
    """Promoting either end of a chain to the semantic tier (another table on a file)
    keeps ``superseded_by``, ``valid_to``, the reason and the timeline."""
    old = memory.remember("Ana lives in Lisbon")
    clock.advance(1000)
    new = memory.remember("Ana lives in Porto", supersedes=old.id)
    for memory_id in (old.id, new.id):
        memory.promote(memory_id, Tier.SEMANTIC, reason="learned")
    kept = memory.get(old.id)
    assert kept is not None and kept.tier is Tier.SEMANTIC
    assert (kept.superseded_by, kept.valid_to, kept.superseded_reason) == (
        new.id, new.created_at, "supersedes"
    )  # fmt: skip
    assert [e.memory_id for e in memory.timeline(new.id)] == [old.id, new.id]
    assert [h.memory.id for h in memory.recall("Ana lives", 3)] == [new.id]
