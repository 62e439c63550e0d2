"""The test lanes hold: every marker a test uses is registered in pyproject.toml, and
every test file keeps at least one test in the fast lane (``pytest -m "not slow"``),
unless the whole file says it is slow (``pytestmark`` with ``slow``: the crash
campaigns and the benchmark smoke run, one long test each).

Both are read from a collection. When this session collected every test file (the
whole suite, or the fast lane with no file missing) its own items answer at no cost;
otherwise a child process collects the fast lane (collecting runs no test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TESTS = ROOT / "tests"


def _test_files() -> set[str]:
    return {path.name for path in TESTS.rglob("test_*.py")}


def _wholly_slow_files() -> set[str]:
    """Files whose module-level ``pytestmark`` holds ``slow`` (read as text: cheap)."""
    return {
        path.name
        for path in TESTS.rglob("test_*.py")
        if any(
            line.startswith("pytestmark") and "pytest.mark.slow" in line
            for line in path.read_text().splitlines()
        )
    }


def _fast_files_collected_apart() -> set[str]:
    """The fast lane's files from a child's collection; a collection error (such as an
    unregistered marker under ``--strict-markers``) fails here."""
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
    registered = {line.split(":")[0].split("(")[0] for line in request.config.getini("markers")}
    unregistered = {
        f"{item.nodeid}: {mark.name}"
        for item in items
        for mark in item.iter_markers()
        if mark.name not in registered
    }
    assert not unregistered, sorted(unregistered)
    expected = _test_files() - _wholly_slow_files()
    if {item.path.name for item in items} >= expected:
        fast = {item.path.name for item in items if item.get_closest_marker("slow") is None}
    else:  # a part of the suite was selected: collect the fast lane apart
        fast = _fast_files_collected_apart()
    assert expected - fast == set(), "test files with no test in the fast lane"
