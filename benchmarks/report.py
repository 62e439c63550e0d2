"""The benchmark report: ``python benchmarks/report.py`` turns benchmark results into one
HTML page of plots (SVG drawn by the inspector's chart code, ``tiered_memory.inspector.svg``:
no script, nothing loaded from elsewhere).

    .venv/bin/python benchmarks/report.py --quick            # a small fresh run, then the report
    .venv/bin/python benchmarks/report.py scaling.json locomo.json --out report.html

Results it reads (any number of JSON files):

- ``benchmarks/scaling.py --json-out``: latency against N for ``remember()``, ``get`` and
  ``recall()`` beside the raw SQLite floor and a LangGraph store, and peak RSS against N;
- ``benchmarks/eval_locomo.py --json-out``: LoCoMo evidence recall by question category.

``--quick`` measures both afresh at small sizes (``--sizes``, default 200,1000,5000; LoCoMo:
the first ``--locomo-convs`` conversations of ``--locomo-data``, by default the team's
development file beside the repository, skipped with a note when it is missing) and saves
the results next to the report (``--save-json``). ``--svg-dir`` also writes the plots as
standalone SVG files.

``--markdown PAGE`` writes the documentation's page instead of the HTML: each table with
the command that measured it and its plot (the SVG files beside the page). The committed
page is generated from the committed results (tests/docs/test_benchmark_page.py checks it)
by :data:`PAGE_COMMAND`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tiered_memory.inspector import svg  # noqa: E402

OPERATIONS = ("remember", "get", "recall")
DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo-dev.json"
COLORS = {"tiered-memory": "#2563eb", "raw SQLite floor": "#6b7280"}
PEER_COLOR = "#dc2626"
CSS = """body{font:14px/1.45 system-ui,sans-serif;color:#111827;max-width:1100px;margin:1.5rem auto;
padding:0 1rem}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}table{border-collapse:
collapse;margin:.5rem 0}td,th{border:1px solid #e5e7eb;padding:.2rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}.note{color:#6b7280}figure{margin:0}"""


def _series(rows: list[dict[str, Any]], sides: list[str], value: Any) -> list[svg.Series]:
    out = []
    for side in sides:
        points = [(float(r["n"]), v) for r in rows if (v := value(r, side)) is not None]
        if points:
            out.append(svg.Series(side, points, dashed=side == "raw SQLite floor",
                                  color=COLORS.get(side, PEER_COLOR)))  # fmt: skip
    return out


def latency_plot(scaling: dict[str, Any]) -> str:
    """The main plot: p50 latency against N, one panel per operation, log-log."""
    rows, sides = scaling["rows"], scaling["sides"]
    panels = [
        svg.line_chart(
            _series(rows, sides, lambda r, s, op=op: r["p50_ms"].get(s, {}).get(op)),
            title=f"{op} p50 latency against N", x_label=f"memories (N) · {op}()",
            y_label="p50 ms", log_x=True, log_y=True, width=360, height=300,
        )
        for op in OPERATIONS
    ]  # fmt: skip
    title = "p50 latency against N: tiered-memory, the raw floor, a peer"
    return svg.grid(panels, width=360, height=300, columns=3, title=title)


def rss_plot(scaling: dict[str, Any]) -> str:
    return svg.line_chart(
        _series(scaling["rows"], scaling["sides"], lambda r, s: r["peak_rss_mib"].get(s)),
        title="peak RSS against N", x_label="memories (N)", y_label="peak RSS (MiB)",
        log_x=True, width=560, height=300,
    )  # fmt: skip


def locomo_plot(result: dict[str, Any]) -> str:
    ks = result.get("ks", [5, 10])
    items = [
        (f"{name} · recall@{k} (n={cat['n']})", cat.get(f"recall@{k}", 0.0))
        for name, cat in [("overall (1-4)", result["overall"]), *result["by_category"].items()]
        for k in ks if cat.get("n")
    ]  # fmt: skip
    shades = ("#93c5fd", "#2563eb", "#1e3a8a")[: len(ks)]
    return svg.bars(items, title=f"LoCoMo recall by category: {result['retriever']}",
                    width=720, colors=shades, signed=False)  # fmt: skip


def _latency_table(scaling: dict[str, Any]) -> str:
    sides = scaling["sides"]
    head = "".join(f"<th>{escape(s)}</th>" for s in sides)
    lines = [f"<table><tr><th>N</th><th>operation</th>{head}<th>library / floor</th></tr>"]
    for r in scaling["rows"]:
        for op in OPERATIONS:
            cells = [r["p50_ms"].get(s, {}).get(op) for s in sides]
            lib, floor = cells[0], cells[1]
            ratio = f"{lib / floor:.2f}x" if lib and floor else "-"
            values = "".join(f"<td>{c:.4f} ms</td>" if c is not None else "<td>-</td>"
                             for c in cells)  # fmt: skip
            lines.append(f"<tr><td>{r['n']:,}</td><td>{op}</td>{values}<td>{ratio}</td></tr>")
    lines.append("</table>")
    return "".join(lines)


def _rss_table(scaling: dict[str, Any]) -> str:
    sides = scaling["sides"]
    head = "".join(f"<th>{escape(s)}</th>" for s in sides)
    lines = [f"<table><tr><th>N</th>{head}</tr>"]
    for r in scaling["rows"]:
        cells = [r["peak_rss_mib"].get(s) for s in sides]
        values = "".join(f"<td>{c:.1f} MiB</td>" if c is not None else "<td>-</td>"
                         for c in cells)  # fmt: skip
        lines.append(f"<tr><td>{r['n']:,}</td>{values}</tr>")
    lines.append("</table>")
    return "".join(lines)


def _locomo_table(result: dict[str, Any]) -> str:
    ks = result.get("ks", [5, 10])
    head = "".join(f"<th>recall@{k}</th><th>hit@{k}</th>" for k in ks)
    lines = [f"<table><tr><th>questions</th><th>n</th>{head}</tr>"]
    for name, cat in [("overall (1-4)", result["overall"]), *result["by_category"].items()]:
        values = "".join(
            f"<td>{cat.get(f'recall@{k}', 0):.3f}</td><td>{cat.get(f'hit@{k}', 0):.3f}</td>"
            for k in ks
        )
        lines.append(f"<tr><td>{escape(name)}</td><td>{cat.get('n', 0)}</td>{values}</tr>")
    lines.append("</table>")
    return "".join(lines)


def render(results: list[dict[str, Any]], notes: list[str] = ()) -> str:  # type: ignore[assignment]
    """The report's HTML for these result documents."""
    parts = ["<!doctype html><html lang=en><head><meta charset=utf-8>",
             "<title>tiered-memory benchmarks</title>", f"<style>{CSS}</style></head><body>",
             "<h1>tiered-memory benchmarks</h1>"]  # fmt: skip
    for note in notes:
        parts.append(f'<p class="note">{escape(note)}</p>')
    for doc in results:
        if doc.get("kind") == "scaling":
            sizes = ", ".join(f"{r['n']:,}" for r in doc["rows"])
            machine = doc.get("machine", {})
            parts += [
                "<h2>Latency against N</h2>",
                f'<p class="note">p50 of {doc["calls"]} calls (remember, get) and '
                f'{doc["queries"]} queries (recall), at N = {sizes}; measured '
                f'{escape(doc.get("when", ""))} on {machine.get("cpus", "?")} cores '
                f"({escape(str(machine.get('platform', '')))}). Dashed: the raw SQLite floor "
                "(the same statements without the library). Log-log axes.</p>",
                f'<figure id="latency">{latency_plot(doc)}</figure>', _latency_table(doc),
                "<h2>Memory against N</h2>",
                '<p class="note">Peak RSS of a new process that opens the data and answers '
                "20 queries (the in-memory peer loads the data first).</p>",
                f'<figure id="rss">{rss_plot(doc)}</figure>', _rss_table(doc),
            ]  # fmt: skip
        for result in doc.get("results", []):
            parts += [
                f"<h2>LoCoMo recall by category: {escape(result['retriever'])}</h2>",
                f'<p class="note">{result.get("n_conversations", "?")} conversation(s), '
                f"{result.get('n_memories', '?')} memories; data: "
                f"{escape(str(doc.get('data', '?')))}.</p>",
                f'<figure class="locomo">{locomo_plot(result)}</figure>', _locomo_table(result),
            ]  # fmt: skip
    parts.append("</body></html>")
    return "\n".join(parts)


PAGE_COMMAND = (
    ".venv/bin/python benchmarks/report.py docs/benchmarks/results.json "
    "--markdown docs/benchmarks/report.md"
)
"""How the committed benchmark page is made from the committed results."""


def measuring_command(doc: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """The command that measured a result document: the one it saved, else the
    ``--quick`` run that measures what ``results`` (saved together) hold."""
    if doc.get("command"):
        return str(doc["command"])
    parts = [".venv/bin/python benchmarks/report.py --quick"]
    for other in results:
        if other.get("kind") == "scaling":
            sizes = ",".join(str(r["n"]) for r in other["rows"])
            parts.append(f"--sizes {sizes} --calls {other['calls']} --queries {other['queries']}")
        for result in other.get("results", []):
            parts.append(f"--locomo-convs {result.get('n_conversations', 1)}")
    return " ".join(parts)


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(row) + " |" for row in rows)]  # fmt: skip


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms"


def markdown(results: list[dict[str, Any]], svg_prefix: str = "") -> str:
    """The documentation's benchmark page for these result documents: per benchmark its
    command, its plot (``<svg_prefix>latency.svg`` ...) and its table."""
    lines = ["# Benchmark report", "",
             "<!-- generated by benchmarks/report.py from docs/benchmarks/results.json: "
             "do not edit -->", "",
             "Every table below names the command that measured it. This page itself is "
             "generated from the saved results (`docs/benchmarks/results.json`, plots "
             "included) by", "", f"    {PAGE_COMMAND}", ""]  # fmt: skip
    for doc in results:
        if doc.get("kind") == "scaling":
            sides, machine = doc["sides"], doc.get("machine", {})
            lines += [
                "## Latency against N", "", "Measured by", "",
                f"    {measuring_command(doc, results)}", "",
                f"p50 of {doc['calls']} calls (`remember()`, an uncached `get`) and "
                f"{doc['queries']} queries (`recall()`) at each N, measured "
                f"{doc.get('when', '?')} on {machine.get('cpus', '?')} cores (Python "
                f"{machine.get('python', '?')}). The raw SQLite floor runs the same "
                "statements without the library (dashed); how each figure is taken is in "
                "`benchmarks/scaling.py`'s docstring. Log-log axes.", "",
                f"![p50 latency against N]({svg_prefix}latency.svg)", "",
            ]  # fmt: skip
            rows = []
            for r in doc["rows"]:
                for op in OPERATIONS:
                    cells = [r["p50_ms"].get(s, {}).get(op) for s in sides]
                    lib, floor = cells[0], cells[1]
                    ratio = f"{lib / floor:.2f}x" if lib and floor else "-"
                    rows.append([f"{r['n']:,}", f"`{op}`", *map(_ms, cells), ratio])
            lines += _md_table(["N", "operation", *sides, "library / floor"], rows)
            lines += ["", "## Memory against N", "", "Measured by the same command: peak RSS "
                      "of a new process that opens the data and answers 20 queries (the "
                      "in-memory peer loads the data first).", "",
                      f"![peak RSS against N]({svg_prefix}rss.svg)", ""]  # fmt: skip
            rss = [[f"{r['n']:,}", *("-" if (v := r["peak_rss_mib"].get(s)) is None
                                     else f"{v:.1f} MiB" for s in sides)]
                   for r in doc["rows"]]  # fmt: skip
            lines += [*_md_table(["N", *sides], rss), ""]
        for result in doc.get("results", []):
            ks = result.get("ks", [5, 10])
            lines += [
                f"## LoCoMo recall by category: {result['retriever']}", "", "Measured by", "",
                f"    {measuring_command(doc, results)}", "",
                f"{result.get('n_conversations', '?')} conversation(s), "
                f"{result.get('n_memories', '?')} memories (turns), evidence recall of the "
                f"top k; data: `{Path(str(doc.get('data', '?'))).name}` (LoCoMo's "
                "conversations are not in the repository: `benchmarks/eval_locomo.py` says "
                "where to get them).", "",
                f"![LoCoMo recall by category]({svg_prefix}locomo.svg)", "",
            ]  # fmt: skip
            rows = [[name, str(cat.get("n", 0)),
                     *(f"{cat.get(f'{m}@{k}', 0):.3f}" for k in ks for m in ("recall", "hit"))]
                    for name, cat in [("overall (1-4)", result["overall"]),
                                      *result["by_category"].items()]]  # fmt: skip
            head = ["questions", "n", *(f"{m}@{k}" for k in ks for m in ("recall", "hit"))]
            lines += [*_md_table(head, rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_plots(results: list[dict[str, Any]], folder: Path) -> None:
    """The plots as standalone SVG files: latency.svg, rss.svg, locomo.svg."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc in results:
        if doc.get("kind") == "scaling":
            (folder / "latency.svg").write_text(latency_plot(doc) + "\n")
            (folder / "rss.svg").write_text(rss_plot(doc) + "\n")
        for result in doc.get("results", []):
            (folder / "locomo.svg").write_text(locomo_plot(result) + "\n")


def run_locomo(data: Path, convs: int) -> dict[str, Any]:
    """Evidence recall of tiered-memory (default settings) on the first ``convs``
    conversations of ``data``, as ``eval_locomo.py --json-out`` writes it."""
    from benchmarks.eval_locomo import evaluate, load_locomo
    from benchmarks.locomo_adapter import TieredMemoryAdapter

    conversations = load_locomo(str(data))[:convs]
    adapter = TieredMemoryAdapter()
    try:
        result = evaluate(adapter, conversations, ks=(5, 10))
    finally:
        adapter.close()
    return {"data": str(data), "results": [result]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="result JSON files to draw")
    parser.add_argument("--quick", action="store_true", help="measure afresh at small sizes")
    parser.add_argument("--sizes", default="200,1000,5000", help="--quick: memories per run")
    parser.add_argument("--calls", type=int, default=50, help="--quick: timed calls")
    parser.add_argument("--queries", type=int, default=20, help="--quick: timed recalls")
    parser.add_argument("--locomo-data", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--locomo-convs", type=int, default=1, help="--quick: conversations")
    parser.add_argument("--out", type=Path, default=Path("benchmark-report.html"))
    parser.add_argument("--save-json", type=Path, help="--quick: keep the fresh results here")
    parser.add_argument("--svg-dir", type=Path, help="also write the plots as SVG files here")
    parser.add_argument(
        "--markdown", type=Path, help="write the docs page (tables, commands, plots beside it)"
    )
    args = parser.parse_args(argv)
    results = [json.loads(p.read_text()) for p in args.results]
    notes: list[str] = []
    if args.quick:
        from benchmarks.scaling import measure

        sizes = [int(s) for s in args.sizes.split(",")]
        log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        command = " ".join([".venv/bin/python benchmarks/report.py", *(argv or sys.argv[1:])])
        results.append(measure(sizes, calls=args.calls, queries=args.queries, out=log))
        results[-1]["command"] = command
        if args.locomo_data.exists():
            log(f"LoCoMo: {args.locomo_convs} conversation(s) of {args.locomo_data} ...")
            results.append(run_locomo(args.locomo_data, args.locomo_convs))
            results[-1]["command"] = command
        else:
            notes.append(f"LoCoMo left out: no data at {args.locomo_data} (--locomo-data)")
        if args.save_json:
            args.save_json.write_text(json.dumps(results, indent=2) + "\n")
    flat = [d for r in results for d in (r if isinstance(r, list) else [r])]
    if not flat:
        parser.error("give result files, or --quick for a fresh run")
    if args.markdown:  # the docs page: deterministic (no time of writing), plots beside it
        args.markdown.write_text(markdown(flat))
        write_plots(flat, args.markdown.parent)
        print(f"wrote {args.markdown}")
        return 0
    notes.append(f"report written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    args.out.write_text(render(flat, notes))
    if args.svg_dir:
        write_plots(flat, args.svg_dir)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
