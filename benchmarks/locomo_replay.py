#!/usr/bin/env python3
"""Replay recall's fusion on LoCoMo offline, to tune settings cheaply.

Indexing and embedding a conversation takes most of an evaluation's time; the fusion
itself is a few dictionary operations. This script indexes each conversation once
(tiered-memory's keyword search with its window, and the default embedder's vectors),
caches every question's keyword candidates and all vectors in ``--cache``, then replays
score/rank fusion, answer adjacency, speaker attribution and the session-context
reranker for a grid of settings with the library's own functions. The numbers match
``eval_locomo.py`` closely but not exactly (exact cosine instead of the vector copy, no
importance/retention/recency factors, which are equal for all LoCoMo turns); confirm a
choice with a real evaluation. Tune on conv-26/30/41 only, check on conv-42/43::

    .venv/bin/python benchmarks/locomo_replay.py --convs conv-26,conv-30,conv-41
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.eval_locomo import DEFAULT_DATA, evaluate, format_table, load_locomo  # noqa: E402
from tiered_memory import AgentMemoryManager  # noqa: E402
from tiered_memory.embedding.embedders import OnnxEmbedder  # noqa: E402
from tiered_memory.recall.conversation import answer_bonus, is_question, named_speaker  # noqa: E402
from tiered_memory.recall.fusion import fuse, fuse_scores
from tiered_memory.recall.rerank import RerankCandidate, SessionContextReranker  # noqa: E402
from tiered_memory.recall.settings import keywords  # noqa: E402

DEPTH = 100


def build_cache(convs: list[Any], path: Path, embedder: OnnxEmbedder) -> dict[str, Any]:
    """Per conversation: ids, contents, speakers, vectors, and per question the keyword
    candidates (dia_id, bm25) and the query vector."""
    if path.exists():
        cached: dict[str, Any] = pickle.loads(path.read_bytes())
        if all(c.conv_id in cached for c in convs):
            return cached
    else:
        cached = {}
    with tempfile.TemporaryDirectory() as folder:
        for conv in convs:
            if conv.conv_id in cached:
                continue
            with AgentMemoryManager.open(Path(folder) / f"{conv.conv_id}.db", embedder=None) as m:
                session = m.start_session(conv.conv_id)
                ids: dict[str, str] = {}
                with m.transaction():
                    for turn in conv.memories:
                        ids[m.remember(turn.content, session_id=session.session_id).id] = turn.id
                keyword = {}
                for q in conv.questions:
                    found = m.store.indexes.keyword_search(keywords(q.question), DEPTH)
                    keyword[q.question] = [(ids[i], bm25) for i, bm25 in found]
            vectors = embedder.embed([t.content for t in conv.memories])
            queries = embedder.embed([q.question for q in conv.questions])
            cached[conv.conv_id] = {
                "ids": [t.id for t in conv.memories],
                "contents": [t.content for t in conv.memories],
                "speakers": [t.speaker for t in conv.memories],
                "vectors": vectors,
                "keyword": keyword,
                "queries": {q.question: queries[i] for i, q in enumerate(conv.questions)},
            }
            print(f"cached {conv.conv_id}", file=sys.stderr)
    path.write_bytes(pickle.dumps(cached))
    return cached


class Replay:
    """An eval_locomo retriever that fuses cached candidates with ``settings``."""

    name = "replay"

    def __init__(self, cache: dict[str, Any], **settings: Any) -> None:
        self.cache = cache
        self.s = {"fusion": "score", "keyword_share": 0.35, "adjacency": 0.0, "speaker": 0.0,
                  "rerank": 0.0, "rerank_depth": 50, "neighbours": 0.5, **settings}  # fmt: skip
        self.reranker = SessionContextReranker(self.s["neighbours"])

    def index(self, conv_id: str, memories: list[Any]) -> None:
        pass

    def search(self, conv_id: str, query: str, k: int) -> list[str]:
        c, s = self.cache[conv_id], self.s
        ids, vectors = c["ids"], c["vectors"]
        place = {d: i for i, d in enumerate(ids)}
        qv = c["queries"][query]
        cos = vectors @ qv
        top = np.argsort(-cos, kind="stable")[:DEPTH]
        ranked = {"keyword": c["keyword"][query],
                  "vector": [(ids[i], 1.0 - float(cos[i])) for i in top]}  # fmt: skip
        if s["fusion"] == "score":
            wanted = {d for d, _ in ranked["keyword"]} | {d for d, _ in ranked["vector"]}
            distances = {d: 1.0 - float(cos[place[d]]) for d in wanted}
            fused = fuse_scores(ranked, distances, s["keyword_share"])
        else:
            fused = fuse(ranked, {"keyword": 2.0, "vector": 1.0}, 20.0)
        strength = {d: sum(m.contribution for m in sig) for d, sig in fused.items()}
        answers = {
            d: ids[place[d] + 1]
            for d in strength
            if place[d] + 1 < len(ids) and is_question(c["contents"][place[d]])
        }
        bonus = answer_bonus(strength, answers, s["adjacency"])
        for d, (_, add) in bonus.items():
            if d not in strength and s["fusion"] == "score":
                strength[d] = (1 - s["keyword_share"]) * float(cos[place[d]])
            strength[d] = strength.get(d, 0.0) + add
        if s["speaker"]:
            who = named_speaker(query, {c["speakers"][place[d]] for d in strength})
            if who is not None:
                for d in strength:
                    if c["speakers"][place[d]] == who:
                        strength[d] += s["speaker"]
        if s["rerank"]:
            head = sorted(strength, key=lambda d: (-strength[d], d))[: s["rerank_depth"]]
            n = len(ids)

            def vec(i: int) -> Any:
                return vectors[i] if 0 <= i < n else None

            cands = [
                RerankCandidate(d, "", vectors[place[d]], vec(place[d] - 1), vec(place[d] + 1))
                for d in head
            ]
            for d, score in zip(head, self.reranker.score(query, qv, cands), strict=True):
                strength[d] += s["rerank"] * score
        return sorted(strength, key=lambda d: (-strength[d], d))[:k]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--convs", default="conv-26,conv-30,conv-41")
    ap.add_argument("--cache", default="/tmp/locomo-replay.pkl")
    ap.add_argument("--grid", default="adjacency=0,0.1,0.2,0.3;speaker=0,0.02,0.05")
    ap.add_argument("--table", action="store_true", help="per-category table per setting")
    ap.add_argument("--model-dir", help="another ONNX sentence encoder (use its own --cache)")
    ap.add_argument("--max-length", type=int, default=256, help="its token limit")
    args = ap.parse_args()
    wanted = args.convs.split(",")
    convs = [c for c in load_locomo(args.data) if c.conv_id in wanted]
    embedder = OnnxEmbedder(args.model_dir, max_length=args.max_length)
    cache = build_cache(convs, Path(args.cache), embedder)
    axes: dict[str, list[Any]] = {}
    for part in args.grid.split(";"):
        name, values = part.split("=")
        axes[name] = [v if name == "fusion" else float(v) for v in values.split(",")]
        if name == "rerank_depth":
            axes[name] = [int(v) for v in axes[name]]
    for combo in itertools.product(*axes.values()):
        settings = dict(zip(axes, combo, strict=True))
        result = evaluate(Replay(cache, **settings), convs)
        o = result["overall"]
        adv = result["by_category"].get("5-adversarial", {})
        print(f"{settings}: overall r@5 {o['recall@5']:.4f} r@10 {o['recall@10']:.4f}"
              f" | adversarial r@5 {adv.get('recall@5', 0):.4f}")  # fmt: skip
        if args.table:
            print(format_table([result]))


if __name__ == "__main__":
    main()
