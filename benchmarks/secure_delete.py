"""What "forget means forgotten" costs: remember, forget and close with the erasure
measures on and off, in one run, on the same data.

Run from the repository root (about a minute at the default size)::

    .venv/bin/python -m benchmarks.secure_delete --memories 5000 --forgets 500

"on" is the library as shipped (``secure_delete``, FTS5 ``secure-delete``, the keyword
index rewritten at close after a forget, the WAL truncated at close). "off" is the same
code with those measures patched out (the behaviour before them): the raw baseline.
Vectors are 384-d, from a seeded generator keyed by the text (no model runs). Each
figure is the median of ``--repeats`` fresh files; the ratio is on / off.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from tiered_memory import AgentMemoryManager

DIM = 384


class SeededEmbedder:
    model_id = "bench-seeded"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            rows.append(vector / np.linalg.norm(vector))
        return np.stack(rows)


@contextmanager
def erasure_off() -> Iterator[None]:
    """The library without the erasure measures (as before them)."""

    def nothing(*_args: object) -> None:
        return None

    def no_secure_delete(conn: object) -> None:
        conn.pragma("secure_delete", "OFF")  # type: ignore[attr-defined]

    with (
        mock.patch("persistence.sqlite.connection.connection_secure_delete", no_secure_delete),
        mock.patch("persistence.sqlite.store.fts_secure_delete", nothing),
        mock.patch("persistence.sqlite.store.cache_erasure_triggers", nothing),
        mock.patch("persistence.sqlite.store.pending_triggers", nothing),
        mock.patch("persistence.sqlite.store.erase_pending", nothing),
        mock.patch("persistence.sqlite.database.erase_at_close", nothing),
    ):
        yield


def words(rng: np.random.Generator, n: int) -> str:
    return " ".join(f"w{int(x)}" for x in rng.integers(0, 5000, n))


def one_run(folder: Path, memories: int, forgets: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    texts = [words(rng, 12) for _ in range(memories)]
    db = folder / f"bench-{seed}-{time.monotonic_ns()}.db"
    options: dict[str, Any] = {"embedder": SeededEmbedder(), "embed_in_background": False}
    with AgentMemoryManager.open(db, **options) as memory:
        session = memory.start_session().session_id
        memory.remember_many([{"content": t, "session_id": session} for t in texts[:-forgets]])
        memory.flush()
        start = time.perf_counter()
        ids = [memory.remember(t, session_id=session).id for t in texts[-forgets:]]
        memory.flush()
        remember = (time.perf_counter() - start) / forgets
        start = time.perf_counter()
        for memory_id in ids:
            memory.forget(memory_id)
        forget = (time.perf_counter() - start) / forgets
        start = time.perf_counter()
    close = time.perf_counter() - start
    return {"remember_ms": remember * 1e3, "forget_ms": forget * 1e3, "close_ms": close * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--forgets", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):  # interleaved: the load of the machine is shared
            results["on"].append(one_run(Path(tmp), args.memories, args.forgets, repeat))
            with erasure_off():
                results["off"].append(one_run(Path(tmp), args.memories, args.forgets, repeat))
    print(f"{args.memories} memories, {args.forgets} remembered then forgotten one by one, "
          f"median of {args.repeats}")  # fmt: skip
    print(f"{'':26}{'off (raw)':>12}{'on':>12}{'ratio':>8}")
    labels = {"remember_ms": "remember() ms/op", "forget_ms": "forget() ms/op",
              "close_ms": "close() after forgets ms"}  # fmt: skip
    for key, label in labels.items():
        off = statistics.median(r[key] for r in results["off"])
        on = statistics.median(r[key] for r in results["on"])
        print(f"{label:26}{off:12.3f}{on:12.3f}{on / off:8.2f}")


if __name__ == "__main__":
    main()
