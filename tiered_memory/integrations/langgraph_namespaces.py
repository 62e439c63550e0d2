"""Listing a LangGraph store's namespaces from the counts of its namespace tags.

Every item carries ``langgraph:ns:<prefix>`` for each prefix of its namespace (the root
included), and an item with a TTL also ``langgraph-ttl:ns:<namespace>``. The store keeps
how many memories carry each such tag in the transaction of every write
(:meth:`AgentMemoryManager.tag_counts`), so a listing reads one row per namespace under
the asked prefix, never the items: the items directly in a namespace are its tag's count
less its children's. A namespace whose items all have a TTL is checked for one still
live (reads never show an expired item, swept or not).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from langgraph.store.base import MatchCondition

from tiered_memory.integrations.langgraph_values import namespace_matches

NS_TAG = "langgraph:ns:"
"""The prefix of the tags naming a prefix of an item's namespace."""

TTL_NS_TAG = "langgraph-ttl:ns:"
"""The prefix of the tag naming the namespace of an item that has a TTL."""


def ns_tag(namespace: Sequence[str], family: str = NS_TAG) -> str:
    """The tag naming ``namespace`` (labels hold no '.': LangGraph refuses them)."""
    return family + ".".join(namespace)


def fixed_prefix(conditions: Sequence[MatchCondition]) -> tuple[str, ...]:
    """The labels every listed namespace starts with: those of the first prefix
    condition up to its first ``*`` (``()`` without one)."""
    for condition in conditions:
        if condition.match_type == "prefix":
            labels: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def _paths(counts: Mapping[str, int], family: str) -> dict[tuple[str, ...], int]:
    start = len(family)
    return {
        tuple(tag[start:].split(".")) if len(tag) > start else (): n for tag, n in counts.items()
    }


def direct_items(counts: Mapping[str, int]) -> dict[tuple[str, ...], int]:
    """Namespace -> how many items are directly in it, from ``langgraph:ns:`` counts
    (a prefix tag counts the items at and below it)."""
    below = _paths(counts, NS_TAG)
    direct = dict(below)
    for path, n in below.items():
        if path and path[:-1] in direct:
            direct[path[:-1]] -= n
    return {path: n for path, n in direct.items() if path and n > 0}


def list_namespaces(
    counts: Mapping[str, int],
    ttl_counts: Mapping[str, int],
    conditions: Sequence[MatchCondition],
    max_depth: int | None,
    live: Callable[[tuple[str, ...]], bool],
) -> list[tuple[str, ...]]:
    """LangGraph's listing, sorted, before its page is cut: the namespaces matching every
    condition, truncated to ``max_depth`` labels and de-duplicated. ``live`` says whether
    a namespace whose items all have a TTL still has one before its deadline."""
    expiring = _paths(ttl_counts, TTL_NS_TAG)
    chosen = {
        namespace
        for namespace, n in direct_items(counts).items()
        if all(namespace_matches(c, namespace) for c in conditions)
        and (expiring.get(namespace, 0) < n or live(namespace))
    }
    if max_depth is not None:
        chosen = {namespace[:max_depth] for namespace in chosen}
    return sorted(chosen)
