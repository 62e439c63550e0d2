"""SQL about the connected role: whether row-level security applies to it, and what a
superuser must do for it once (mark the keyword match LEAKPROOF, create pgvector)."""

from __future__ import annotations

from typing import Any

BYPASSES_RLS = "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"


def bypasses_row_security(conn: Any) -> bool:
    """True if the connection's role is a superuser or has ``BYPASSRLS`` (no policy binds it)."""
    row = conn.execute(BYPASSES_RLS).fetchone()
    return bool(row and row[0])


KEYWORD_MATCH = "ts_match_vq(tsvector, tsquery)"
"""The function behind ``tsvector @@ tsquery``, the keyword index's operator."""

MATCH_IS_LEAKPROOF = f"SELECT proleakproof FROM pg_proc WHERE oid = '{KEYWORD_MATCH}'::regprocedure"

MAKE_MATCH_LEAKPROOF = f"ALTER FUNCTION {KEYWORD_MATCH} LEAKPROOF"
"""Run once per database by a superuser: lets the planner use the keyword (GIN) index
for a role that row-level security binds."""


def keyword_index_blocked(conn: Any) -> bool:
    """True if row-level security keeps PostgreSQL from using the keyword index for this
    connection's role: the policy binds it and ``@@`` (``ts_match_vq``) is not marked
    ``LEAKPROOF``, so the planner may not test it before the policy, in an index scan,
    and every keyword search reads every keyword row of the database."""
    if bypasses_row_security(conn):
        return False
    row = conn.execute(MATCH_IS_LEAKPROOF).fetchone()
    return not (row and row[0])


CREATE_VECTOR = "CREATE EXTENSION vector"
"""Run once per database by a superuser where the owner may not create pgvector's
extension (it is not a trusted extension): the schema's first version needs it."""

HAS_VECTOR = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector')"


def has_vector(conn: Any) -> bool:
    """True if pgvector's ``vector`` extension is installed in the connected database."""
    row = conn.execute(HAS_VECTOR).fetchone()
    return bool(row and row[0])
