"""Collects each benchmark's median and prints store-vs-raw ratios after the run.

``--smoke`` (or ``TM_BENCH_SMOKE=1``) runs every benchmark once at a tiny size with
pytest-benchmark disabled: it checks that they run, and measures nothing.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from benchmarks.smoke import ENV, smoke

MEDIANS: dict[tuple[str, str], float] = {}
UNITS: dict[str, tuple[float, str]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--smoke",
        action="store_true",
        help="run every benchmark once at a tiny size, timing nothing (what CI runs)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark reads --benchmark-disable
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("smoke", default=False):
        os.environ[ENV] = "1"  # read by the benchmark modules when they are collected
    if smoke():
        config.option.benchmark_disable = True  # each benchmark function runs once


@pytest.fixture
def record(benchmark: Any) -> Any:
    """Call ``record(group, side)`` after ``benchmark(...)`` to keep its median.

    ``units=(amount, name)`` (say ``(100_000, "memories")``) adds a throughput line.
    """

    def keep(group: str, side: str, units: tuple[float, str] | None = None) -> None:
        if benchmark.stats is None:  # disabled (smoke mode): nothing was timed
            return
        MEDIANS[(group, side)] = benchmark.stats.stats.median
        if units is not None:
            UNITS[group] = units

    return keep


def pytest_terminal_summary(terminalreporter: Any) -> None:
    groups = sorted({group for group, _ in MEDIANS})
    if not groups:
        return
    write = terminalreporter.write_line
    write("")
    write(f"{'operation':<28}{'library':>14}{'raw floor':>14}{'ratio':>9}")
    for group in groups:
        lib, raw = MEDIANS.get((group, "library")), MEDIANS.get((group, "raw"))
        if lib is None or raw is None:
            continue
        write(f"{group:<28}{lib * 1e6:>11.1f} µs{raw * 1e6:>11.1f} µs{lib / raw:>8.2f}x")
    for group, (amount, name) in sorted(UNITS.items()):
        lib, raw = MEDIANS.get((group, "library")), MEDIANS.get((group, "raw"))
        if lib and raw:
            write(
                f"{group}: library {amount / lib:,.0f} {name}/s, raw {amount / raw:,.0f} {name}/s"
            )
