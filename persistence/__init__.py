"""Durable storage for tiered-memory: the SQLite store, its records and errors.

Imports ``migrations``; never imports ``tiered_memory``.
"""

from persistence.connection import ConnectionOptions
from persistence.errors import (
    CorruptDatabaseError,
    DatabaseOpenError,
    DuplicateMemoryError,
    EmbeddingDimensionError,
    ForeignDatabaseError,
    InvalidEmbeddingError,
    InvalidInputError,
    InvalidPromotionError,
    InvalidTypeError,
    MemoryNotFoundError,
    MigrationError,
    MissingDirectoryError,
    NotADatabaseError,
    NotFoundError,
    SchemaTooNewError,
    SessionNotFoundError,
    StoreClosedError,
    TieredMemoryError,
)
from persistence.records import (
    Memory,
    PersistenceStatistics,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.sqlite_store import SQLiteStore

__all__ = [
    "ConnectionOptions",
    "CorruptDatabaseError",
    "DatabaseOpenError",
    "DuplicateMemoryError",
    "EmbeddingDimensionError",
    "ForeignDatabaseError",
    "InvalidEmbeddingError",
    "InvalidInputError",
    "InvalidPromotionError",
    "InvalidTypeError",
    "Memory",
    "MemoryNotFoundError",
    "MigrationError",
    "MissingDirectoryError",
    "NotADatabaseError",
    "NotFoundError",
    "PersistenceStatistics",
    "PromotionRecord",
    "QueryOptions",
    "RepetitionSchedule",
    "SQLiteStore",
    "SchemaTooNewError",
    "SessionNotFoundError",
    "SessionState",
    "StoreClosedError",
    "Tier",
    "TieredMemoryError",
    "TranscriptEntry",
]
