"""The SQLite engine: one WAL-mode file driven by APSW (FTS5 for keywords; vectors are
searched in RAM, :mod:`~persistence.sqlite.vector_mirror`).

The only room of the project (with ``migrations``) that imports ``apsw``. The engine:
:mod:`~persistence.sqlite.database` (connections, transactions, hooks),
:mod:`~persistence.sqlite.watcher` (other processes' commits),
:mod:`~persistence.sqlite.connection` (one function per pragma),
:mod:`~persistence.sqlite.background` (the threads beside the writer: the WAL
:mod:`~persistence.sqlite.checkpointer`, registered jobs),
:mod:`~persistence.sqlite.encryption`, :mod:`~persistence.sqlite.log` and
:mod:`~persistence.sqlite.translate` (driver errors to the library's). The keyword
index's policy: :mod:`~persistence.sqlite.keyword_index`. The stores over it:
:class:`SQLiteStore` (the file, its meta and transactions) with one part per record
family, :class:`MemoryStore`, :class:`SessionStore`, :class:`ScheduleStore` and
:class:`IndexStore` (the recall indexes and embeddings), and :class:`GraphStore` (the
knowledge graph); their SQL lives in :mod:`persistence.sqlite.sql`, one module per table
family. Beside them: the vector copy in RAM, bulk writes, backups (``VACUUM INTO``),
restore, integrity and maintenance (:class:`BackupManager`), and SQLite's side of the JSON
formats (:mod:`~persistence.sqlite.json_io`).
"""

from persistence.sqlite.backup import BackupManager
from persistence.sqlite.connection import ConnectionOptions
from persistence.sqlite.database import Database
from persistence.sqlite.graph_store import GraphStore
from persistence.sqlite.index_store import IndexStore
from persistence.sqlite.memory_store import MemoryStore
from persistence.sqlite.schedule_store import ScheduleStore
from persistence.sqlite.session_store import SessionStore
from persistence.sqlite.store import SQLiteStore

__all__ = [
    "BackupManager",
    "ConnectionOptions",
    "Database",
    "GraphStore",
    "IndexStore",
    "MemoryStore",
    "SQLiteStore",
    "ScheduleStore",
    "SessionStore",
]
