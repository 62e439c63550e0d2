"""SQL for agent scopes: whether row-level security applies to the connected role."""

from __future__ import annotations

from typing import Any

BYPASSES_RLS = "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"


def bypasses_row_security(conn: Any) -> bool:
    """True if the connection's role is a superuser or has ``BYPASSRLS`` (no policy binds it)."""
    row = conn.execute(BYPASSES_RLS).fetchone()
    return bool(row and row[0])
