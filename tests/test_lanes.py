"""The test lanes hold: every marker a test uses is registered in pyproject.toml, and
every test file keeps at least one test in the fast lane (``pytest -m "not slow"``).

Both are read from a collection. When this session collected every test file (the
whole suite, or the fast lane with none missing) its own items answer at no cost;
otherwise a child process collects the fast lane (collecting runs no test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TESTS = ROOT / "tests"


def _test_files() -> set[str]:
    return {path.name for path in TESTS.glob("test_*.py")}


def _fast_files_collected_apart() -> set[str]:
    """Files of the fast lane's node ids; a collection error (an unregistered marker
    under ``--strict-markers``) fails here."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--strict-markers",
         "-p", "no:cacheprovider", "-m", "not slow", "tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {
        Path(line.split("::", 1)[0]).name for line in result.stdout.splitlines() if "::" in line
    }


@pytest.mark.subprocess
def test_markers_are_registered_and_every_file_has_a_fast_test(
    request: pytest.FixtureRequest,
) -> None:
    items = request.session.items
    registered = {
        line.split(":", 1)[0].split("(", 1)[0] for line in request.config.getini("markers")
    }
    unregistered = {
        f"{item.nodeid}: {mark.name}"
        for item in items
        for mark in item.iter_markers()
        if mark.name not in registered
    }
    assert not unregistered, sorted(unregistered)
    if {item.path.name for item in items} >= _test_files():
        fast = {item.path.name for item in items if item.get_closest_marker("slow") is None}
    else:  # a part of the suite was selected: collect the fast lane apart
        fast = _fast_files_collected_apart()
    assert _test_files() - fast == set(), "test files with no test in the fast lane"
