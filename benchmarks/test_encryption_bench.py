"""remember() and recall() on an encrypted file vs a plain one, in the same run.

Run: ``.venv/bin/python -m pytest benchmarks/test_encryption_bench.py -s``. Both files
are written and searched alternately, a block of calls at a time, so that load on a
shared machine falls on both sides alike. Recall ranks by keywords and by vectors from a
hash stand-in for the model (``tests/support/worker.py``'s ``HashEmbedder``, no model run), so
the cost measured is the storage's, where the cipher works. Prints the ratios; there is no target.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from benchmarks.smoke import size
from tests.support.worker import HashEmbedder
from tiered_memory import AgentMemoryManager

CALLS = size(4_000, 40)
QUERIES = size(400, 5)
BLOCK = size(200, 10)
DIM = 64
TEXT = (
    "the user moved to a new flat last week and talked about pottery classes the camping "
    "trip secret recipes a dentist appointment the gym app the blue pot and the shed"
)
WORDS = TEXT.split()


def test_remember_and_recall_encrypted_vs_plain(tmp_path: Path) -> None:
    rng = random.Random(7)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) for _ in range(CALLS)]
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(QUERIES)]
    options = {
        "embedder": HashEmbedder("bench", DIM),
        "embed_in_background": False,
        "recall_review_quality": None,
    }
    write = {"encrypted": 0.0, "plain": 0.0}
    read = {"encrypted": 0.0, "plain": 0.0}
    with (
        AgentMemoryManager.open(tmp_path / "enc.db", key="benchmark key", **options) as enc,
        AgentMemoryManager.open(tmp_path / "plain.db", **options) as plain,
    ):
        sides = (("encrypted", enc), ("plain", plain))
        for n, start in enumerate(range(0, CALLS, BLOCK)):
            for side, memory in sides if n % 2 else sides[::-1]:
                begin = time.perf_counter()
                for text in texts[start : start + BLOCK]:
                    memory.remember(text)
                memory.flush()  # embeds the block (the vectors are written too)
                write[side] += time.perf_counter() - begin
        step = max(BLOCK // 10, 1)
        for n, start in enumerate(range(0, QUERIES, step)):
            for side, memory in sides if n % 2 else sides[::-1]:
                begin = time.perf_counter()
                for query in queries[start : start + step]:
                    assert memory.recall(query, k=5)
                read[side] += time.perf_counter() - begin
    for name, spent, count in (("remember", write, CALLS), ("recall", read, QUERIES)):
        rate = {side: count / seconds for side, seconds in spent.items()}
        print(
            f"\n{name}() x{count}: encrypted {rate['encrypted']:,.0f}/s, plain "
            f"{rate['plain']:,.0f}/s (encrypted at {rate['encrypted'] / rate['plain']:.1%})"
        )
