"""``AsyncAgentMemoryManager.notes``: the notes' calls (:class:`~tiered_memory.notes.Notes`)
as coroutines, run by the async manager (in its worker, with its cancellation rule)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from tiered_memory.arguments import typed_arguments
from tiered_memory.notes import Notes

P = ParamSpec("P")
R = TypeVar("R")

Submit = Callable[..., Awaitable[Any]]
"""``submit(fn, *args, **kwargs)``: the async manager's way to run ``fn`` in its worker."""


def _coroutine(
    method: Callable[Concatenate[Notes, P], R],
) -> Callable[Concatenate[AsyncNotes, P], Coroutine[Any, Any, R]]:
    """The async form of a :class:`Notes` method, same arguments."""

    async def call(self: AsyncNotes, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = await self._submit(method, self.notes, *args, **kwargs)
        return result

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    return call


@typed_arguments
class AsyncNotes:
    """A manager's notes for asyncio: each method is a coroutine of the same name."""

    def __init__(self, notes: Notes, submit: Submit) -> None:
        self.notes = notes
        self._submit = submit

    create = _coroutine(Notes.create)
    update = _coroutine(Notes.update)
    delete = _coroutine(Notes.delete)
    link = _coroutine(Notes.link)
    unlink = _coroutine(Notes.unlink)
    get = _coroutine(Notes.get)
    history = _coroutine(Notes.history)
    list = _coroutine(Notes.list_notes)
    about = _coroutine(Notes.about)
    count = _coroutine(Notes.count)
