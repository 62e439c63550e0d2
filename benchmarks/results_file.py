"""A benchmark run's record: printed as one JSON line and appended to its results file
(``benchmarks/results/<name>.jsonl``), so runs on other days and machines can be compared."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def record_run(results: Path, record: Mapping[str, Any], *, keep: bool = True) -> None:
    """Print ``record`` as one JSON line and, with ``keep`` (a run without
    ``--no-record``), append that line to ``results`` (its folder made if missing)."""
    line = json.dumps(record)
    print(line, flush=True)
    if keep:
        results.parent.mkdir(parents=True, exist_ok=True)
        with results.open("a") as out:
            out.write(line + "\n")
