"""tiered-memory: durable, fast, explainable three-tier memory for LLM agents.

Start from :class:`AgentMemoryManager`; the records and errors come from ``persistence``
and are re-exported here, so users import only from ``tiered_memory`` (recall's settings
and results, the ``Embedder`` protocol and the default ``OnnxEmbedder`` included).
"""

from persistence import *  # noqa: F403 - the records and errors are part of this API
from persistence import __all__ as _persistence_all
from tiered_memory.aio import AsyncAgentMemoryManager
from tiered_memory.config import MemoryConfig
from tiered_memory.embeddings import Embedder, OnnxEmbedder
from tiered_memory.extraction import DefaultExtractor, Extraction, Extractor
from tiered_memory.forgetting import ForgettingCurve
from tiered_memory.graph import KnowledgeGraph
from tiered_memory.manager import AgentMemoryManager
from tiered_memory.recall import Explanation, RecallHit, RecallSettings, SignalMatch
from tiered_memory.redaction import Redaction, Redactor, SecretRedactor
from tiered_memory.rerank import OnnxCrossEncoder, RerankCandidate, Reranker, SessionContextReranker
from tiered_memory.scratchpad import Scratchpad
from tiered_memory.sessions import SessionManager
from tiered_memory.tiers import TierView
from tiered_memory.tokens import EstimatedTokenCounter, TokenCounter

__version__ = "0.1.0.dev0"
__all__ = [
    *_persistence_all,
    "AgentMemoryManager",
    "AsyncAgentMemoryManager",
    "DefaultExtractor",
    "Embedder",
    "Extraction",
    "Extractor",
    "KnowledgeGraph",
    "EstimatedTokenCounter",
    "Explanation",
    "ForgettingCurve",
    "MemoryConfig",
    "OnnxCrossEncoder",
    "OnnxEmbedder",
    "RecallHit",
    "RecallSettings",
    "Redaction",
    "Redactor",
    "RerankCandidate",
    "Reranker",
    "Scratchpad",
    "SecretRedactor",
    "SessionContextReranker",
    "SessionManager",
    "SignalMatch",
    "TierView",
    "TokenCounter",
    "__version__",
]
