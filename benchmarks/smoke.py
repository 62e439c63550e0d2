"""Smoke mode: every benchmark runs once, at a tiny size, and nothing is timed or judged.

``pytest benchmarks/ --smoke`` (or ``TM_BENCH_SMOKE=1``) is what CI runs
(``tests/docs/test_benchmarks_smoke.py``), so a benchmark that no longer runs is caught
without paying for a real measurement. Benchmarks take their sizes through :func:`size`.
"""

from __future__ import annotations

import os

ENV = "TM_BENCH_SMOKE"


def smoke() -> bool:
    """True in smoke mode (read at call time: ``--smoke`` sets it before collection)."""
    return os.environ.get(ENV, "") not in ("", "0")


def size(full: int, tiny: int) -> int:
    """``full`` for a measurement, ``tiny`` in smoke mode."""
    return tiny if smoke() else full
