"""Conversation structure as recall signals: answer adjacency and speaker attribution.

Any chat memory has these two, whatever the domain:

- **Answer adjacency.** The memory right after a question in its session (rowid
  order, as the keyword window counts) is likely its answer. When the question is a
  candidate, its answer gets ``adjacency_weight`` times the question's fused value on
  top of its own (never less than its own: a negative fused value adds nothing). A
  question near the query thereby pulls in the turn that answers it.
- **Speaker attribution.** Memories may record who said them (``speaker``). When the
  query names exactly one of the speakers among the candidates, that speaker's
  memories get ``speaker_boost`` added to their fused value.

Both are pure functions of the fused values, so an offline replay of the fusion
(``benchmarks/locomo_replay.py``) scores exactly as :meth:`recall` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from tiered_memory.recall.types import SignalMatch, fused_values

if TYPE_CHECKING:
    from tiered_memory.recall.settings import RecallSettings

Turn = tuple[str | None, bool, str | None, str | None]
"""(speaker, asks something, id before it in its session, id after it)."""

ADJACENCY = "adjacency"
SPEAKER = "speaker"

_WORD = re.compile(r"\w+", re.UNICODE)


def is_question(content: str) -> bool:
    """Whether a memory asks something: it holds a question mark."""
    return "?" in content


def answer_bonus(
    strength: Mapping[str, float], answers: Mapping[str, str], weight: float
) -> dict[str, tuple[str, float]]:
    """Answer id -> (the question it follows, what it adds): ``weight`` times the
    question's fused value, for each question among the candidates (``strength``: fused
    value per candidate; ``answers``: question id -> the memory after it). When one
    memory follows several questions (it cannot, in one session), the best counts."""
    bonus: dict[str, tuple[str, float]] = {}
    if weight <= 0:
        return bonus
    for question, answer in answers.items():
        value = strength.get(question, 0.0)
        if value <= 0 or answer == question:
            continue
        add = weight * value
        if add > bonus.get(answer, ("", 0.0))[1]:
            bonus[answer] = (question, add)
    return bonus


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.casefold() for w in _WORD.findall(text))


def named_speaker(query: str, speakers: Iterable[str]) -> str | None:
    """The one speaker among ``speakers`` whose name (all its words, in order) the query
    holds, case-insensitively; ``None`` when it names none or several."""
    words = _words(query)
    named = set()
    for speaker in set(speakers):
        name = _words(speaker)
        if name and any(words[i : i + len(name)] == name for i in range(len(words))):
            named.add(speaker)
    return named.pop() if len(named) == 1 else None


def cached_turns(
    lookup: Callable[[Sequence[str]], Mapping[str, Turn]],
) -> Callable[[Sequence[str]], dict[str, Turn]]:
    """``lookup`` that asks the store only for ids it has not asked about yet (one
    recall's conversation signals, neighbour evidence and reranker share the rows)."""
    known: dict[str, Turn] = {}
    asked: set[str] = set()

    def turns(memory_ids: Sequence[str]) -> dict[str, Turn]:
        missing = [m for m in dict.fromkeys(memory_ids) if m not in asked]
        if missing:
            known.update(lookup(missing))
            asked.update(missing)
        return {m: known[m] for m in memory_ids if m in known}

    return turns


def add_conversation_signals(
    fused: dict[str, list[SignalMatch]],
    query: str,
    settings: RecallSettings,
    turns: Callable[[Sequence[str]], Mapping[str, Turn]],
    distances: Callable[[Sequence[str]], Mapping[str, float]] | None,
    may_add: bool,
) -> None:
    """Add the ``adjacency`` and ``speaker`` signals to ``fused`` (memory id -> signals).

    ``turns`` looks up the candidates' conversation facts; ``distances`` gives cosine
    distances (score fusion: an answer that was not a candidate enters with its own
    vector share; ``None`` under rank fusion, where it enters with the bonus alone).
    ``may_add`` is false under recall filters: then only candidates gain, since an
    answer outside the candidates may not pass the filters.
    """
    if not fused or (settings.adjacency_weight <= 0 and settings.speaker_boost <= 0):
        return
    facts = dict(turns(list(fused)))
    if settings.adjacency_weight > 0:
        strength = fused_values(fused)
        answers = {m: t[3] for m, t in facts.items() if t[1] and t[3] is not None}
        bonus = answer_bonus(strength, answers, settings.adjacency_weight)
        new = [m for m in bonus if m not in fused]
        if new and not may_add:
            bonus = {m: b for m, b in bonus.items() if m in fused}
            new = []
        if new:
            facts.update(turns(new))
            own = dict(distances(new)) if distances is not None else {}
            share = 1.0 - settings.keyword_share
            for m in new:
                if m not in facts:
                    continue  # forgotten meanwhile
                fused[m] = []
                if m in own:
                    fused[m].append(SignalMatch("vector", 0, own[m], "cosine distance",
                                                share * (1.0 - own[m])))  # fmt: skip
        for m, (question, add) in bonus.items():
            if m in fused:
                why = "answer to a matching question"
                match = SignalMatch(ADJACENCY, 0, strength[question], "question", add, detail=why)
                fused[m].append(match)
    if settings.speaker_boost > 0:
        speakers = {t[0] for t in facts.values() if t[0]}
        who = named_speaker(query, speakers)
        if who is not None:
            for m, signals in fused.items():
                if m in facts and facts[m][0] == who:
                    boost = settings.speaker_boost
                    said = SignalMatch(SPEAKER, 0, boost, "boost", boost, detail=f"said by {who}")
                    signals.append(said)
