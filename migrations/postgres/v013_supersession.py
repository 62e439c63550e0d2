"""Version 13: a memory can be superseded by a newer one (facts that change).

The twin of the file's version 18. ``tm_memories`` gains ``superseded_by`` (the newer
memory's id), ``valid_to`` (its time) and ``superseded_reason``; existing memories read
``NULL`` in all three: current. A partial index on ``superseded_by`` holds only the
superseded rows: it answers "is any memory superseded" (recall then needs no condition
when none is) and "which memories did this one supersede" (a timeline), and a write of
a current memory does not touch it. (A second partial index on ``id`` for the vector
search's check was measured and left out: the planner turned the HNSW scan into an
anti-join over every vector, several times slower than reading the candidates' rows.)
Adding nullable columns rewrites no row. Idempotent: a database whose version rows were
rolled back past it runs it again.
"""

VERSION = 13
DESCRIPTION = "superseded_by, valid_to and superseded_reason on tm_memories"

STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE tm_memories ADD COLUMN IF NOT EXISTS superseded_by text, "
    "ADD COLUMN IF NOT EXISTS valid_to bigint, ADD COLUMN IF NOT EXISTS superseded_reason text",
    "CREATE INDEX IF NOT EXISTS tm_memories_superseded_by ON tm_memories (superseded_by) "
    "WHERE superseded_by IS NOT NULL",
)
