"""The ``context`` command: the memories that answer a query, as the text an agent pastes
into its prompt, within a token budget (read only, as ``search`` is)."""

from __future__ import annotations

from typing import Any

import click

from persistence import EmbeddingModelMismatchError, Tier
from tiered_memory.cli.app import _emit, _open, db_argument, json_option, main
from tiered_memory.cli.moments import MomentType
from tiered_memory.embedding.embedders import EmbedderError


@main.command()
@db_argument
@click.argument("query")
@click.option("--max-tokens", "max_tokens", type=click.IntRange(min=1), default=1000,
              show_default=True, help="The budget: the text never counts more tokens.")  # fmt: skip
@click.option("--tier", type=click.Choice([t.value for t in Tier]), help="Only this tier.")
@click.option("--session", "session_id", help="Only memories of this session.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable).")
@click.option("--as-of", "as_of", type=MomentType(), default=None,
              help="As of this moment (epoch ms, or an ISO 8601 date or time).")  # fmt: skip
@click.option("--no-scratchpad", "no_scratchpad", is_flag=True,
              help="Leave the scratchpad's entries out.")  # fmt: skip
@click.option("--keywords-only", is_flag=True,
              help="Rank by keywords alone: no embedding model is loaded.")  # fmt: skip
@json_option
def context(db: str, query: str, max_tokens: int, tier: str | None, session_id: str | None,
            tags: tuple[str, ...], as_of: int | None, no_scratchpad: bool, keywords_only: bool,
            as_json: bool) -> None:  # fmt: skip
    """Print the memories that answer QUERY as prompt text within --max-tokens: the
    scratchpad first, then memories grouped by session under one header (date, who), in
    conversation order, each line cited as [m:<ref>].

    Read only. --json adds the ids in order, the tokens, the candidates that did not
    fit (omitted) and why each memory is there.
    """
    if not query.strip():
        raise click.UsageError("QUERY is empty: give the words to search for")
    model: dict[str, Any] = {"embedder": None} if keywords_only else {}
    try:
        with _open(db, load_model_at_open=True, **model) as memory:
            found = memory.context(
                query, max_tokens, tier=tier, session_id=session_id, tags=tags, as_of=as_of,
                scratchpad=not no_scratchpad,
            )  # fmt: skip
    except (EmbeddingModelMismatchError, EmbedderError) as exc:
        raise type(exc)(f"{exc} (or use --keywords-only)") from exc

    def human() -> None:
        click.echo(found.text)
        click.echo(f"-- {found.tokens}/{found.max_tokens} tokens, {len(found.memory_ids)} "
                   f"memories, {found.omitted} omitted", err=True)  # fmt: skip

    _emit(as_json, found.to_dict(), human)
