"""A :class:`~persistence.records.MemoryFilter` as one SQL condition on ``tm_memories``,
for the recall searches (the filter goes inside the search, never after its LIMIT)."""

from __future__ import annotations

from persistence.records import MemoryFilter
from persistence.stores.rows import AS_OF, CURRENT
from persistence.stores.rows import index_backed as index_backed  # shared; the store asks here


def condition(where: MemoryFilter, alias: str = "m") -> tuple[str, dict[str, object]]:
    """``(sql condition, named parameters)``; every field is a plain indexed predicate
    (``tags`` uses the GIN index with ``@>``). ``"true"`` when nothing is set."""
    conds: list[str] = []
    params: dict[str, object] = {}
    if where.tier is not None:
        conds.append(f"{alias}.tier = %(f_tier)s")
        params["f_tier"] = where.tier.value
    for name in ("session_id", "agent_id"):
        value = getattr(where, name)
        if value is not None:
            conds.append(f"{alias}.{name} = %(f_{name})s")
            params[f"f_{name}"] = value
    if where.tags:
        conds.append(f"{alias}.tags @> %(f_tags)s::text[]")
        params["f_tags"] = list(dict.fromkeys(where.tags))
    if where.created_after is not None:
        conds.append(f"{alias}.created_at >= %(f_after)s")
        params["f_after"] = where.created_after
    if where.created_before is not None:
        conds.append(f"{alias}.created_at < %(f_before)s")
        params["f_before"] = where.created_before
    if where.min_retention is not None:
        conds.append(f"{alias}.retention >= %(f_ret)s")
        params["f_ret"] = where.min_retention
    if where.current:
        conds.append(CURRENT.format(alias=f"{alias}."))
    if where.as_of is not None:
        conds.append(AS_OF.format(alias=f"{alias}.", mark="%(f_as_of)s"))
        params["f_as_of"] = where.as_of
    return (" AND ".join(conds) or "true"), params
