"""Issue 46's scale run as a benchmark file: ``benchmarks/scale_run.py`` run once (its
``--smoke`` mode at 2,000 memories in smoke mode, 20,000 memories otherwise), every
part in a fresh process, each figure present (open + first recall with and without the
model's load, beside raw baselines; RSS before and after the open).

Run the real one as a script (files kept in ``--dir``, outside the repository)::

    .venv/bin/python -m benchmarks.scale_run --dir /somewhere/big --sizes 100000,1000000
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import scale_run
from benchmarks.scale_probes import ROOT
from benchmarks.scale_run import TARGETS
from benchmarks.smoke import smoke
from tiered_memory.config import MemoryConfig


def test_scale_run(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.scale_run", "--dir", str(tmp_path), "--no-record"]
    command += ["--smoke"] if smoke() else ["--sizes", "20000", "--writes", "1000"]
    out = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=1800, cwd=ROOT
    ).stdout
    print(out)
    record = json.loads(out.strip().splitlines()[-1])
    (row,) = record["sizes"]
    # Without --vector-index the library's default is used, and recorded.
    assert set(TARGETS) <= set(row) and record["vector_index"] == MemoryConfig().vector_index
    assert "skipped" not in row
    # Open + first recall with the model's load and without, each beside its raw baseline.
    for key in ("open_first", "open_first_warm", "raw_open_first", "raw_model"):
        assert row[f"{key}_ms"] > 0, key
    assert row["open_first_x_raw"] > 0 and row["open_first_warm_x_raw"] > 0
    assert 0 < row["open_warm_ms"] < row["open_first_warm_ms"]
    # Peak RSS only grows: python + imports, + the model, + the open and first recall.
    assert 0 < row["rss_bare_mib"] <= row["rss_ready_mib"] <= row["rss_warm_first_mib"]
    assert row["count"] == (2_000 if smoke() else 20_000) and row["file_mib"] > 0
    assert 0 < row["recall_p50_ms"] <= row["recall_p99_ms"]
    assert 0 < row["keyword_p50_ms"] <= row["keyword_p99_ms"]
    assert row["rss_writes_mib"] >= row["rss_first_mib"] > 0 and row["remember_vs_floor"] > 0
    # The RAM copy compares exactly at this size: any miss is a wrong answer.
    assert row["vector_recall"] == row["vector_recall_filtered"] == 1.0, row
    assert 0.05 < row["filter_share"] < 0.15
    assert "| figure | 2,000 |" in out or "| figure | 20,000 |" in out


def test_copies_only_what_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy (the file and its WAL) is made while it leaves MARGIN free; one that does
    not fit is skipped and named in the row, so the parts that need it are left out."""
    kept = tmp_path / "memories_2000.db"
    kept.write_bytes(b"x" * 1000)
    Path(f"{kept}-wal").write_bytes(b"w" * 10)
    row: dict[str, Any] = {}
    assert scale_run.copied(kept, tmp_path / "lib.db", row) == tmp_path / "lib.db"
    assert (tmp_path / "lib.db").read_bytes() == kept.read_bytes()
    assert Path(f"{tmp_path / 'lib.db'}-wal").read_bytes() == b"w" * 10 and not row
    usage = shutil.disk_usage(tmp_path)._replace(free=scale_run.MARGIN + 1009)  # 1 byte short
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage)
    assert scale_run.copied(kept, tmp_path / "raw.db", row) is None
    assert not (tmp_path / "raw.db").exists() and row["skipped"] == ["raw.db: 0.0 GiB not free"]
