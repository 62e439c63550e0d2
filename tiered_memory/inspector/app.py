"""The inspector's ASGI application: the pages of :mod:`tiered_memory.inspector.pages`,
the shipped static files, and the guards every request passes.

Guards: a request must name this server in its ``Host`` header (a page another site loads
through DNS rebinding is refused), and, when the server was started with a token (any
host but loopback), carry it once as ``?token=`` (kept in a cookie) or in that cookie.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from tiered_memory.inspector.context import HERE, Inspector
from tiered_memory.inspector.pages import MODULES
from tiered_memory.manager import AgentMemoryManager

TOKEN_COOKIE = "tiered_memory_token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
SECURITY_HEADERS = {
    # Nothing on a page may load from elsewhere, and no inline script runs.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _Guard(BaseHTTPMiddleware):
    """Checks the token (when there is one) and adds the security headers."""

    def __init__(self, app: object, token: str | None) -> None:
        super().__init__(app)  # type: ignore[arg-type]
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if self.token is not None:
            given = request.query_params.get("token")
            if given is not None and hmac.compare_digest(given, self.token):
                response: Response = RedirectResponse(request.url.remove_query_params("token"), 303)
                response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
                return response
            cookie = request.cookies.get(TOKEN_COOKIE, "")
            if not hmac.compare_digest(cookie, self.token):
                return PlainTextResponse(
                    "this inspector needs the token its command printed: open the address "
                    "with ?token=...", 403
                )  # fmt: skip
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def create_app(
    memory: AgentMemoryManager,
    *,
    allow_edits: bool = False,
    token: str | None = None,
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
) -> Starlette:
    """The inspector over an open ``memory`` (opened read-only unless ``allow_edits``).

    ``token``: every request must carry it (see the module's docstring); ``allowed_hosts``:
    the ``Host`` names accepted (``("*",)`` for any, with a token)."""
    inspector = Inspector(memory, allow_edits=allow_edits)
    inspector.nav = [m.NAV for m in MODULES if m.NAV is not None]
    routes: list[BaseRoute] = [
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    ]
    for module in MODULES:
        routes += module.routes(inspector)
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
            Middleware(_Guard, token=token),
        ],
    )
    app.state.inspector = inspector
    return app
