"""One validation style: config, recall settings and connection options refuse the same
mistake with the same exception type as the ``require_*`` functions the store uses."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from persistence import (
    InvalidInputError,
    TieredMemoryError,
    require_bool,
    require_int,
    require_number,
)
from persistence.sqlite import ConnectionOptions
from tiered_memory import MemoryConfig, RecallSettings


def _raised(call: Callable[[], object]) -> type[BaseException]:
    with pytest.raises(TieredMemoryError) as caught:
        call()
    return caught.type


@pytest.mark.parametrize(
    ("build", "reference"),
    [
        (lambda: MemoryConfig(cache_size="5"), lambda: require_int("5", "x", minimum=1)),
        (lambda: MemoryConfig(cache_size=0), lambda: require_int(0, "x", minimum=1)),
        (lambda: MemoryConfig(recall_review_quality=6), lambda: require_int(6, "x", maximum=5)),
        (lambda: MemoryConfig(target_retention="0.9"), lambda: require_number("0.9", "x")),
        (
            lambda: MemoryConfig(forgetting_threshold=2.0),
            lambda: require_number(2.0, "x", maximum=1),
        ),
        (lambda: RecallSettings(depth="5"), lambda: require_int("5", "x")),
        (lambda: RecallSettings(rrf_k="60"), lambda: require_number("60", "x")),
        (lambda: RecallSettings(rrf_k=float("nan")), lambda: require_number(float("nan"), "x")),
        (lambda: RecallSettings(fact_mutual=1), lambda: require_bool(1, "x")),
        (lambda: RecallSettings(fact_mutual="false"), lambda: require_bool("false", "x")),
        (lambda: ConnectionOptions(busy_timeout_ms="5"), lambda: require_int("5", "x")),
        (lambda: ConnectionOptions(busy_timeout_ms=-1), lambda: require_int(-1, "x", minimum=0)),
    ],
)
def test_the_same_mistake_raises_the_same_type(
    build: Callable[[], object], reference: Callable[[], object]
) -> None:
    assert _raised(build) is _raised(reference)
    assert issubclass(_raised(build), InvalidInputError)
