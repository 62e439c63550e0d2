"""Facts that change (issue 43): does recall answer with what is true now, and then, and
what does leaving superseded memories out cost?

Two measurements, one run:

- **History** (:func:`history_quality`): ``subjects`` people whose city, employer and
  preferred drink change two to four times, worded variously; half the people's
  changes are remembered with ``supersedes=`` the previous one, the other half's with
  a single-valued relation (``lives_in``, ``works_at``, ``drinks``: the new fact
  supersedes the old one on its own). For
  "where does X live?"-style questions, the share where the current fact is the top
  hit: with today's recall (``include_superseded=True``: every version competes, as
  before supersession existed) and with the new default; then the same for ``as_of``
  questions at random moments (the fact true then at the top); each without the fact
  signal (``*_no_fact``: before it) and with it (the default). Twice: among X's
  memories (a tag per person: the city competes with the employer and the drink, so the
  model's reading of the question counts too) and among X's memories of the asked kind
  (``*_of_kind``: only the versions of that fact compete). Worded with the templates
  the recall defaults were tuned on (``--wordings first``) and with held-out ones
  nothing was tuned on (``heldout``); also without the fact signal's predicate words
  (``*_no_words``: relations alone), without its memories' meaning (``fact_vectors=0``,
  ``*_no_vectors``: relations and words, the default before the meaning), and recall's
  p50 for these questions under each settings variant,
  asked in turn (``p50_ms*``); the meaning without its guard (``fact_mutual=False``,
  ``*_no_guard``). And the **fact absent** case (``absent_*``): ``subjects // 3`` more
  people with two kinds of facts and two sentences naming none (:data:`NEUTRAL`), asked
  about the third kind: the share where the fact signal boosted a hit anyway (false
  boosts; ``absent_meaning``: by a memory's meaning).
- **Cost** (:func:`recall_p50`): default ``recall()`` p50 on a store of ``n`` memories
  with none superseded, and on one of ``n`` memories a share of which are superseded
  (the filter inside each search leg), on SQLite and PostgreSQL; half the superseded
  ones by ``supersedes=``, half by single-valued relations (``lives_in``). Vectors are
  fixed per text (no model runs), the queries three random words of the vocabulary.
  The stores are built in batches (``remember_many``, and ``memory.transaction()``
  around 500 superseding writes), so 100,000 memories build in minutes.

Run: ``.venv/bin/python benchmarks/supersession.py [--n 10000] [--engine sqlite,postgres]``
(``--copied --n 100000``: the cost on PostgreSQL with both stores built on SQLite files
and moved with ``copy_memory()``)
(``--only-none`` measures only the store without superseded memories: that part runs on
a checkout from before supersession too, for a before/after comparison).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the checkout's root on the path
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: a run
    # with PYTHONPATH=<another checkout> measures that checkout's library

from benchmarks.backends_table import (  # noqa: E402
    LookupEmbedder,
    _new_database,
    _open_tiered,
    postgres_server,
)

CITIES = ["Paris", "Berlin", "Lisbon", "Oslo", "Madrid", "Vienna", "Prague", "Dublin", "Rome"]
EMPLOYERS = ["Acme", "Initech", "Globex", "Umbrella", "Hooli", "Soylent", "Wayne", "Stark"]
DRINKS = ["tea", "coffee", "cocoa", "matcha", "espresso", "lemonade", "kombucha"]
WORDING = {
    "city": ["{x} lives in {v}", "{x} moved to {v}", "{x} relocated to {v} this year",
             "home for {x} is now {v}", "{x} has an apartment in {v} now"],
    "work": ["{x} works at {v}", "{x} joined {v}", "{x} took a job at {v}",
             "{x} is employed by {v} now", "{x}'s employer is {v}"],
    "drink": ["{x} prefers {v}", "{x} likes {v} best", "{x} now drinks {v} every morning",
              "{x}'s favourite drink is {v}", "{x} switched to {v}"],
}  # fmt: skip
QUESTIONS = {
    "city": "where does {x} live?",
    "work": "where does {x} work?",
    "drink": "what does {x} like to drink?",
}
HELD_OUT = {  # written before the predicate vocabulary was tuned, never tuned on
    "city": ["{x} is settling into a flat in {v}", "{x} bought a house in {v}",
             "{x} is renting a place in {v}", "these days {x} is based in {v}",
             "{x}'s new address is in {v}"],
    "work": ["{x} started a new position at {v}", "{x} signed a contract with {v}",
             "{x} got hired by {v}", "{x} is on the payroll of {v}",
             "{x} accepted an offer from {v}"],
    "drink": ["{x} orders {v} whenever possible", "{x} can't start the day without {v}",
              "{x} has been drinking {v} lately", "{x} picks {v} over anything else",
              "{x} enjoys a cup of {v}"],
}  # fmt: skip
HELD_OUT_QUESTIONS = {
    "city": "where is {x}'s home these days?",
    "work": "which company employs {x}?",
    "drink": "what is {x}'s usual drink?",
}
HELD_OUT_2 = {  # written for issue 43's embedding lever before it was tried, never tuned on
    "city": ["{x} just signed a lease in {v}", "{x} packed up and went to {v} for good",
             "{x}'s mail goes to {v} now", "{x} has been living in {v} since spring",
             "{x} now calls {v} home"],
    "work": ["{x} is a software engineer at {v}", "{x} got a role with {v}",
             "{x} spends weekdays at the {v} office", "{x} draws a salary from {v}",
             "{x} is now part of the team at {v}"],
    "drink": ["{x} always asks for {v}", "{x} sips {v} all afternoon",
              "{x} keeps a thermos of {v} at hand", "{x} is hooked on {v}",
              "{x}'s go-to beverage is {v}"],
}  # fmt: skip
HELD_OUT_2_QUESTIONS = {
    "city": "which city is {x} living in now?",
    "work": "who is {x}'s employer at the moment?",
    "drink": "what does {x} usually drink?",
}
WORDINGS = {
    "first": (WORDING, QUESTIONS),
    "heldout": (HELD_OUT, HELD_OUT_QUESTIONS),
    "heldout2": (HELD_OUT_2, HELD_OUT_2_QUESTIONS),
}
"""Sentence and question templates: ``first`` (the set the recall defaults were tuned
on), ``heldout`` (a second set nothing was tuned on: ``--wordings heldout``) and
``heldout2`` (a third, written before the fact signal's embedding lever was tried and
never tuned on either)."""
NEUTRAL = {  # facts absent: sentences about a person holding none of the facts asked
    "first": ["{x}'s sister is visiting in June", "{x} has a dog named Rex",
              "{x} is learning to play the guitar", "{x} ran a marathon last autumn",
              "{x} is allergic to peanuts"],
    "heldout": ["{x} finished reading a long novel", "{x} celebrated a birthday on Friday",
                "{x} lost a phone on the bus", "{x} watches football every Sunday",
                "{x} is taking a pottery class"],
    "heldout2": ["{x} painted a portrait of a cat", "{x} forgot an umbrella yesterday",
                 "{x}'s brother plays the violin", "{x} went hiking in the hills",
                 "{x} is afraid of spiders"],
}  # fmt: skip
"""Per template set, sentences naming no single-valued fact: a person of the "fact
absent" case has two of them beside the facts of two kinds, and is asked the third."""
VALUES = {"city": CITIES, "work": EMPLOYERS, "drink": DRINKS}
PREDICATES = {"city": "lives_in", "work": "works_at", "drink": "drinks"}
SINGLE_VALUED = ("lives_in", "works_at", "drinks")
DAY = 86_400_000


class Clock:
    """A settable clock (epoch ms): the history spans years, the run seconds."""

    def __init__(self, now: int = 1_600_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def history_quality(
    location: str, subjects: int, seed: int = 43, wordings: str = "first"
) -> dict[str, float]:
    """The history measurement (see the module docstring) on ``location``, with the
    default embedding model, worded with the ``wordings`` templates (:data:`WORDINGS`);
    shares of questions answered right at the top. Asked of the one history without the
    fact signal (``RecallSettings(fact_share=0)``, keys ``*_no_fact``: recall before it
    existed), without its predicate words nor its memories' meaning (``fact_words=0,
    fact_vectors=0``, keys ``*_no_words``: relations alone), without the meaning
    (``fact_vectors=0``, ``*_no_vectors``) and with the defaults."""
    from tiered_memory import AgentMemoryManager
    from tiered_memory.recall import RecallSettings

    sentences, questions = WORDINGS[wordings]
    variants = [("_no_fact", RecallSettings(fact_share=0.0))]
    fields = RecallSettings.__dataclass_fields__
    if "fact_words" in fields:  # not on older checkouts
        meaning = {"fact_vectors": 0.0} if "fact_vectors" in fields else {}
        variants.append(("_no_words", RecallSettings(fact_words=0.0, **meaning)))
    if "fact_vectors" in fields:
        variants.append(("_no_vectors", RecallSettings(fact_vectors=0.0)))
    if "fact_mutual" in fields:
        variants.append(("_no_guard", RecallSettings(fact_mutual=False)))
    variants.append(("", RecallSettings()))

    clock = Clock()
    options: dict[str, Any] = dict(clock=clock, embed_in_background=False,
                                   recall_review_quality=None, extractor=None,
                                   single_valued=SINGLE_VALUED)  # fmt: skip
    people = [f"Person{n:04d}" for n in range(subjects)]
    rng = random.Random(seed)
    truth, absent = build_history(location, options, people, rng, wordings)
    end = clock.now
    asked = [(p, kind) for p in people for kind in VALUES]
    moments = {key: rng.randint(truth[key][0][0], end) for key in asked}
    found: dict[str, int] = {}
    for label, settings in variants:
        with AgentMemoryManager.open(location, recall=settings, **options) as memory:
            for person, kind in asked:
                question = questions[kind].format(x=person)
                chain = truth[(person, kind)]
                moment = moments[(person, kind)]
                true_then = [memory_id for start, memory_id in chain if start <= moment][-1]
                for suffix, tags in (("", (person,)), ("_of_kind", (person, kind))):
                    asks = {"current": {}, "as_of": {"as_of": moment}}
                    if label == "_no_fact":  # today's recall: every version competes
                        asks["today"] = {"include_superseded": True}
                    for name, extra in asks.items():
                        hits = memory.recall(question, 1, tags=tags, **extra)
                        want = true_then if name == "as_of" else chain[-1][1]
                        key = name + suffix + ("" if name == "today" else label)
                        right = bool(hits) and hits[0].memory.id == want
                        found[key] = found.get(key, 0) + right
                        if name == "current" and not suffix:  # by half and kind
                            half = "related" if int(person[-4:]) % 2 else "plain"
                            part = f"{name}{label} {half} {kind}"
                            found[part] = found.get(part, 0) + right
            if label != "_no_fact":
                for key, count in _false_boosts(memory, absent, questions).items():
                    found[key + label] = found.get(key + label, 0) + count
    shares = {k: round(v / (len(absent) if k.startswith("absent") else len(asked)), 3)
              for k, v in found.items() if " " not in k}  # fmt: skip
    per_part = len(asked) / 6  # each half asks about each kind
    parts = {k: round(v / per_part, 3) for k, v in sorted(found.items()) if " " in k}
    timing = _question_p50(location, options, variants,
                           [questions[kind].format(x=p) for p, kind in asked])  # fmt: skip
    return {"questions": len(asked), "absent": len(absent), **shares, **parts, **timing}


def _false_boosts(memory: Any, absent: dict[str, str], questions: dict[str, str]) -> dict[str, int]:
    """The "fact absent" case: each of ``absent`` (person -> a kind none of their
    memories holds) asked about it (``k=10``: all their memories); how many times the
    fact signal boosted any hit (``absent_boosted``), by a memory's meaning
    (``absent_meaning``) or its words (``absent_words``); none holds the fact asked."""
    found = {"absent_boosted": 0, "absent_meaning": 0, "absent_words": 0}
    for person, kind in absent.items():
        hits = memory.recall(questions[kind].format(x=person), 10, tags=(person,))
        why = [str(s.path) for h in hits for s in h.explanation.signals if s.signal == "fact"]
        found["absent_boosted"] += bool(why)
        found["absent_meaning"] += any(w.startswith("its meaning") for w in why)
        found["absent_words"] += any(" expresses " in w for w in why)
    return found


def build_history(
    location: str,
    options: dict[str, Any],
    people: list[str],
    rng: random.Random,
    wordings: str,
) -> tuple[dict[tuple[str, str], list[tuple[int, str]]], dict[str, str]]:
    """The history on ``location`` (``options["clock"]`` advancing): each of ``people``'s
    facts of each kind, 3-5 versions; (person, kind) -> [(from, memory id)]. Before it
    (in time), the "fact absent" people (:func:`_remember_absent`): person -> the kind
    asked."""
    from tiered_memory import AgentMemoryManager

    sentences = WORDINGS[wordings][0]
    clock = options["clock"]
    truth: dict[tuple[str, str], list[tuple[int, str]]] = {}  # (person, kind) -> (from, id)
    with AgentMemoryManager.open(location, **options) as memory:
        start = clock.now  # the absent people's facts before it: the history is as it was
        clock.now -= len(people) // 3 * 6 * DAY
        absent = _remember_absent(memory, clock, len(people) // 3, wordings)
        assert clock.now <= start
        clock.now = start
        events = [(p, kind) for p in people for kind in VALUES for _ in range(rng.randint(3, 5))]
        rng.shuffle(events)
        said: dict[tuple[str, str], str] = {}
        for person, kind in events:  # 3-5 versions: the first fact and 2-4 changes
            clock.now += rng.randint(1, 5) * DAY // 4
            chain = truth.setdefault((person, kind), [])
            value = rng.choice([v for v in VALUES[kind] if v != said.get((person, kind))])
            said[(person, kind)] = value
            text = rng.choice(sentences[kind]).format(x=person, v=value)
            stored = _remember_fact(memory, person, kind, value, text,
                                    chain[-1][1] if chain else None,
                                    related=bool(int(person[-4:]) % 2))  # fmt: skip
            chain.append((stored.created_at, stored.id))
        memory.flush()
    return truth, absent


def _remember_fact(
    memory: Any,
    person: str,
    kind: str,
    value: str,
    text: str,
    previous: str | None,
    *,
    related: bool,
) -> Any:
    """One version of a fact: with a single-valued relation (it supersedes on its own)
    when ``related``, else with ``supersedes=`` the ``previous`` version."""
    if related:
        fact = (person, PREDICATES[kind], value)
        return memory.remember(text, tags=(person, kind), relations=[fact])
    return memory.remember(text, tags=(person, kind), supersedes=previous)


def _remember_absent(memory: Any, clock: Clock, count: int, wordings: str) -> dict[str, str]:
    """The "fact absent" case: ``count`` people with one or two versions of two kinds'
    facts (as the history's) and two :data:`NEUTRAL` sentences, none of the third kind,
    which they are asked about: person -> that kind. Its own random stream, so the
    history before it is the same with or without it."""
    rng = random.Random(f"absent-{wordings}")
    sentences = WORDINGS[wordings][0]
    asked: dict[str, str] = {}
    for n in range(count):
        person = f"Absent{n:04d}"
        asked[person] = missing = list(VALUES)[n % len(VALUES)]
        for kind in (k for k in VALUES if k != missing):
            previous = None
            for value in rng.sample(VALUES[kind], rng.randint(1, 2)):
                clock.now += rng.randint(1, 5) * DAY // 4
                text = rng.choice(sentences[kind]).format(x=person, v=value)
                previous = _remember_fact(memory, person, kind, value, text, previous,
                                          related=bool(n % 2)).id  # fmt: skip
        for text in rng.sample(NEUTRAL[wordings], 2):
            clock.now += DAY // 4
            memory.remember(text.format(x=person), tags=(person, "neutral"))
    return asked


def _question_p50(
    location: str, options: dict[str, Any], variants: list[tuple[str, Any]], asked: list[str]
) -> dict[str, float]:
    """Recall's p50 (ms, ``k=10``, no filter: the whole store's candidates) for the
    history's questions under each settings variant, the variants asked in turn."""
    from tiered_memory import AgentMemoryManager

    managers = [AgentMemoryManager.open(location, recall=s, **options) for _, s in variants]
    try:
        samples: list[list[float]] = [[] for _ in variants]
        for question in asked[:20]:  # warm
            for memory in managers:
                memory.recall(question, 10)
        for question in asked:
            for memory, times in zip(managers, samples, strict=True):
                started = time.perf_counter()
                memory.recall(question, 10)
                times.append((time.perf_counter() - started) * 1000)
    finally:
        for memory in managers:
            memory.shutdown()
    return {
        f"p50_ms{label}": round(statistics.median(times), 2)
        for (label, _), times in zip(variants, samples, strict=True)
    }


def _words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(n))


def build(
    location: str, n: int, superseded_share: float, seed: int = 7, *, supersede: bool = True
) -> Any:
    """An open manager on ``n`` memories of 12 random words, a ``superseded_share`` of
    them superseded (each by one of the others): half by ``supersedes=``, half by a
    single-valued ``lives_in`` relation (a person's old city, then the new one).
    ``supersede=False``: the same memories and graph, nothing superseded (the relations
    are ``resides_in``, not single-valued; no ``supersedes=``): the baseline."""
    rng = random.Random(seed)
    memory = _open_tiered(location, LookupEmbedder())
    replaced = int(n * superseded_share)
    by_relation = replaced // 2
    base = n - replaced - by_relation
    texts = [_words(rng, VOCABULARY, 12) for _ in range(base)]
    ids: list[str] = []
    for lo in range(0, base, 1000):
        ids += [m.id for m in memory.remember_many(texts[lo : lo + 1000])]
    olds = rng.sample(ids, replaced - by_relation)
    for lo in range(0, len(olds), 500):
        with memory.transaction():
            for old in olds[lo : lo + 500]:
                memory.remember(_words(rng, VOCABULARY, 12), supersedes=old if supersede else None)
    predicate = "lives_in" if supersede else "resides_in"
    for phase in ("old", "new"):  # each person's first city, then the one after it
        for lo in range(0, by_relation, 500):
            with memory.transaction():
                for person in range(lo, min(lo + 500, by_relation)):
                    city = f"City{(person + (phase == 'new')) % 997}"
                    memory.remember(_words(rng, VOCABULARY, 12),
                                    relations=[(f"Subject{person}", predicate, city)])  # fmt: skip
    memory.flush()
    return memory


VOCABULARY = [f"w{i}" for i in range(5000)]


def recall_p50(memories: list[Any], queries: int = 300, seed: int = 9) -> list[float]:
    """Default ``recall(k=10)`` p50 in ms on each of ``memories``, the same questions
    (three random words) asked of each in turn, so a busy machine slows all alike."""
    rng = random.Random(seed)
    asked = [_words(rng, VOCABULARY, 3) for _ in range(queries)]
    for memory in memories:
        for question in asked[:20]:  # warm: caches, the vector copy, prepared statements
            memory.recall(question, 10)
    samples: list[list[float]] = [[] for _ in memories]
    for question in asked:
        for memory, times in zip(memories, samples, strict=True):
            start = time.perf_counter()
            memory.recall(question, 10)
            times.append((time.perf_counter() - start) * 1000)
    return [statistics.median(times) for times in samples]


@contextmanager
def locations(engine: str) -> Iterator[Any]:
    """A maker of fresh locations (``name -> file path or URL``) on ``engine``."""
    if engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tm-supersession-") as root:
            yield lambda name: str(Path(root) / f"{name}.db")
    else:
        with postgres_server() as server:
            yield lambda name: _new_database(server, f"tm_{name}")


def copied_to_postgres(n: int, share: float) -> None:
    """The cost measurement on PostgreSQL with stores built on SQLite files (batches of
    local writes) and moved with ``copy_memory()`` (a few statements per table): a
    superseding ``remember()`` at a time over the network is too slow to build 100,000."""
    from tiered_memory.copying import copy_memory

    with tempfile.TemporaryDirectory(prefix="tm-supersession-") as root, postgres_server() as pg:
        started = time.perf_counter()
        urls = []
        for name, supersede in (("none", False), ("some", True)):
            path = str(Path(root) / f"{name}.db")
            build(path, n, share, supersede=supersede).shutdown()
            urls.append(_new_database(pg, f"tm_{name}"))
            copy_memory(path, urls[-1])
        stores = [_open_tiered(url, LookupEmbedder()) for url in urls]
        try:
            counts = [m.store.memories.superseded_count() for m in stores]
            p50 = recall_p50(stores)
        finally:
            for memory in stores:
                memory.shutdown()
        print(f"postgres (copied from SQLite): recall p50 at {n}: none superseded "
              f"{p50[0]:.2f} ms, {share:.0%} superseded {p50[1]:.2f} ms "
              f"({p50[1] / p50[0]:.2f}x) [superseded: {counts[1]}, built and copied in "
              f"{time.perf_counter() - started:.0f} s]", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--share", type=float, default=0.3, help="superseded share")
    parser.add_argument("--engine", default="sqlite,postgres")
    parser.add_argument("--subjects", type=int, default=300)
    parser.add_argument("--only-none", action="store_true")
    parser.add_argument(
        "--wordings",
        default="first,heldout",
        help="history: template sets (first: tuned on; heldout: not)",
    )
    parser.add_argument("--history-only", action="store_true", help="skip the cost")
    parser.add_argument(
        "--copied", action="store_true",
        help="postgres: build the stores on SQLite files, then copy_memory() them over",
    )  # fmt: skip
    args = parser.parse_args()
    if args.copied:
        return copied_to_postgres(args.n, args.share)
    for engine in args.engine.split(","):
        with locations(engine) as where:
            if args.history_only:
                for wordings in args.wordings.split(","):
                    print(f"{engine}: history ({wordings})",
                          history_quality(where(f"history_{wordings}"), args.subjects,
                                          wordings=wordings), flush=True)  # fmt: skip
                continue
            started = time.perf_counter()
            stores = [build(where("none"), args.n, args.share, supersede=False)]
            built = [time.perf_counter() - started]
            if not args.only_none:
                started = time.perf_counter()
                stores.append(build(where("some"), args.n, args.share))
                built.append(time.perf_counter() - started)
            try:
                counts = [m.store.memories.superseded_count() for m in stores]
                p50 = recall_p50(stores)
            finally:
                for memory in stores:
                    memory.shutdown()
            line = f"{engine}: recall p50 at {args.n}: none superseded {p50[0]:.2f} ms"
            if not args.only_none:
                line += f", {args.share:.0%} superseded {p50[1]:.2f} ms ({p50[1] / p50[0]:.2f}x)"
                line += f" [superseded: {counts[1]}, built in {built[0]:.0f} s / {built[1]:.0f} s]"
            print(line, flush=True)
            if not args.only_none and args.subjects:
                for wordings in args.wordings.split(","):
                    print(f"{engine}: history ({wordings})",
                          history_quality(where(f"history_{wordings}"), args.subjects,
                                          wordings=wordings), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
