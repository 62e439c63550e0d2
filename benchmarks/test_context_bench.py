"""``memory.context(query, max_tokens=N)`` against a plain ``recall()`` of the same depth,
on a LoCoMo-sized file, measured in the same run.

Run: ``.venv/bin/python -m pytest benchmarks/test_context_bench.py`` (a minute or two;
prints the ratio table). Issue 44's target: a context's p50 at most 30 ms with the query
embedding. The file is a conversation the size of a LoCoMo one (``SESSIONS`` sessions of
``TURNS`` turns between two speakers, made up from a fixed vocabulary: the LoCoMo data
may not be shipped), embedded with the default model. Every call asks a question not
asked before, so each one embeds its query (a vector kept from an earlier call would
flatter both sides); the file's memories are read once before (a running agent's
manager holds them in RAM). The raw side is ``recall(query, k)`` with the ``k`` that
``context()`` recalls for that budget (``depth_for``): the ratio is what choosing,
packing and rendering the context add to the recall it starts from.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.smoke import size
from tiered_memory import AgentMemoryManager
from tiered_memory.context.assemble import depth_for

SESSIONS = size(25, 2)
TURNS = size(24, 6)
"""LoCoMo's conversations hold 19-32 sessions of about 20-30 turns (some 600 in all)."""
BUDGETS = (250, 500, 1000, 2000)
ROUNDS = size(40, 1)
PEOPLE = ("Ann", "Bo")
PLACES = ("lake", "museum", "library", "beach", "market", "studio", "park", "harbour")
THINGS = ("painting", "pottery", "canoeing", "guitar", "adoption", "marathon", "garden",
          "camping", "novel", "concert", "bakery", "volunteering")  # fmt: skip
WHEN = ("yesterday", "last week", "on Sunday", "in May", "last summer", "this morning")


def _turn(rng: random.Random, asks: bool) -> str:
    place, thing, when = rng.choice(PLACES), rng.choice(THINGS), rng.choice(WHEN)
    if asks:
        return f"How did the {thing} go at the {place} {when}? Did you enjoy it?"
    return (f"I went to the {place} {when} for {thing}; it was "
            f"{rng.choice(('great', 'tiring', 'fun', 'calm'))} and I met a friend "
            f"who loves {rng.choice(THINGS)}.")  # fmt: skip


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentMemoryManager]:
    path: Path = tmp_path_factory.mktemp("context-bench") / "chat.db"
    rng = random.Random(44)
    memory = AgentMemoryManager.open(path, embed_in_background=False,
                                     recall_review_quality=None)  # fmt: skip
    with memory.transaction():
        for s in range(SESSIONS):
            session = memory.start_session(f"chat {s}").session_id
            for t in range(TURNS):
                memory.remember(_turn(rng, t % 3 == 0), session_id=session,
                                speaker=PEOPLE[t % 2], dedup=False)  # fmt: skip
    memory.flush()
    warm = _questions(seed=1)
    for _ in range(size(30, 1)):  # the manager's RAM copies warm, as in a running agent
        memory.context(next(warm), max_tokens=BUDGETS[-1])
    yield memory
    memory.shutdown()


def _questions(seed: int = 7) -> Iterator[str]:
    """A new question each call (its vector is never cached)."""
    rng = random.Random(seed)
    for n in itertools.count():
        yield (f"When did {rng.choice(PEOPLE)} go to the {rng.choice(PLACES)} for "
               f"{rng.choice(THINGS)}, trip {n}?")  # fmt: skip


@pytest.mark.parametrize("budget", BUDGETS)
def test_context(conversation: AgentMemoryManager, benchmark: Any, record: Any, budget: int
                 ) -> None:  # fmt: skip
    questions = _questions()
    found = benchmark.pedantic(
        lambda: conversation.context(next(questions), max_tokens=budget),
        rounds=ROUNDS, warmup_rounds=min(ROUNDS, 3),
    )  # fmt: skip
    assert found.tokens <= budget and found.memory_ids
    record(f"context {budget} tokens", "library")


@pytest.mark.parametrize("budget", BUDGETS)
def test_recall_of_the_same_depth(
    conversation: AgentMemoryManager, benchmark: Any, record: Any, budget: int
) -> None:
    questions = _questions()
    k = depth_for(budget)
    hits = benchmark.pedantic(
        lambda: conversation.recall(next(questions), k=k), rounds=ROUNDS,
        warmup_rounds=min(ROUNDS, 3),
    )  # fmt: skip
    assert hits
    record(f"context {budget} tokens", "raw")
