"""Clause-blended vectors: a memory of several sentences leans towards each of them.

Mean pooling over a long chat turn dilutes each thing it says ("Thanks, Joanna! Lately
I've been doing great - I won a really big video game tournament last week"): the
pleasantry weighs as much as the news, and a question about the news meets a vector
about both. :class:`ClauseBlendEmbedder` wraps a sentence embedder; for a text of two
or more sentences (of at least :data:`MIN_WORDS` words each) it returns::

    normalise(alpha * v(text) + (1 - alpha) * normalise(mean of v(sentence)))

and the plain vector for any other text (most queries are one sentence, so they embed
as before). A transcript line's speaker label (``Name:`` at the start, one to three
words, after an optional ``[...]`` stamp) is repeated before each later sentence, so
each sentence still says who said it. Still one vector per memory: no new index, no
query-time cost; indexing embeds each sentence as well (about twice the texts on
LoCoMo's turns), the first :data:`MAX_SENTENCES` of them only, so a huge memory costs
at most that many more short runs of the model. Sentences end at ``.``, ``!``, ``?``
(and their full-width forms) before white space; a text without such ends (most
Chinese or Japanese text) is embedded whole.

On LoCoMo's development conversations (README) ``alpha=0.6`` raised recall@10 on the
tuning and the check half alike. It has its own model id (the base's plus
``+clauses0.6``), so a file keeps the vectors of one scheme: an existing file switches
with ``reembed=True``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from numbers import Real

import numpy as np

from persistence import EmbedderError, InvalidInputError
from tiered_memory.embedding.onnx_encoder import Embedder, Vectors

ALPHA = 0.6
"""The default share of the whole text's vector (the rest: its sentences' mean)."""
MIN_WORDS = 3
"""Sentences shorter than this ("Wow!", "Thanks, Nate!") take no part of their own."""

MAX_SENTENCES = 8
"""Sentences embedded on their own at most (the first ones): a memory of a thousand
sentences costs what one of eight does."""

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
_NAME_WORD = r"[^\W\d_][\w'’-]*"
_LABEL = re.compile(rf"^(?:\[[^\]\n]*\]\s*)?({_NAME_WORD}(?: {_NAME_WORD}){{0,2}}):\s")


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` that count on their own (at least :data:`MIN_WORDS`
    words), each after the first prefixed by the text's speaker label if it has one.
    Fewer than two: the text is embedded whole only."""
    parts = [p for p in _SENTENCE_END.split(text.strip()) if len(p.split()) >= MIN_WORDS]
    if len(parts) < 2:
        return []
    parts = parts[:MAX_SENTENCES]
    label = _LABEL.match(text)
    if label is not None:
        parts = [parts[0], *(f"{label.group(1).strip()}: {p}" for p in parts[1:])]
    return parts


def blended_note(content: str, alpha: float) -> tuple[str, ...]:
    """A recall hit's note when its memory's vector was blended (empty when not: one
    sentence, or ``alpha`` 1, which keeps the whole text's vector)."""
    count = len(sentences(content)) if alpha < 1 else 0
    if not count:
        return ()
    return (f"vector: the whole text blended with its {count} sentences (clause blend {alpha:g})",)


class ClauseBlendEmbedder:
    """An :class:`~tiered_memory.embedding.onnx_encoder.Embedder` whose vector for a
    text of several sentences blends the whole text's vector with its sentences' mean
    (see the module docstring); ``base`` embeds every piece."""

    def __init__(self, base: Embedder, alpha: float = ALPHA) -> None:
        if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0 < alpha <= 1:
            raise InvalidInputError(f"alpha must be a number in (0, 1], got {alpha!r}")
        self.base: Embedder = base
        # Rounded as the model id prints it: two blends of one id make the same vectors.
        self.alpha: float = float(f"{float(alpha):g}")

    @property
    def dim(self) -> int:
        """The base embedder's dimension."""
        return self.base.dim

    def load_model(self) -> None:
        """Load the base embedder's model now, if it has that step (``load_model``)."""
        load = getattr(self.base, "load_model", None)
        if callable(load):
            load()

    @property
    def model_id(self) -> str:
        """The base's id and the blend (``...+clauses0.6``): the file records it, so a
        file never mixes plain and blended vectors."""
        return f"{self.base.model_id}+clauses{self.alpha:g}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One vector per text, in one call of the base embedder for every piece."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("embed() takes a sequence of str")
        split = [sentences(t) if self.alpha < 1 else [] for t in texts]
        pieces = [p for text, parts in zip(texts, split, strict=True) for p in (text, *parts)]
        vectors = np.asarray(self.base.embed(pieces), dtype=np.float32)
        if vectors.shape != (len(pieces), self.dim):
            raise EmbedderError(
                f"the base embedder {self.base.model_id!r} returned shape {vectors.shape} "
                f"for {len(pieces)} texts of dimension {self.dim}"
            )
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        at = 0
        for i, parts in enumerate(split):
            whole = vectors[at]
            if parts:
                whole = whole / max(float(np.linalg.norm(whole)), 1e-12)
                mean = vectors[at + 1 : at + 1 + len(parts)].mean(axis=0)
                mean /= max(float(np.linalg.norm(mean)), 1e-12)
                whole = self.alpha * whole + (1.0 - self.alpha) * mean
                whole /= max(float(np.linalg.norm(whole)), 1e-12)
            out[i] = whole
            at += 1 + len(parts)
        return out
