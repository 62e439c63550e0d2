"""The agent a scoped manager is for: checking it and stamping it on what it writes.

``AgentMemoryManager.open(location, agent_id="a")`` reads and writes only agent ``a``'s
data (a predicate every store's SQL carries, :mod:`persistence.stores.scope`, and
row-level security on PostgreSQL as a second wall);
here the domain makes every memory it writes carry ``agent_id="a"`` and refuses a call
naming another agent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from persistence import InvalidInputError, require_str


def require_agent(agent_id: Any) -> str | None:
    """``agent_id`` if it is ``None`` or a non-empty ``str``; else the validation error."""
    if agent_id is not None:
        require_str(agent_id, "agent_id", allow_empty=False)
    return agent_id  # type: ignore[no-any-return]


def stamped(scope: str | None, agent_id: str | None) -> str | None:
    """The ``agent_id`` a call of a handle scoped to ``scope`` uses: the scope's own.
    Another agent's id is refused (:class:`~persistence.InvalidInputError`)."""
    if scope is None or agent_id is None or agent_id == scope:
        return scope if scope is not None else agent_id
    raise InvalidInputError(
        f"this manager is scoped to agent {scope!r}: agent_id={agent_id!r} is refused"
    )


def stamped_records(
    scope: str | None, records: Sequence[str | Mapping[str, Any]]
) -> Sequence[str | Mapping[str, Any]]:
    """``remember_many``'s records, each mapping carrying the scope's agent."""
    if scope is None:
        return records
    return [
        {**r, "agent_id": stamped(scope, r.get("agent_id"))} if isinstance(r, Mapping) else r
        for r in records
    ]
