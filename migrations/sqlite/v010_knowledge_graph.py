"""Version 10: a knowledge graph in the same file.

Tables:

- ``entities``: one row per thing (id derived from its normalised name and type, so the
  same entity written twice is one row); ``direct`` = 1 when added through the graph API
  (kept until removed there), 0 when derived from memories (collected when no memory
  supports it any more).
- ``entity_aliases``: every normalised name (and the type it was named with) that
  resolves to an entity; merging moves the dropped entity's aliases to the kept one.
  ``entity_fts`` (FTS5, diacritics removed) indexes the aliases' display text for
  recall, kept in step by triggers.
- ``relations``: subject -predicate-> object with confidence, weight (how many memories
  support it), ``valid_from``/``valid_to`` (an invalidated relation keeps its row).
- ``memory_entities`` / ``memory_relations``: provenance, which memory asserted what
  (``origin`` 'caller' for facts given to ``remember()``, 'extractor' for extracted ones).
- ``content_keys``: a hash of each memory's normalised content (case, whitespace and
  Unicode form aside) with its agent and session, so ``remember()`` finds an identical
  live memory with one index probe (deduplication); rows of deleted memories go with
  their graph provenance.
- ``graph_queue``: memories waiting for entity extraction (the background extractor's
  queue is the file); ``graph_dirty``: memories deleted in the open transaction, whose
  provenance is removed and whose unsupported entities and relations are collected just
  before it commits.

Triggers on the tier tables queue new and edited memories and note deleted ones. Every
memory already in the file is queued, so an old file gets its graph built in the
background, in batches, resumably.
"""

from __future__ import annotations

import hashlib
import unicodedata

import apsw

VERSION = 10
DESCRIPTION = "knowledge graph: entities, aliases, relations, provenance, extraction queue"

TIERS = ("scratchpad", "episodic", "semantic")

TABLES = [
    """CREATE TABLE entities (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        description TEXT,
        direct INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    )""",
    "CREATE INDEX idx_entities_type ON entities(type, id)",
    """CREATE TABLE entity_aliases (
        norm TEXT NOT NULL,
        type TEXT NOT NULL,
        alias TEXT NOT NULL,
        entity_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        UNIQUE (norm, type)
    )""",
    "CREATE INDEX idx_entity_aliases_entity ON entity_aliases(entity_id)",
    """CREATE VIRTUAL TABLE entity_fts USING fts5(
        alias, entity_id UNINDEXED, tokenize = 'unicode61 remove_diacritics 2'
    )""",
    """CREATE TABLE relations (
        id TEXT PRIMARY KEY,
        subject_id TEXT NOT NULL REFERENCES entities(id),
        predicate TEXT NOT NULL,
        object_id TEXT NOT NULL REFERENCES entities(id),
        confidence REAL NOT NULL DEFAULT 1.0,
        weight REAL NOT NULL DEFAULT 0,
        valid_from INTEGER,
        valid_to INTEGER,
        direct INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL
    )""",
    # A walk follows each entity's best supported relations first: these indexes give
    # them in that order, so a hub's top few cost a few rows, not a sort of thousands.
    """CREATE INDEX idx_relations_subject
        ON relations(subject_id, weight DESC, confidence DESC, id)""",
    """CREATE INDEX idx_relations_object
        ON relations(object_id, weight DESC, confidence DESC, id)""",
    """CREATE UNIQUE INDEX idx_relations_current
        ON relations(subject_id, predicate, object_id) WHERE valid_to IS NULL""",
    """CREATE TABLE memory_entities (
        memory_id TEXT NOT NULL,
        entity_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        origin TEXT NOT NULL,
        PRIMARY KEY (memory_id, entity_id, origin)
    ) WITHOUT ROWID""",
    "CREATE INDEX idx_memory_entities_entity ON memory_entities(entity_id, memory_id)",
    """CREATE TABLE memory_relations (
        memory_id TEXT NOT NULL,
        relation_id TEXT NOT NULL REFERENCES relations(id) ON DELETE CASCADE,
        origin TEXT NOT NULL,
        PRIMARY KEY (memory_id, relation_id, origin)
    ) WITHOUT ROWID""",
    "CREATE INDEX idx_memory_relations_relation ON memory_relations(relation_id, memory_id)",
    """CREATE TABLE graph_queue (
        memory_id TEXT PRIMARY KEY,
        attempts INTEGER NOT NULL DEFAULT 0,
        not_before INTEGER NOT NULL DEFAULT 0,
        error TEXT
    ) WITHOUT ROWID""",
    "CREATE TABLE graph_dirty (memory_id TEXT PRIMARY KEY) WITHOUT ROWID",
    """CREATE TABLE content_keys (
        memory_id TEXT PRIMARY KEY,
        key BLOB NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX idx_content_keys_key ON content_keys(key)",
    """CREATE TRIGGER entity_aliases_fts_insert AFTER INSERT ON entity_aliases BEGIN
        INSERT INTO entity_fts (rowid, alias, entity_id) VALUES (NEW.rowid, NEW.alias,
            NEW.entity_id);
    END""",
    """CREATE TRIGGER entity_aliases_fts_delete AFTER DELETE ON entity_aliases BEGIN
        DELETE FROM entity_fts WHERE rowid = OLD.rowid;
    END""",
    """CREATE TRIGGER entity_aliases_fts_update AFTER UPDATE ON entity_aliases BEGIN
        DELETE FROM entity_fts WHERE rowid = OLD.rowid;
        INSERT INTO entity_fts (rowid, alias, entity_id) VALUES (NEW.rowid, NEW.alias,
            NEW.entity_id);
    END""",
]


def triggers(tier: str) -> list[str]:
    """Queue new and edited memories of ``tier`` for extraction; note deleted ones.

    A memory inserted where one of the same id was deleted in this transaction (a
    promotion) keeps its provenance and is not queued again.
    """
    # No OR IGNORE / OR REPLACE: an outer statement's conflict clause (an upsert's)
    # would override the trigger's.
    return [
        f"""CREATE TRIGGER {tier}_graph_insert AFTER INSERT ON {tier}
            WHEN NOT EXISTS (SELECT 1 FROM graph_dirty WHERE memory_id = NEW.id) BEGIN
            INSERT INTO graph_queue (memory_id) SELECT NEW.id
                WHERE NOT EXISTS (SELECT 1 FROM graph_queue WHERE memory_id = NEW.id);
        END""",
        f"""CREATE TRIGGER {tier}_graph_update AFTER UPDATE OF content ON {tier}
            WHEN OLD.content IS NOT NEW.content BEGIN
            DELETE FROM graph_queue WHERE memory_id = NEW.id;
            INSERT INTO graph_queue (memory_id) VALUES (NEW.id);
        END""",
        f"""CREATE TRIGGER {tier}_graph_delete AFTER DELETE ON {tier} BEGIN
            INSERT INTO graph_dirty (memory_id) SELECT OLD.id
                WHERE NOT EXISTS (SELECT 1 FROM graph_dirty WHERE memory_id = OLD.id);
        END""",
    ]


def content_key(content: object, agent_id: object, session_id: object) -> bytes:
    """The deduplication key: same normalised text, agent and session, same key."""
    text = " ".join(unicodedata.normalize("NFKC", str(content)).casefold().split())
    scope = f"{agent_id or ''}\x1f{session_id or ''}\x1f"
    return hashlib.blake2b((scope + text).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def up(conn: apsw.Connection) -> None:
    """Create the graph tables and triggers; queue every existing memory and record its
    content key."""
    for statement in TABLES:
        conn.execute(statement)
    for tier in TIERS:
        for statement in triggers(tier):
            conn.execute(statement)
        conn.execute(f"INSERT OR IGNORE INTO graph_queue (memory_id) SELECT id FROM {tier}")
        rows = conn.execute(f"SELECT id, content, agent_id, session_id FROM {tier}").fetchall()
        conn.executemany(
            "INSERT OR IGNORE INTO content_keys (memory_id, key) VALUES (?, ?)",
            [(i, content_key(c, a, s)) for i, c, a, s in rows],
        )
