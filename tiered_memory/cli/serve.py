"""``tiered-memory serve DB``: the inspector, a local web page over a file or a server
(needs the ``serve`` extra). Read-only unless ``--allow-edits``; binds 127.0.0.1 unless
``--host``, and then only with a token.

The port is bound before anything is announced, so a busy port is a one-line error
(exit 1) and no "serving" line. SIGTERM stops the server the way Ctrl-C does: the
requests in flight finish and the database is closed (no ``-wal``/``-shm`` files left
behind), exit 0.
"""

from __future__ import annotations

import secrets
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

from persistence import display
from tiered_memory.cli.app import _open, db_argument, main

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a free port), or a ``ClickException``
    naming the address and what to do when it cannot be had (busy, unknown host)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}: {exc.strerror or exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another port "
            "with --port (--port 0 picks a free one)"
        ) from exc
    return sock


class _Terminated(Exception):
    """SIGTERM arrived: leave the server and close the database."""


@contextmanager
def _sigterm_closes() -> Iterator[None]:
    """Turn SIGTERM into a clean stop. uvicorn stops gracefully on SIGTERM, then raises
    the signal again with the handler it found, which by default kills the process before
    the database is closed (and leaves its -wal/-shm files)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


@main.command()
@db_argument
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; any but loopback needs a token (printed).")  # fmt: skip
@click.option("--token", help="The token a browser must present (default: a new random one "
              "when --host is not loopback, none on loopback).")  # fmt: skip
@click.option(
    "--allow-edits",
    is_flag=True,
    help="Allow forget, promote and review, and editing notes, from the page (POSTs with "
    "a CSRF token).",
)
@click.option(
    "--keywords-only", is_flag=True, help="Recall by keywords alone: no embedding model is loaded."
)
def serve(db: str, port: int, host: str, token: str | None, allow_edits: bool,
          keywords_only: bool) -> None:  # fmt: skip
    """Serve the inspector for DB: overview, memories, notes, recall, sessions, graph, each
    page with a .json twin. Read-only (no byte of DB changes) unless --allow-edits."""
    try:
        import uvicorn

        from tiered_memory.inspector.app import create_app
    except ImportError as exc:
        raise click.ClickException(
            f"the inspector needs the serve extra: pip install 'tiered-memory[serve]' ({exc})"
        ) from exc
    loopback = host in LOOPBACK
    if token is None and not loopback:
        token = secrets.token_urlsafe(18)
    model = {"embedder": None} if keywords_only else {}
    with (
        _sigterm_closes(),
        _open(
            db, write=allow_edits, recall_review_quality=None, load_model_at_open=True, **model
        ) as memory,
        listening_socket(host, port) as sock,
    ):
        app = create_app(
            memory, allow_edits=allow_edits, token=token,
            allowed_hosts=LOOPBACK + ("[::1]",) if loopback else ("*",),
        )  # fmt: skip
        shown = f"[{host}]" if ":" in host else host
        bound = sock.getsockname()[1]
        address = f"http://{shown}:{bound}/" + (f"?token={token}" if token else "")
        mode = "edits allowed" if allow_edits else "read-only"
        click.echo(f"serving {display(db)} ({mode}) at {address}  (Ctrl-C stops)", err=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        server.run(sockets=[sock])
