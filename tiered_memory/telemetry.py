"""OpenTelemetry spans for the manager's memory operations (the ``otel`` extra).

Each public operation of :class:`~tiered_memory.AgentMemoryManager` that reads or
changes memories is one span, named and described as the GenAI semantic conventions'
memory spans say (``gen_ai.memory.client``, status Development, in
open-telemetry/semantic-conventions-genai): the span name is the operation's
``gen_ai.operation.name``, ``search_memory`` for ``recall()`` and ``query()``,
``upsert_memory`` for ``remember()`` (it may reinforce an identical memory instead of
adding one: the caller does not choose; ``create_memory`` with deduplication off),
``update_memory`` for ``update()`` and ``promote()``, ``delete_memory`` for the
``forget`` calls, ``create_memory_store`` for opening a store (which creates or migrates
it). The spans are written here, in the domain, once for both engines.

``gen_ai.memory.store.id`` is the store's location as the library prints it (a file
path, ``":memory:"``, or a PostgreSQL URL without its password); ``db.system.name``
names the engine (``sqlite``, ``postgresql``), and a server's spans carry
``server.address`` and ``server.port``. Memory content and queries
(``gen_ai.memory.records``, ``gen_ai.memory.query.text``) and error messages are
recorded only when content capture is on: ``MemoryConfig(capture_content=True)``, or,
with ``capture_content=None`` (the default), the conventions' environment variable
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``, ``span_only`` or
``span_and_event``). A failed call sets the span's status to error and ``error.type`` to
the exception's class (a :class:`~persistence.TieredMemoryError` subclass by name).

``opentelemetry-api`` is optional: without it :meth:`Telemetry.span` returns one shared
object whose methods do nothing (a check of one attribute per call). With the API and no
global tracer provider set (no SDK configured) the same no-op is returned, checked per
call, so a provider set later is used from then on.
Calls the library makes to itself inside an operation (``forget_many()`` forgetting
each memory, say) add no spans of their own: one public call, one span.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from types import ModuleType, TracebackType
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qsl, urlsplit

import orjson

from persistence import Memory, display, is_server_url

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI conventions' opt-in for content; read when a manager is built."""
_CAPTURE_VALUES: Final = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})

TRACER_NAME: Final = "tiered_memory"

# gen_ai.operation.name values (and span names) of the conventions' memory span.
SEARCH_MEMORY: Final = "search_memory"
CREATE_MEMORY: Final = "create_memory"
UPSERT_MEMORY: Final = "upsert_memory"
UPDATE_MEMORY: Final = "update_memory"
DELETE_MEMORY: Final = "delete_memory"
CREATE_MEMORY_STORE: Final = "create_memory_store"

# Attributes: the conventions' own, then the library's (namespaced ``tiered_memory.``).
OPERATION: Final = "gen_ai.operation.name"
STORE_ID: Final = "gen_ai.memory.store.id"
RECORD_ID: Final = "gen_ai.memory.record.id"
RECORD_COUNT: Final = "gen_ai.memory.record.count"
QUERY_TEXT: Final = "gen_ai.memory.query.text"  # opt-in (content)
RECORDS: Final = "gen_ai.memory.records"  # opt-in (content), a JSON array
AGENT_ID: Final = "gen_ai.agent.id"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
DB_SYSTEM: Final = "db.system.name"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"
TIER: Final = "tiered_memory.tier"
RECALL_K: Final = "tiered_memory.recall.k"
STORE_CREATED: Final = "tiered_memory.store.created"
MIGRATIONS_APPLIED: Final = "tiered_memory.store.migrations_applied"

_inside: ContextVar[bool] = ContextVar("tiered_memory_operation", default=False)


class _Api(NamedTuple):
    context: ModuleType
    trace: ModuleType


_UNSET: Final = object()
_api: object = _UNSET


def _load_api() -> _Api | None:
    """``opentelemetry``'s context and trace modules, imported once; ``None`` without them."""
    global _api
    if _api is _UNSET:
        try:
            from opentelemetry import context, trace
        except ImportError:
            _api = None
        else:
            _api = _Api(context, trace)
    return _api if isinstance(_api, _Api) else None


def writing(dedup: bool | None, default: bool) -> str:
    """The operation of a ``remember()``: ``upsert_memory`` when it deduplicates (it may
    reinforce an identical memory instead: the caller does not choose), else
    ``create_memory``."""
    return UPSERT_MEMORY if (default if dedup is None else dedup is True) else CREATE_MEMORY


def capture_from_env() -> bool:
    """Whether :data:`CAPTURE_CONTENT_ENV` asks for content on spans."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_VALUES


class _NoSpan:
    """The span of an operation nobody traces: every method does nothing."""

    __slots__ = ()
    recording = False
    capturing = False

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def set(self, key: str, value: object) -> None:
        """Nothing (see :meth:`Span.set`)."""

    def query(self, text: str) -> None:
        """Nothing (see :meth:`Span.query`)."""

    def records(self, items: Iterable[dict[str, Any]]) -> None:
        """Nothing (see :meth:`Span.records`)."""

    def stored(self, memories: Sequence[Memory]) -> None:
        """Nothing (see :meth:`Span.stored`)."""

    def found(self, memories: Sequence[Memory]) -> None:
        """Nothing (see :meth:`Span.found`)."""

    def opened(self, applied: Sequence[int]) -> None:
        """Nothing (see :meth:`Span.opened`)."""


NO_SPAN: Final = _NoSpan()


class Span:
    """One operation's span while it runs (a context manager): the current span inside,
    ended on exit with the error, if any, recorded."""

    __slots__ = ("_api", "_attributes", "_name", "_span", "_telemetry", "_tokens", "capturing",
                 "recording")  # fmt: skip

    def __init__(self, telemetry: Telemetry, api: _Api, name: str,
                 attributes: dict[str, Any]) -> None:  # fmt: skip
        self._telemetry = telemetry
        self._api = api
        self._name = name
        self._attributes = attributes
        self.recording = False
        self.capturing = False

    def __enter__(self) -> Span:
        telemetry, api = self._telemetry, self._api
        self._span = span = telemetry.tracer.start_span(
            self._name, kind=telemetry.kind, attributes=self._attributes
        )
        self._tokens = (
            api.context.attach(api.trace.set_span_in_context(span)),
            _inside.set(True),
        )
        self.recording = recording = span.is_recording()
        self.capturing = recording and telemetry.capture
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span = self._span
        context_token, inside_token = self._tokens
        _inside.reset(inside_token)
        self._api.context.detach(context_token)
        if isinstance(exc, Exception) and self.recording:
            span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
            # The message only with content capture: it may quote what was asked.
            message = str(exc) if self.capturing else None
            span.set_status(self._api.trace.Status(self._api.trace.StatusCode.ERROR, message))
        span.end()

    def set(self, key: str, value: object) -> None:
        """Set attribute ``key`` (nothing for ``None``, or when the span is not recorded)."""
        if self.recording and value is not None:
            self._span.set_attribute(key, value)

    def query(self, text: str) -> None:
        """Record a search's query text, with content capture only."""
        if self.capturing:
            self._span.set_attribute(QUERY_TEXT, text)

    def records(self, items: Iterable[dict[str, Any]]) -> None:
        """Record the memory records stored or found (``content``, ``id``, ``score``, as
        the conventions' JSON schema names them), as a JSON array, with content capture
        only. Callers build ``items`` lazily (a generator), so nothing is built without."""
        if self.capturing:
            self._span.set_attribute(RECORDS, orjson.dumps(list(items)).decode())

    def stored(self, memories: Sequence[Memory]) -> None:
        """Record the memories a write stored: one's id and tier, and their content
        (with capture)."""
        if self.recording and len(memories) == 1:
            self.set(RECORD_ID, memories[0].id)
            self.set(TIER, str(memories[0].tier))
        self.records({"id": m.id, "content": m.content} for m in memories)

    def found(self, memories: Sequence[Memory]) -> None:
        """Record how many memories a search found, and their content (with capture)."""
        self.set(RECORD_COUNT, len(memories))
        self.records({"id": m.id, "content": m.content} for m in memories)

    def opened(self, applied: Sequence[int]) -> None:
        """Record what an open did to the schema: the migrations it ``applied``
        (the first among them: it created the store)."""
        self.set(STORE_CREATED, 1 in applied)
        self.set(MIGRATIONS_APPLIED, len(applied))


class Telemetry:
    """The spans of one manager's store (see the module docstring).

    ``tracer_provider`` is an OpenTelemetry ``TracerProvider`` (``None``: the global
    one, set with ``opentelemetry.trace.set_tracer_provider``); ``capture_content``
    ``None`` follows :data:`CAPTURE_CONTENT_ENV`.
    """

    __slots__ = ("_api", "_base", "_unset", "capture", "kind", "tracer")

    def __init__(
        self, location: str, *, tracer_provider: object = None, capture_content: bool | None
    ) -> None:
        self.capture = capture_from_env() if capture_content is None else capture_content
        self._api = api = _load_api()
        self.tracer: Any = None
        self.kind: Any = None
        self._base: dict[str, dict[str, Any]] = {}
        self._unset: Any = None
        if api is None:
            return
        if tracer_provider is None:  # the global one: skipped while none is set
            self._unset = api.trace.ProxyTracerProvider
        # The package's version, read where it is loaded (importing it would be a circle).
        version = getattr(sys.modules.get("tiered_memory"), "__version__", None)
        self.tracer = api.trace.get_tracer(TRACER_NAME, version, tracer_provider)
        where = display(location)
        server = is_server_url(where)
        # A server is another process (CLIENT); a file is read in this one (INTERNAL).
        self.kind = api.trace.SpanKind.CLIENT if server else api.trace.SpanKind.INTERNAL
        base: dict[str, Any] = {STORE_ID: where, DB_SYSTEM: "postgresql" if server else "sqlite"}
        if server:
            base.update(_server_of(where))
        for name in (SEARCH_MEMORY, CREATE_MEMORY, UPSERT_MEMORY, UPDATE_MEMORY,
                     DELETE_MEMORY, CREATE_MEMORY_STORE):  # fmt: skip
            self._base[name] = {OPERATION: name, **base}

    @property
    def enabled(self) -> bool:
        """False when ``opentelemetry-api`` is not installed (every span is a no-op)."""
        return self._api is not None

    def span(self, name: str, attributes: dict[str, Any] | None = None) -> Span | _NoSpan:
        """The span of operation ``name`` (one of this module's operation names), with
        ``attributes`` (``None`` values left out) given at its start, where samplers see
        them. A no-op without the API, without a tracer provider, or inside another
        operation of the library."""
        api = self._api
        if api is None or _inside.get():
            return NO_SPAN
        if self._unset is not None and isinstance(api.trace.get_tracer_provider(), self._unset):
            return NO_SPAN  # no SDK configured yet (checked per call: one may come later)
        start = dict(self._base[name])
        if attributes:
            start.update((k, v) for k, v in attributes.items() if v is not None)
        return Span(self, api, name, start)


def _server_of(url: str) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of a PostgreSQL URL: the host in its netloc,
    or in its ``host`` parameter (a Unix socket's directory), and the port (5432 unless
    named), as far as the URL names them."""
    try:
        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query))
        host = parts.hostname or params.get("host")
        port = parts.port or int(params.get("port") or 5432)
    except ValueError:
        return {}
    return {SERVER_ADDRESS: host, SERVER_PORT: port} if host else {}
