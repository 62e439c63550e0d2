"""sqlite-vec on the file's connections: loaded where the vector cells re-rank in SQL.

:func:`loaded` loads the extension on a connection the first time it is asked (and
remembers the answer per connection). Where it cannot load (no wheel for the platform,
an SQLite built without extension loading), one warning says so and the caller re-ranks
with numpy instead: the file still opens and answers.
"""

from __future__ import annotations

import logging
import threading
import weakref

import apsw

log = logging.getLogger("tiered_memory")

_known: weakref.WeakKeyDictionary[apsw.Connection, bool] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_warned = False


def loaded(conn: apsw.Connection) -> bool:
    """True if sqlite-vec's functions work on ``conn`` (loading it on first use)."""
    with _lock:
        known = _known.get(conn)
        if known is None:
            known = _known[conn] = _load(conn)
        return known


def _load(conn: apsw.Connection) -> bool:
    global _warned
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        try:
            conn.load_extension(sqlite_vec.loadable_path())
        finally:
            conn.enable_load_extension(False)
    except (ImportError, AttributeError, apsw.Error, OSError) as exc:
        if not _warned:
            _warned = True
            log.warning(
                "sqlite-vec could not be loaded (%s): vectors are re-ranked with numpy", exc
            )
        return False
    return True
