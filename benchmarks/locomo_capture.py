#!/usr/bin/env python3
"""Capture recall's fused candidates on LoCoMo once, then score re-orderings offline.

Indexes the development conversations with the eval's adapter (default settings), runs
every question through the public ``recall()`` with the fused candidates captured just
before the early-stopping explanation step, and pickles per question: the candidates'
signals, their dia_ids, sessions and speakers, the query vector, and per conversation
every turn's vector and session. Offline experiments (``--replay``) re-score those
candidates with candidate rules, paired against the captured default order.
Experiment code, not part of the library."""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.eval_locomo import DEFAULT_DATA, load_locomo  # noqa: E402
from benchmarks.locomo_adapter import TieredMemoryAdapter  # noqa: E402
from tiered_memory.recall.types import fused_values  # noqa: E402


def capture(out: Path, data: Path) -> None:
    convs = load_locomo(data)
    adapter = TieredMemoryAdapter()
    result: dict[str, Any] = {}
    for conv in convs:
        t0 = time.perf_counter()
        adapter.index(conv.conv_id, conv.memories)
        manager = adapter._managers[conv.conv_id]
        recaller = manager._recall
        stash: dict[str, Any] = {}
        original = recaller._explained

        def explained(fused, k, *a, _o=original, _s=stash, **kw):  # type: ignore[no-untyped-def]
            _s["fused"] = {m: list(s) for m, s in fused.items()}
            return _o(fused, k, *a, **kw)

        recaller._explained = explained  # type: ignore[method-assign]
        by_id = {v: k for k, v in adapter._dia_ids.items()}
        ids = [by_id[t.id] for t in conv.memories]
        memories = manager._memories.get_many(ids)
        turns = {
            t.id: (t.session, t.speaker, memories[by_id[t.id]].embedding) for t in conv.memories
        }
        questions = []
        for q in conv.questions:
            if not q.evidence:
                continue
            hits = manager.recall(q.question, k=10)
            fused = stash.pop("fused")
            qv = manager.embeddings.embed_query(q.question)
            questions.append(
                {
                    "category": q.category,
                    "question": q.question,
                    "evidence": q.evidence,
                    "default": [adapter._dia_ids[h.memory.id] for h in hits],
                    "fused": {adapter._dia_ids[m]: s for m, s in fused.items()},
                    "strength": {adapter._dia_ids[m]: v for m, v in fused_values(fused).items()},
                    "qv": np.asarray(qv, dtype=np.float32),
                }
            )
        result[conv.conv_id] = {"turns": turns, "questions": questions,
                                "order": [t.id for t in conv.memories]}  # fmt: skip
        print(conv.conv_id, f"{time.perf_counter() - t0:.1f}s", len(questions), flush=True)
    adapter.close()
    out.write_bytes(pickle.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="the pickle to write (locomo_rules.py reads it)")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    args = ap.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    capture(Path(args.out), Path(args.data))


if __name__ == "__main__":
    main()
