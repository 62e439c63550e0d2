"""The knowledge graph: ``memory.graph`` (:mod:`~tiered_memory.graph.facade`) and the
entity extraction that feeds it (:mod:`~tiered_memory.graph.extraction`).

:func:`entity_facts` and :func:`relation_facts` check facts a caller extracted itself
(``remember(..., entities=..., relations=...)`` uses them)."""

from tiered_memory.graph.extraction import DefaultExtractor, Extraction, Extractor
from tiered_memory.graph.facade import (
    DEFAULT_FANOUT,
    MAX_DEPTH,
    MAX_LIMIT,
    KnowledgeGraph,
    entity_facts,
    relation_facts,
)

__all__ = [
    "DEFAULT_FANOUT",
    "MAX_DEPTH",
    "MAX_LIMIT",
    "DefaultExtractor",
    "Extraction",
    "Extractor",
    "KnowledgeGraph",
    "entity_facts",
    "relation_facts",
]
