"""``python benchmarks/report.py --quick``: a small real benchmark run (latency and RSS
against N beside the raw floor and a LangGraph store, LoCoMo recall on a tiny conversation)
rendered as an HTML report whose plots and tables show the figures the run saved."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.docs.test_pages import LOCOMO_LIKE

ROOT = Path(__file__).resolve().parents[2]
SIZES = (100, 400)

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]  # a real benchmark run: ~8 s


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict], Path]:  # type: ignore[type-arg]
    tmp = tmp_path_factory.mktemp("report")
    data = tmp / "tiny-locomo.json"
    data.write_text(json.dumps(LOCOMO_LIKE))
    result = subprocess.run(
        [sys.executable, "benchmarks/report.py", "--quick", "--sizes", ",".join(map(str, SIZES)),
         "--calls", "5", "--queries", "3", "--locomo-data", str(data),
         "--out", str(tmp / "report.html"), "--save-json", str(tmp / "results.json"),
         "--svg-dir", str(tmp / "svg")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return (tmp / "report.html").read_text(), json.loads((tmp / "results.json").read_text()), tmp


def test_the_run_measured_every_side_at_every_size(report: tuple[str, list, Path]) -> None:  # type: ignore[type-arg]
    scaling = next(d for d in report[1] if d.get("kind") == "scaling")
    assert [r["n"] for r in scaling["rows"]] == list(SIZES)
    assert scaling["sides"][:2] == ["tiered-memory", "raw SQLite floor"]
    assert scaling["command"].startswith(".venv/bin/python benchmarks/report.py --quick --sizes")
    assert scaling["sides"][2].startswith("LangGraph ")
    for row in scaling["rows"]:
        for side in scaling["sides"]:
            assert set(row["p50_ms"][side]) == {"remember", "get", "recall"}
            assert all(v > 0 for v in row["p50_ms"][side].values())
            assert row["peak_rss_mib"][side] > 10  # a Python process holds more than that


def test_the_latency_plot_draws_each_side_from_the_saved_figures(
    report: tuple[str, list, Path],  # type: ignore[type-arg]
) -> None:
    html, results, tmp = report
    scaling = next(d for d in results if d.get("kind") == "scaling")
    figure = re.search(r'<figure id="latency">(.*?)</figure>', html, re.S)
    assert figure is not None
    panels = re.findall(r"<svg x=.*?</svg>", figure.group(1), re.S)
    assert len(panels) == 3  # remember, get, recall
    for op, panel in zip(("remember", "get", "recall"), panels, strict=True):
        lines = dict(re.findall(r'data-name="([^"]+)" points="([^"]+)"', panel))
        assert set(lines) == set(scaling["sides"]), op
        for side, points in lines.items():
            ys = [float(p.split(",")[1]) for p in points.split()]
            values = [r["p50_ms"][side][op] for r in scaling["rows"]]
            assert len(ys) == len(values)
            # pixels grow downwards: a larger latency is drawn higher (a smaller y); two
            # latencies within 1% may share a pixel (points are rounded to 0.1 px)
            if ys[0] == ys[1]:
                assert abs(values[0] - values[1]) <= 0.01 * max(values[0], values[1]), op
            else:
                assert (ys[0] > ys[1]) == (values[0] < values[1]), op
    for r in scaling["rows"]:
        lib = r["p50_ms"]["tiered-memory"]["recall"]
        floor = r["p50_ms"]["raw SQLite floor"]["recall"]
        assert f"<td>{lib:.4f} ms</td><td>{floor:.4f} ms</td>" in html
        assert f"{lib / floor:.2f}x" in html
    for name in ("latency", "rss", "locomo"):
        ET.fromstring((tmp / "svg" / f"{name}.svg").read_text())  # well-formed SVG


def test_the_report_shows_rss_and_locomo_recall_by_category(
    report: tuple[str, list, Path],  # type: ignore[type-arg]
) -> None:
    html, results, _ = report
    assert '<figure id="rss">' in html
    locomo = next(d for d in results if "results" in d)["results"][0]
    assert locomo["n_conversations"] == 1 and locomo["overall"]["n"] == 2
    assert set(locomo["by_category"]) == {"1-multi-hop", "4-single-hop"}
    for name, cat in locomo["by_category"].items():
        row = f"<tr><td>{name}</td><td>{cat['n']}</td><td>{cat['recall@5']:.3f}</td>"
        assert row in html
    assert html.count('class="bar"') == 2 * (1 + len(locomo["by_category"]))  # @5 and @10
