"""Editing notes from the page (``--allow-edits``): create, update, delete, link and unlink,
each a POST guarded and run by :func:`~tiered_memory.inspector.pages.edits.action` (the
page's CSRF token, one transaction, 403 when the server is read-only).

An edit names its author in the form's ``author`` field; left blank, the version is
written by ``"inspector"``. Tags are typed comma-separated; an update whose tags field
still shows the note's tags as the page rendered them leaves the tags alone (so a tag
holding a comma survives an edit of the content). Browsers send a textarea's line breaks
as CRLF: content is compared and written with LF line breaks."""

from __future__ import annotations

from typing import Any

from starlette.routing import BaseRoute, Route

from persistence import InvalidInputError, NoteNotFoundError
from tiered_memory.inspector.context import Inspector
from tiered_memory.inspector.pages.edits import action

NAV = None
AUTHOR = "inspector"
"""Who wrote a version when the form does not say."""


def routes(inspector: Inspector) -> list[BaseRoute]:
    def post(path: str, edit: Any, param: str = "note_id") -> Route:
        return Route(path, action(inspector, edit, param), methods=["POST"])

    return [
        post("/notes", _create, param=""),
        post("/notes/{note_id}/update", _update),
        post("/notes/{note_id}/delete", _delete),
        post("/notes/{note_id}/link", _link),
        post("/notes/{note_id}/unlink", _unlink),
    ]


def tags_text(tags: Any) -> str:
    """Tags as the edit form shows them."""
    return ", ".join(tags)


def _field(form: Any, name: str) -> str | None:
    value = form.get(name)
    return None if value is None else str(value)


def _text(form: Any, name: str) -> str | None:
    """A textarea's value with LF line breaks."""
    value = _field(form, name)
    return None if value is None else value.replace("\r\n", "\n")


def _tags(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _author(form: Any) -> str:
    return (_field(form, "author") or "").strip() or AUTHOR


def _create(inspector: Inspector, _: str, form: Any) -> str:
    note = inspector.memory.notes.create(
        _field(form, "title") or "", _text(form, "content") or "",
        tags=_tags(_field(form, "tags")), author=_author(form),
    )  # fmt: skip
    return f"/notes/{note.id}"


def _update(inspector: Inspector, note_id: str, form: Any) -> str:
    notes = inspector.memory.notes
    note = notes.get(note_id)
    if note is None:
        raise NoteNotFoundError(f"no note {note_id}: it may have been deleted")
    tags = _field(form, "tags")
    same_tags = tags is None or tags.strip() == tags_text(note.tags)
    content = _text(form, "content")
    same_content = content is None or content == note.content.replace("\r\n", "\n")
    notes.update(
        note_id, title=_field(form, "title"), content=None if same_content else content,
        tags=None if same_tags else _tags(tags), author=_author(form),
    )  # fmt: skip
    return f"/notes/{note_id}"


def _delete(inspector: Inspector, note_id: str, form: Any) -> str:
    if not inspector.memory.notes.delete(note_id):
        raise NoteNotFoundError(f"no note {note_id}: it may have been deleted already")
    return "/notes"


def _target(form: Any) -> dict[str, str]:
    """``memory=`` or ``entity=`` from the form's ``kind`` and ``target``."""
    kind, target = _field(form, "kind"), (_field(form, "target") or "").strip()
    if kind not in ("memory", "entity") or not target:
        raise InvalidInputError("give a memory id or an entity (its id or name) to link")
    return {kind: target}


def _link(inspector: Inspector, note_id: str, form: Any) -> str:
    inspector.memory.notes.link(note_id, **_target(form))
    return f"/notes/{note_id}"


def _unlink(inspector: Inspector, note_id: str, form: Any) -> str:
    if not inspector.memory.notes.unlink(note_id, **_target(form)):
        raise InvalidInputError(f"note {note_id} has no such link")
    return f"/notes/{note_id}"
