"""Calls with arguments a method does not take, typed like every other bad input.

Python refuses an unknown keyword, a missing argument or one too many with a builtin
``TypeError`` before the method runs; :func:`typed_arguments` turns exactly those (the
arguments do not bind to the method's signature; a ``TypeError`` raised inside a method
stays as it is) into :class:`~persistence.InvalidTypeError`,
which is still a ``TypeError`` and also an :class:`~persistence.InvalidInputError`. So
``recall(nope=1)`` fails as ``query(nope=1)`` does, and nothing was changed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import FunctionType
from typing import Any, TypeVar

from persistence import InvalidTypeError, TieredMemoryError

C = TypeVar("C", bound=type)


def typed_arguments(cls: C) -> C:
    """Wrap every public method (and class method) of ``cls`` with :func:`_translated`,
    those it inherits from this library's own classes (the manager's ``*Calls`` parts)
    too, each once."""
    seen: set[str] = set()
    for owner in cls.__mro__:
        if owner is not cls and not owner.__module__.startswith(__package__ or "tiered_memory"):
            continue  # a framework's base class (LangGraph's BaseStore) keeps its own
        for name, value in list(vars(owner).items()):
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(value, classmethod) and not _wrapped(value.__func__):
                setattr(cls, name, classmethod(_translated(value.__func__, cls.__name__)))
            elif isinstance(value, FunctionType) and not _wrapped(value):
                setattr(cls, name, _translated(value, cls.__name__))
    return cls


def _wrapped(method: Callable[..., Any]) -> bool:
    return getattr(method, _MARK, False)


_MARK = "__typed_arguments__"


def _translated(method: Callable[..., Any], owner: str) -> Callable[..., Any]:
    """``method``, raising :class:`InvalidTypeError` where binding its arguments fails
    (a coroutine function stays one: the error is raised when it is awaited)."""

    def refused(exc: TypeError, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if isinstance(exc, TieredMemoryError) or _binds(method, args, kwargs):
            return
        raise InvalidTypeError(
            f"{exc}; see help({owner}.{method.__name__}) (nothing was changed)"
        ) from None

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            try:
                coroutine = method(*args, **kwargs)
            except TypeError as exc:
                refused(exc, args, kwargs)
                raise
            return await coroutine

        setattr(awaited, _MARK, True)
        return awaited

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except TypeError as exc:
            refused(exc, args, kwargs)
            raise

    setattr(call, _MARK, True)
    return call


def _binds(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``method`` takes these arguments (only asked once a call failed)."""
    try:
        inspect.signature(method).bind(*args, **kwargs)
    except TypeError:
        return False
    return True
