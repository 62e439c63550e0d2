"""Version 6: the keyword index carries the filters recall applies (``agent_id`` and
``created_at`` beside its ``tier`` and ``session_id``).

A keyword search filtered by agent joined every memory matching a query word to
``tm_memories`` and counted document frequencies over the whole index a second time
(71 ms at 100k memories, against 41 ms unfiltered). With the filter's columns on the
keyword row, a search by agent, tier or time reads the matches once: every match counts
towards document frequency (as unfiltered), the accepted ones are ranked. The work-off
writes the two columns with the rest of the row, and a change of a memory's agent or
creation time re-indexes it (the update trigger watches them too).
"""

from migrations.postgres.v002_recall_index import STATEMENTS as V2

VERSION = 6
DESCRIPTION = "agent and creation time on the keyword rows"


def _work_off() -> str:
    """Version 2's work-off, writing ``agent_id`` and ``created_at`` as well."""
    (old,) = [s for s in V2 if s.startswith("CREATE FUNCTION tm_kw_work_off()")]
    new = old.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    replacements = (
        ("SELECT m.id, m.scope, m.tier, m.session_id, m.seq,",
         "SELECT m.id, m.scope, m.tier, m.session_id, m.seq, m.agent_id, m.created_at,"),
        ("(memory_id, scope, tier, session_id, seq, kw, kw_len,",
         "(memory_id, scope, tier, session_id, seq, agent_id, created_at, kw, kw_len,"),
        ("SELECT win.id, win.scope, win.tier, win.session_id, win.seq, win.kw, t.len,",
         "SELECT win.id, win.scope, win.tier, win.session_id, win.seq, win.agent_id, "
         "win.created_at, win.kw, t.len,"),
        ("ON CONFLICT (memory_id) DO UPDATE SET tier = excluded.tier,",
         "ON CONFLICT (memory_id) DO UPDATE SET tier = excluded.tier, "
         "agent_id = excluded.agent_id, created_at = excluded.created_at,"),
    )  # fmt: skip
    for before, after in replacements:
        if before not in new:
            raise AssertionError(f"version 2's work-off changed: {before!r}")
        new = new.replace(before, after, 1)
    return new


STATEMENTS = (
    "ALTER TABLE tm_keywords ADD COLUMN agent_id text, ADD COLUMN created_at bigint",
    """UPDATE tm_keywords k SET agent_id = m.agent_id, created_at = m.created_at
        FROM tm_memories m WHERE m.id = k.memory_id""",
    _work_off(),
    "DROP TRIGGER tm_memories_kw_update ON tm_memories",
    """CREATE TRIGGER tm_memories_kw_update
        AFTER UPDATE OF content, tier, session_id, agent_id, created_at
        ON tm_memories FOR EACH ROW
        WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.tier IS DISTINCT FROM NEW.tier
              OR OLD.session_id IS DISTINCT FROM NEW.session_id
              OR OLD.agent_id IS DISTINCT FROM NEW.agent_id
              OR OLD.created_at IS DISTINCT FROM NEW.created_at)
        EXECUTE FUNCTION tm_kw_note_update()""",
)
