"""Recall: fuse keyword (FTS5 bm25) and vector (cosine) candidates into one ranked,
explained answer.

Scoring, for a memory found by some of the signals (the default, ``fusion="score"``)::

    fused  = keyword_share * bm25 / best bm25 of the query + (1 - keyword_share) * cosine
    score  = fused * importance_factor * retention_factor * recency_factor

    importance_factor = 1 + importance_weight * (importance - 0.5)
    retention_factor  = retention_floor + (1 - retention_floor) * retention
    recency_factor    = 1 + recency_weight * exp(-age_days / recency_days)

Every candidate's cosine similarity is computed, also for memories that only the
keywords found, and a memory that no keyword matches adds nothing on that side (FTS5's
bm25 is negative and lower is better; it is kept as it is, and shown as a share of the
query's best bm25, since its absolute values are tiny in small files). The factors only
reorder near-ties.

``RecallSettings(fusion="rrf")`` fuses ranks instead of raw values (weighted
reciprocal-rank fusion, the default before score fusion measured better on LoCoMo)::

    fused = sum over signals s that found it of  weight_s / (rrf_k + rank_s)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

import numpy as np

from persistence import (
    DatabaseBusyError,
    Memory,
    MemoryFilter,
    MemoryStorage,
    NoteStorage,
    StoreClosedError,
    Tier,
    parse_tier,
    require_bool,
    require_int,
    require_str,
    require_str_tuple,
    validate_filter,
)
from tiered_memory.embedding.clause_blend import ClauseBlendEmbedder, blended_note
from tiered_memory.embedding.queue import EmbeddingQueue, checked_vectors
from tiered_memory.recall.chains import with_chain_notes
from tiered_memory.recall.conversation import add_conversation_signals, cached_turns
from tiered_memory.recall.fact_signal import (
    PredicateVectors,
    asked_predicates,
    meaning_facts,
    predicate_vectors,
    tokens,
    word_facts,
)
from tiered_memory.recall.feedback import add_feedback, confident_hits, moved_query
from tiered_memory.recall.fusion import (
    best_score,
    check_k,
    explain,
    fuse,
    fuse_scores,
    score,
    with_paths,
)
from tiered_memory.recall.graph_signal import GraphCandidates
from tiered_memory.recall.neighbours import add_neighbour_evidence
from tiered_memory.recall.note_hits import NoteHit, note_hits, notes_apply
from tiered_memory.recall.rerank import rerank_candidates
from tiered_memory.recall.reviews import ReviewQueue
from tiered_memory.recall.session_units import add_session_lift
from tiered_memory.recall.settings import STOPWORDS, RecallSettings, check_cuts, cut, keywords
from tiered_memory.recall.types import RecallHit, SignalMatch, fused_values
from tiered_memory.recall.window import with_windows

# --- orchestration ----------------------------------------------------------------------

_NO_VECTOR = ("no vector yet: ranked by keywords only",)
FACT_DEPTH = 50
"""Candidates of each search whose words the fact signal reads (a query naming a
single-valued predicate only): the memories about the query's subject rank high."""


GraphSearch = Callable[[str, MemoryFilter], GraphCandidates]
"""``(query, filter) -> the graph and fact signals' candidates`` (see graph_signal)."""


def recall_filter(
    tier: Tier | str | None,
    session_id: str | None,
    agent_id: str | None,
    tags: Sequence[str],
    created_after: int | None,
    created_before: int | None,
    min_retention: float | None,
    *,
    include_superseded: bool = False,
    as_of: int | None = None,
) -> MemoryFilter:
    """The filter that recall's arguments name, checked (current memories only unless
    ``include_superseded`` or ``as_of``); ``context()`` uses it for the scratchpad too."""
    chosen = None if tier is None else parse_tier(tier)
    require_str_tuple(tags, "tags")
    where = MemoryFilter(chosen, session_id, agent_id, tuple(tags), created_after,
                         created_before, min_retention,
                         current=not include_superseded and as_of is None,
                         as_of=as_of)  # fmt: skip
    validate_filter(where)
    return where


class Recaller:
    """Recall for one manager, start to end: candidate search (keyword and vector, the
    filter applied inside each), fusion, explanation, early stop, and reinforcement
    (recalled memories that are due count as reviews, written in batches).

    ``get_many`` reads memories through the manager's RAM (scratchpad, cache);
    ``review`` and ``get`` are the manager's, used when queued reviews are written.
    """

    def __init__(
        self,
        store: MemoryStorage,
        embeddings: EmbeddingQueue,
        settings: RecallSettings,
        clock: Callable[[], int],
        *,
        get_many: Callable[[list[str]], dict[str, Memory]],
        get: Callable[[str], Memory | None],
        review: Callable[[str, int], object],
        review_quality: int | None,
        review_batch: int,
    ) -> None:
        self._store = store
        self._embeddings = embeddings
        self.settings = settings
        self._clock = clock
        self._get_many = get_many
        self.reviews = ReviewQueue(store, clock, get=get, review=review,
                                   quality=review_quality, batch=review_batch)  # fmt: skip
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.graph_search: GraphSearch | None = None
        """The graph signal's candidate search (set by the manager; see graph_recall)."""
        self.notebook: NoteStorage | None = None
        """The notes recall may return (set by the manager; see note_hits)."""
        self.predicate_words: dict[str, frozenset[str]] = {}
        """Single-valued predicate -> the stems of the words expressing it, for the fact
        signal's memories that hold a fact by their words (set by the manager)."""
        self.predicate_terms: dict[str, tuple[str, ...]] = {}
        """Single-valued predicate -> the words expressing it as written, whose vectors
        make the predicate's (memories holding a fact by their meaning; by the manager)."""
        self._predicate_vectors: PredicateVectors | None = None

    def recall(
        self,
        query: str,
        k: int,
        *,
        tier: Tier | str | None,
        session_id: str | None,
        agent_id: str | None,
        tags: Sequence[str],
        created_after: int | None,
        created_before: int | None,
        min_retention: float | None,
        min_score: float | None = None,
        relative_cut: float | None = None,
        notes: bool = False,
        include_superseded: bool = False,
        as_of: int | None = None,
        writes: bool = True,
        windows: bool = True,
    ) -> list[RecallHit | NoteHit]:
        """The ``k`` best hits for ``query`` among the memories the filters accept (and,
        with ``notes``, the notes: see :mod:`tiered_memory.recall.note_hits`); fewer
        when ``min_score`` or ``relative_cut`` drop some (see :class:`RecallSettings`;
        ``None`` takes the settings' value). Current memories only, unless
        ``include_superseded``; ``as_of``: the memories true at that time.
        ``writes=False`` (``context()``) writes nothing, as a read-only file's recall: no
        pending memory is embedded (those rank by keywords) and no review is queued.
        ``windows=False`` leaves out where each keyword match lies (one more look-up):
        ``context()`` asks :meth:`with_windows` for the hits it shows only."""
        require_str(query, "query")
        require_bool(notes, "notes")
        require_bool(include_superseded, "include_superseded")
        require_int(as_of, "as_of", allow_none=True, minimum=0)
        k = check_k(k)
        check_cuts(min_score, relative_cut)
        where = recall_filter(tier, session_id, agent_id, tags, created_after, created_before,
                              min_retention, include_superseded=include_superseded,
                              as_of=as_of)  # fmt: skip
        words = keywords(query)
        if not words:
            return []  # no words: nothing to look for
        store, settings = self._store, self.settings
        self._embeddings.ready()  # the model loads now, if it must: never beside the searches
        chains = store.memories.has_superseded()  # none: every memory is current, as is
        where = replace(where, current=chains and where.current)
        # At most ~250 ms for a backlog; what still waits is found by its keywords.
        if store.read_only or not writes or self.reviews.paused():
            unseen = store.indexes.unembedded_count() if self._embeddings.embedder() else 0
        else:
            try:
                unseen = self._embeddings.catch_up()
            except DatabaseBusyError:  # other writers: the pending rank by keywords this time
                self.reviews.note_deferred()
                unseen = store.indexes.unembedded_count() if self._embeddings.embedder() else 0

        def nearest() -> tuple[np.ndarray, list[tuple[str, float]]] | None:
            vector = self._embeddings.embed_query(query)
            if vector is None:
                return None
            return vector, store.indexes.vector_search(vector, settings.vector_depth, where=where)

        # Off a transaction, the query embedding and vector search run beside the keyword
        # search (onnxruntime, numpy and SQLite all release the GIL).
        beside = not (store.is_memory or store.in_transaction)
        pending = self._recall_pool().submit(nearest) if beside else None
        ranked: dict[str, Sequence[tuple[str, float]]] = {
            "keyword": store.indexes.keyword_search(
                words, settings.depth, None, settings.context_weight, settings.after_weight,
                where=where,
            )
        }  # fmt: skip
        paths: dict[str, str] | None = None  # the third signal: entities the query names
        facts: dict[str, str] = {}  # the fourth: the memories holding a fact it asks
        answered: frozenset[str] = frozenset()  # the predicates relations answered
        if (settings.graph_on or settings.fact_on) and self.graph_search is not None:
            graph = self.graph_search(query, where)
            if settings.graph_on:
                ranked["graph"], paths = graph.ranked, graph.paths
            if settings.fact_on and graph.facts:
                facts, answered = graph.facts, graph.answered
                ranked["fact"] = [(m, 1.0) for m in sorted(facts)]
        found = pending.result() if pending is not None else nearest()
        if found is not None:
            ranked["vector"] = found[1]
        if settings.fact_on and (settings.fact_words > 0 or settings.fact_vectors > 0):
            held = self._held_facts(query, ranked, answered, settings, where.as_of is None)
            held = {m: found for m, found in held.items() if m not in facts}
            if held:
                facts = {**facts, **{m: why for m, (why, _) in held.items()}}
                ranked["fact"] = [*ranked.get("fact", ()),
                                  *((m, held[m][1]) for m in sorted(held))]  # fmt: skip
        described, now = replace(where, current=False).describe(), self._clock()
        if settings.fusion == "score":
            distances = dict(found[1]) if found is not None else {}
            if found is not None:
                others = [m for name in ("keyword", "graph", "fact")
                          for m, _ in ranked.get(name, ()) if m not in distances]  # fmt: skip
                distances.update(
                    store.indexes.vector_distances(found[0], list(dict.fromkeys(others)))
                )
            fused = fuse_scores(ranked, distances, settings.keyword_share, settings.graph_share,
                                settings.fact_share)  # fmt: skip
            if found is not None and settings.feedback_share > 0:
                self._feedback(fused, found[0], settings, where)
        else:
            weights = {"keyword": settings.keyword_weight, "vector": settings.vector_weight,
                       "graph": settings.graph_weight, "fact": settings.fact_weight}  # fmt: skip
            fused = fuse(ranked, weights, settings.rrf_k)
        self._structure(fused, query, settings, found[0] if found is not None else None,
                        filtered=bool(described))  # fmt: skip
        if settings.session_weight > 0:
            sessions = {m: memory.session_id for m, memory in self._get_many(list(fused)).items()}
            add_session_lift(fused, sessions, settings.session_weight, settings.session_top,
                             settings.session_turns)  # fmt: skip
        named = [(paths or {}, "graph"), (facts, "fact")]  # named in the hits' explanations
        skipped = getattr(ranked["keyword"], "skipped", None)  # a backend's KeywordHits
        top = self._explained(fused, k, described, now, unseen if found is not None else 0,
                              (skipped,) if skipped else (), where, named)  # fmt: skip
        if chains:
            top = with_chain_notes(top, store.memories.superseded_ids)
        floor = settings.min_score if min_score is None else min_score
        share = settings.relative_cut if relative_cut is None else relative_cut
        top = top[: cut([hit.score for hit in top], floor, share)]
        if windows:
            top = self.with_windows(query, top)
        if not (notes and self.notebook is not None and notes_apply(where)):
            if writes:
                self.queue_reviews([hit.memory.id for hit in top])
            return list(top)
        found_notes = note_hits(self.notebook, words, where, settings, now,
                                found[0] if found is not None else None,
                                self._embeddings.embed_query)  # fmt: skip
        both: list[RecallHit | NoteHit] = [*top, *found_notes]
        merged = sorted(both, key=_by_score)[:k]
        merged = merged[: cut([hit.score for hit in merged], floor, share)]
        if writes:
            self.queue_reviews([hit.memory.id for hit in merged if isinstance(hit, RecallHit)])
        return merged

    def with_windows(self, query: str, hits: Sequence[RecallHit]) -> list[RecallHit]:
        """``hits`` of ``query`` with each keyword match's part of the keyword window
        named in the explanation (:mod:`tiered_memory.recall.window`)."""
        keyword_hits = [
            h.memory.id for h in hits if any(s.signal == "keyword" for s in h.explanation.signals)
        ]
        if not keyword_hits:
            return list(hits)
        return with_windows(hits, self._store.indexes.keyword_parts(keywords(query), keyword_hits))

    def _held_facts(
        self,
        query: str,
        ranked: dict[str, Sequence[tuple[str, float]]],
        answered: frozenset[str],
        settings: RecallSettings,
        now: bool,
    ) -> dict[str, tuple[str, float]]:
        """The fact signal's memories holding a fact the query asks about that no
        relation answered, among the searches' best ``FACT_DEPTH`` candidates each: by
        their words (:func:`~tiered_memory.recall.fact_signal.word_facts`, weight
        ``fact_words``), or when none does, the one nearest in meaning
        (:func:`~tiered_memory.recall.fact_signal.meaning_facts`, ``fact_vectors``; with
        ``fact_mutual``, only when it is the predicate's nearest memory too), a
        current one when ``now`` (with ``include_superseded``, an older version is never
        the one that holds the fact now; an ``as_of`` search's candidates are those of
        then): id -> (why, weight)."""
        if not self.predicate_words:
            return {}
        words = tokens(query)
        asked = asked_predicates(words, self.predicate_words, STOPWORDS)
        asked = {p: word for p, word in asked.items() if p not in answered}
        if not asked:
            return {}
        ids = [m for name in ("keyword", "vector", "graph")
               for m, _ in list(ranked.get(name, ()))[:FACT_DEPTH]]  # fmt: skip
        memories = self._get_many(list(dict.fromkeys(ids)))
        contents = {m: memory.content for m, memory in memories.items()}
        held: dict[str, tuple[str, float]] = {}
        if settings.fact_words > 0:
            worded = word_facts(words, asked, self.predicate_words, contents, STOPWORDS)
            held = {m: (why, settings.fact_words) for m, why in worded.items()}
        vectors = self.predicate_vectors() if settings.fact_vectors > 0 and not held else None
        if vectors is not None:  # no memory says it in words: the nearest in meaning
            rest = {m: (memory.content, memory.embedding) for m, memory in memories.items()
                    if m not in held and memory.embedding is not None
                    and (memory.current or not now)}  # fmt: skip
            meant = meaning_facts(words, asked, self.predicate_words, vectors, rest, STOPWORDS,
                                  mutual=settings.fact_mutual)  # fmt: skip
            held.update((m, (why, settings.fact_vectors)) for m, why in meant.items())
        return held

    def predicate_vectors(self) -> PredicateVectors | None:
        """The single-valued predicates' vectors from the file's model (made on first
        need, about a millisecond a word; again when the model changes); ``None``
        without a model."""
        if not self.predicate_terms:
            return None
        embedder = self._embeddings.embedder()
        if embedder is None:
            return None
        made = self._predicate_vectors
        if made is None or made.model_id != embedder.model_id:
            embed = partial(checked_vectors, embedder)
            made = predicate_vectors(embedder.model_id, embed, self.predicate_terms)
            self._predicate_vectors = made
        return made

    def _feedback(
        self,
        fused: dict[str, list[SignalMatch]],
        query_vector: np.ndarray,
        settings: RecallSettings,
        where: MemoryFilter,
    ) -> None:
        """Second pass (:mod:`tiered_memory.recall.feedback`): move the query vector
        towards the confident first hits, search again, add the ``feedback`` signal."""
        strength = fused_values(fused)
        chosen = confident_hits(strength, settings.feedback_hits, settings.feedback_confidence)
        memories = self._get_many(chosen)
        vectors = [
            v for m in chosen if (v := getattr(memories.get(m), "embedding", None)) is not None
        ]
        moved = moved_query(query_vector, vectors, settings.feedback_beta)
        if moved is None:
            return
        store = self._store
        second = store.indexes.vector_search(moved, settings.vector_depth, where=where)
        distances = dict(second)
        others = [m for m in fused if m not in distances]
        distances.update(store.indexes.vector_distances(moved, others))
        ranks = {m: rank for rank, (m, _) in enumerate(second, start=1)}
        share = 1.0 - settings.keyword_share  # new candidates enter with their own vector share
        new = [m for m, _ in second if m not in fused]
        for m, distance in store.indexes.vector_distances(query_vector, new).items():
            own = SignalMatch("vector", 0, distance, "cosine distance", share * (1.0 - distance))
            fused[m] = [own]
        add_feedback(fused, distances, ranks, settings.feedback_share, len(vectors))

    def _structure(
        self,
        fused: dict[str, list[SignalMatch]],
        query: str,
        settings: RecallSettings,
        query_vector: np.ndarray | None,
        *,
        filtered: bool,
    ) -> None:
        """Add the conversation signals, the neighbour evidence and the reranker's score
        to ``fused`` (:mod:`tiered_memory.recall.conversation`,
        :mod:`tiered_memory.recall.neighbours`, :mod:`tiered_memory.recall.rerank`)."""
        store = self._store
        distances = None
        if query_vector is not None and settings.fusion == "score":
            vector = query_vector

            def distances(ids: Sequence[str]) -> dict[str, float]:
                return store.indexes.vector_distances(vector, ids)

        # One look-up of the candidates' turns (with the turn before) serves all three.
        turns = cached_turns(partial(store.indexes.conversation_turns, before=True))
        add_conversation_signals(fused, query, settings, turns, distances,
                                 may_add=not filtered)  # fmt: skip
        if distances is not None and settings.neighbour_weight > 0:
            add_neighbour_evidence(fused, settings.neighbour_weight, settings.neighbour_depth,
                                   turns, distances)  # fmt: skip
        rerank_candidates(fused, query, query_vector, settings, self._get_many, turns)

    def _explained(
        self,
        fused: dict[str, list[SignalMatch]],
        k: int,
        described: tuple[str, ...],
        now: int,
        unseen: int,
        skipped: tuple[str, ...] = (),
        where: MemoryFilter | None = None,
        paths: Sequence[tuple[dict[str, str], str]] = (),
    ) -> list[RecallHit]:
        """Fetch and score candidates strongest first, a batch at a time, until none
        left can reach the top ``k`` (early stop); explain the top ``k``, naming the
        graph paths and facts of ``paths`` (see :func:`with_paths`). ``skipped``: what
        the keyword search left out (every hit's explanation says it). A candidate that
        signals other than the searches added (a conversation neighbour) counts only if
        ``where``'s supersession condition (``current``, ``as_of``) accepts it."""
        chain = None  # the supersession condition alone, checked on RAM copies
        if where is not None and (where.current or where.as_of is not None):
            chain = MemoryFilter(current=where.current, as_of=where.as_of)
        settings = self.settings
        strength = fused_values(fused)
        order = sorted(strength, key=lambda m: (-strength[m], m))
        ranked: list[tuple[float, str, Memory]] = []  # (score, id, memory), best first
        trip = self._store.rows_per_trip  # a tenth of it per hit wanted, and at least it
        batch = max(k * trip // 10, trip)
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            memories = self._get_many(chunk)
            for memory_id in chunk:
                memory = memories.get(memory_id)
                if chain is not None and memory is not None and not chain.accepts(memory):
                    continue
                if memory is not None:  # forgotten meanwhile
                    ranked.append((score(memory, fused[memory_id], now, settings), memory_id,
                                   memory))  # fmt: skip
            ranked.sort(key=lambda h: (-h[0], h[1]))
            rest = order[start + batch : start + batch + 1]
            if (
                len(ranked) >= k
                and rest
                and ranked[k - 1][0] > best_score(strength[rest[0]], settings)
            ):
                break  # no candidate left can reach the top k
        # Only the hits returned are explained (most candidates never are).
        embedder = self._embeddings.loaded_embedder()
        blend = embedder if isinstance(embedder, ClauseBlendEmbedder) else None
        hits: list[RecallHit] = []
        for _, memory_id, memory in ranked[:k]:
            notes = skipped
            if unseen and memory.embedding is None:
                notes = _NO_VECTOR + skipped
            elif blend is not None and any(
                s.signal == "vector" for s in fused[memory_id]
            ):  # found by its blended vector: say so
                notes = blended_note(memory.content, blend.alpha) + skipped
            signals = with_paths(memory_id, fused[memory_id], paths)
            hits.append(explain(memory, signals, now, settings, described,
                                notes, vector_pending=unseen))  # fmt: skip
        return hits

    def _recall_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if not self._store.is_open:
                raise StoreClosedError("memory manager is closed (or was never initialized)")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="tiered-memory-recall")
            return self._pool

    def stop(self) -> None:
        """Stop the thread that runs vector searches beside keyword searches."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def queue_reviews(self, memory_ids: list[str]) -> None:
        """Count these recalled memories as reviews, written in batches; busy writers
        defer them (see :mod:`~tiered_memory.recall.reviews`), never fail the recall."""
        self.reviews.add(memory_ids)

    def apply_reviews(self, *, drop_if_busy: bool = False) -> None:
        """Write the queued reviews of memories that are due, in one transaction."""
        self.reviews.write(drop_if_busy=drop_if_busy)


def _by_score(hit: RecallHit | NoteHit) -> tuple[float, int, str]:
    """Best first; at equal scores memories before notes, then by id."""
    if isinstance(hit, RecallHit):
        return (-hit.score, 0, hit.memory.id)
    return (-hit.score, 1, hit.note.id)
