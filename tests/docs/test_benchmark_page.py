"""The documentation's benchmark report (docs/benchmarks/report.md and its SVG plots) is
what ``benchmarks/report.py --markdown`` generates from the committed results: no
table or plot there is edited by hand (else regenerate it with the command the page
names). Nothing is measured here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import report

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "benchmarks"


@pytest.fixture(scope="module")
def results() -> list[dict]:  # type: ignore[type-arg]
    loaded: list[dict] = json.loads((PAGES / "results.json").read_text())  # type: ignore[type-arg]
    return loaded


def test_the_committed_page_is_what_report_py_generates(results: list[dict]) -> None:  # type: ignore[type-arg]
    assert (PAGES / "report.md").read_text() == report.markdown(results)
    assert report.PAGE_COMMAND in (PAGES / "report.md").read_text()


def test_the_committed_plots_are_drawn_from_the_committed_results(
    results: list[dict],  # type: ignore[type-arg]
) -> None:
    [scaling] = [doc for doc in results if doc.get("kind") == "scaling"]
    [locomo] = [r for doc in results for r in doc.get("results", [])]
    assert (PAGES / "latency.svg").read_text() == report.latency_plot(scaling) + "\n"
    assert (PAGES / "rss.svg").read_text() == report.rss_plot(scaling) + "\n"
    assert (PAGES / "locomo.svg").read_text() == report.locomo_plot(locomo) + "\n"


def test_each_table_has_its_command_its_plot_and_the_saved_figures(
    results: list[dict],  # type: ignore[type-arg]
) -> None:
    page = report.markdown(results)
    sections = re.split(r"^## ", page, flags=re.M)[1:]
    assert [s.splitlines()[0] for s in sections] == [
        "Latency against N", "Memory against N", "LoCoMo recall by category: tiered-memory"
    ]  # fmt: skip
    for section in sections:
        assert re.search(r"!\[[^]]+\]\((latency|rss|locomo)\.svg\)", section), section[:40]
        assert re.search(r"^\|---\|", section, flags=re.M), section[:40]
    latency, _, locomo = sections
    assert "    .venv/bin/python benchmarks/report.py --quick --sizes 1000,10000,50000" in latency
    [scaling] = [doc for doc in results if doc.get("kind") == "scaling"]
    last = scaling["rows"][-1]
    lib, floor = (last["p50_ms"][s]["recall"] for s in scaling["sides"][:2])
    assert f"| {last['n']:,} | `recall` | {lib:.4f} ms | {floor:.4f} ms |" in latency
    assert f"| {lib / floor:.2f}x |" in latency
    overall = results[1]["results"][0]["overall"]
    assert f"| overall (1-4) | {overall['n']} | {overall['recall@5']:.3f} |" in locomo


def test_a_changed_figure_changes_the_page(results: list[dict]) -> None:  # type: ignore[type-arg]
    """The comparison above would see an edit: one figure moved, the page differs."""
    changed = json.loads(json.dumps(results))
    changed[0]["rows"][0]["p50_ms"]["tiered-memory"]["recall"] *= 2
    assert report.markdown(changed) != (PAGES / "report.md").read_text()


def test_a_saved_command_is_the_one_the_page_names() -> None:
    doc = {"kind": "scaling", "command": "python benchmarks/report.py --quick --sizes 5",
           "sides": ["tiered-memory", "raw SQLite floor"], "calls": 1, "queries": 1,
           "rows": [{"n": 5, "p50_ms": {"tiered-memory": {"recall": 2.0},
                                        "raw SQLite floor": {"recall": 1.0}},
                     "peak_rss_mib": {}}]}  # fmt: skip
    page = report.markdown([doc])
    assert "    python benchmarks/report.py --quick --sizes 5\n" in page
    assert "| 5 | `recall` | 2.0000 ms | 1.0000 ms | 2.00x |" in page
