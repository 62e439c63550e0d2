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
    CacheStatistics,
    ForgettingRecord,
    Memory,
    PersistenceStatistics,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RetentionInput,
    SessionState,
    Tier,
    TranscriptEntry,
)
from persistence.sqlite_store import SQLiteStore

__all__ = [
    "CacheStatistics",
    "ForgettingRecord",
    "RetentionInput",
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
