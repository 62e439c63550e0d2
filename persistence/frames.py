"""TransactionFrames: the bookkeeping of nested transaction blocks, once for both engines.

An engine's database (:class:`~persistence.sqlite.database.Database`,
:class:`~persistence.postgres.database.PgDatabase`) opens one frame per block of its
``transaction()``: the outermost transaction, a savepoint, a joined block. A frame holds
the callbacks to run when it commits or rolls back; an inner frame that commits hands
them to the frame around it, so they run only when the outermost one ends. The engine
keeps its own SQL (BEGIN, SAVEPOINT, COMMIT) and calls these steps around it; this
module imports no driver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

Hook = Callable[[], None]
"""A callback run after a commit or a rollback."""


def run_hooks(callbacks: Iterable[Hook]) -> None:
    """Call each of ``callbacks`` in order."""
    for callback in callbacks:
        callback()


class TransactionFrames:
    """Base of an engine's database: which thread holds the open transaction, how deep
    its blocks are nested, each block's commit and rollback callbacks, and two flags the
    engine sets (``_aborted``: the transaction can only roll back; ``_joined``: nested
    blocks join it rather than open a savepoint)."""

    def __init__(self) -> None:
        self._depth = 0
        self._owner: int | None = None
        self._hooks: list[tuple[list[Hook], list[Hook]]] = []
        self._aborted = False
        self._joined = False

    @property
    def in_transaction(self) -> bool:
        """True when the calling thread is inside :meth:`transaction`."""
        return self._depth > 0 and self._owner == threading.get_ident()

    def after_commit(self, callback: Hook) -> None:
        """Run ``callback`` once the current transaction commits (now, outside one)."""
        if self.in_transaction:
            self._hooks[-1][0].append(callback)
        else:
            callback()

    def after_rollback(self, callback: Hook) -> None:
        """Run ``callback`` if the current transaction (or nested block) rolls back; newest
        first, like an undo log. Outside a transaction it is dropped."""
        if self.in_transaction:
            self._hooks[-1][1].append(callback)

    def _open_frame(self) -> None:
        """A block begins (outermost or nested) on this thread."""
        self._depth += 1
        self._owner = threading.get_ident()
        self._hooks.append(([], []))

    def _close_inner_frame(self, commit: bool) -> None:
        """A nested block ends: committed, its callbacks wait for the enclosing frame;
        rolled back, its rollback callbacks run now (newest first)."""
        on_commit, on_rollback = self._hooks.pop()
        self._depth -= 1
        if commit:
            self._hooks[-1][0].extend(on_commit)
            self._hooks[-1][1].extend(on_rollback)
        else:
            run_hooks(reversed(on_rollback))

    def _close_outer_frame(self) -> tuple[list[Hook], list[Hook], bool]:
        """The outermost block ends: no transaction is open any more. Its commit and
        rollback callbacks (for the engine to run once it has committed or rolled back)
        and whether the transaction was aborted."""
        on_commit, on_rollback = self._hooks.pop()
        self._depth, self._owner, self._joined = 0, None, False
        aborted, self._aborted = self._aborted, False
        return on_commit, on_rollback, aborted
