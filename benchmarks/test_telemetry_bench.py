"""What the OpenTelemetry spans cost remember() and recall(), in the same run.

Run: ``.venv/bin/python -m pytest benchmarks/test_telemetry_bench.py -s``. Four files are
written and searched alternately, a block of calls at a time (so load on a shared machine
falls on every side alike), by managers that differ only in their telemetry:

- ``absent``: as without the ``otel`` extra (``opentelemetry-api`` not importable): every
  span is one shared no-op object;
- ``api``: the API installed, no tracer provider set (no SDK configured);
- ``sdk``: an SDK ``TracerProvider`` recording every span into an in-memory exporter;
- ``sdk, sampled out``: the SDK with the ``ALWAYS_OFF`` sampler.

The raw baseline is a remember() without instrumentation (``absent``'s calls, the
no-op span aside); each side's span is also timed alone, as remember() opens and fills
it, per call. Targets: without the API and without a tracer provider, the span under 0.5% of a
remember(). The interleaved rates are printed as ratios, not asserted: on a shared machine
their noise exceeds the spans' cost. Keyword-only recall and no embedder: the fastest
calls the library has, where a span's fixed cost weighs most.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from benchmarks.smoke import size, smoke
from tiered_memory import AgentMemoryManager, telemetry

CALLS = size(1_500, 40)
BLOCK = size(100, 10)
TEXT = (
    "tea coffee Oslo Lisbon meeting dentist birthday flight hotel project deadline "
    "report garden bicycle piano lesson recipe"
)
WORDS = TEXT.split()  # noqa: SIM905


def _text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)) + f" #{i}"


def _open(path: Path, absent: bool = False, **config: Any) -> AgentMemoryManager:
    """A manager; ``absent``: built as if ``opentelemetry-api`` were not installed."""
    options = {"embedder": None, "embed_in_background": False, "recall_review_quality": None}
    saved = telemetry._api
    if absent:
        telemetry._api = None
    try:
        return AgentMemoryManager.open(path, **options, **config)
    finally:
        telemetry._api = saved


def _span_cost_us(memory: AgentMemoryManager, calls: int) -> float:
    """What ``memory``'s telemetry alone costs a remember() (its span, as remember()
    opens and fills it), in µs per call."""
    tel = memory._telemetry
    begin = time.perf_counter()
    for _ in range(calls):
        attributes = {telemetry.AGENT_ID: None, telemetry.CONVERSATION_ID: None,
                      telemetry.RECORD_COUNT: 1}  # fmt: skip
        with tel.span(telemetry.UPSERT_MEMORY, attributes) as span:
            if span.recording:
                span.set(telemetry.RECORD_ID, "0123456789abcdef0123456789abcdef")
                span.set(telemetry.TIER, "episodic")
    return (time.perf_counter() - begin) / calls * 1e6


def test_span_cost_of_remember_and_recall(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    recording = TracerProvider()
    recording.add_span_processor(SimpleSpanProcessor(exporter))
    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    sides = {
        "absent": _open(tmp_path / "absent.db", absent=True),
        "api": _open(tmp_path / "api.db"),
        "sdk": _open(tmp_path / "sdk.db", tracer_provider=recording),
        "sdk, sampled out": _open(tmp_path / "off.db", tracer_provider=sampled_out),
    }
    spent = {(side, op): 0.0 for side in sides for op in ("remember", "recall")}
    try:
        for n, start in enumerate(range(0, CALLS, BLOCK)):
            texts = [_text(i) for i in range(start, start + BLOCK)]
            order = list(sides.items())
            order = order[n % len(order) :] + order[: n % len(order)]  # rotate who goes first
            for side, memory in order:
                begin = time.perf_counter()
                for text in texts:
                    memory.remember(text)
                spent[side, "remember"] += time.perf_counter() - begin
                begin = time.perf_counter()
                for i, text in enumerate(texts):
                    memory.recall(text.split()[i % 12], k=5)
                spent[side, "recall"] += time.perf_counter() - begin
            spans = len(exporter.get_finished_spans())
            exporter.clear()
        alone = {side: _span_cost_us(memory, size(20_000, 100)) for side, memory in sides.items()}
    finally:
        for memory in sides.values():
            memory.shutdown()
        recording.shutdown()
    per_call = {key: seconds / CALLS * 1e6 for key, seconds in spent.items()}
    print(f"\nremember() and recall() x{CALLS} each, blocks of {BLOCK}, sides interleaved:")
    for op in ("remember", "recall"):
        base = per_call["absent", op]
        line = ", ".join(
            f"{side} {per_call[side, op]:.0f} µs ({base / per_call[side, op]:.1%})"
            for side in sides
        )
        print(f"  {op}() per call (absent's rate / the side's): {line}")
    remember = per_call["absent", "remember"]
    share = {side: cost / remember for side, cost in alone.items()}
    print(
        "  the span alone per call, and its share of an uninstrumented remember(): "
        + ", ".join(f"{side} {alone[side] * 1000:,.0f} ns ({share[side]:.2%})" for side in sides)
    )
    assert spans == 2 * BLOCK  # the recording side kept a span per call of its last block
    if not smoke():
        assert share["absent"] < 0.005
        assert share["api"] < 0.005
