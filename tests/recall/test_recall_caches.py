"""Recall keeps what it reads call after call (the turns' links, the float vectors, the
memories naming an entity) until something commits: another handle's or another
process's write between two calls is seen by the second call."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import FakeClock, managers_at
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.types import RecallHit

EMBEDDER = OnnxEmbedder()  # one model load for the module
ROOT = Path(__file__).resolve().parents[2]

QUESTION = "Where did you travel for the summer holiday?"
ANSWER = "Lisbon, with my sister. We ate pastries every day."
QUERY = "summer holiday travel"
FILLERS = ("The quarterly report is due on Friday", "My cat Miso sleeps all afternoon")


def _signals(hit: RecallHit) -> set[str]:
    return {s.signal for s in hit.explanation.signals}


def _asked(memory: AgentMemoryManager) -> tuple[str, str]:
    """A session whose last turn is a question nobody answered yet: (session, question)."""
    session = memory.start_session().session_id
    for text in FILLERS:
        memory.remember(text, session_id=session, speaker="Melanie")
    question = memory.remember(QUESTION, session_id=session, speaker="Melanie").id
    memory.flush()
    return session, question


def _hits(memory: AgentMemoryManager, query: str) -> dict[str, RecallHit]:
    return {h.memory.id: h for h in memory.recall(query, k=10) if isinstance(h, RecallHit)}


def test_another_handles_write_is_seen_by_the_next_call(
    engine: str, any_location: str, clock: FakeClock
) -> None:
    # PostgreSQL's change watch looks every external_change_check_ms (its RAM copies'
    # freshness, docs/guides/postgresql.md); 0 makes it look at every call.
    fresh = {"external_change_check_ms": 0} if engine == "postgres" else {}
    with managers_at(any_location, clock) as make:
        reader = make(embedder=EMBEDDER, **fresh)
        writer = make(embedder=EMBEDDER, **fresh)
        session, question = _asked(reader)
        reader.remember("Caroline went hiking in the hills", entities=["Caroline"])
        reader.flush()
        before = _hits(reader, QUERY)
        assert question in before
        named = _hits(reader, "What did Caroline do?")
        assert all("graph" in _signals(h) for h in named.values() if "Caroline" in h.memory.content)
        reader.context(QUERY, max_tokens=400)  # every look-up kept once
        answer = writer.remember(ANSWER, session_id=session, speaker="Caroline").id
        adopted = writer.remember("Caroline adopted a puppy", entities=["Caroline"]).id
        writer.flush()
        # The question's turn now has an answer after it: the answer gains adjacency.
        after = _hits(reader, QUERY)
        assert answer in after and "adjacency" in _signals(after[answer])
        context = reader.context(QUERY, max_tokens=400)
        assert answer in context.memory_ids
        # The entity is named by one memory more: it is found through the graph too.
        assert "graph" in _signals(_hits(reader, "What did Caroline do?")[adopted])


def test_another_process_write_is_seen_by_the_next_context(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with AgentMemoryManager.open(path, embedder=EMBEDDER, embed_in_background=False) as reader:
        session, question = _asked(reader)
        first = reader.context(QUERY, max_tokens=400)
        assert question in first.memory_ids
        script = textwrap.dedent(f"""
            from tiered_memory import AgentMemoryManager
            with AgentMemoryManager.open({str(path)!r}, embedder=None) as writer:
                print(writer.remember({ANSWER!r}, session_id={session!r}, speaker="Caroline").id)
        """)  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, timeout=120, check=True)  # fmt: skip
        answer = done.stdout.strip().splitlines()[-1]
        second = reader.context(QUERY, max_tokens=400)  # at once: no check interval waited
        assert answer in second.memory_ids
        reason = second.why(answer)
        assert "answer to a matching question" in reason or f"neighbour of {question}" in reason


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_write_in_a_transaction_is_seen_inside_it_and_a_rollback_is_forgotten(
    where: str, tmp_path: Path
) -> None:
    location = str(tmp_path / "agent.db") if where == "file" else ":memory:"
    with managers_at(location, FakeClock()) as make:
        memory = make(embedder=EMBEDDER)
        session, question = _asked(memory)
        assert "adjacency" not in str(_hits(memory, QUERY))
        with pytest.raises(RuntimeError), memory.transaction():
            answer = memory.remember(ANSWER, session_id=session, speaker="Caroline").id
            inside = _hits(memory, QUERY)  # reads the transaction's own rows, keeps none
            assert answer in inside and "adjacency" in _signals(inside[answer])
            raise RuntimeError("roll back")
        after = _hits(memory, QUERY)
        assert answer not in after
        assert all("adjacency" not in _signals(h) for h in after.values())


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_restore_is_seen_by_the_next_call(where: str, tmp_path: Path) -> None:
    """A restore replaces the file's pages (no row is written in memory): what recall
    kept is read again."""
    location = str(tmp_path / "agent.db") if where == "file" else ":memory:"
    with managers_at(location, FakeClock()) as make:
        memory = make(embedder=EMBEDDER, backup_dir=tmp_path)
        session, question = _asked(memory)
        backup = memory.backup()
        answer = memory.remember(ANSWER, session_id=session, speaker="Caroline").id
        memory.flush()
        assert "adjacency" in _signals(_hits(memory, QUERY)[answer])  # the links kept
        memory.restore(backup)  # the answer is gone again
        after = _hits(memory, QUERY)
        assert answer not in after and question in after
        assert all("adjacency" not in _signals(h) for h in after.values())
        assert memory.context(QUERY, max_tokens=400).memory_ids.count(answer) == 0
