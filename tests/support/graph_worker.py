"""Child-process workload for the knowledge graph's crash test (run as a script).

``graph_worker.py DB SEED``: forever, through AgentMemoryManager with the default
extractor run by hand: prints ``READY`` once open, then remembers memories with a caller
relation (prints ``R id name`` once the call returned), forgets some (``f id`` before,
``F id`` after: GC of what they supported), merges two entities (``M keep drop``) and
works the extraction queue off in batches (``X n``).
"""

from __future__ import annotations

import os
import random
import sys

from persistence.sqlite.keyword_index import IDLE_ENV
from tiered_memory import AgentMemoryManager


def _say(*parts: str) -> None:
    print(*parts, flush=True)


def graph(path: str, seed: int) -> None:
    rng = random.Random(seed)
    with AgentMemoryManager.open(
        path, embedder=None, embed_in_background=False, extract_in_background=False
    ) as memory:
        _say("READY")
        mine: list[str] = []
        n = 0
        while True:
            n += 1
            op = rng.random()
            if op < 0.5 or not mine:
                person, place = f"Person{rng.randrange(40)}", f"Place{rng.randrange(40)}"
                friend = f"Friend{rng.randrange(6)}"
                m = memory.remember(
                    f"{person} visited {place} with {friend} on trip {seed}-{n}",
                    relations=[(person, "visited", place)],
                )
                mine.append(m.id)
                _say("R", m.id, person)
            elif op < 0.7:
                victim = mine.pop(rng.randrange(len(mine)))
                _say("f", victim)  # about to forget: may be gone if killed before "F"
                memory.forget(victim)
                _say("F", victim)
            elif op < 0.8:
                keep, drop = f"Friend{rng.randrange(6)}", f"Friend{rng.randrange(6)}"
                if keep != drop and memory.graph.entity(keep) and memory.graph.entity(drop):
                    memory.graph.merge_entities(keep, drop)
                    _say("M", keep, drop)
            else:
                _say("X", str(memory.extraction.flush(batch_size=16)))


if __name__ == "__main__":
    os.environ.pop(IDLE_ENV, None)  # the test process's hour: here the default, merges included
    graph(sys.argv[1], int(sys.argv[2]))
