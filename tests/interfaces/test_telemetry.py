"""OpenTelemetry spans (tiered_memory.telemetry, the ``otel`` extra): every public memory
operation is one span named and described as the GenAI semantic conventions' memory span
says, on both engines; content only when capture is on; a URL's password never in a span;
errors recorded by class; without a tracer provider, or without the API, nothing is
exported and nothing breaks. Spans are read from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from persistence import InvalidInputError, MemoryNotFoundError, TieredMemoryError
from tests.conftest import FakeClock
from tests.support.pg_server import APP_ROLE, with_password
from tiered_memory import AgentMemoryManager, AsyncAgentMemoryManager, MemoryConfig, telemetry
from tiered_memory.telemetry import CAPTURE_CONTENT_ENV

SECRET_QUERY = "which drink does Alice like"
SECRET_CONTENT = "Alice likes green tea with honey"
PASSWORD = "pw-Xq7-never-in-a-span"


class Traced:
    """A TracerProvider of its own (never the global one) and its exporter's spans."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = self.exporter.get_finished_spans()
        return [s for s in found if name is None or s.name == name]

    def one(self, name: str) -> dict[str, Any]:
        (span,) = self.spans(name)
        return dict(span.attributes or {})

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def traced() -> Iterator[Traced]:
    t = Traced()
    yield t
    t.provider.shutdown()


@pytest.fixture
def opened(
    any_location: str, clock: FakeClock, traced: Traced
) -> Iterator[Callable[..., AgentMemoryManager]]:
    """Open managers on ``any_location`` (both engines) whose spans go to ``traced``."""
    made: list[AgentMemoryManager] = []

    def open_(**config: Any) -> AgentMemoryManager:
        config.setdefault("tracer_provider", traced.provider)
        manager = AgentMemoryManager.open(
            any_location, clock=clock, embedder=None, embed_in_background=False, **config
        )
        made.append(manager)
        return manager

    yield open_
    for manager in made:
        manager.shutdown()


def _engine_name(location: str) -> str:
    return "postgresql" if location.startswith("postgresql://") else "sqlite"


def _all_attribute_text(spans: list[ReadableSpan]) -> str:
    """Every attribute value, event and status description of ``spans`` as one text."""
    parts: list[str] = []
    for span in spans:
        parts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        parts.append(span.status.description or "")
        for event in span.events:
            parts += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
    return "\n".join(parts)


@pytest.mark.pg_unmigrated
def test_each_operation_is_one_span_named_by_the_conventions(
    opened: Callable[..., AgentMemoryManager], traced: Traced, any_location: str
) -> None:
    memory = opened()
    store = traced.one("create_memory_store")
    assert store["gen_ai.operation.name"] == "create_memory_store"
    assert store["tiered_memory.store.created"] is True  # a new file, an empty database
    assert store["tiered_memory.store.migrations_applied"] >= 1
    assert store["db.system.name"] == _engine_name(any_location)
    assert store["gen_ai.memory.store.id"] == memory.location

    session = memory.start_session("s1").session_id
    fact = memory.remember(SECRET_CONTENT, session_id=session, importance=0.9)
    hits = memory.recall("green tea", k=3)
    memory.update(fact.id, content="Alice likes black tea")
    memory.promote(fact.id, "semantic")
    found = memory.query(tier="semantic")
    spare = memory.remember("Bob walks his dog every morning", dedup=False)
    memory.forget(spare.id)
    memory.forget_many([fact.id])

    names = [s.name for s in traced.spans()]
    assert names == [
        "create_memory_store", "upsert_memory", "search_memory", "update_memory",
        "update_memory", "search_memory", "create_memory", "delete_memory", "delete_memory",
    ]  # fmt: skip
    for span in traced.spans():
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.operation.name"] == span.name
        assert attributes["db.system.name"] == _engine_name(any_location)
        assert attributes["gen_ai.memory.store.id"] == memory.location
        assert span.status.status_code is StatusCode.UNSET
        # A server is another process (CLIENT); a file is read in this one (INTERNAL).
        server = any_location.startswith("postgresql://")
        assert span.kind is (SpanKind.CLIENT if server else SpanKind.INTERNAL)
        if server:
            assert attributes["server.address"] and attributes["server.port"] > 0

    upsert = traced.spans("upsert_memory")[0].attributes or {}
    assert upsert["gen_ai.memory.record.id"] == fact.id
    assert upsert["gen_ai.memory.record.count"] == 1
    assert upsert["gen_ai.conversation.id"] == session
    assert upsert["tiered_memory.tier"] == "episodic"
    recall, query = traced.spans("search_memory")
    assert (recall.attributes or {})["tiered_memory.recall.k"] == 3
    assert (recall.attributes or {})["gen_ai.memory.record.count"] == len(hits) == 1
    assert (query.attributes or {})["gen_ai.memory.record.count"] == len(found) == 1
    assert (query.attributes or {})["tiered_memory.tier"] == "semantic"
    update, promote = traced.spans("update_memory")
    assert (update.attributes or {})["gen_ai.memory.record.id"] == fact.id
    assert (promote.attributes or {})["tiered_memory.tier"] == "semantic"
    forget, forget_many = traced.spans("delete_memory")
    assert (forget.attributes or {})["gen_ai.memory.record.id"] == spare.id
    # forget_many forgets each memory itself: still one span for the one call.
    assert "gen_ai.memory.record.id" not in (forget_many.attributes or {})
    assert (forget_many.attributes or {})["gen_ai.memory.record.count"] == 1
    assert memory.get(fact.id) is None and memory.get(spare.id) is None


def test_reopening_a_store_is_not_creating_it(
    opened: Callable[..., AgentMemoryManager], traced: Traced
) -> None:
    opened().shutdown()
    traced.clear()
    opened()
    store = traced.one("create_memory_store")
    assert store["tiered_memory.store.created"] is False
    assert store["tiered_memory.store.migrations_applied"] == 0


def test_no_content_on_spans_by_default(
    opened: Callable[..., AgentMemoryManager], traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    memory = opened()
    fact = memory.remember(SECRET_CONTENT)
    assert memory.recall(SECRET_QUERY, k=2)  # found: the hits' content is not recorded
    memory.update(fact.id, content=SECRET_CONTENT + " and lemon")
    with pytest.raises(InvalidInputError):
        memory.remember(SECRET_CONTENT, tier="no such tier")
    text = _all_attribute_text(traced.spans())
    assert "Alice" not in text and "drink" not in text and "no such tier" not in text
    assert "gen_ai.memory.query.text" not in text and "gen_ai.memory.records" not in text


@pytest.mark.parametrize("how", ["config", "environment"])
def test_content_on_spans_when_capture_is_on(
    opened: Callable[..., AgentMemoryManager],
    traced: Traced,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    if how == "config":
        memory = opened(capture_content=True)
    else:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "SPAN_ONLY")
        memory = opened()
    fact = memory.remember(SECRET_CONTENT)
    hits = memory.recall(SECRET_QUERY, k=2)
    (search,) = traced.spans("search_memory")
    attributes = search.attributes or {}
    assert attributes["gen_ai.memory.query.text"] == SECRET_QUERY
    records = orjson.loads(str(attributes["gen_ai.memory.records"]))
    assert records == [{"id": fact.id, "content": SECRET_CONTENT, "score": hits[0].score}]
    stored = orjson.loads(str(traced.one("upsert_memory")["gen_ai.memory.records"]))
    assert stored == [{"id": fact.id, "content": SECRET_CONTENT}]


def test_the_config_turns_capture_off_whatever_the_environment_says(
    opened: Callable[..., AgentMemoryManager], traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    memory = opened(capture_content=False)
    memory.remember(SECRET_CONTENT)
    memory.recall(SECRET_QUERY)
    assert "Alice" not in _all_attribute_text(traced.spans())


def test_errors_are_recorded_with_their_class(
    opened: Callable[..., AgentMemoryManager], traced: Traced
) -> None:
    memory = opened()
    with pytest.raises(MemoryNotFoundError):
        memory.update("0" * 32, content="nothing to update")
    with pytest.raises(InvalidInputError):
        memory.recall("tea", k=0)
    update, recall = traced.spans("update_memory")[0], traced.spans("search_memory")[0]
    for span, error in ((update, MemoryNotFoundError), (recall, InvalidInputError)):
        assert issubclass(error, TieredMemoryError)
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == error.__qualname__
        assert span.status.description is None  # the message is content: capture only
    traced.clear()
    captured = opened(capture_content=True)
    with pytest.raises(MemoryNotFoundError) as raised:
        captured.update("1" * 32, content="nothing to update")
    (span,) = traced.spans("update_memory")
    assert span.status.description == str(raised.value)


def test_a_url_password_never_reaches_a_span(pg_url: str, clock: FakeClock, traced: Traced) -> None:
    # Only a server URL has a password (the test server trusts local connections: the
    # password is sent and ignored).
    url = with_password(pg_url, APP_ROLE, PASSWORD)
    url += f"{'&' if '?' in url else '?'}sslpassword={PASSWORD}"
    config = MemoryConfig(clock=clock, embedder=None, embed_in_background=False,
                          tracer_provider=traced.provider, capture_content=True)  # fmt: skip
    with AgentMemoryManager.open(url, config) as memory:
        fact = memory.remember(SECRET_CONTENT)
        memory.recall("tea")
        memory.forget(fact.id)
        with pytest.raises(MemoryNotFoundError):
            memory.update(fact.id, content="gone")
    bad = url.replace(pg_url.rsplit("/", 1)[1].split("?")[0], "no_such_database")
    with pytest.raises(TieredMemoryError):
        AgentMemoryManager.open(bad, config)
    spans = traced.spans()
    assert len(spans) == 6 and spans[-1].status.status_code is StatusCode.ERROR
    text = _all_attribute_text(spans)
    assert PASSWORD not in text
    assert "Alice" in text  # capture was on: the check above read real attributes


def test_async_calls_are_children_of_the_callers_span(
    any_location: str, clock: FakeClock, traced: Traced
) -> None:
    async def run() -> None:
        tracer = traced.provider.get_tracer("agent")
        async with await AsyncAgentMemoryManager.open(
            any_location, clock=clock, embedder=None, embed_in_background=False,
            tracer_provider=traced.provider,
        ) as memory:  # fmt: skip
            with tracer.start_as_current_span("agent turn"):
                await memory.remember("a fact the agent learnt")
                await memory.recall("fact")

    asyncio.run(run())
    (turn,) = traced.spans("agent turn")
    children = [s for s in traced.spans() if s.parent is not None]
    assert [s.name for s in children] == ["upsert_memory", "search_memory"]
    assert [s.name for s in traced.spans() if s.parent is None] == [
        "create_memory_store", "agent turn"]  # fmt: skip
    assert all(s.parent and s.parent.span_id == turn.context.span_id for s in children)


def test_without_a_tracer_provider_nothing_is_exported_and_nothing_breaks(
    any_location: str, clock: FakeClock, traced: Traced
) -> None:
    # No SDK provider is set globally in the test session: the API's no-op tracer runs.
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    with AgentMemoryManager.open(any_location, clock=clock, embedder=None,
                                 embed_in_background=False) as memory:  # fmt: skip
        assert memory._telemetry.enabled  # the API is there: the no-op is per call
        assert memory._telemetry.span("search_memory") is telemetry.NO_SPAN
        fact = memory.remember(SECRET_CONTENT)
        assert [h.memory.id for h in memory.recall("green tea")] == [fact.id]
        assert memory.forget(fact.id)
    assert traced.spans() == []


def test_without_the_api_every_span_is_a_no_op(
    tmp_path: Path, clock: FakeClock, traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails as if absent
    monkeypatch.setattr(telemetry, "_api", telemetry._UNSET)
    with AgentMemoryManager.open(tmp_path / "a.db", clock=clock, embedder=None,
                                 tracer_provider=traced.provider) as memory:  # fmt: skip
        assert not memory._telemetry.enabled
        assert memory._telemetry.span("search_memory") is telemetry.NO_SPAN
        fact = memory.remember(SECRET_CONTENT)
        assert [h.memory.id for h in memory.recall("green tea")] == [fact.id]
        with pytest.raises(MemoryNotFoundError):
            memory.update("0" * 32, content="x")
    assert traced.spans() == []


def test_a_tracer_provider_must_be_one() -> None:
    with pytest.raises(InvalidInputError, match="TracerProvider"):
        MemoryConfig(tracer_provider="jaeger")
    with pytest.raises(InvalidInputError, match="capture_content"):
        MemoryConfig(capture_content="yes")  # type: ignore[arg-type]
