"""Durable storage for tiered-memory: the contract every backend shares.

This top level is what the domain (``tiered_memory``) may import, and all it may import:
the records (:mod:`persistence.records`, :mod:`persistence.graph_records`), the storage
Protocols (:mod:`persistence.storage`), the errors, validation, the write-through cache,
the JSON formats (:mod:`persistence.transfer`), the background :class:`Worker` and
:func:`build_backend`, the one place that picks an engine. Each engine has a room of
its own: :mod:`persistence.sqlite` (one WAL-mode file through APSW) and
:mod:`persistence.postgres` (a server through psycopg). Never imports ``tiered_memory``.

The ground floor: importing this package loads no engine, no driver and no file format.
:func:`build_backend` imports an engine when a location asks for it, and the JSON
formats' names (:data:`_TRANSFER`) are imported on first use.
"""

from typing import TYPE_CHECKING, Any

from persistence import (
    graph_records,  # the graph's rules (names, types, limits)
    note_records,  # the notes' limits
)
from persistence.backend import (
    Backend,
    Key,
    build_backend,
    check_current,
    inspect_damage,
    migrate,
    salvage,
)
from persistence.cache_layer import CacheLayer, TransactionHooks
from persistence.codecs import require_embedding
from persistence.dedup_key import normalised as normalised_content
from persistence.errors import (
    AuthenticationError,
    BackupError,
    ConnectionLostError,
    CorruptDatabaseError,
    CorruptDatabaseOpenError,
    DatabaseBusyError,
    DatabaseInUseError,
    DatabaseMissingError,
    DatabaseOpenError,
    DuplicateMemoryError,
    EmbedderError,
    EmbeddingDimensionError,
    EmbeddingModelMismatchError,
    EmptyQueryError,
    EncryptionKeyError,
    EncryptionUnavailableError,
    ExtensionMissingError,
    ExtraMissingError,
    ForeignDatabaseError,
    InvalidBudgetError,
    InvalidEmbeddingError,
    InvalidImportError,
    InvalidInputError,
    InvalidPromotionError,
    InvalidSupersessionError,
    InvalidTypeError,
    MemoryNotFoundError,
    MigrationError,
    MigrationRequiredError,
    MissingDirectoryError,
    MissingFileError,
    ModelCacheError,
    NotADatabaseError,
    NoteNotFoundError,
    NotFoundError,
    PlaintextExportError,
    ReadOnlyError,
    SameDatabaseError,
    SchemaError,
    SchemaTooNewError,
    SecretsFoundError,
    ServerUnavailableError,
    SessionNotFoundError,
    StorageError,
    StorageFullError,
    StoreClosedError,
    TieredMemoryError,
    TransactionAbortedError,
    UnsupportedOperationError,
)
from persistence.graph_errors import (
    EntityNotFoundError,
    ExtractorError,
    InvalidDepthError,
    InvalidEntityNameError,
    InvalidPredicateError,
    RelationNotFoundError,
)
from persistence.graph_records import (
    Entity,
    EntityFact,
    GraphPath,
    GraphStatistics,
    Neighbor,
    Reach,
    Relation,
    RelationFact,
)
from persistence.locations import display, is_server_url
from persistence.meta_keys import (
    DEDUPLICATED_KEY,
    EMBEDDING_MODEL_KEY,
    NEAR_DUPLICATES_KEY,
    REDACTIONS_KEY,
)
from persistence.note_records import MemoryVersion, Note, NoteLink, NoteVersion
from persistence.records import (
    MEMORY_FIELDS,
    NEW_MEMORY_FIELDS,
    CacheStatistics,
    ConsolidationReport,
    DecayReport,
    ForgettingRecord,
    ImportResult,
    IntegrityProblem,
    IntegrityResult,
    KeywordHits,
    KeywordParts,
    MaintenanceResult,
    Memory,
    MemoryFilter,
    MemoryStatistics,
    PersistenceStatistics,
    PoolSettings,
    Progress,
    PromotionRecord,
    QueryOptions,
    RepetitionSchedule,
    RestoreResult,
    RetentionInput,
    SalvageResult,
    SessionState,
    Synchronous,
    TableCounts,
    TableSalvage,
    Tier,
    TracedStatement,
    TranscriptEntry,
    content_hash,
    new_id,
    now_ms,
)
from persistence.storage import (
    GraphStorage,
    MemoryRecords,
    MemoryStorage,
    NoteStorage,
    RecallIndex,
    ScheduleRecords,
    SessionRecords,
    StoreControl,
    StoreFiles,
)
from persistence.validation import (
    DEFAULT_MAX_CONTENT_BYTES,
    MAX_COUNT,
    check_memory_fields,
    parse_tier,
    require_bool,
    require_callable,
    require_choice,
    require_content,
    require_int,
    require_mapping,
    require_number,
    require_path,
    require_str,
    require_str_tuple,
    validate_filter,
)
from persistence.worker import Retry, Worker, work_right

if TYPE_CHECKING:
    from persistence.transfer import CopyResult, ImportDocument, copy_store, memory_to_json

_TRANSFER = frozenset({"CopyResult", "ImportDocument", "copy_store", "memory_to_json"})
"""Names of :mod:`persistence.transfer` this package hands out, imported on first use."""


def __getattr__(name: str) -> Any:
    """The JSON formats' names, imported when first asked for (see the module docstring)."""
    if name in _TRANSFER:
        from persistence import transfer

        value = getattr(transfer, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'persistence' has no attribute {name!r}")


__all__ = [
    "display",
    "is_server_url",
    # choosing and building a backend
    "Backend",
    "Key",
    "build_backend",
    "check_current",
    "inspect_damage",
    "migrate",
    "salvage",
    "CacheLayer",
    "TransactionHooks",
    # background work
    "Retry",
    "Worker",
    "work_right",
    # the storage Protocols
    "GraphStorage",
    "MemoryVersion",
    "Note",
    "NoteLink",
    "NoteVersion",
    "NoteStorage",
    "MemoryRecords",
    "MemoryStorage",
    "RecallIndex",
    "ScheduleRecords",
    "SessionRecords",
    "StoreControl",
    "StoreFiles",
    # records
    "CacheStatistics",
    "ConsolidationReport",
    "DecayReport",
    "ForgettingRecord",
    "ImportResult",
    "IntegrityProblem",
    "IntegrityResult",
    "SalvageResult",
    "TableSalvage",
    "MaintenanceResult",
    "Memory",
    "KeywordHits",
    "KeywordParts",
    "MemoryFilter",
    "MemoryStatistics",
    "PersistenceStatistics",
    "PoolSettings",
    "Progress",
    "PromotionRecord",
    "QueryOptions",
    "RepetitionSchedule",
    "RestoreResult",
    "RetentionInput",
    "SessionState",
    "Synchronous",
    "TableCounts",
    "Tier",
    "TracedStatement",
    "TranscriptEntry",
    "MEMORY_FIELDS",
    "NEW_MEMORY_FIELDS",
    "content_hash",
    "normalised_content",
    "new_id",
    "now_ms",
    # the knowledge graph's records
    "graph_records",
    "note_records",
    "Entity",
    "EntityFact",
    "GraphPath",
    "GraphStatistics",
    "Neighbor",
    "Reach",
    "Relation",
    "RelationFact",
    # counters kept in the store
    "DEDUPLICATED_KEY",
    "EMBEDDING_MODEL_KEY",
    "NEAR_DUPLICATES_KEY",
    "REDACTIONS_KEY",
    # formats
    "CopyResult",
    "ImportDocument",
    "copy_store",
    "memory_to_json",
    # validation
    "DEFAULT_MAX_CONTENT_BYTES",
    "MAX_COUNT",
    "check_memory_fields",
    "parse_tier",
    "require_bool",
    "require_callable",
    "require_choice",
    "require_int",
    "require_mapping",
    "require_number",
    "require_content",
    "require_embedding",
    "require_path",
    "require_str",
    "require_str_tuple",
    "validate_filter",
    # errors
    "BackupError",
    "ServerUnavailableError",
    "DatabaseMissingError",
    "ConnectionLostError",
    "AuthenticationError",
    "CorruptDatabaseError",
    "CorruptDatabaseOpenError",
    "DatabaseBusyError",
    "DatabaseInUseError",
    "DatabaseOpenError",
    "DuplicateMemoryError",
    "EmbedderError",
    "ModelCacheError",
    "EmbeddingDimensionError",
    "EmbeddingModelMismatchError",
    "EncryptionKeyError",
    "EncryptionUnavailableError",
    "ExtensionMissingError",
    "ForeignDatabaseError",
    "InvalidEmbeddingError",
    "InvalidImportError",
    "InvalidInputError",
    "InvalidBudgetError",
    "EmptyQueryError",
    "InvalidPromotionError",
    "InvalidSupersessionError",
    "InvalidTypeError",
    "MemoryNotFoundError",
    "MigrationError",
    "MigrationRequiredError",
    "MissingDirectoryError",
    "MissingFileError",
    "NoteNotFoundError",
    "NotADatabaseError",
    "NotFoundError",
    "PlaintextExportError",
    "ReadOnlyError",
    "SameDatabaseError",
    "SchemaError",
    "SchemaTooNewError",
    "SecretsFoundError",
    "SessionNotFoundError",
    "StorageError",
    "StorageFullError",
    "StoreClosedError",
    "TieredMemoryError",
    "TransactionAbortedError",
    "UnsupportedOperationError",
    "EntityNotFoundError",
    "ExtraMissingError",
    "ExtractorError",
    "InvalidDepthError",
    "InvalidEntityNameError",
    "InvalidPredicateError",
    "RelationNotFoundError",
]
