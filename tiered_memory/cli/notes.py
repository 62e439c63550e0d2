"""The ``tiered-memory notes`` commands: list, show, history, add, edit, delete, link and
unlink notes. Reading commands open the database read-only (no byte changes); the
others open it for writing, one transaction each."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import click

from persistence import Note, NoteNotFoundError, NoteVersion, display
from tiered_memory.cli.app import _emit, _open, db_argument, json_option, main


def note_row(note: Note) -> dict[str, Any]:
    """A note as JSON data (tags and links as lists)."""
    row = asdict(note)
    row["tags"] = list(note.tags)
    row["links"] = [{"kind": link.kind, "target": link.target} for link in note.links]
    return row


def version_row(version: NoteVersion) -> dict[str, Any]:
    """A version as JSON data."""
    row = asdict(version)
    row["tags"], row["changed"] = list(version.tags), list(version.changed)
    return row


def _content(content: str | None) -> str | None:
    """``-`` reads the content from standard input."""
    return sys.stdin.read() if content == "-" else content


def _show(note: Note) -> None:
    tags = f"  [{', '.join(note.tags)}]" if note.tags else ""
    who = f" by {note.updated_by}" if note.updated_by else ""
    click.echo(f"{note.id}  v{note.version}{who}  {note.title}{tags}")


@main.group()
def notes() -> None:
    """Notes: things written down on purpose, with a title, tags and every version."""


@notes.command("list")
@db_argument
@click.option("--tag", help="Only notes carrying this tag.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@json_option
def list_notes(db: str, tag: str | None, limit: int, as_json: bool) -> None:
    """List notes, most recently updated first."""
    with _open(db) as memory:
        found = memory.notes.list(tag=tag, limit=limit)

    def human() -> None:
        for note in found:
            _show(note)

    _emit(as_json, [note_row(n) for n in found], human)


@notes.command()
@db_argument
@click.argument("note_id")
@json_option
def show(db: str, note_id: str, as_json: bool) -> None:
    """Show one note: title, tags, links and content."""
    with _open(db) as memory:
        note = memory.notes.get(note_id)
    if note is None:
        raise NoteNotFoundError(f"no note {note_id!r} in {display(db)}")

    def human() -> None:
        _show(note)
        for link in note.links:
            click.echo(f"  linked to {link.kind} {link.target}")
        click.echo(note.content)

    _emit(as_json, note_row(note), human)


@notes.command()
@db_argument
@click.argument("note_id")
@json_option
def history(db: str, note_id: str, as_json: bool) -> None:
    """Every version of a note, oldest first: who, when, what changed."""
    with _open(db) as memory:
        versions = memory.notes.history(note_id)

    def human() -> None:
        for v in versions:
            who = v.author or "-"
            click.echo(f"v{v.version}  {v.at}  {who}  changed {', '.join(v.changed)}: {v.title}")

    _emit(as_json, [version_row(v) for v in versions], human)


@notes.command()
@db_argument
@click.argument("title")
@click.option("--content", default="", help="The note's text ('-': read standard input).")
@click.option("--tag", "tags", multiple=True, help="A tag (repeat for more).")
@click.option("--author", help="Who writes it.")
@click.option("--memory", "memories", multiple=True, help="Link to this memory id (repeatable).")
@click.option("--entity", "entities", multiple=True, help="Link to this entity (repeatable).")
@json_option
def add(db: str, title: str, content: str, tags: tuple[str, ...], author: str | None,
        memories: tuple[str, ...], entities: tuple[str, ...], as_json: bool) -> None:  # fmt: skip
    """Write a new note titled TITLE; prints its id."""
    with _open(db, write=True, embedder=None) as memory:
        note = memory.notes.create(title, _content(content) or "", tags=tags, author=author,
                                   memories=memories, entities=entities)  # fmt: skip
    _emit(as_json, note_row(note), lambda: click.echo(note.id))


@notes.command()
@db_argument
@click.argument("note_id")
@click.option("--title", help="A new title.")
@click.option("--content", help="A new text ('-': read standard input).")
@click.option("--tag", "tags", multiple=True, help="The new tags (replace the old ones).")
@click.option("--author", help="Who makes the edit.")
@json_option
def edit(db: str, note_id: str, title: str | None, content: str | None, tags: tuple[str, ...],
         author: str | None, as_json: bool) -> None:  # fmt: skip
    """Change a note; the edit is kept as its next version."""
    with _open(db, write=True, embedder=None) as memory:
        note = memory.notes.update(note_id, title=title, content=_content(content),
                                   tags=tags or None, author=author)  # fmt: skip
    _emit(as_json, note_row(note), lambda: _show(note))


@notes.command()
@db_argument
@click.argument("note_id")
def delete(db: str, note_id: str) -> None:
    """Delete a note and every version of it."""
    with _open(db, write=True, embedder=None) as memory:
        if not memory.notes.delete(note_id):
            raise NoteNotFoundError(f"no note {note_id!r} in {display(db)}")
    click.echo(f"deleted {note_id}")


@notes.command()
@db_argument
@click.argument("note_id")
@click.option("--memory", help="A memory id.")
@click.option("--entity", help="An entity (name or id).")
def link(db: str, note_id: str, memory: str | None, entity: str | None) -> None:
    """Link a note to a memory or an entity."""
    with _open(db, write=True, embedder=None) as handle:
        made = handle.notes.link(note_id, memory=memory, entity=entity)
    click.echo("linked" if made else "already linked")


@notes.command()
@db_argument
@click.argument("note_id")
@click.option("--memory", help="A memory id.")
@click.option("--entity", help="An entity (name or id).")
def unlink(db: str, note_id: str, memory: str | None, entity: str | None) -> None:
    """Remove a note's link to a memory or an entity."""
    with _open(db, write=True, embedder=None) as handle:
        removed = handle.notes.unlink(note_id, memory=memory, entity=entity)
    click.echo("unlinked" if removed else "was not linked")
