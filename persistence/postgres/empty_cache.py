"""EmptyAtVersion: "this read found nothing", kept while the handle's version row says
nothing changed, so a check that recall makes on every call (any alias for the graph
signal? any memory waiting for a vector?) costs no round trip when the answer cannot
have changed.

The version is the one :class:`~persistence.postgres.change_watch.PgChangeWatch` keeps:
it moves with every commit of this handle that wrote and with other processes' commits
as soon as the change watch sees them; the cache asks it to look before it answers (the
announcements at every call, the row itself every ``change_check_interval_s``), the same
freshness as the manager's RAM copies.
Inside a transaction nothing is cached (its own writes are not counted yet).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol


class VersionSource(Protocol):
    """What the cache reads of the database handle."""

    @property
    def seen_version(self) -> int | None: ...

    @property
    def in_transaction(self) -> bool: ...

    def check_external_changes(self, wait_s: float = 0.05) -> bool: ...

    def on_external_change(self, callback: Callable[[], None]) -> None: ...


class EmptyAtVersion:
    """Whether a read last came back empty at the handle's current version."""

    __slots__ = ("_db", "_at", "_forgets")

    def __init__(self, db: VersionSource) -> None:
        self._db = db
        self._at: Hashable | None = None
        self._forgets = 0
        """How many times :meth:`forget` was called: part of the version, so a read that
        raced an announcement is not kept (the version row alone does not move for a
        commit in another scope)."""
        # Another process's commit in another scope this handle sees (an agent's, seen by
        # an unscoped handle, or the reverse) moves another scope's version row, not this
        # handle's: the change watch's announcement alone tells, so it empties the cache.
        db.on_external_change(self.forget)

    def known_empty(self) -> bool:
        """True when the read found nothing at the version the handle still sees (the
        change watch looks first: announcements always, the row when it is due)."""
        if self._db.in_transaction or self._at is None:
            return False
        if not self._db.check_external_changes():
            return False  # another thread holds the handle: read instead
        return self._at == self.version()

    def version(self) -> tuple[int, int] | None:
        """The version to pass to :meth:`found` (read BEFORE the read it stands for): the
        handle's version row as seen and the count of announcements."""
        seen = self._db.seen_version
        if self._db.in_transaction or seen is None:
            return None
        return seen, self._forgets

    def found(self, empty: bool, version: Hashable | None) -> None:
        """Record a read's outcome, taken at ``version`` (from :meth:`version`): kept only
        if empty and the handle still sees that version (nothing moved meanwhile)."""
        keep = empty and version is not None and version == self.version()
        self._at = version if keep else None

    def forget(self) -> None:
        self._at = None
        self._forgets += 1
