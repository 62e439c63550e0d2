"""tiered-memory: durable, fast, explainable three-tier memory for LLM agents.

Start from :class:`AgentMemoryManager` (or :class:`AsyncAgentMemoryManager`). This top
level holds what a user imports: the managers and their settings, the records they
return, the Protocols a user implements (with the shipped implementations) and the
common errors. Everything else comes from its room:

- ``tiered_memory.errors``: every error (all subclasses of :class:`TieredMemoryError`);
- the core at this level: ``manager`` and the collaborators it delegates to (``memories``,
  ``writer``, ``drafts``, ``links``, ``retention``, ``files``, ``lifecycle``), ``config``,
  ``tiers``, ``scratchpad``, ``sessions``, ``forgetting``, ``dedup``, ``redaction``,
  ``tokens``; ``aio`` (the API as coroutines);
- ``tiered_memory.recall``, ``tiered_memory.embedding``, ``tiered_memory.graph``: recall,
  embedders, the knowledge graph;
- ``tiered_memory.cli``, ``tiered_memory.integrations``: the command line, LangGraph, MCP;
- ``persistence``: every record, the storage Protocols and backends.
"""

from persistence import (
    ConsolidationReport,
    DecayReport,
    EmbedderError,
    EncryptionKeyError,
    InvalidInputError,
    Memory,
    MemoryFilter,
    MemoryNotFoundError,
    MemoryStatistics,
    NotFoundError,
    PlaintextExportError,
    PromotionRecord,
    ReadOnlyError,
    RepetitionSchedule,
    SessionState,
    StorageError,
    StorageFullError,
    Tier,
    TieredMemoryError,
    TranscriptEntry,
)
from tiered_memory.aio import AsyncAgentMemoryManager
from tiered_memory.config import MemoryConfig
from tiered_memory.embedding.embedders import Embedder, OnnxEmbedder
from tiered_memory.graph.extraction import DefaultExtractor, Extraction, Extractor
from tiered_memory.manager import AgentMemoryManager
from tiered_memory.recall.rerank import OnnxCrossEncoder, SessionContextReranker
from tiered_memory.recall.settings import RecallSettings
from tiered_memory.recall.types import Explanation, RecallHit, RerankCandidate, Reranker
from tiered_memory.redaction import Redaction, Redactor, SecretRedactor
from tiered_memory.tokens import TokenCounter

__version__ = "0.1.0.dev0"
__all__ = [
    # the managers and their settings
    "AgentMemoryManager",
    "AsyncAgentMemoryManager",
    "MemoryConfig",
    "RecallSettings",
    # records they return
    "Memory",
    "Tier",
    "MemoryFilter",
    "SessionState",
    "TranscriptEntry",
    "PromotionRecord",
    "RepetitionSchedule",
    "DecayReport",
    "ConsolidationReport",
    "MemoryStatistics",
    "RecallHit",
    "Explanation",
    # Protocols a user implements, and the shipped implementations
    "Embedder",
    "OnnxEmbedder",
    "Extractor",
    "Extraction",
    "DefaultExtractor",
    "Reranker",
    "RerankCandidate",
    "SessionContextReranker",
    "OnnxCrossEncoder",
    "Redactor",
    "Redaction",
    "SecretRedactor",
    "TokenCounter",
    # the common errors (all of them: tiered_memory.errors)
    "TieredMemoryError",
    "InvalidInputError",
    "NotFoundError",
    "MemoryNotFoundError",
    "StorageError",
    "StorageFullError",
    "ReadOnlyError",
    "EmbedderError",
    "EncryptionKeyError",
    "PlaintextExportError",
    "__version__",
]
