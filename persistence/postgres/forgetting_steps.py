"""Forgetting on a server database: a batch of memories deleted with their audit rows in
one statement (:func:`~persistence.postgres.sql.memory_sql.forget_rows`). (A file
forgets step by step: :mod:`persistence.sqlite.forgetting_steps`.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from persistence.postgres.sql import memory_sql
from persistence.records import Tier
from persistence.statements import run


def forget_many(
    conn: psycopg.Connection[Any],
    tier: Tier,
    forgotten: Sequence[tuple[str, float]],
    reason: str,
    at: int,
) -> None:
    """Forget each ``(id, retention)`` of ``tier`` with an audit row (one statement)."""
    run(
        conn,
        memory_sql.forget_rows(
            [memory_id for memory_id, _ in forgotten],
            [float(retention) for _, retention in forgotten],
            tier,
            reason,
            at,
        ),
    )
