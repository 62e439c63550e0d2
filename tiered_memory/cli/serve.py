"""``tiered-memory serve DB``: the inspector, a local web page over a file or a server
(needs the ``serve`` extra). Read-only unless ``--allow-edits``; binds 127.0.0.1 unless
``--host``, and then only with a token."""

from __future__ import annotations

import secrets

import click

from persistence import display
from tiered_memory.cli.app import _open, db_argument, main

LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
    with _open(db, write=allow_edits, recall_review_quality=None, **model) as memory:
        app = create_app(
            memory, allow_edits=allow_edits, token=token,
            allowed_hosts=LOOPBACK + ("[::1]",) if loopback else ("*",),
        )  # fmt: skip
        shown = f"[{host}]" if ":" in host else host
        address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
        mode = "edits allowed" if allow_edits else "read-only"
        click.echo(f"serving {display(db)} ({mode}) at {address}  (Ctrl-C stops)", err=True)
        uvicorn.run(app, host=host, port=port, log_level="warning")
