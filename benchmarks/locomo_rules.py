#!/usr/bin/env python3
"""Candidate recall rules replayed on captured LoCoMo candidates, paired with the defaults.

``benchmarks/locomo_capture.py`` stores, per question, recall's fused candidates (each
signal's contribution) as ``recall()`` had them before the explanation step, with
every turn's vector and session. Re-ranking those candidates by their summed
contributions gives back the public ``recall()`` top 10 exactly (the importance,
retention and recency factors are equal for LoCoMo turns), so a rule that re-orders or
re-weights candidates can be measured here in seconds, on the same index as the
defaults. Rules measured for recall v3 (issue 30), none of which won on both halves::

    .venv/bin/python benchmarks/locomo_capture.py --out capture.pkl   # about 40 s
    .venv/bin/python benchmarks/locomo_rules.py capture.pkl [more captures...]

"List questions" are those whose answer is several things: ``both``, ``how many``, or
``what``/``which`` followed within two words by a plural noun (not a possessive):
on the development file 83 of the 142 multi-hop questions and 29 of the 618 others.
"""

from __future__ import annotations

import argparse
import pickle
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.eval_locomo import CATEGORY_NAMES, DEFAULT_DATA, load_locomo  # noqa: E402

TUNING = {"conv-26", "conv-30", "conv-41"}
Rule = Callable[[dict[str, Any], dict[str, Any]], list[str]]
_NOT_PLURAL = {"is", "was", "does", "has", "his", "this", "its", "us", "as", "yes", "always"}
_SPLIT = re.compile(r"(?<=[.!?])\s+")


def is_list_question(question: str) -> bool:
    """Whether a question asks for several things (see the module docstring)."""
    words = re.findall(r"[A-Za-z'+-]+", question.lower())
    if not words:
        return False
    if "both" in words or words[:2] == ["how", "many"]:
        return True
    if words[0] in ("what", "which"):
        return any(w.endswith("s") and "'" not in w and not w.endswith("ss")
                   and w not in _NOT_PLURAL for w in words[1:3])  # fmt: skip
    return False


def ranked(strength: dict[str, float]) -> list[str]:
    return sorted(strength, key=lambda m: (-strength[m], m))


def default(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
    return list(q["default"])


def gated(rule: Rule) -> Rule:
    """``rule`` for list questions, the defaults for the others."""
    return lambda conv, q: rule(conv, q) if q["list"] else list(q["default"])


def session_fill(keep: int, depth: int) -> Rule:
    """Keep the first ``keep``; fill the rest of the top 10 with the best candidates (of
    the first ``depth``) from sessions not yet in it, then by score."""

    def rule(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
        order = ranked(q["strength"])
        top = order[:keep]
        seen = {conv["turns"][m][0] for m in top}
        for m in order[keep:depth]:
            if len(top) < 10 and conv["turns"][m][0] not in seen:
                top.append(m)
                seen.add(conv["turns"][m][0])
        return (top + [m for m in order if m not in top])[:10]

    return rule


def session_mmr(penalty: float, keep: int) -> Rule:
    """After the first ``keep``, each pick loses ``penalty`` per turn of its session
    already picked (maximal marginal relevance over sessions)."""

    def rule(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
        s = q["strength"]
        order = ranked(s)
        top, rest = order[:keep], order[keep:60]
        count: dict[int, int] = defaultdict(int)
        for m in top:
            count[conv["turns"][m][0]] += 1
        while len(top) < 10 and rest:
            pick = max(rest, key=lambda m: s[m] - penalty * count[conv["turns"][m][0]])
            rest.remove(pick)
            top.append(pick)
            count[conv["turns"][pick][0]] += 1
        return top

    return rule


def vector_mmr(penalty: float, keep: int) -> Rule:
    """MMR on vectors: a pick loses ``penalty`` times its best cosine with those picked."""

    def rule(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
        s, vec = q["strength"], conv["vectors"]
        order = ranked(s)
        top, rest = order[:keep], order[keep:60]
        while len(top) < 10 and rest:

            def value(m: str) -> float:
                near = max((float(vec[m] @ vec[t]) for t in top), default=0.0)
                return float(s[m]) - penalty * near

            pick = max(rest, key=value)
            rest.remove(pick)
            top.append(pick)
        return top

    return rule


def session_centroid(weight: float, best: int) -> Rule:
    """The ``best`` sessions by the cosine of their mean turn vector with the query lift
    their candidates by ``weight`` times that cosine as a share of the best session's."""

    def rule(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
        s = dict(q["strength"])
        cos = {name: float(c @ q["qv"]) for name, c in conv["centroids"].items()}
        chosen = sorted(cos, key=lambda n: -cos[n])[:best]
        top = cos[chosen[0]]
        for m in s:
            if conv["turns"][m][0] in chosen:
                s[m] += weight * cos[conv["turns"][m][0]] / top
        return ranked(s)[:10]

    return rule


def added(weight: float, value: Callable[[dict[str, Any], dict[str, Any], str], float]) -> Rule:
    """Each candidate gains ``weight`` times ``value(conv, q, memory)``."""

    def rule(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
        s = {m: v + weight * value(conv, q, m) for m, v in q["strength"].items()}
        return ranked(s)[:10]

    return rule


def named_speaker(conv: dict[str, Any], q: dict[str, Any], m: str) -> float:
    return float(any(g.signal == "speaker" for g in q["fused"][m]))


def own_cosine(q: dict[str, Any], m: str) -> float | None:
    return next((1.0 - float(g.raw) for g in q["fused"][m] if g.signal == "vector"), None)


def clause_gain(conv: dict[str, Any], q: dict[str, Any], m: str) -> float:
    """How much closer the best sentence of a long turn is to the query than the turn."""
    own, sentences = own_cosine(q, m), conv["sentences"].get(m)
    if own is None or sentences is None:
        return 0.0
    return max(0.0, float((sentences @ q["qv"]).max()) - own)


def rocchio(seeds: int) -> Callable[[dict[str, Any], dict[str, Any], str], float]:
    def value(conv: dict[str, Any], q: dict[str, Any], m: str) -> float:
        key = f"centroid of {seeds}"
        if key not in q:
            c = np.mean([conv["vectors"][t] for t in ranked(q["strength"])[:seeds]], axis=0)
            q[key] = c / np.linalg.norm(c)
        return float(conv["vectors"][m] @ q[key])

    return value


def keyword_share(share: float) -> Rule:
    """Score fusion with another keyword share (vector share 1 - share)."""

    def rule(conv: dict[str, Any], q: dict[str, Any]) -> list[str]:
        s = {}
        for m, signals in q["fused"].items():
            total = 0.0
            for g in signals:
                if g.signal == "keyword":
                    total += g.contribution / 0.35 * share
                elif g.signal == "vector":
                    total += g.contribution / 0.65 * (1 - share)
                else:
                    total += g.contribution
            s[m] = total
        return ranked(s)[:10]

    return rule


def prepare(data: dict[str, Any], sentences: dict[str, dict[str, np.ndarray]]) -> None:
    for conv_id, conv in data.items():
        vectors = {m: v / np.linalg.norm(v) for m, (_, _, v) in conv["turns"].items()}
        conv["vectors"] = vectors
        by_session: dict[int, list[np.ndarray]] = defaultdict(list)
        for m, (session, _, _) in conv["turns"].items():
            by_session[session].append(vectors[m])
        conv["centroids"] = {
            s: (c := np.mean(vs, axis=0)) / np.linalg.norm(c) for s, vs in by_session.items()
        }
        conv["sentences"] = sentences.get(conv_id, {})
        for q in conv["questions"]:
            q["qv"] = q["qv"] / np.linalg.norm(q["qv"])
            q["list"] = is_list_question(q["question"])


def embed_sentences(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Per conversation and turn of two or more sentences (of three words or more): the
    sentences' vectors, each sentence after the first prefixed by the speaker's name
    (as the turn's own text is)."""
    from tiered_memory.embedding.embedders import OnnxEmbedder

    model = OnnxEmbedder.compact()
    out: dict[str, dict[str, np.ndarray]] = {}
    for conv in load_locomo(path):
        per: dict[str, np.ndarray] = {}
        for turn in conv.memories:
            parts = [p for p in _SPLIT.split(turn.content.strip()) if len(p.split()) >= 3]
            if len(parts) >= 2:
                texts = [parts[0]] + [f"{turn.speaker}: {p}" for p in parts[1:]]
                vs = np.asarray(model.embed(texts), dtype=np.float32)  # one text per run
                per[turn.id] = vs / np.linalg.norm(vs, axis=1, keepdims=True)
        out[conv.conv_id] = per
    return out


def score(data: dict[str, Any], rule: Rule) -> dict[tuple[str, str], tuple[float, float]]:
    acc: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for conv_id, conv in data.items():
        half = "tuning" if conv_id in TUNING else "check"
        for q in conv["questions"]:
            if q["category"] == 5:
                continue
            top, evidence = rule(conv, q), set(q["evidence"])
            pair = (len(evidence & set(top[:5])) / len(evidence),
                    len(evidence & set(top[:10])) / len(evidence))  # fmt: skip
            acc[(half, "overall")].append(pair)
            acc[(half, CATEGORY_NAMES[q["category"]])].append(pair)
    return {k: (statistics.fmean(p[0] for p in v), statistics.fmean(p[1] for p in v))
            for k, v in acc.items()}  # fmt: skip


RULES: dict[str, Rule] = {
    "session fill, list questions (keep 5, depth 20)": gated(session_fill(5, 20)),
    "session fill, all questions (keep 7, depth 20)": session_fill(7, 20),
    "session MMR 0.02 after 5, all questions": session_mmr(0.02, 5),
    "session MMR 0.1 after 5, list questions": gated(session_mmr(0.1, 5)),
    "vector MMR 0.1 after 5, all questions": vector_mmr(0.1, 5),
    "session centroid 0.02, best 3, all questions": session_centroid(0.02, 3),
    "session centroid 0.02, best 3, list questions": gated(session_centroid(0.02, 3)),
    "speaker +0.2, list questions": gated(added(0.2, named_speaker)),
    "clause gain x0.65, all questions": added(0.65, clause_gain),
    "clause gain x0.65, list questions": gated(added(0.65, clause_gain)),
    "Rocchio top-3 centroid x0.1, list questions": gated(added(0.1, rocchio(3))),
    "keyword share 0.25, list questions": gated(keyword_share(0.25)),
    "keyword share 0.45, list questions": gated(keyword_share(0.45)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    args = ap.parse_args()
    sentences = embed_sentences(Path(args.data))
    cols = [(h, c) for c in ("overall", "multi-hop", "open-domain") for h in ("tuning", "check")]
    print("| rule (difference from the defaults) | " + " | ".join(f"{c} {h}" for h, c in cols)
          + " |")  # fmt: skip
    print("|" + "---|" * (len(cols) + 1))
    runs = []
    for path in args.captures:
        data = pickle.loads(Path(path).read_bytes())
        prepare(data, sentences)
        runs.append((data, score(data, default)))
    for name, rule in {"defaults (replayed)": default, **RULES}.items():
        per = [score(data, rule) for data, _ in runs]
        cells = []
        for col in cols:
            if name.startswith("defaults"):  # the replayed defaults: their own figures
                at5, at10 = (statistics.fmean(b[col][i] for _, b in runs) for i in (0, 1))
                cells.append(f"{at5:.3f} / {at10:.3f}")
                continue
            d5, d10 = (
                statistics.fmean(p[col][i] - b[col][i] for p, (_, b) in zip(per, runs, strict=True))
                for i in (0, 1)
            )
            cells.append(f"{d5:+.3f} / {d10:+.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
