"""A huge memory cannot stall the embedding queue.

``MemoryConfig.max_content_bytes`` (1,000,000 UTF-8 bytes by default) refuses bigger
content on every way in, with ``InvalidInputError`` (``InvalidImportError`` on import)
and nothing written; and the ONNX embedder tokenizes only a bounded prefix of whole
words, which embeds exactly as the whole text does.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from persistence import InvalidImportError, InvalidInputError, Memory, Tier
from persistence.sqlite import SQLiteStore
from persistence.validation import DEFAULT_MAX_CONTENT_BYTES
from tests.conftest import file_digest
from tiered_memory import AgentMemoryManager, MemoryConfig
from tiered_memory.embedding.embedders import CHARS_PER_TOKEN, OnnxEmbedder, token_prefix

EMBEDDER = OnnxEmbedder()  # one model load for the module
HUGE = "x" * 10_000_000
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "near",
    "our",
    "riverbank",
    "every",
    "morning",
]


def _prose(n_bytes: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(n_bytes // 4))
    return text[:n_bytes]


def test_the_default_limit_is_one_decimal_megabyte() -> None:
    assert MemoryConfig().max_content_bytes == DEFAULT_MAX_CONTENT_BYTES == 1_000_000
    for bad in (0, -1, 1.5, "1MB"):
        with pytest.raises(InvalidInputError, match="max_content_bytes"):
            MemoryConfig(max_content_bytes=bad)  # type: ignore[arg-type]


WAYS_IN: dict[str, Callable[[AgentMemoryManager, str], object]] = {
    "remember": lambda m, text: m.remember(text),
    "remember scratchpad": lambda m, text: m.remember(text, Tier.SCRATCHPAD),
    "remember_many": lambda m, text: m.remember_many(["short", text]),
    "update": lambda m, text: m.update(m.query(Tier.EPISODIC)[0].id, content=text),
    "scratchpad put": lambda m, text: m.scratchpad.put("big", text),
    "store put_episodic": lambda m, text: m.store.put_episodic(Memory.create(text)),
    "store put_memory": lambda m, text: m.store.memories.put_memory(
        Memory.create(text, Tier.SEMANTIC)
    ),
    "store put_scratchpad": lambda m, text: m.store.put_scratchpad(
        "k", Memory.create(text, Tier.SCRATCHPAD)
    ),
}


def _digests(memory: AgentMemoryManager) -> tuple[str, ...]:
    if memory.path is None:
        return tuple(m.id for m in memory.query())
    wal = Path(f"{memory.path}-wal")
    return tuple(file_digest(p) for p in (memory.path, wal) if p.exists())


@pytest.mark.slow
@pytest.mark.parametrize("way", sorted(WAYS_IN))
def test_ten_megabytes_are_refused_on_every_way_in(
    make_memory: Callable[..., AgentMemoryManager], way: str
) -> None:
    memory = make_memory(embedder=None, scratchpad_token_budget=10**9)
    memory.remember("already here")
    before = _digests(memory)
    with pytest.raises(InvalidInputError, match="10,000,000 bytes, more than max_content_bytes"):
        WAYS_IN[way](memory, HUGE)
    assert _digests(memory) == before
    # multi-byte characters count as bytes: 250,001 four-byte characters are too many
    with pytest.raises(InvalidInputError, match="1,000,004 bytes"):
        WAYS_IN[way](memory, "\U0001f600" * 250_001)
    assert _digests(memory) == before


def test_import_refuses_it_naming_the_content(tmp_path: Path) -> None:
    with AgentMemoryManager.open(tmp_path / "a.db", embedder=None) as memory:
        memory.remember("small")
        doc: dict[str, Any] = orjson.loads(memory.export_json(tmp_path / "a.json").read_bytes())
        before = _digests(memory)
        for mode in ("replace", "merge"):
            big = copy.deepcopy(doc)
            big["tables"]["episodic"][0]["content"] = HUGE
            path = tmp_path / "big.json"
            path.write_bytes(orjson.dumps(big))
            with pytest.raises(InvalidImportError) as refused:
                memory.import_json(path, mode)
            assert refused.value.location == "tables.episodic[0].content"
            assert "max_content_bytes" in refused.value.problem
            assert _digests(memory) == before


def test_a_smaller_configured_limit_applies_and_stored_content_may_be_written_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.db"
    with AgentMemoryManager.open(path, embedder=None) as memory:
        stored = memory.remember("y" * 5_000)
    with AgentMemoryManager.open(path, embedder=None, max_content_bytes=1_000) as memory:
        with pytest.raises(InvalidInputError, match="max_content_bytes"):
            memory.remember("z" * 1_001)
        memory.remember("z" * 1_000)
        memory.review(stored.id, 5)  # rewrites the memory: its content did not change
        memory.link(stored.id, memory.remember("small").id)
        with pytest.raises(InvalidInputError, match="max_content_bytes"):
            memory.update(stored.id, content="w" * 5_000)
    with SQLiteStore(path, max_content_bytes=1_000) as store:
        old = store.get_episodic(stored.id)
        assert old is not None
        store.put_episodic(replace(old, importance=0.9))
        with pytest.raises(InvalidInputError, match="max_content_bytes"):
            store.put_episodic(replace(old, content=old.content + "!"))


def test_token_prefix_is_bounded_and_keeps_whole_words() -> None:
    text = _prose(DEFAULT_MAX_CONTENT_BYTES - 1)
    prefix = token_prefix(text, 2048)
    assert 2000 < len(prefix) <= 2048
    assert text.startswith(prefix) and text[len(prefix)].isspace()
    assert token_prefix("short text", 2048) == "short text"
    assert token_prefix("y" * 5000, 2048) == ""  # no word boundary inside the bound


class _RecordingTokenizer:
    """Passes every call to the real tokenizer, noting the longest text it was given."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.longest = 0

    def encode(self, text: str) -> Any:
        self.longest = max(self.longest, len(text))
        return self.real.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> Any:
        self.longest = max([self.longest, *map(len, texts)])
        return self.real.encode_batch(texts)


@pytest.mark.slow
def test_a_text_just_under_the_limit_is_embedded_from_a_bounded_prefix(tmp_path: Path) -> None:
    text = _prose(DEFAULT_MAX_CONTENT_BYTES)
    embedder = OnnxEmbedder()
    embedder.dim  # noqa: B018 - loads the model and its tokenizer
    recording = _RecordingTokenizer(embedder._tokenizer)
    embedder._tokenizer = recording
    with AgentMemoryManager.open(
        tmp_path / "a.db", embedder=embedder, embed_in_background=False
    ) as memory:
        m = memory.remember(text)
        assert memory.flush() == 1
        stored = memory.get(m.id)
        assert stored is not None and stored.embedding is not None
    assert 0 < recording.longest <= embedder.max_length * CHARS_PER_TOKEN
    embedder._tokenizer = recording.real
    full = embedder._run([text])  # the whole text through the tokenizer, as before
    assert np.array_equal(np.asarray(stored.embedding), full[0])


@pytest.mark.slow  # 2.5 s measured on a busy machine
@pytest.mark.parametrize(
    "text",
    [
        _prose(50_000, seed=1),
        "a" + " " * 40 + "b" + (" " * 40 + "word") * 3000,  # mostly whitespace: the cut grows
        "z" * 9000 + " " + _prose(100_000, seed=2),  # no boundary in the first window
        "Überraschung! 東京タワー, naïve café. " * 2000,  # accents, CJK, punctuation
    ],
    ids=["prose", "whitespace", "long-word", "unicode"],
)
def test_the_bounded_embedding_equals_the_whole_texts(text: str) -> None:
    assert np.array_equal(EMBEDDER.embed([text]), EMBEDDER._run([text]))
    assert len(EMBEDDER.bounded(text)) < len(text)
