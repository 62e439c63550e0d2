"""LangGraph TTLs over tiered-memory's forgetting.

An item put with ``ttl`` (minutes; ``TTLConfig["default_ttl"]`` when not given) carries
its deadline in its metadata and a tag marking it as expiring. Reads never return an
item past its deadline; a read with ``refresh_ttl`` moves the deadline to ``now + ttl``;
:func:`sweep` forgets expired items with ``forget()``, so each leaves the forgetting log
and the audit trail like any forgotten memory. :class:`Sweeper` sweeps on an interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from persistence import InvalidInputError

log = logging.getLogger(__name__)

TTL_TAG = "langgraph:ttl"
TTL_KEY = "ttl_minutes"
DEADLINE_KEY = "expires_at"


def check_ttl(ttl: Any) -> float | None:
    """A TTL in minutes (> 0) or ``None``."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise InvalidInputError(f"ttl must be a number of minutes > 0 or None, got {ttl!r}")
    return float(ttl)


def deadline(ttl_minutes: float | None, now_ms: int) -> int | None:
    """The instant (ms) an item written or refreshed at ``now_ms`` expires."""
    return None if ttl_minutes is None else now_ms + round(ttl_minutes * 60_000)


def ttl_entries(ttl_minutes: float | None, now_ms: int) -> dict[str, Any]:
    """The metadata entries of an item's TTL."""
    return {TTL_KEY: ttl_minutes, DEADLINE_KEY: deadline(ttl_minutes, now_ms)}


def expired(metadata: Mapping[str, Any], now_ms: int) -> bool:
    """Whether the item is past its deadline (one without a TTL never is)."""
    at = metadata.get(DEADLINE_KEY)
    return isinstance(at, int) and at <= now_ms


def refreshable(metadata: Mapping[str, Any]) -> bool:
    return isinstance(metadata.get(TTL_KEY), int | float)


class Sweeper:
    """Calls ``sweep`` every ``interval_s`` seconds in a daemon thread until stopped."""

    def __init__(self, sweep: Callable[[], int], interval_s: float) -> None:
        if not interval_s > 0:
            raise InvalidInputError(f"sweep interval must be > 0, got {interval_s!r}")
        self._sweep = sweep
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="tiered-memory-ttl-sweeper", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                swept = self._sweep()
            except Exception:  # the next round tries again; the store stays usable
                log.exception("TTL sweep failed")
                continue
            if swept:
                log.info("TTL sweep forgot %d expired item(s)", swept)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop; True once the thread has ended."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()
