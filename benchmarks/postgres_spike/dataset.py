"""The spike's data set: real English sentences (CPython standard library docstrings),
grouped into sessions in their order, with 384-dim clustered random vectors, and the
queries. Deterministic (seeded); written once to data/ and read by both benchmarks
(PostgreSQL: bench.py; the project's SQLiteStore: sqlite_baseline.py)."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
DATA = HERE / "data"
DIM = 384
STDLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"

_WORD = re.compile(r"\w+", re.UNICODE)
# tiered_memory.recall.STOPWORDS (copied: the spike does not import the project)
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves s t d ll m re ve
    """.split()
)


def keyword_query(text: str) -> str | None:
    """tiered_memory.recall.keyword_query (copied)."""
    words = [w.lower() for w in _WORD.findall(text)]
    kept = [w for w in words if w not in STOPWORDS] or words
    unique = list(dict.fromkeys(kept))
    return " OR ".join(f'"{w}"' for w in unique) if unique else None


def sentences() -> list[tuple[str, str]]:
    """(module, sentence) from docstrings, in file order."""
    out: list[tuple[str, str]] = []
    for path in sorted(STDLIB.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if not doc:
                    continue
                text = " ".join(doc.split())
                for s in re.split(r"(?<=[.!?])\s+", text):
                    n = len(s.split())
                    if 5 <= n <= 40 and not s.startswith((">>>", "...")):
                        out.append((path.stem, s))
    return out


def build(n: int = 10_000, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    found = sentences()
    if len(found) < n:
        reps = n // len(found) + 1
        found = [(m + (f"#{r}" if r else ""), s) for r in range(reps) for m, s in found]
    found = found[:n]
    centers = rng.normal(size=(200, DIM)).astype(np.float32)
    rows = []
    vectors = np.empty((n, DIM), dtype=np.float32)
    session_no, in_session, last_module = 0, 0, None
    tags = [f"tag{i}" for i in range(20)]
    for i, (module, text) in enumerate(found):
        if module != last_module or in_session >= 50:
            session_no += 1
            in_session = 0
            last_module = module
            center = centers[rng.integers(len(centers))]
            agent = f"agent{rng.integers(5)}"
        in_session += 1
        r = rng.random()
        tier = "scratchpad" if r < 0.05 else "episodic" if r < 0.85 else "semantic"
        mid = f"{i:012x}{rng.integers(1 << 62):020x}"[:32]
        rows.append({
            "id": mid, "tier": tier, "key": mid if tier == "scratchpad" else None,
            "content": text, "session_id": f"s{session_no:05d}", "agent_id": agent,
            "tags": sorted(set(rng.choice(tags, size=rng.integers(0, 3), replace=False).tolist())),
            "created_at": 1_700_000_000_000 + i * 60_000, "retention": float(rng.random()),
        })  # fmt: skip
        vectors[i] = center + 0.6 * rng.normal(size=DIM).astype(np.float32)
    queries = []
    for q in range(200):
        j = int(rng.integers(n))
        words = [w for w in _WORD.findall(rows[j]["content"]) if w.lower() not in STOPWORDS]
        picked = (
            list(rng.choice(words, size=min(len(words), int(rng.integers(2, 5))), replace=False))
            if words
            else ["file"]
        )  # noqa: E501
        other = rows[int(rng.integers(n))]["content"].split()
        picked.append(other[int(rng.integers(len(other)))])
        text = " ".join(picked)
        qv = vectors[j] + 0.3 * rng.normal(size=DIM).astype(np.float32)
        queries.append({"text": text, "match": keyword_query(text), "of": j,
                        "session_id": rows[j]["session_id"], "agent_id": rows[j]["agent_id"],
                        "tag": tags[int(rng.integers(len(tags)))]})  # fmt: skip
        if q == 0:
            qvecs = np.empty((200, DIM), dtype=np.float32)
        qvecs[q] = qv
    DATA.mkdir(exist_ok=True)
    (DATA / f"rows_{n}.json").write_text(json.dumps(rows))
    (DATA / f"queries_{n}.json").write_text(json.dumps(queries))
    np.save(DATA / f"vectors_{n}.npy", vectors)
    np.save(DATA / f"qvectors_{n}.npy", qvecs)
    print(f"{n} rows, {session_no} sessions, {len(set(r['content'] for r in rows))} distinct texts")


def load(n: int = 10_000) -> tuple[list[dict], list[dict], np.ndarray, np.ndarray]:
    if not (DATA / f"rows_{n}.json").exists():
        build(n)
    return (
        json.loads((DATA / f"rows_{n}.json").read_text()),
        json.loads((DATA / f"queries_{n}.json").read_text()),
        np.load(DATA / f"vectors_{n}.npy"),
        np.load(DATA / f"qvectors_{n}.npy"),
    )


if __name__ == "__main__":
    build(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
