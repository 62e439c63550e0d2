"""The LangGraph store's calls, their namespaces checked before LangGraph's own code runs.

``BaseStore.get`` and its kin iterate a namespace before anything else: ``None``, a number
or an object raised Python's ``TypeError`` (a dict, a ``KeyError``). Here a namespace
that is not a tuple (or list) raises :class:`~persistence.InvalidTypeError`; its labels
are LangGraph's to check (``InvalidNamespaceError``), as on LangGraph's own stores. An
unknown keyword or a surplus argument is an ``InvalidTypeError`` too
(:func:`~tiered_memory.arguments.typed_arguments`).
"""

from __future__ import annotations

from typing import Any

from langgraph.store.base import NOT_PROVIDED, BaseStore, Item, SearchItem

from persistence import InvalidTypeError
from tiered_memory.arguments import typed_arguments


def _namespace(value: Any, what: str, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, tuple | list):
        raise InvalidTypeError(
            f"{what} must be a tuple of str (a namespace), got {type(value).__name__}; "
            "nothing was changed"
        )


@typed_arguments
class CheckedCalls(BaseStore):
    """``BaseStore``'s convenience methods with their namespaces checked first."""

    def get(self, namespace: Any, key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        _namespace(namespace, "namespace")
        return super().get(namespace, key, refresh_ttl=refresh_ttl)

    def search(self, namespace_prefix: Any, /, *, query: str | None = None,
               filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,  # noqa: A002
               refresh_ttl: bool | None = None) -> list[SearchItem]:  # fmt: skip
        _namespace(namespace_prefix, "namespace_prefix")
        return super().search(namespace_prefix, query=query, filter=filter, limit=limit,
                              offset=offset, refresh_ttl=refresh_ttl)  # fmt: skip

    def put(self, namespace: Any, key: str, value: Any, index: Any = None, *,
            ttl: Any = NOT_PROVIDED) -> None:  # fmt: skip
        _namespace(namespace, "namespace")
        super().put(namespace, key, value, index, ttl=ttl)

    def delete(self, namespace: Any, key: str) -> None:
        _namespace(namespace, "namespace")
        super().delete(namespace, key)

    def list_namespaces(self, *, prefix: Any = None, suffix: Any = None,
                        max_depth: int | None = None, limit: int = 100,
                        offset: int = 0) -> list[tuple[str, ...]]:  # fmt: skip
        _namespace(prefix, "prefix", allow_none=True)
        _namespace(suffix, "suffix", allow_none=True)
        return super().list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth,
                                       limit=limit, offset=offset)  # fmt: skip

    async def aget(self, namespace: Any, key: str, *, refresh_ttl: bool | None = None) -> Any:
        _namespace(namespace, "namespace")
        return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    async def asearch(self, namespace_prefix: Any, /, *, query: str | None = None,
                      filter: dict[str, Any] | None = None, limit: int = 10,  # noqa: A002
                      offset: int = 0,
                      refresh_ttl: bool | None = None) -> list[SearchItem]:  # fmt: skip
        _namespace(namespace_prefix, "namespace_prefix")
        return await super().asearch(namespace_prefix, query=query, filter=filter, limit=limit,
                                     offset=offset, refresh_ttl=refresh_ttl)  # fmt: skip

    async def aput(self, namespace: Any, key: str, value: Any, index: Any = None, *,
                   ttl: Any = NOT_PROVIDED) -> None:  # fmt: skip
        _namespace(namespace, "namespace")
        await super().aput(namespace, key, value, index, ttl=ttl)

    async def adelete(self, namespace: Any, key: str) -> None:
        _namespace(namespace, "namespace")
        await super().adelete(namespace, key)

    async def alist_namespaces(self, *, prefix: Any = None, suffix: Any = None,
                               max_depth: int | None = None, limit: int = 100,
                               offset: int = 0) -> list[tuple[str, ...]]:  # fmt: skip
        _namespace(prefix, "prefix", allow_none=True)
        _namespace(suffix, "suffix", allow_none=True)
        return await super().alist_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth,
                                              limit=limit, offset=offset)  # fmt: skip
