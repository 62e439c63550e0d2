"""SQL about the connected role: whether row-level security applies to it, and what a
superuser must do for it once (create pgvector).

Built, not run: the reads are :class:`~persistence.statements.Statement` constants whose
one value is a boolean (no row reads as false).
"""

from __future__ import annotations

from persistence.statements import Statement

BYPASSES_RLS = Statement(
    "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
)
"""True if the connection's role is a superuser or has ``BYPASSRLS`` (no policy binds it)."""

CREATE_VECTOR = "CREATE EXTENSION vector"
"""Run once per database by a superuser where the owner may not create pgvector's
extension (it is not a trusted extension): the schema's first version needs it."""

HAS_VECTOR = Statement("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'vector')")
"""True if pgvector's ``vector`` extension is installed in the connected database."""
