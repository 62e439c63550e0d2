"""Memory ids (persistence.records.new_id): 32 hex characters, unique, time first."""

from __future__ import annotations

import time

from persistence.records import new_id


def test_ids_are_unique_hex_of_the_old_length() -> None:
    ids = [new_id() for _ in range(50_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert len({i[12:] for i in ids}) == len(ids)  # the random part alone never repeats


def test_ids_sort_by_creation_time_across_milliseconds() -> None:
    earlier = new_id()
    time.sleep(0.003)
    later = new_id()
    assert earlier < later
    now_ms = time.time_ns() // 1_000_000
    assert abs(int(later[:12], 16) - now_ms) < 5_000
