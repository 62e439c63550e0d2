"""Open + first recall (issue 46), phase by phase, against a raw baseline, and against an
older checkout of the library taking turns with this one in the same run.

    .venv/bin/python -m benchmarks.open_first --dir /somewhere/big \
        --sizes 100000,1000000 [--indexes cells,ram] [--rounds 5] [--before /old/checkout]

Files are :mod:`benchmarks.million`'s (``memories_<count>.db`` in ``--dir``, built once
if missing; for ``cells``, their vector cells trained by ``maintain()`` once). Every
measurement is a fresh process that opens the file read-write, as an application does
(the recall writes nothing: no reviews), with the compact model under the file's
model id, and recalls :data:`QUERY` (the words of rank 1, 7 and 13 of the file's 5,000:
the keyword leg's heavy case) and then :data:`SECOND` (the steady cost of such a
recall, for scale). Two states of the process:

- ``cold``: a fresh process: the clock covers the model's load (``compact_model.build``
  checks its file, the ``OnnxEmbedder`` made, its session loaded when the library asks)
  and the library's modules imported on first open;
- ``warm``: the model loaded and one recall embedded, and one memory opened and closed
  in RAM (the library's modules imported), before the clock starts: what grows with
  the file.

Peak RSS (VmHWM) is read at four points: ``bare_mib`` (python and the imports),
``ready_mib`` (when the clock starts: warm, the model loaded), ``peak_first_mib`` (after
the first recall) and ``peak_mib`` (at the end).

The raw baseline, in its own fresh process: ``apsw`` opens the file and reads FTS5's
first 100 matches of the same words (unranked: a floor; ranking every match of these
common words by bm25 takes about a second at 1M), and (``cold``) loads the same ONNX
model and tokenizer and embeds the query (state ``model``: only that, no file;
:mod:`benchmarks.scale_run` uses it). ``--before`` names another checkout (a folder
holding ``tiered_memory`` and ``persistence``; e.g. ``git archive <commit> | tar -x -C
DIR``): each round runs both, taking turns, so they meet the same load. Medians per row;
a JSON line per run goes to ``benchmarks/results/open_first.jsonl`` (``--no-record``:
not). ``--light`` recalls rare words instead (:data:`LIGHT`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.million import build, library
from benchmarks.results_file import record_run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "open_first.jsonl"
QUERY = "w1 w7 w13 question"
SECOND = "w2 w9 w14 other question"
LIGHT = ("w1500 w2700 w4100 question", "w1600 w2800 w4200 other question")
"""``--light``: words of rank 1,500-4,200 (each in a few hundred memories): a recall
whose keyword leg is light, so open + first recall is mostly what the open costs."""
MODEL_ID = "bench-random"
"""The model id :mod:`benchmarks.million`'s files record (their vectors are random)."""

PROBE = """
import json, os, sys, time
root, path, index, state, query, second = sys.argv[1:7]
sys.path.insert(0, root)
import tiered_memory
assert tiered_memory.__file__.startswith(root), tiered_memory.__file__
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding import compact_model
from tiered_memory.embedding.embedders import OnnxEmbedder

def peak():
    with open("/proc/self/status") as status:
        line = next(ln for ln in status if ln.startswith("VmHWM"))
    return round(int(line.split()[1]) / 1024, 1)

options = {"vector_index": index} if index != "default" else {}
bare = peak()
if state == "warm":
    model = OnnxEmbedder(compact_model.build(None), model_id=MODEL_ID)
    model.embed(["a recall before this one"])
    AgentMemoryManager.in_memory(embedder=None).close()
ready = peak()
start = time.perf_counter()
if state == "cold":
    model = OnnxEmbedder(compact_model.build(None), model_id=MODEL_ID)
made = time.perf_counter()
memory = AgentMemoryManager.open(path, embedder=model, recall_review_quality=None, **options)
opened = time.perf_counter()
memory.recall(query, k=10)
first = time.perf_counter()
peak_first = peak()
memory.recall(second, k=10)
again = time.perf_counter()
memory.close()
ms = lambda a, b: round((b - a) * 1000, 1)
print(json.dumps({"model_ms": ms(start, made), "open_ms": ms(made, opened),
                  "first_ms": ms(opened, first), "total_ms": ms(start, first),
                  "second_ms": ms(first, again), "bare_mib": bare, "ready_mib": ready,
                  "peak_first_mib": peak_first, "peak_mib": peak()}))
""".replace("MODEL_ID", repr(MODEL_ID))

RAW = """
import json, sys, time
folder, path, state, query = sys.argv[1:5]
import apsw
import numpy as np

def model():
    import onnxruntime as ort
    from tokenizers import Tokenizer
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(folder + "/model.onnx", options,
                                   providers=["CPUExecutionProvider"])
    return session, Tokenizer.from_file(folder + "/tokenizer.json")

def embed(session, tokenizer, text):
    code = tokenizer.encode(text)
    ids = np.array([code.ids], dtype=np.int64)
    mask = np.array([code.attention_mask], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in {i.name for i in session.get_inputs()}:
        feed["token_type_ids"] = np.zeros_like(ids)
    hidden = session.run(None, feed)[0]
    pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum()
    return pooled / np.linalg.norm(pooled)

if state == "warm":
    loaded = model()
    embed(*loaded, "a recall before this one")
start = time.perf_counter()
best = []
if state != "model":  # "model": the model loaded and the query embedded, no file
    conn = apsw.Connection(path)
    match = " OR ".join(f'"{word}"' for word in query.split())
    best = conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT 100",
                        (match,)).fetchall()
if state != "warm":
    loaded = model()
vector = embed(*loaded, query)
first = time.perf_counter()
if state != "model":
    conn.close()
print(json.dumps({"total_ms": round((first - start) * 1000, 1), "rows": len(best)}))
"""


def probe(script: str, *args: str) -> dict[str, float]:
    """The probe's JSON line, run in a fresh process that may keep .pyc files (as an
    installed package has them: without, every module is compiled in the clock)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600,
        cwd=ROOT, env=env,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"probe failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def cells_trained(path: Path) -> bool:
    """Whether the file's vector cells are trained (``vector_cells`` holds rows)."""
    import apsw

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = conn.execute(
            "SELECT name FROM sqlite_schema WHERE name = 'vector_cells'"
        ).fetchall()
        return bool(found) and bool(conn.execute("SELECT 1 FROM vector_cells LIMIT 1").fetchall())
    finally:
        conn.close()


def prepare(path: Path, count: int, indexes: list[str]) -> None:
    """The file, built once; its cells trained once if ``cells`` is measured."""
    if not path.exists():
        build(path, count)
    if "cells" in indexes and not cells_trained(path):
        from tiered_memory import AgentMemoryManager

        with AgentMemoryManager.open(path, embedder=None, vector_index="cells") as memory:
            memory.maintain()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--indexes", default="cells,ram")
    parser.add_argument("--states", default="cold,warm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="an older checkout to take turns with")
    parser.add_argument("--light", action="store_true", help="rare words (LIGHT)")
    parser.add_argument("--smoke", action="store_true", help="2,000 memories, one round")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.rounds = "2000", 1
    args.dir.mkdir(parents=True, exist_ok=True)
    indexes, states = args.indexes.split(","), args.states.split(",")
    query, second = LIGHT if args.light else (QUERY, SECOND)
    codes = {"now": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    from tiered_memory.embedding import compact_model

    folder = compact_model.build(None)  # the raw baseline's model files
    runs: dict[tuple[str, int, str, str], list[dict[str, float]]] = {}
    for count in (int(n) for n in args.sizes.split(",")):
        path = library(args.dir, count)
        prepare(path, count, indexes)
        for state in states:  # once unmeasured: the page cache and .pyc files warm
            for root in codes.values():
                probe(PROBE, str(root), str(path), indexes[0], state, query, second)
        for n in range(args.rounds):
            turn = list(codes.items())
            for code, root in turn if n % 2 == 0 else reversed(turn):
                for index in indexes:
                    for state in states:
                        runs.setdefault((code, count, index, state), []).append(
                            probe(PROBE, str(root), str(path), index, state, query, second)
                        )
            for state in states:
                runs.setdefault(("raw", count, "-", state), []).append(
                    probe(RAW, str(folder), str(path), state, query)
                )
    rows: list[dict[str, Any]] = []
    for (code, count, index, state), found in runs.items():
        median = {k: round(statistics.median(r[k] for r in found), 1) for k in found[0]}
        rows.append({"code": code, "count": count, "index": index, "state": state, **median})
    raw = {(r["count"], r["state"]): r["total_ms"] for r in rows if r["code"] == "raw"}
    print(
        "| code | memories | index | process | model | open | first recall | open + first "
        "| x raw | second recall | peak RSS |"
    )
    print("|" + " --- |" * 11)
    for r in rows:
        if r["code"] == "raw":
            continue
        base = raw[(r["count"], r["state"])]
        print(f"| {r['code']} | {r['count']:,} | {r['index']} | {r['state']} | "
              f"{r['model_ms']} | {r['open_ms']} | {r['first_ms']} | {r['total_ms']} | "
              f"{r['total_ms'] / base:.2f}x | {r['second_ms']} | "
              f"{r['peak_mib']} MiB |")  # fmt: skip
    for (count, state), total in raw.items():
        print(
            f"raw baseline ({count:,}, {state}): {total} ms (apsw open + FTS5's first 100 matches"
            f"{' + the model loaded and the query embedded' if state == 'cold' else ''})"
        )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()  # fmt: skip
    record = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit or None,
        "rounds": args.rounds,
        "load": round(os.getloadavg()[0], 2),
        "before": str(args.before) if args.before else None,
        "query": query,
        "rows": rows,
    }
    record_run(RESULTS, record, keep=not args.no_record)


if __name__ == "__main__":
    main()
