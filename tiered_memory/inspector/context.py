"""What every page shares: the open manager behind one lock, the templates, the edit
switch with its CSRF token, and how a page answers as HTML or as its ``.json`` twin."""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
from jinja2 import Environment, FileSystemLoader
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from persistence import Memory, TieredMemoryError
from tiered_memory.inspector import svg
from tiered_memory.manager import AgentMemoryManager

HERE = Path(__file__).parent
PageData = dict[str, Any]
Handler = Callable[["Inspector", Request], tuple[str, PageData]]


class PageError(Exception):
    """A page cannot be shown: answered with ``status`` and the message (escaped)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class NavItem:
    """One entry of the navigation bar (a page module adds its own)."""

    label: str
    path: str


@dataclass(slots=True)
class Inspector:
    """The served manager and the settings of this server process."""

    memory: AgentMemoryManager
    allow_edits: bool = False
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    nav: list[NavItem] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    templates: Environment = field(init=False)

    def __post_init__(self) -> None:
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=True, trim_blocks=True,
            lstrip_blocks=True,
        )  # fmt: skip
        self.templates.globals["svg"] = svg
        self.templates.filters["when"] = when
        self.templates.filters["num"] = num
        self.templates.globals["link"] = link

    def csrf_ok(self, given: object) -> bool:
        """True if ``given`` is this process's CSRF token (compared in constant time)."""
        return isinstance(given, str) and hmac.compare_digest(given, self.csrf_token)

    def html(self, request: Request, template: str, data: PageData, status: int = 200) -> Response:
        page = self.templates.get_template(template).render(
            data=data, nav=self.nav, edits=self.allow_edits, csrf=self.csrf_token,
            json_href=json_twin(request), location=self.memory.location,
            read_only=self.memory.read_only, path=request.url.path,
            params=list(request.query_params.multi_items()),
        )  # fmt: skip
        return HTMLResponse(page, status_code=status)


def when(epoch_ms: int | None) -> str:
    """An epoch-milliseconds time as UTC text (``-`` for none)."""
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def num(value: object) -> object:
    """A float as people write it (at most 4 decimals: ``0.9``, not
    ``0.9000000000000001``); anything else unchanged."""
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return value


def link(path: str, params: list[tuple[str, str]], **changes: str | None) -> str:
    """``path`` with the current query ``params``, each name in ``changes`` replaced (or
    dropped when ``None``); ``add_tag`` adds one more ``tag``. Paging restarts at 1."""
    extra = changes.pop("add_tag", None)
    kept = [(k, v) for k, v in params if k not in changes and k != "page"]
    kept += [(k, v) for k, v in changes.items() if v is not None]
    if extra is not None and ("tag", extra) not in kept:
        kept.append(("tag", extra))
    return f"{path}?{urlencode(kept)}" if kept else path


def json_twin(request: Request) -> str:
    """The address of the request's page as JSON (same query string)."""
    path = request.url.path
    base = "/index" if path == "/" else path.rstrip("/")
    query = f"?{request.url.query}" if request.url.query else ""
    return f"{base}.json{query}"


def to_json(data: Any) -> bytes:
    return orjson.dumps(
        data, default=_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
    )


def _default(value: Any) -> Any:
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot show {type(value).__name__} as JSON")


def memory_row(memory: Memory) -> PageData:
    """A memory as the pages show it (the embedding only by its size)."""
    return {
        "id": memory.id, "content": memory.content, "tier": memory.tier.value,
        "key": memory.key, "session_id": memory.session_id, "agent_id": memory.agent_id,
        "category": memory.category, "tags": list(memory.tags), "importance": memory.importance,
        "retention": memory.retention, "token_count": memory.token_count,
        "source": memory.source, "metadata": dict(memory.metadata),
        "linked_memories": list(memory.linked_memories), "access_count": memory.access_count,
        "last_accessed_at": memory.last_accessed_at, "created_at": memory.created_at,
        "updated_at": memory.updated_at, "speaker": memory.speaker,
        "embedding_dim": None if memory.embedding is None else len(memory.embedding),
    }  # fmt: skip


def page_routes(inspector: Inspector, path: str, handler: Handler) -> list[Route]:
    """The page at ``path`` and its ``.json`` twin (``/`` has ``/index.json``): the
    handler returns ``(template, data)``; the twin answers ``data`` itself."""

    def endpoint(as_json: bool) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            def run() -> tuple[str, PageData]:
                with inspector.lock:
                    return handler(inspector, request)

            try:
                template, data = await run_in_threadpool(run)
            except PageError as exc:
                return error_response(inspector, request, exc.status, str(exc), as_json)
            except TieredMemoryError as exc:
                return error_response(inspector, request, 400, str(exc), as_json)
            if as_json:
                return Response(to_json(data), media_type="application/json")
            return inspector.html(request, template, data)

        return answer

    twin = "/index.json" if path == "/" else f"{path}.json"
    return [Route(twin, endpoint(True)), Route(path, endpoint(False))]


def error_response(
    inspector: Inspector, request: Request, status: int, message: str, as_json: bool
) -> Response:
    if as_json:
        return Response(to_json({"error": message}), status, media_type="application/json")
    return inspector.html(request, "error.html", {"status": status, "message": message}, status)


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    """A whole-number query parameter within ``low..high`` (else a 400 page)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PageError(400, f"{name} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise PageError(400, f"{name} must be from {low} to {high}, got {value}")
    return value
