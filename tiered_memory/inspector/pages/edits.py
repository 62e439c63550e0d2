"""The edits ``--allow-edits`` turns on: forget, promote and review a memory, each a POST
carrying the page's CSRF token and run as one transaction. Without ``--allow-edits`` the
manager is read-only and these answer 403. :func:`action` is how every edit (the notes'
too, :mod:`~tiered_memory.inspector.pages.note_edits`) is guarded and run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from persistence import InvalidInputError, MemoryNotFoundError, TieredMemoryError
from tiered_memory.inspector.context import Inspector, error_response

NAV = None


def routes(inspector: Inspector) -> list[BaseRoute]:
    return [
        Route("/memories/{memory_id}/forget", action(inspector, _forget), methods=["POST"]),
        Route("/memories/{memory_id}/promote", action(inspector, _promote), methods=["POST"]),
        Route("/memories/{memory_id}/review", action(inspector, _review), methods=["POST"]),
    ]


Edit = Callable[[Inspector, str, Any], str]
"""An edit: ``(inspector, the id in the path, the form)`` -> where to go afterwards."""


def action(inspector: Inspector, edit: Edit, param: str = "memory_id") -> Callable[[Request], Any]:
    """The POST endpoint running ``edit`` on the path parameter ``param`` (``""`` when the
    path has none): refused (403) without ``--allow-edits`` or without the page's CSRF
    token, run in one transaction, answered with a redirect (303) or a 400 page."""

    async def answer(request: Request) -> Response:
        if not inspector.allow_edits:
            message = "read-only: start the server with --allow-edits to edit"
            return error_response(inspector, request, 403, message, False)
        form = await request.form()
        if not inspector.csrf_ok(form.get("csrf")):
            return error_response(inspector, request, 403, "missing or wrong CSRF token", False)
        target_id = str(request.path_params.get(param, ""))

        def run() -> str:
            with inspector.lock, inspector.memory.transaction():
                return edit(inspector, target_id, form)

        try:
            target = await run_in_threadpool(run)
        except TieredMemoryError as exc:
            return error_response(inspector, request, 400, str(exc), False)
        return RedirectResponse(target, status_code=303)

    return answer


def _forget(inspector: Inspector, memory_id: str, form: Any) -> str:
    reason = str(form.get("reason") or "forgotten in the inspector")
    if not inspector.memory.forget(memory_id, reason):
        raise _missing(memory_id)
    return "/memories"


def _promote(inspector: Inspector, memory_id: str, form: Any) -> str:
    inspector.memory.promote(memory_id, str(form.get("to_tier") or "semantic"),
                             str(form.get("reason") or "promoted in the inspector"))  # fmt: skip
    return f"/memories/{memory_id}"


def _review(inspector: Inspector, memory_id: str, form: Any) -> str:
    raw = form.get("quality")
    try:
        quality = int(str(raw))
    except ValueError:
        raise InvalidInputError(f"quality must be a number from 0 to 5, got {raw!r}") from None
    inspector.memory.review(memory_id, quality)
    return f"/memories/{memory_id}"


def _missing(memory_id: str) -> TieredMemoryError:
    return MemoryNotFoundError(f"no memory {memory_id}")
