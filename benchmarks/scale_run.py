"""Issue 46's scale run: every figure of the issue, per file size, in one run, with the
issue's targets, raw baselines and the slope between sizes.

    .venv/bin/python -m benchmarks.scale_run --dir /somewhere/big \
        --sizes 100000,1000000,3000000 [--vector-index ram|cells] [--rounds 3] [--smoke]

Files are built once in ``--dir`` by :mod:`benchmarks.million` (clustered 384-d vectors,
words drawn as in text) and reused (with ``cells``, their cells trained once if they are
not: :func:`benchmarks.open_first.prepare`). Each part runs in a fresh process:

- open + first recall with the model's load in the clock (``open_first_ms``: the compact
  model built and loaded, the query embedded) and peak RSS after it, then ``--writes``
  embedded ``remember()`` calls and peak RSS after them (on a copy of the file);
- open + first recall in a process that already has its model, loaded and run once
  (``open_first_warm_ms``: what the library adds to an agent that has its model), with
  peak RSS after python and the imports (``rss_bare_mib``), once the model is loaded
  (``rss_ready_mib``) and after the open + first recall (``rss_warm_first_mib``); and
  the raw baselines (:mod:`benchmarks.open_first`'s): ``apsw`` opens the file and reads
  FTS5's first 100 matches of the same words, the query embedded by the model loaded
  before (``raw_open_first_ms``), and the same model loaded and the query embedded
  (``raw_model_ms``); the medians of ``--rounds``, the three taking turns. The ratios:
  warm against the raw open, cold against the two raw figures' sum;
- ``recall()`` p50 / p99 with the query vectors precomputed (no query embedding);
- the keyword leg alone, p50 / p99 over varied queries (:mod:`benchmarks.keyword_tail`);
- vector recall@10 against an exact numpy scan on a sample, unfiltered and with a time
  filter that accepts about a tenth of the file;
- ``remember()`` taking turns with its write floor (the raw SQL writing the same rows
  and indexes) on the first copy (after its writes) and a second one, made then.

The copies go to ``--dir``/scratch one at a time, the free space printed before each (a
copy that does not fit is skipped, with the parts that need it: ``skipped``).
``--vector-index`` is passed to the store when given (``MemoryConfig.vector_index``);
without it the library's default is used, and recorded. A JSON line per run goes to
``benchmarks/results/scale_run.jsonl`` (``--no-record``: not). ``--smoke`` runs each
part once at 2,000 memories with a handful of queries and writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks import open_first
from benchmarks.million import RECALL_PROBE, RSS_PROBE, build, library
from benchmarks.results_file import record_run
from benchmarks.scale_probes import FLOOR_PROBE, KEYWORD_PROBE, ROOT, VECTOR_PROBE, run

RESULTS = ROOT / "benchmarks" / "results" / "scale_run.jsonl"
MARGIN = 2**30
"""Free space a copy leaves at least (the writes and WAL that follow it)."""
assert open_first.QUERY in RSS_PROBE, "the cold and warm probes recall the same words"

TARGETS = {
    "open_first_ms": "<= 150 ms at 1M, 250 at 10M",
    "open_first_warm_ms": "(the model loaded before)",
    "raw_open_first_ms": "(apsw + FTS5, query embedded)",
    "raw_model_ms": "(model loaded, query embedded)",
    "open_first_x_raw": "(cold / raw open + raw model)",
    "open_first_warm_x_raw": "(warm / raw open)",
    "rss_first_mib": "<= 200 MiB at 1M; 10M <= 1M + 30",
    "rss_bare_mib": "(python + imports)",
    "rss_ready_mib": "(+ the model, warm)",
    "rss_warm_first_mib": "(warm: + open + first recall)",
    "rss_writes_mib": "(after the writes)",
    "recall_p50_ms": "<= 40 ms at 1M, 80 at 10M",
    "recall_p99_ms": "<= 3x p50",
    "keyword_p50_ms": "",
    "keyword_p99_ms": "<= 3x p50",
    "vector_recall": ">= 0.95",
    "vector_recall_filtered": ">= 0.95",
    "remember_vs_floor": "<= 2x",
    "build_s": "",
    "file_mib": "",
}


def vector_index_option(choice: str | None) -> tuple[dict[str, str], str]:
    """The open options that select the vector stage, and the stage used: ``None`` is the
    library's default (``MemoryConfig.vector_index``; ``ram``, the only one, before it)."""
    from tiered_memory.config import MemoryConfig

    field = {f.name: f for f in dataclasses.fields(MemoryConfig)}.get("vector_index")
    if field is not None:
        return ({}, str(field.default)) if choice is None else ({"vector_index": choice}, choice)
    if choice not in (None, "ram"):
        raise SystemExit(f"--vector-index {choice}: this library has only the RAM vector copy")
    return {}, "ram"


def copied(path: Path, to: Path, row: dict[str, Any]) -> Path | None:
    """A copy of the file (and its WAL, if any) at ``to``, or None (noted in the row's
    ``skipped``) if it would leave less than :data:`MARGIN` free."""
    files = [Path(f"{path}{suffix}") for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists()]
    need, free = sum(f.stat().st_size for f in files), shutil.disk_usage(to.parent).free
    print(f"{to.name}: copying {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free", flush=True)
    if need + MARGIN > free:
        row.setdefault("skipped", []).append(f"{to.name}: {need / 2**30:.1f} GiB not free")
        return None
    for file in files:
        shutil.copyfile(file, f"{to}{file.name.removeprefix(path.name)}")
    return to


def warm_and_raw(path: Path, index: str, rounds: int) -> dict[str, float]:
    """Open + first recall in a process that has its model, and the raw baselines, each in
    a fresh process, the three taking turns ``rounds`` times: medians."""
    from tiered_memory.embedding import compact_model

    folder, query = str(compact_model.build(None)), open_first.QUERY
    args = {
        "warm": (open_first.PROBE, str(ROOT), str(path), index, "warm", query, open_first.SECOND),
        "raw": (open_first.RAW, folder, str(path), "warm", query),
        "model": (open_first.RAW, folder, str(path), "model", query),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in args}
    for _ in range(rounds):
        for name, (script, *argv) in args.items():
            runs[name].append(open_first.probe(script, *argv))

    def median(name: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[name]), 1)

    return {
        "open_first_warm_ms": median("warm", "total_ms"),
        "open_warm_ms": median("warm", "open_ms"),
        "raw_open_first_ms": median("raw", "total_ms"),
        "raw_model_ms": median("model", "total_ms"),
        "rss_bare_mib": median("warm", "bare_mib"),
        "rss_ready_mib": median("warm", "ready_mib"),
        "rss_warm_first_mib": median("warm", "peak_first_mib"),
    }


def measure(
    path: Path, count: int, args: argparse.Namespace, options: dict[str, str]
) -> dict[str, Any]:
    """Every figure for the file of ``count`` memories at ``path``."""
    built = json.loads(Path(f"{path}.build.json").read_text())
    row: dict[str, Any] = {
        "count": count,
        "build_s": round(built["build_s"] + built["maintain_s"], 1),
        "file_mib": round(path.stat().st_size / 2**20, 1),
        "load_before": round(os.getloadavg()[0], 2),
    }
    scratch = args.dir / "scratch"
    scratch.mkdir(exist_ok=True)
    try:
        lib = copied(path, scratch / "lib.db", row)
        if lib:  # the model's load in the clock; then writes on the copy
            rss: Any = run(RSS_PROBE, str(lib), str(args.writes), options=options)
            row["open_first_ms"] = round(float(rss["first_s"]) * 1000, 1)
            row["rss_first_mib"] = round(rss["after_first"]["VmHWM"], 1)
            row["rss_writes_mib"] = round(rss["end"]["VmHWM"], 1)
        row.update(warm_and_raw(path, options.get("vector_index", "default"), args.rounds))
        raw_open, warm = row["raw_open_first_ms"], row["open_first_warm_ms"]
        row["open_first_warm_x_raw"] = round(warm / raw_open, 2)
        if lib:
            cold_raw = raw_open + row["raw_model_ms"]
            row["open_first_x_raw"] = round(row["open_first_ms"] / cold_raw, 2)
        raw = copied(path, scratch / "raw.db", row) if lib else None
        if lib and raw:  # the library's side on the first copy, after its writes
            floor: Any = run(
                FLOOR_PROBE, str(lib), str(raw), str(args.floor_calls), options=options
            )
            row["remember_vs_floor"] = round(float(floor["ratio"]), 2)
            row["remember_us"] = round(float(floor["library_us"]), 1)
            row["floor_us"] = round(float(floor["floor_us"]), 1)
    finally:
        shutil.rmtree(scratch)
    recall: Any = run(RECALL_PROBE, str(path), str(args.queries), options=options)
    row["recall_p50_ms"] = round(float(recall["p50"]), 1)
    row["recall_p99_ms"] = round(float(recall["p99"]), 1)
    row["recall_cpu_p50_ms"] = round(float(recall["cpu_p50"]), 1)
    keyword: Any = run(KEYWORD_PROBE, str(path), str(args.keyword_queries), options=options)
    leg: dict[str, float] = keyword["leg"]
    row["keyword_p50_ms"] = round(leg["p50"], 1)
    row["keyword_p99_ms"] = round(leg["p99"], 1)
    row["keyword_cpu_p50_ms"] = round(leg["cpu_p50"], 1)
    row["keyword_cpu_p99_ms"] = round(leg["cpu_p99"], 1)
    vector: Any = run(VECTOR_PROBE, str(path), str(args.vector_queries), options=options)
    row["vector_recall"] = round(float(vector["recall"]), 3)
    row["vector_recall_filtered"] = round(float(vector["filtered_recall"]), 3)
    row["filter_share"] = round(float(vector["filter_share"]), 3)
    row["load_after"] = round(os.getloadavg()[0], 2)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The figures per size, the issue's target, and each figure's slope from one size
    to the next (its ratio)."""
    sizes = [f"{r['count']:,}" for r in rows]
    slopes = [f"{a['count']:,}->{b['count']:,}" for a, b in zip(rows, rows[1:], strict=False)]
    head = ["figure", *sizes, *(f"slope {s}" for s in slopes), "target"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key, target in TARGETS.items():
        values = [r.get(key) for r in rows]
        ratios = [
            f"{b / a:.2f}x" if isinstance(a, int | float) and isinstance(b, int | float) and a
            else "-"
            for a, b in zip(values, values[1:], strict=False)
        ]  # fmt: skip
        shown = ["-" if v is None else str(v) for v in values]
        lines.append("| " + " | ".join([key, *shown, *ratios, target]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--vector-index", choices=("ram", "cells"), help="default: the library's")
    parser.add_argument("--rounds", type=int, default=3, help="of the warm and raw processes")
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--floor-calls", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keyword-queries", type=int, default=1_000)
    parser.add_argument("--vector-queries", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="2,000 memories, a few calls")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.writes, args.floor_calls, args.rounds = "2000", 20, 20, 1
        args.queries, args.keyword_queries, args.vector_queries = 10, 20, 5
    args.dir.mkdir(parents=True, exist_ok=True)
    options, index = vector_index_option(args.vector_index)
    rows = []
    for count in (int(n) for n in args.sizes.split(",")):
        path = library(args.dir, count)
        start = time.perf_counter()
        build(path, count)
        open_first.prepare(path, count, [index])  # cells trained once, if measured
        print(f"{count:,}: {shutil.disk_usage(args.dir).free / 2**30:.1f} GiB free", flush=True)
        rows.append(measure(path, count, args, options))
        print(json.dumps(rows[-1]), f"({time.perf_counter() - start:.0f} s)", flush=True)
    record = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "vector_index": index,
        "smoke": args.smoke,
        "sizes": rows,
    }
    print(table(rows))
    record_run(RESULTS, record, keep=not args.no_record)


if __name__ == "__main__":
    main()
