"""The reranking stage: the protocol, the session-context reranker, and a user-supplied
ONNX cross-encoder (a tiny one this test builds with the ``onnx`` package's helpers)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from persistence import EmbedderError, InvalidInputError
from tiered_memory import AgentMemoryManager
from tiered_memory.embedding.embedders import OnnxEmbedder
from tiered_memory.recall.rerank import (
    OnnxCrossEncoder,
    RerankCandidate,
    Reranker,
    SessionContextReranker,
)
from tiered_memory.recall.settings import RecallSettings

EMBEDDER = OnnxEmbedder()  # one model load for the module
WORDS = ["garden", "tomato", "sailing", "boat", "tax", "piano", "the", "my", "is"]
WEIGHTS = {"garden": 3.0, "tomato": 1.0, "tax": -2.0}  # per document-side token


def build_cross_encoder(folder: Path) -> Path:
    """A cross-encoder whose logit is the sum of the weights of the document's tokens
    (segment 1 of the pair): Gather, Squeeze, Cast, Mul and ReduceSum, opset 13."""
    from onnx import TensorProto, checker, helper, numpy_helper, save
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3}
    vocab.update({w: i + 4 for i, w in enumerate(WORDS)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )  # fmt: skip
    tokenizer.enable_padding(pad_id=3, pad_token="[PAD]")
    table = np.zeros((len(vocab), 1), dtype=np.float32)
    for word, weight in WEIGHTS.items():
        table[vocab[word], 0] = weight
    dims = ["batch", "length"]
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["per_token"]),
            helper.make_node("Squeeze", ["per_token", "last"], ["weights"]),
            helper.make_node("Cast", ["token_type_ids"], ["segment"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["weights", "segment"], ["document"]),
            helper.make_node("Mul", ["document", "mask"], ["kept"]),
            helper.make_node("ReduceSum", ["kept", "second"], ["logits"], keepdims=1),
        ],
        "tiny-cross-encoder",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        initializer=[numpy_helper.from_array(table, "table"),
                     numpy_helper.from_array(np.array([2], dtype=np.int64), "last"),
                     numpy_helper.from_array(np.array([1], dtype=np.int64), "second")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime the project allows
    checker.check_model(model)
    folder.mkdir(parents=True, exist_ok=True)
    save(model, str(folder / "model.onnx"))
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_cross_encoder_scores_query_document_pairs(tmp_path: Path) -> None:
    encoder = OnnxCrossEncoder.from_directory(build_cross_encoder(tmp_path / "ce"))
    assert isinstance(encoder, Reranker)
    docs = ["my garden is the garden", "tax", "sailing boat", "tomato garden"]
    candidates = [RerankCandidate(str(i), d, None) for i, d in enumerate(docs)]
    # the query's own words never count (segment 0): "garden tax" adds nothing
    scores = encoder.score("garden tax", None, candidates)
    assert scores == pytest.approx([_sigmoid(6.0), _sigmoid(-2.0), 0.5, _sigmoid(4.0)])
    assert encoder.score("anything", None, []) == []


def test_cross_encoder_needs_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "model.onnx").write_bytes(b"")
    with pytest.raises(EmbedderError, match="not a cross-encoder folder: it lacks tokenizer.json"):
        OnnxCrossEncoder.from_directory(tmp_path / "half")
    with pytest.raises(EmbedderError, match="lacks model.onnx and tokenizer.json"):
        OnnxCrossEncoder.from_directory(tmp_path / "missing")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not onnx")
    (broken / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match="cannot load the cross-encoder"):
        OnnxCrossEncoder.from_directory(broken).score("q", None, [RerankCandidate("a", "b", None)])


@pytest.mark.slow
def test_reranker_reorders_the_top_n_and_joins_the_explanation(
    make_memory: Callable[..., AgentMemoryManager], tmp_path: Path
) -> None:
    encoder = OnnxCrossEncoder.from_directory(build_cross_encoder(tmp_path / "ce"))
    settings = RecallSettings(reranker=encoder, rerank_depth=3, rerank_weight=2.0)
    memory = make_memory(embedder=EMBEDDER, recall=settings)
    texts = ["my tax is due", "the piano tax", "sailing boat tax", "garden tomato", "piano"]
    ids = {memory.remember(t).id: t for t in texts}
    hits = memory.recall("tax", k=5)
    reranked = [h for h in hits if any(s.signal == "rerank" for s in h.explanation.signals)]
    assert len(reranked) == 3  # only the top rerank_depth fused candidates
    for hit in reranked:
        [signal] = [s for s in hit.explanation.signals if s.signal == "rerank"]
        tokens = ids[hit.memory.id].split()
        expected = _sigmoid(sum(WEIGHTS.get(w, 0.0) for w in tokens))
        assert signal.raw == pytest.approx(expected, rel=1e-5)
        assert signal.contribution == pytest.approx(2.0 * expected, rel=1e-5)
        assert f"rerank #{signal.rank} (cross-encoder ce {expected:.2f})" in str(hit.explanation)
    assert sorted(s.rank for h in reranked for s in h.explanation.signals
                  if s.signal == "rerank") == [1, 2, 3]  # fmt: skip


def test_session_context_reranker_reads_a_turn_with_its_neighbours() -> None:
    reranker = SessionContextReranker(neighbour_weight=1.0)
    query, own, near = np.eye(3, dtype=np.float32)
    alone = RerankCandidate("a", "", own)
    with_context = RerankCandidate("b", "", own, before=query, after=None)
    scores = reranker.score("q", query, [alone, with_context, RerankCandidate("c", "", None)])
    assert scores == pytest.approx([0.0, 1 / math.sqrt(2), 0.0])
    assert reranker.score("q", None, [with_context]) == [0.0]
    with pytest.raises(InvalidInputError):
        SessionContextReranker(neighbour_weight=-1)


def test_session_context_reranker_in_recall_uses_stored_vectors(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    settings = RecallSettings(reranker=SessionContextReranker(), rerank_depth=2)
    memory = make_memory(embedder=EMBEDDER, recall=settings)
    session = memory.start_session().session_id
    texts = ["We planted tomatoes in the garden", "Yes, last May!", "The tax form is due"]
    for text in texts:
        memory.remember(text, session_id=session)
    query = "When did you plant the garden?"
    [vector] = EMBEDDER.embed([query])
    vectors = dict(zip(texts, EMBEDDER.embed(texts), strict=True))
    reranked = 0
    for hit in memory.recall(query, k=3):
        signal = {s.signal: s for s in hit.explanation.signals}.get("rerank")
        if signal is None:
            continue
        reranked += 1
        place = texts.index(hit.memory.content)  # scored with the turns around it
        blend = vectors[texts[place]].copy()
        for near in (place - 1, place + 1):
            if 0 <= near < len(texts):
                blend += 0.5 * vectors[texts[near]]
        expected = float(vector @ blend / np.linalg.norm(blend))
        assert signal.raw == pytest.approx(expected, abs=1e-4)
    assert reranked == 2  # rerank_depth


class _Wrong:
    name = "wrong"

    def score(
        self, query: str, query_vector: object, candidates: Sequence[RerankCandidate]
    ) -> list[float]:
        return [1.0]


def test_a_reranker_must_fit_the_protocol_and_score_every_candidate(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    with pytest.raises(InvalidInputError, match="RecallSettings.reranker"):
        RecallSettings(reranker=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="rerank_depth"):
        RecallSettings(rerank_depth=0)
    memory = make_memory(embedder=None, recall=RecallSettings(reranker=_Wrong()))
    memory.remember("garden one")
    memory.remember("garden two")
    with pytest.raises(InvalidInputError, match="returned 1 scores for 2"):
        memory.recall("garden")
