"""Seeded fuzzing, a few hundred inputs per target (tests/support/fuzz_targets.py); the 100k run
is benchmarks/fuzz.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support.fuzz_targets import TARGETS

pytestmark = [pytest.mark.slow]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzzed_inputs_lose_nothing_change_nothing_when_refused_and_raise_only_ours(
    target: str, tmp_path: Path
) -> None:
    tally = TARGETS[target](random.Random(f"tests {target}"), 150, tmp_path)
    assert tally.inputs == 150
    assert (tally.lost, tally.partial, dict(tally.raw)) == (0, 0, {}), tally.notes
    assert tally.refused > 0  # the inputs reach the checks
    if target != "import":  # a broken document is (nearly) always refused
        assert tally.accepted > 0  # and, for the others, the working paths
