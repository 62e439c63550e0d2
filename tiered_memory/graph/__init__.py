"""The knowledge graph: ``memory.graph`` (:mod:`~tiered_memory.graph.facade`) and the
entity extraction that feeds it (:mod:`~tiered_memory.graph.extraction`)."""

from tiered_memory.graph.extraction import DefaultExtractor, Extraction, Extractor
from tiered_memory.graph.facade import KnowledgeGraph

__all__ = ["DefaultExtractor", "Extraction", "Extractor", "KnowledgeGraph"]
