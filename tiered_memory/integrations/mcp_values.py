"""What every MCP tool shares: records as plain JSON values, and the library's errors as
tool errors carrying the same message."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson
from mcp.server.mcpserver.exceptions import ToolError

from persistence import TieredMemoryError

T = TypeVar("T")


def plain(value: Any) -> Any:
    """Records (dataclasses, enums, numpy arrays) as plain JSON values."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY))


async def tool_call(call: Awaitable[T]) -> T:
    """Await a library call; its errors become tool errors with the same message."""
    try:
        return await call
    except TieredMemoryError as exc:
        raise ToolError(str(exc)) from exc
