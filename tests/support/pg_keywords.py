"""Reference keyword scores for the PostgreSQL tests: FTS5's bm25 over each memory's
window (its own words, the two memories before it in its session and tier, the two
after), computed here in Python from ``tm_memories`` alone (each memory's lexemes from
``tm_tsv``), independent of how the engine stores its keyword index."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

_MEMORIES = (
    "SELECT m.id, m.seq, m.scope, m.tier, m.session_id, "
    "coalesce((SELECT array_agg(u.lexeme) FROM unnest(tm_tsv(m.content)) u), '{}'), "
    "coalesce((SELECT array_agg(cardinality(u.positions)) FROM unnest(tm_tsv(m.content)) u), "
    "'{}') FROM tm_memories m ORDER BY m.seq"
)


def windows(conn: Any) -> dict[str, tuple[int, str, int, Counter[str], Counter[str], Counter[str]]]:
    """Memory id -> (seq, scope, window tokens, own, before and after term counts), as
    the connection sees the memories."""
    rows = conn.execute(_MEMORIES).fetchall()
    own = {r[0]: Counter(dict(zip(r[5], r[6], strict=True))) for r in rows}
    chains: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in rows:
        if r[4] is not None:
            chains[(r[2], r[3], r[4])].append(r[0])
    place = {m: (key, i) for key, chain in chains.items() for i, m in enumerate(chain)}
    out = {}
    for r in rows:
        before: Counter[str] = Counter()
        after: Counter[str] = Counter()
        if r[0] in place:
            key, i = place[r[0]]
            chain = chains[key]
            for m in chain[max(i - 2, 0) : i]:
                before.update(own[m])
            for m in chain[i + 1 : i + 3]:
                after.update(own[m])
        length = sum(own[r[0]].values()) + sum(before.values()) + sum(after.values())
        out[r[0]] = (r[1], r[2], length, own[r[0]], before, after)
    return out


def reference_search(
    conn: Any, words: Sequence[str], context_weight: float, after_weight: float,
    scope: str | None = None,
) -> list[tuple[str, float]]:  # fmt: skip
    """``(memory_id, bm25)`` of every window holding a lexeme of a single-token word,
    best first, ties by ``seq``; N, avgdl and document frequencies over the windows of
    ``scope`` (all the connection sees when ``None``)."""
    lexemes = sorted(
        {r[0] for r in conn.execute("SELECT u.lexeme FROM unnest(%s::text[]) w, "
                                    "unnest(tm_tsv(w)) u", (list(words),))}
    )  # fmt: skip
    found = windows(conn)
    if scope is not None:
        found = {m: w for m, w in found.items() if w[1] == scope}
    n = len(found)
    avgdl = sum(w[2] for w in found.values()) / max(n, 1)
    holds = {m: {x for x in lexemes if w[3][x] or w[4][x] or w[5][x]} for m, w in found.items()}
    df = {x: sum(x in h for h in holds.values()) for x in lexemes}
    scored = []
    for m, (seq, _, length, own, before, after) in found.items():
        if not holds[m]:
            continue
        score = 0.0
        for x in holds[m]:
            f = own[x] + context_weight * before[x] + after_weight * after[x]
            idf = max(math.log((n - df[x] + 0.5) / (df[x] + 0.5)), 1e-6)
            score -= idf * (f * 2.2) / (f + 1.2 * (0.25 + 0.75 * length / avgdl))
        scored.append((score, seq, m))
    return [(m, s) for s, _, m in sorted(scored)]
