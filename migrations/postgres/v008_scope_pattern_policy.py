r"""Version 8: the row-level security policy says what it keeps in a form the planner can
estimate, so the vector (HNSW) index is used under the policy.

Version 4's rule ``tm_scope() = '' OR scope = tm_scope()`` is exact, but PostgreSQL
cannot estimate ``tm_scope() = ''`` (no column in it): it guessed that 0.2% of the rows
pass, so a nearest-neighbour search (ORDER BY distance LIMIT k) expected to walk half the
HNSW index and chose an exact scan of every vector instead (at 100,000 memories: 176-190
ms against 30-39 ms, for every role the policy binds). The rule that reads rows is now
``scope LIKE tm_scope_pattern()``: ``'%'`` for the operator's (unscoped) connection, the
scope with ``\``, ``%`` and ``_`` escaped otherwise (the same rows, matched literally), and
the planner estimates a LIKE on a column from its statistics. The check on written rows
keeps version 4's rule.
"""

from migrations.postgres.v004_row_level_security import _RULE, SCOPED_TABLES

VERSION = 8
DESCRIPTION = "row-level security reads rows through scope LIKE tm_scope_pattern()"

TABLES = (*SCOPED_TABLES, "tm_unembedded")
"""Every table under the policy (version 4's and version 5's embedding queue)."""

STATEMENTS: tuple[str, ...] = (
    r"""CREATE FUNCTION tm_scope_pattern() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS
    $$ SELECT CASE WHEN tm_scope() = '' THEN '%'
              ELSE replace(replace(replace(tm_scope(), '\', '\\'), '%', '\%'), '_', '\_')
              END $$""",
    *(
        statement
        for table in TABLES
        for statement in (
            f"DROP POLICY tm_scope_rows ON {table}",
            f"CREATE POLICY tm_scope_rows ON {table} USING (scope LIKE tm_scope_pattern()) "
            f"WITH CHECK ({_RULE})",
        )
    ),
)
