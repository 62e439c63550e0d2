"""Entity extraction: the :class:`Extractor` protocol, the default local extractor, and
the queue that runs it in the background.

The queue is the file (``graph_queue``: every new or edited memory is queued by a
trigger in the transaction that wrote it), so ``remember()`` never waits for
extraction (the background thread works between bursts of writes, in short
batches), a crash loses nothing and an old file's graph is built from its memories
in batches, resumably. An extractor that raises or returns garbage never costs a
memory: the failure is logged (logger ``tiered_memory.extraction``), counted in the file
(``statistics().graph.extraction_errors``) and that memory is retried later, after a
pause that doubles with each failure.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from persistence import (
    DatabaseBusyError,
    EntityFact,
    ExtractorError,
    GraphStorage,
    MemoryStorage,
    RelationFact,
    Retry,
    TieredMemoryError,
    Worker,
    graph_records,
    work_right,
)
from tiered_memory.graph.facade import entity_facts, relation_facts

MENTIONED_WITH = graph_records.MENTIONED_WITH
normalise = graph_records.normalise
BATCH_SIZE = 64
BACKGROUND_BATCH = 16
"""Memories per background transaction: short, so a remember() never waits long."""
QUIET_SECONDS = 0.05
MAX_DEFER_SECONDS = 2.0
"""Background extraction waits for a pause in writes, but never longer than this."""
RETRY_SECONDS: Retry = (5.0, 3600.0)
"""The default ``retry_seconds`` of a memory whose extraction failed."""
MAX_CO_MENTIONED = 12
"""``mentioned_with`` links at most this many entities of one memory pairwise."""
_IDLE_SECONDS = 2.0
_log = logging.getLogger("tiered_memory.extraction")


@dataclass(frozen=True, slots=True)
class Extraction:
    """What an extractor found in one text."""

    entities: tuple[EntityFact, ...] = ()
    relations: tuple[RelationFact, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Finds entities and relations in a memory's text.

    ``extract`` returns an :class:`Extraction` (or a mapping with ``entities`` and
    ``relations`` in the forms ``remember()`` takes). It runs in a background thread;
    it may be slow (an LLM call) but must be deterministic enough that running it twice
    on the same text is harmless.
    """

    def extract(self, text: str) -> Extraction | Mapping[str, Any]: ...


# --- the default extractor --------------------------------------------------------------

_URL = re.compile(r"\bhttps?://[^\s<>\"')\]]+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_HANDLE = re.compile(r"(?<![\w@.])@([A-Za-z0-9_]{2,30})\b")
_TAG = re.compile(r"(?<![\w#&])#([^\W\d_][\w-]{1,49})")
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{2,60})[\"”]")
_CAPITALISED = r"[A-ZÀ-ÖØ-Þ][\w'’-]*"
_PROPER = re.compile(
    rf"(?<![\w@#'’]){_CAPITALISED}"
    rf"(?:[ \t]+(?:(?:of|de|da|del|von|van|der|la|le|du|the)[ \t]+)?{_CAPITALISED})*"
)
_SENTENCE_START = re.compile(r"(?:^\s*|[.!?;\n]\s*|[\"“(]\s*)$")
_COMMON = frozenset(
    [
        "a",
        "about",
        "after",
        "again",
        "all",
        "also",
        "although",
        "always",
        "an",
        "and",
        "another",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "during",
        "each",
        "even",
        "ever",
        "every",
        "few",
        "for",
        "from",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "however",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "let",
        "like",
        "many",
        "may",
        "maybe",
        "me",
        "might",
        "more",
        "most",
        "much",
        "must",
        "my",
        "myself",
        "never",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "oh",
        "ok",
        "okay",
        "on",
        "once",
        "one",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "perhaps",
        "please",
        "same",
        "she",
        "should",
        "since",
        "so",
        "some",
        "still",
        "such",
        "than",
        "thank",
        "thanks",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "though",
        "through",
        "thus",
        "to",
        "too",
        "under",
        "until",
        "up",
        "us",
        "very",
        "was",
        "we",
        "well",
        "were",
        "what",
        "whatever",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "yes",
        "yet",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "hi",
        "hello",
        "hey",
        "wow",
        "yeah",
        "sure",
        "great",
        "good",
        "nice",
        "sorry",
        "really",
        "totally",
        "today",
        "tomorrow",
        "yesterday",
        "tonight",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "mr",
        "mrs",
        "ms",
        "dr",
    ]
)
_NOT_NAMES = ("ly", "ing", "ed")
_CONNECTORS = frozenset(["of", "de", "da", "del", "von", "van", "der", "la", "le", "du", "the"])


class DefaultExtractor:
    """Local and deterministic (no model, no network): proper-noun spans, quoted names,
    @handles, #tags, e-mail addresses and URLs become entities, linked pairwise by
    ``mentioned_with`` (its weight counts the memories that mention both)."""

    extractor_id = "tiered-memory-default-1"

    def extract(self, text: str) -> Extraction:
        """The entities in ``text`` (first mention first) and their co-mentions."""
        found: dict[tuple[str, str], tuple[int, str]] = {}

        def add(start: int, name: str, type_: str) -> None:
            name = name.strip(" .,;:!?'’-")
            norm = normalise(name)
            if len(norm) < 2 or len(name) > 200:
                return
            found.setdefault((norm, type_), (start, name))

        taken: list[tuple[int, int]] = []
        for pattern, type_, group in ((_URL, "url", 0), (_EMAIL, "email", 0)):
            for m in pattern.finditer(text):
                add(m.start(), m.group(group).rstrip(".,;:!?"), type_)
                taken.append(m.span())
        for m in _HANDLE.finditer(text):
            if not _inside(m.start(), taken):
                add(m.start(), "@" + m.group(1), "handle")
                taken.append(m.span())
        for m in _TAG.finditer(text):
            if not _inside(m.start(), taken):
                add(m.start(), "#" + m.group(1), "tag")
                taken.append(m.span())
        for m in _QUOTED.finditer(text):
            inner = m.group(1).strip()
            if inner and len(inner.split()) <= 6:
                add(m.start(1), inner, "entity")
                taken.append(m.span())
        spans = [
            (start, span)
            for m in _PROPER.finditer(text)
            if not _inside(m.start(), taken)
            for start, span in _proper_spans(text, m.start(), m.group(0))
        ]
        inside = {span for start, span in spans if not _opens_sentence(text, start)}
        for start, span in spans:
            # One capitalised word opening a sentence may be any word: an adverb or
            # gerund is dropped unless it is capitalised elsewhere too.
            alone = " " not in span and _opens_sentence(text, start)
            if not alone or span in inside or not span.lower().endswith(_NOT_NAMES):
                add(start, span, "entity")
        ordered = sorted(found.items(), key=lambda kv: kv[1][0])
        entities = tuple(EntityFact(name, type_) for (_, type_), (_, name) in ordered)
        linked = entities[:MAX_CO_MENTIONED]
        relations = tuple(
            RelationFact(a.name, MENTIONED_WITH, b.name, 1.0, a.type, b.type)
            for n, a in enumerate(linked)
            for b in linked[n + 1 :]
        )
        return Extraction(entities, relations)


def _opens_sentence(text: str, start: int) -> bool:
    return bool(_SENTENCE_START.search(text[max(0, start - 3) : start]))


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= position < b for a, b in spans)


def _proper_spans(text: str, start: int, span: str) -> list[tuple[int, str]]:
    """A run of capitalised words, without common words that only open a sentence and
    without possessive endings; connectors stay only between two names."""
    words = [(m.start() + start, m.group(0)) for m in re.finditer(r"\S+", span)]
    if words and words[0][1].lower() in _COMMON:
        before = text[: words[0][0]]
        if _SENTENCE_START.search(before) or words[0][1].lower() in ("i", "the", "a", "an"):
            words = words[1:]
    while words and words[0][1].lower() in _CONNECTORS:
        words = words[1:]
    while words and words[-1][1].lower() in _CONNECTORS:
        words = words[:-1]
    if not words:
        return []
    if len(words) == 1 and words[0][1].lower() in _COMMON:
        return []
    name = " ".join(w for _, w in words)
    name = re.sub(r"['’]s$", "", name)
    return [(words[0][0], name)]


def checked_extraction(result: object) -> tuple[list[EntityFact], list[RelationFact]]:
    """An extractor's result as facts, or :class:`ExtractorError` if it is garbage."""
    try:
        if isinstance(result, Extraction):
            return entity_facts(list(result.entities)), relation_facts(list(result.relations))
        if isinstance(result, Mapping) and set(result) <= {"entities", "relations"}:
            return entity_facts(result.get("entities") or []), relation_facts(
                result.get("relations") or []
            )
    except TieredMemoryError as exc:
        raise ExtractorError(f"the extractor returned an invalid fact: {exc}") from exc
    raise ExtractorError(
        f"the extractor returned {type(result).__name__}, not an Extraction or a mapping "
        "with 'entities' and 'relations'"
    )


# --- the queue ----------------------------------------------------------------------------


class ExtractionQueue:
    """Runs the extractor over queued memories, in batches; thread-safe.

    ``retry_seconds``: the first and the longest wait before a memory whose extraction
    failed is tried again (it doubles with each failure of that memory). The background
    thread is a :class:`~persistence.Worker`: a failure of a whole batch (the store, not
    the extractor) is logged and tried again after ``_IDLE_SECONDS``.
    """

    def __init__(
        self,
        store: MemoryStorage,
        graph: GraphStorage,
        extractor: Extractor | None,
        clock: Callable[[], int],
        retry_seconds: Retry = RETRY_SECONDS,
    ) -> None:
        self.store = store  # its path names the thread; closing it stops the work
        self.graph = graph
        self.extractor = extractor
        self.retry_seconds = retry_seconds
        self._clock = clock
        self._work_lock = threading.Lock()
        self._worker = Worker(
            f"tiered-memory-extract {store.path}",
            self._background_batches,
            logger=_log,
            what=f"background extraction on {store.path}",
            wait_s=_idle_seconds,  # the timeout also picks up due retries
            retry=_batch_retry,
            busy=(DatabaseBusyError,),
            busy_s=_IDLE_SECONDS,
            closed=self._store_closed,
        )
        self._last_write = 0.0
        self.single_valued: frozenset[str] = frozenset()
        """Predicates whose new facts :attr:`settle` sees (``MemoryConfig.single_valued``)."""
        self.settle: Callable[[str], object] | None = None
        """Runs the single-valued facts rule on one extracted memory, in the transaction
        that stores what was extracted (set by the manager)."""

    def flush(self, batch_size: int = BATCH_SIZE) -> int:
        """Extract every memory waiting now (failed ones wait for their retry time);
        returns how many were extracted."""
        return self._work(batch_size, self._stop_never)

    @staticmethod
    def _stop_never() -> bool:
        return False

    @contextmanager
    def _working(self) -> Iterator[None]:
        """The right to extract (:func:`~persistence.worker.work_right`: waiting for it in
        ``memory.transaction()`` once deadlocked ``flush()`` on PostgreSQL)."""
        with work_right(self._work_lock, self.store.in_transaction):
            yield

    def _work(self, batch_size: int, stop: Callable[[], bool]) -> int:
        if self.extractor is None:
            return 0
        done = 0
        with self._working():
            while not stop():
                batch = self.graph.pending(self._clock(), batch_size)
                if not batch:
                    break
                done += self._extract_batch(self.extractor, batch)
        return done

    def _extract_batch(self, extractor: Extractor, batch: list[tuple[str, str, int]]) -> int:
        results = []
        failures = []
        for memory_id, content, attempts in batch:
            if content is None:  # forgotten meanwhile: its queue row goes with it
                results.append((memory_id, None, [], []))
                continue
            try:
                entities, relations = checked_extraction(extractor.extract(content))
            except Exception as exc:
                failures.append((memory_id, attempts, exc))
                continue
            results.append((memory_id, content, entities, relations))
        now = self._clock()
        first, longest = self.retry_seconds
        postponed = [
            (memory_id, now + int(1000 * min(first * 2**attempts, longest)),
             f"{type(exc).__name__}: {exc}")
            for memory_id, attempts, exc in failures
        ]  # fmt: skip
        for memory_id, until, error in postponed:
            _log.error(
                "entity extraction failed for memory %s; the memory is kept and retried "
                "after %d ms: %s", memory_id, until - now, error,
            )  # fmt: skip
        settled = [
            memory_id for memory_id, content, _, relations in results
            if content is not None and any(r.predicate in self.single_valued for r in relations)
        ]  # fmt: skip
        if self.settle is None or not settled:
            return self.graph.apply_extractions(results, postponed, now)
        with self.store.transaction():  # the facts and what they supersede: all or nothing
            done = self.graph.apply_extractions(results, postponed, now)
            for memory_id in settled:
                self.settle(memory_id)
        return done

    # --- the background thread ------------------------------------------------------

    def start(self) -> None:
        """Start the background thread (once)."""
        if self.extractor is not None and not self._worker.started:
            self._worker.start()

    def notify(self) -> None:
        """Tell the background thread that there may be new work (a write happened)."""
        self._last_write = time.monotonic()
        self._worker.notify()

    def _quiet(self) -> None:
        """Wait until writes pause for ``QUIET_SECONDS`` (at most ``MAX_DEFER_SECONDS``):
        extraction takes the write lock and the GIL, so it runs between bursts."""
        deadline = time.monotonic() + MAX_DEFER_SECONDS
        while not self._worker.stopping and time.monotonic() < deadline:
            idle = time.monotonic() - self._last_write
            if idle >= QUIET_SECONDS:
                return
            self._worker.sleep(QUIET_SECONDS - idle)

    def _busy(self) -> bool:
        """Stop the background batches when asked to stop or when writes resume."""
        return self._worker.stopping or time.monotonic() - self._last_write < QUIET_SECONDS

    def stop(self) -> None:
        """Stop the background thread after its current batch and wait for it."""
        self._worker.stop()

    def _store_closed(self) -> bool:
        return not self.store.is_open

    def _background_batches(self) -> None:
        """The background thread's job: once writes pause, short batches until they
        resume."""
        self._quiet()
        if self._worker.stopping or not self.store.is_open:
            return
        self._work(BACKGROUND_BATCH, self._busy)


def _idle_seconds() -> float:
    return _IDLE_SECONDS


def _batch_retry() -> Retry:
    return (_IDLE_SECONDS, _IDLE_SECONDS)  # a failed batch: the same pause each time
