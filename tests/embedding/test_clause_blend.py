"""Clause-blended vectors (the default embedder for new files): a memory of several
sentences gets its whole vector blended with its sentences' mean; a one-sentence text
keeps the base vector; recall finds the buried sentence better and says why, on SQLite
and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from persistence import EmbedderError, InvalidInputError
from tiered_memory import AgentMemoryManager, RecallSettings
from tiered_memory.embedding import ClauseBlendEmbedder
from tiered_memory.embedding.clause_blend import MAX_SENTENCES, blended_note, sentences
from tiered_memory.embedding.embedders import OnnxEmbedder

BASE = OnnxEmbedder.compact()  # one model load for the module
BLEND = ClauseBlendEmbedder(BASE)
BURIED = (
    "[2 May] Nate: Thanks so much, Joanna! Things have been busy around here lately. "
    "I won a regional chess tournament last Saturday."
)
QUERY = "Which tournament did Nate win?"
# The vector signal alone decides the order (keyword share 0, no other signal).
VECTOR_ONLY = RecallSettings(keyword_share=0.0, graph_share=0.0, speaker_boost=0.0,
                             adjacency_weight=0.0, neighbour_weight=0.0)  # fmt: skip


def test_sentences_keep_those_of_three_words_and_carry_the_speaker_label() -> None:
    assert sentences(BURIED) == [
        "[2 May] Nate: Thanks so much, Joanna!",
        "Nate: Things have been busy around here lately.",
        "Nate: I won a regional chess tournament last Saturday.",
    ]
    assert sentences("Wow! Thanks! See you soon, Nate.") == []  # one counts: not split
    assert sentences("No label here. Just two sentences of text.") == [
        "No label here.",
        "Just two sentences of text.",
    ]


def test_a_one_sentence_text_gets_the_base_vector_exactly() -> None:
    texts = ["Which tournament did Nate win?", "Wow! Nice!"]
    assert np.array_equal(BLEND.embed(texts), BASE.embed(texts))


def test_a_text_of_several_sentences_blends_its_whole_and_its_sentences_mean() -> None:
    parts = sentences(BURIED)
    whole, *each = BASE.embed([BURIED, *parts])
    mean = np.mean(each, axis=0)
    mean /= np.linalg.norm(mean)
    for alpha in (0.6, 0.8, 1.0):
        expected = alpha * whole + (1 - alpha) * mean
        expected /= np.linalg.norm(expected)
        got = ClauseBlendEmbedder(BASE, alpha).embed([BURIED])[0]
        assert np.allclose(got, expected, atol=1e-6)
        assert float(np.linalg.norm(got)) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(ClauseBlendEmbedder(BASE, 1.0).embed([BURIED])[0], whole, atol=1e-6)
    # In a batch each text blends its own pieces only.
    batch = BLEND.embed(["I like turtles.", BURIED, "Hi there, Nate. How was the game?"])
    assert np.allclose(batch[1], BLEND.embed([BURIED])[0], atol=1e-6)
    assert np.array_equal(batch[0], BASE.embed(["I like turtles."])[0])


def test_only_a_short_name_is_a_speaker_label() -> None:
    # Text before a colon that is no name is not repeated before each sentence.
    assert sentences("The reason is simple: we left early. We came back late at night.") == [
        "The reason is simple: we left early.",
        "We came back late at night.",
    ]
    assert sentences("Yes, of course. Remember this: the key is under the mat.")[1] == (
        "Remember this: the key is under the mat."
    )
    assert sentences("Élodie Durand: je suis partie tôt. Nous sommes revenus tard.")[1] == (
        "Élodie Durand: Nous sommes revenus tard."
    )
    assert sentences("私は家に帰りました。 それからとても長く寝ました。") == []  # one "word" each


class _Counting:
    """A base embedder that counts the texts it is given (vectors of the real model)."""

    def __init__(self) -> None:
        self.texts = 0
        self.dim = BASE.dim
        self.model_id = BASE.model_id

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return BASE.embed(texts)


def test_a_huge_memory_embeds_at_most_max_sentences_more_pieces() -> None:
    huge = " ".join(f"Sentence number {i} says one more thing." for i in range(5_000))
    counting = _Counting()
    vector = ClauseBlendEmbedder(counting).embed([huge])[0]  # type: ignore[arg-type]
    assert counting.texts == 1 + MAX_SENTENCES
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
    counting.texts = 0
    ClauseBlendEmbedder(counting, 1.0).embed([huge, BURIED])  # type: ignore[arg-type]
    assert counting.texts == 2  # alpha 1: the sentences would weigh nothing, none embedded


def test_bad_input_and_a_bad_base_get_specific_errors() -> None:
    for bad in ("one string", [None], [b"bytes"]):
        with pytest.raises(InvalidInputError, match="sequence of str"):
            BLEND.embed(bad)  # type: ignore[arg-type]

    class Short(_Counting):
        def embed(self, texts: list[str]) -> np.ndarray:
            return BASE.embed(texts[:1])

    with pytest.raises(EmbedderError, match="returned shape"):
        ClauseBlendEmbedder(Short()).embed([BURIED])  # type: ignore[arg-type]


def test_the_note_names_the_blend_only_where_there_is_one() -> None:
    assert blended_note(BURIED, 0.6) == (
        "vector: the whole text blended with its 3 sentences (clause blend 0.6)",
    )
    assert blended_note(BURIED, 1.0) == ()  # alpha 1 keeps the whole text's vector
    assert blended_note("Nate: I like turtles.", 0.6) == ()


def test_the_blend_has_its_own_model_id_and_checks_alpha() -> None:
    assert BLEND.model_id == f"{BASE.model_id}+clauses0.6" != BASE.model_id
    assert BLEND.dim == BASE.dim
    assert ClauseBlendEmbedder(BASE, 0.75).model_id.endswith("+clauses0.75")
    for bad in (0, 0.0, -0.5, 1.5, True, "0.6", None):
        with pytest.raises(InvalidInputError, match="alpha"):
            ClauseBlendEmbedder(BASE, bad)  # type: ignore[arg-type]
    # One id, one scheme: an alpha the id cannot tell apart is the same alpha.
    near = ClauseBlendEmbedder(BASE, 0.6000001)
    assert near.model_id == BLEND.model_id and near.alpha == BLEND.alpha
    assert ClauseBlendEmbedder(BASE, np.float32(0.5)).alpha == 0.5  # type: ignore[arg-type]


def _vector_cosine(memory: AgentMemoryManager, content: str) -> tuple[float, tuple[str, ...]]:
    hits = memory.recall(QUERY, k=5)
    hit = next(h for h in hits if h.memory.content == content)
    vector = next(s for s in hit.explanation.signals if s.signal == "vector")
    return 1.0 - vector.raw, hit.explanation.notes


@pytest.mark.slow  # 1.7 s measured on a busy machine
def test_recall_finds_a_buried_sentence_better_and_says_why(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    """The same memories with plain and with blended vectors: the blend raises the
    buried news's cosine with the query, and lifts it above a one-sentence memory that
    the plain vectors preferred; its hit names the blend, the other hit does not."""
    rival = "Nate: I practised for hours today with my team."  # cosine between the two
    results: dict[str, dict[str, tuple[float, tuple[str, ...]]]] = {}
    first: dict[str, str] = {}
    for name, model in (("plain", BASE), ("blend", BLEND)):
        # One location per test: the second open re-embeds the first's memories (a
        # file or a server), or starts empty (in memory).
        memory = make_memory(embedder=model, recall=VECTOR_ONLY, reembed=True)
        if not memory.query():
            for text in (BURIED, rival):
                memory.remember(text, speaker="Nate")
        memory.flush()
        results[name] = {text: _vector_cosine(memory, text) for text in (BURIED, rival)}
        first[name] = memory.recall(QUERY, k=2)[0].memory.content
        embedder = memory.embedder()
        assert embedder is not None and embedder.model_id == model.model_id
        memory.shutdown()
    plain, blend = results["plain"], results["blend"]
    assert blend[BURIED][0] > plain[BURIED][0] + 0.02
    assert blend[rival][0] == pytest.approx(plain[rival][0], abs=1e-5)  # one sentence
    assert first == {"plain": rival, "blend": BURIED}
    assert blend[BURIED][1] == (
        "vector: the whole text blended with its 3 sentences (clause blend 0.6)",
    )
    assert blend[rival][1] == () and plain[BURIED][1] == ()
