#!/usr/bin/env python3
"""Same answers before and after a speed change: recall's and context()'s output on
LoCoMo questions, dumped to JSON, and two dumps compared.

A change meant to make recall or ``context()`` faster must not change what they return.
This runs LoCoMo's first ``--questions`` questions (over ``--convs``, in order) through
``recall(k=10)`` (each hit's id, score and full explanation, its ``repr``: every float
exactly) and ``memory.context(q, max_tokens=N)`` at each budget (``to_dict()``) on saved
conversation files, and writes them to ``--out``; run it on both commits and
``--compare`` the two dumps::

    PYTHONPATH=BEFORE .venv/bin/python benchmarks/locomo_same_answers.py --out before.json
    PYTHONPATH=AFTER .venv/bin/python benchmarks/locomo_same_answers.py --out after.json
    .venv/bin/python benchmarks/locomo_same_answers.py --compare before.json after.json

The files are made once (``--files``, as ``benchmarks/locomo_adapter.py:ContextAdapter``
stores a conversation: one session per LoCoMo session, the clock at its date) and each
run opens a fresh copy, so both commits answer from the very same bytes. The LoCoMo data is not
shipped (see eval_locomo.py); ``--data`` defaults to the team's development copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.eval_locomo import DEFAULT_DATA, WHERE_TO_GET, load_locomo
from benchmarks.locomo_adapter import ContextAdapter
from tiered_memory import AgentMemoryManager

BUDGETS = (60, 250, 500, 1000, 2000)


def saved_file(adapter: ContextAdapter, conv: Any, files: Path) -> tuple[Path, int]:
    """The conversation's saved file and the clock its queries run at (made if missing)."""
    db, side = files / f"{conv.conv_id}.db", files / f"{conv.conv_id}.json"
    if not db.exists():
        adapter.index(conv.conv_id, conv.memories)
        adapter._managers.pop(conv.conv_id).shutdown()
        shutil.copy(Path(adapter._dir.name) / f"{conv.conv_id}.db", db)
        side.write_text(json.dumps({"now": adapter._now[0]}))
    return db, int(json.loads(side.read_text())["now"])


def answers(data: str, conv_ids: list[str], questions: int, files: Path) -> list[dict[str, Any]]:
    """recall(k=10) and context() at each budget for the first ``questions`` questions."""
    files.mkdir(parents=True, exist_ok=True)
    adapter = ContextAdapter()
    out: list[dict[str, Any]] = []
    work = tempfile.TemporaryDirectory(prefix="same-answers-")
    for conv in load_locomo(data):
        if conv.conv_id not in conv_ids or len(out) >= questions:
            continue
        saved, now = saved_file(adapter, conv, files)
        db = Path(shutil.copy(saved, work.name))  # a copy: every run starts from these bytes
        memory = AgentMemoryManager.open(
            db, embedder=adapter._embedder, recall_review_quality=None,
            clock=lambda now=now: now, embed_in_background=False,
        )  # fmt: skip
        try:
            for q in conv.questions[: questions - len(out)]:
                hits = memory.recall(q.question, k=10)
                out.append({
                    "conv": conv.conv_id, "question": q.question,
                    "recall": [[h.memory.id, repr(h.score), repr(h.explanation)] for h in hits],
                    "context": {str(b): memory.context(q.question, max_tokens=b).to_dict()
                                for b in BUDGETS},
                })  # fmt: skip
        finally:
            memory.shutdown()
    work.cleanup()
    return out


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> int:
    """Print where two dumps differ; the number of questions that differ."""
    differ = 0
    if len(before) != len(after):
        print(f"{len(before)} questions before, {len(after)} after")
        return max(len(before), len(after))
    for one, two in zip(before, after, strict=True):
        if one == two:
            continue
        differ += 1
        parts = [k for k in ("recall", "context") if one[k] != two[k]]
        print(f"{one['conv']} {one['question']!r}: {', '.join(parts)} differ")
    return differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA) if DEFAULT_DATA.exists() else None)
    ap.add_argument("--convs", default="conv-26,conv-30")
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument(
        "--files",
        default="/tmp/locomo-same-answers",
        help="where the conversations' files are saved (made once)",
    )
    ap.add_argument("--out", help="write the answers here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = ap.parse_args(argv)
    if a.compare:
        dumps = [json.loads(Path(p).read_text()) for p in a.compare]
        differ = compare(*dumps)
        print(f"{len(dumps[0])} questions, {differ} differ")
        return 1 if differ else 0
    if a.data is None or not Path(a.data).exists():
        raise SystemExit(WHERE_TO_GET)
    out = answers(a.data, a.convs.split(","), a.questions, Path(a.files))
    text = json.dumps(out, sort_keys=True)
    if a.out:
        Path(a.out).write_text(text)
    print(f"{len(out)} questions, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
