"""The ``tiered-memory`` command line: the manager's operations for operators and scripts.

Every command takes ``--json`` for scripts. Exit codes: 0 on success, 1 with a one-line
reason on stderr on failure, 2 on a usage error. Long work (backup, export, import)
shows a progress bar when stderr is a terminal, and none otherwise.

The read commands (``stats``, ``check``, ``list``, ``show``, ``sessions``, ``search``
without ``--reinforce``, ``export``, ``backup``) open the database read-only: they change
none of its bytes and work on read-only storage. Of the operator commands only
``migrate`` upgrades a file, and only ``restore`` and ``import`` create one; ``mcp``
serves a running agent's memory and, like the library, creates or migrates it.

An encrypted database's key comes from ``--key-file`` (before or after the command) or
the ``TIERED_MEMORY_KEY`` environment variable, never from the command line itself.
"""

from __future__ import annotations

from pathlib import Path

import click

from persistence import (
    BackupError,
    EmbeddingModelMismatchError,
    MemoryNotFoundError,
    Tier,
    display,
    is_server_url,
)
from persistence import (
    migrate as migrate_file,
)
from tiered_memory.cli.app import (
    KEY_ENV,
    _agent,
    _emit,
    _key,
    _memory_row,
    _open,
    _open_or_create,
    _progress,
    db_argument,
    json_option,
    location_argument,
    main,
    read_key_file,
)
from tiered_memory.cli.moments import MomentType
from tiered_memory.cli.notes import note_row
from tiered_memory.config import MemoryConfig
from tiered_memory.copying import copy_memory
from tiered_memory.embedding.embedders import EmbedderError
from tiered_memory.recall import NoteHit


@main.command()
@db_argument
@json_option
def stats(db: str, as_json: bool) -> None:
    """Counts per tier, sessions, size (SQLite: file and WAL), schema version."""
    with _open(db) as memory:
        s = memory.statistics()

    def human() -> None:
        st = s.storage
        click.echo(f"database       {st.path} (schema v{st.schema_version})")
        for tier, count in s.tier_counts.items():
            click.echo(f"{tier.value:<14} {count}")
        click.echo(f"sessions       {st.session_count} ({st.active_session_count} active)")
        click.echo(f"transcripts    {st.transcript_count}")
        click.echo(f"promotions     {st.promotion_count}")
        click.echo(f"forgotten      {st.forgotten_count}")
        click.echo(
            f"to embed       {st.unembedded_count} (cached vectors {st.embedding_cache_count})"
        )
        click.echo(f"size           {st.size_bytes} bytes ({st.backend})")
        for name, value in st.backend_details.items():
            click.echo(f"  {name:<16} {value}")
        last = f" (last: {st.last_embedding_error})" if st.last_embedding_error else ""
        click.echo(f"embed errors   {st.embedding_errors}{last}")
        click.echo(f"redacted       {s.redactions} secret(s)")

    _emit(as_json, s, human)


@main.command()
@db_argument
@click.option("--to", "target", type=click.Path(dir_okay=False), help="Snapshot file to write.")
@click.option("--keep", type=click.IntRange(min=1), help="Keep only the newest N snapshots.")
@json_option
def backup(db: str, target: str | None, keep: int | None, as_json: bool) -> None:
    """Snapshot DB (VACUUM INTO, verified) while it stays in use.

    Without --to it goes to the folder STEM-backups beside DB, named
    STEM-YYYYMMDDTHHMMSSZ.db (UTC); another snapshot in the same second gets -2, -3, ...
    """
    with _open(db) as memory, _progress("backup", as_json) as progress:
        path = memory.backup(target, keep=keep, progress=progress)
    _emit(as_json, {"backup": str(path)}, lambda: click.echo(str(path)))


@main.command()
@db_argument
@click.argument("snapshot", type=click.Path(dir_okay=False))
@json_option
def restore(db: str, snapshot: str, as_json: bool) -> None:
    """Replace DB's content with SNAPSHOT's, all or nothing (DB is created if missing)."""
    with _open_or_create(db) as memory:
        result = memory.restore(snapshot)
    _emit(
        as_json,
        result,
        lambda: click.echo(
            f"restored {result.memories} memories from {result.source} "
            f"(schema v{result.source_schema_version} -> v{result.schema_version})"
        ),
    )


@main.command(name="export")
@db_argument
@click.argument("out", required=False, type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.option(
    "--allow-plaintext",
    is_flag=True,
    help="Export an encrypted DB anyway (the JSON is not encrypted).",
)
@json_option
def export_(db: str, out: str | None, force: bool, allow_plaintext: bool, as_json: bool) -> None:
    """Write everything in DB to one JSON document (OUT, or timestamped); an encrypted
    DB needs --allow-plaintext."""
    existing = out is not None and not force and Path(out).exists()
    itself = not is_server_url(db) and Path(str(out)).resolve() == Path(db).resolve()
    if existing and not itself:  # DB itself: the library says so
        raise BackupError(f"{out} already exists: pass --force to replace it")
    with _open(db) as memory, _progress("export", as_json) as progress:
        path = memory.export_json(
            out, overwrite=force, progress=progress, allow_plaintext=allow_plaintext
        )
    _emit(as_json, {"export": str(path)}, lambda: click.echo(str(path)))


@main.command(name="import")
@db_argument
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@click.option(
    "--mode",
    type=click.Choice(["replace", "merge"]),
    default="replace",
    show_default=True,
    help="Replace everything, or keep the newer of each row.",
)
@click.option(
    "--refuse-secrets",
    is_flag=True,
    help="Fail (importing nothing) if the document holds a secret, instead of redacting it.",
)
@json_option
def import_(db: str, source: str, mode: str, refuse_secrets: bool, as_json: bool) -> None:
    """Load a JSON export into DB, all or nothing (DB is created if missing); secrets
    in it are redacted first."""
    with _open_or_create(db) as memory, _progress("import", as_json) as progress:
        result = memory.import_json(source, mode, progress=progress, refuse_secrets=refuse_secrets)
    data = {
        "mode": result.mode,
        "source": result.source,
        "inserted": result.inserted,
        "updated": result.updated,
        "skipped": result.skipped,
        "tables": result.tables,
    }
    _emit(
        as_json,
        data,
        lambda: click.echo(
            f"{mode}: {result.inserted} inserted, {result.updated} updated, "
            f"{result.skipped} skipped"
        ),
    )


@main.command()
@location_argument("src")
@location_argument("dst")
@json_option
def copy(src: str, dst: str, as_json: bool) -> None:
    """Copy everything in SRC into DST, a new file or an empty database (a file or a
    postgresql:// URL each), in one transaction at DST: all or nothing."""
    with _progress("copy", as_json) as progress:
        result = copy_memory(src, dst, progress=progress)
    data = {
        "source": result.source,
        "destination": result.destination,
        "memories": result.memories,
        "rows": result.rows,
        "tables": result.tables,
    }
    _emit(
        as_json,
        data,
        lambda: click.echo(
            f"copied {result.memories} memories ({result.rows} rows) "
            f"from {result.source} to {result.destination}"
        ),
    )


@main.command()
@db_argument
@json_option
def embed(db: str, as_json: bool) -> None:
    """Embed every memory still waiting for a vector (a progress bar on a terminal)."""
    with _open(db, write=True) as memory, _progress("embed", as_json) as progress:
        embedded = memory.flush(progress=progress)
        pending = memory.statistics().vector_pending
    _emit(
        as_json,
        {"embedded": embedded, "pending": pending},
        lambda: click.echo(f"embedded {embedded} memories, {pending} still pending"),
    )


@main.command()
@db_argument
@click.option("--vacuum", is_flag=True, help="Also rebuild the file to reclaim space.")
@json_option
def maintain(db: str, vacuum: bool, as_json: bool) -> None:
    """Checkpoint the WAL, train the vector cells, refresh statistics.

    The vector cells are trained when due: a file filled before it had cells (recall
    searches the RAM copy until then), or one grown fourfold since. --vacuum also
    rebuilds the file."""
    with _open(db, write=True) as memory:
        result = memory.maintain(vacuum=vacuum)
    _emit(
        as_json,
        result,
        lambda: click.echo(
            f"file {result.bytes_before} -> {result.bytes_after} bytes, "
            f"WAL {result.wal_bytes_before} -> {result.wal_bytes_after} bytes"
        ),
    )


@main.command()
@db_argument
@click.argument("memory_id")
@json_option
def show(db: str, memory_id: str, as_json: bool) -> None:
    """Show one memory by id."""
    with _open(db) as memory:
        found = memory.get(memory_id)
        history = memory.promotion_history(memory_id) if found else []
    if found is None:
        raise MemoryNotFoundError(f"no memory {memory_id} in {display(db)}")
    row = _memory_row(found) | {"promotions": history}

    def human() -> None:
        click.echo(f"{found.id} [{found.tier.value}] {found.content}")
        click.echo(f"  tags: {', '.join(found.tags) or '-'}  importance: {found.importance}  "
                   f"retention: {found.retention:.3f}")  # fmt: skip
        for record in history:
            click.echo(f"  promoted {record.from_tier} -> {record.to_tier}: {record.reason or ''}")

    _emit(as_json, row, human)


@main.command(name="list")
@db_argument
@click.option("--tier", type=click.Choice([t.value for t in Tier]), help="Only this tier.")
@click.option("--session", "session_id", help="Only memories of this session.")
@click.option("--agent", "agent_id", help="Only memories of this agent.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable).")
@click.option("--category", help="Only memories of this category.")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0)
@click.option(
    "--include-superseded",
    is_flag=True,
    help="Also memories a newer one superseded (default: current ones only).",
)
@json_option
def list_(db: str, tier: str | None, session_id: str | None, agent_id: str | None,
          tags: tuple[str, ...], category: str | None, limit: int, offset: int,
          include_superseded: bool, as_json: bool) -> None:  # fmt: skip
    """List memories, newest first, with the same filters as ``query()`` (current
    memories unless --include-superseded)."""
    with _open(db) as memory:
        found = memory.query(tier, session_id=session_id, agent_id=agent_id, tags=tags,
                             category=category, limit=limit, offset=offset,
                             include_superseded=include_superseded)  # fmt: skip

    def human() -> None:
        for m in found:
            click.echo(f"{m.id}  {m.tier.value:<10}  {m.content[:70]}")

    _emit(as_json, [_memory_row(m) for m in found], human)


@main.command()
@db_argument
@click.option("--all", "include_ended", is_flag=True, help="Include ended sessions.")
@json_option
def sessions(db: str, include_ended: bool, as_json: bool) -> None:
    """List sessions, most recently active first (active ones unless --all)."""
    with _open(db) as memory:
        found = memory.sessions.all() if include_ended else memory.active_sessions()
        total = len(found) if found else memory.statistics().storage.session_count

    def human() -> None:
        for s in found:
            state = "active" if s.is_active else "ended"
            click.echo(f"{s.session_id}  {state:<6}  turns={s.turn_number}")
        if not found:  # say why the list is empty, on stderr: stdout stays one line per session
            ended = f"{total} ended session(s): pass --all to list them" if total else ""
            where = display(db)
            click.echo(f"no active sessions in {where}; {ended}" if ended
                       else f"no sessions in {where}", err=True)  # fmt: skip

    _emit(as_json, found, human)


@main.command()
@db_argument
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1, max=1000), default=5, show_default=True)
@click.option("--tier", type=click.Choice([t.value for t in Tier]), help="Only this tier.")
@click.option("--session", "session_id", help="Only memories of this session.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable).")
@click.option("--notes", is_flag=True, help="Notes compete too, as hits of their own kind.")
@click.option(
    "--as-of",
    "as_of",
    type=MomentType(),
    default=None,
    help="Answer as of this moment: memories that existed then and were not yet "
    "superseded (epoch milliseconds, or an ISO 8601 date or time, UTC unless it says).",
)
@click.option(
    "--include-superseded",
    is_flag=True,
    help="Superseded memories compete too (each hit says what superseded it).",
)
@click.option(
    "--min-score",
    type=float,
    default=None,
    help="Drop hits scoring below this (the scale of each hit's score).",
)
@click.option(
    "--relative-cut",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Drop hits under this share of the best hit's score (0.5: half).",
)
@click.option(
    "--reinforce",
    is_flag=True,
    help="Write to DB as an agent's recall does: each hit that is due for review counts as "
    "a successful review (its schedule advances, its access count grows) and memories "
    "still without a vector are embedded first (default: read only).",
)
@click.option(
    "--keywords-only",
    is_flag=True,
    help="Rank by keywords alone: no embedding model is loaded (any file, any model).",
)
@json_option
def search(db: str, query: str, k: int, tier: str | None, session_id: str | None,
           tags: tuple[str, ...], notes: bool, as_of: int | None, include_superseded: bool,
           min_score: float | None, relative_cut: float | None, reinforce: bool,
           keywords_only: bool, as_json: bool) -> None:  # fmt: skip
    """Recall the K memories that best answer QUERY, each with why it came back.

    Read only: memories not embedded yet are ranked by their keywords (the hit says
    so). --reinforce instead embeds what is pending first and counts the hits that are
    due for review as reviews, written before the command exits (a failure to write
    them is the command's error).
    """
    if not query.strip():
        raise click.UsageError("QUERY is empty: give the words to search for")
    quality = MemoryConfig().recall_review_quality if reinforce else None
    model = {"embedder": None} if keywords_only else {}
    try:
        with _open(
            db, write=reinforce, recall_review_quality=quality, load_model_at_open=True, **model
        ) as memory:
            hits = memory.recall(query, k=k, tier=tier, session_id=session_id, tags=tags,
                                 notes=notes, min_score=min_score,
                                 relative_cut=relative_cut, as_of=as_of,
                                 include_superseded=include_superseded)  # fmt: skip
            if reinforce:
                memory.flush()  # the reviews now, so that a failure is reported
    except (EmbeddingModelMismatchError, EmbedderError) as exc:
        raise type(exc)(f"{exc} (or search with --keywords-only)") from exc
    rows = [
        {"kind": h.kind, "score": h.score, "explanation": str(h.explanation),
         "signals": h.explanation.signals,
         **({"note": note_row(h.note)} if isinstance(h, NoteHit)
            else {"memory": _memory_row(h.memory)})}
        for h in hits
    ]  # fmt: skip

    def human() -> None:
        for h in hits:
            if isinstance(h, NoteHit):
                click.echo(f"{h.score:.4f}  {h.note.id}  [note]  {h.note.title}")
            else:
                click.echo(f"{h.score:.4f}  {h.memory.id}  [{h.memory.tier.value}]  "
                           f"{h.memory.content}")  # fmt: skip
            click.echo(f"        why: {h.explanation}")

    _emit(as_json, rows, human)


@main.command()
@db_argument
@json_option
def migrate(db: str, as_json: bool) -> None:
    """Upgrade DB to this version's schema (read commands refuse an older file)."""
    before, after = migrate_file(db, key=_key())
    where = display(db)
    _emit(
        as_json,
        {"database": where, "from_version": before, "to_version": after},
        lambda: click.echo(
            f"{where}: schema v{before} -> v{after}"
            if before != after
            else f"{where}: already at schema v{after}"
        ),
    )


@main.command()
@db_argument
@click.option(
    "--new-key-file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="File holding the new key.",
)
@json_option
def rekey(db: str, new_key_file: str, as_json: bool) -> None:
    """Re-encrypt DB with the key in --new-key-file, in one operation (the current key
    comes from --key-file or $TIERED_MEMORY_KEY). No other process may have DB open."""
    if _key() is None:
        raise click.UsageError(f"rekey needs the current key: --key-file or ${KEY_ENV}")
    new_key = read_key_file(new_key_file)
    with _open(db, write=True) as memory:
        memory.rekey(new_key)
    where = display(db)
    _emit(as_json, {"database": where, "rekeyed": True},
          lambda: click.echo(f"{where}: key changed"))  # fmt: skip


@main.command()
@db_argument
@click.option(
    "--read-only",
    is_flag=True,
    help="Serve an existing file without writing to it; only the tools that read are listed.",
)
@click.option(
    "--keywords-only", is_flag=True, help="Recall by keywords alone: no embedding model is loaded."
)
def mcp(db: str, read_only: bool, keywords_only: bool) -> None:
    """Serve DB over the Model Context Protocol on stdin/stdout (needs the mcp extra).

    Like the library, it creates DB if missing and migrates an older one (unless
    --read-only); an encrypted DB takes its key from --key-file or the environment.
    Tools: remember, recall, get, forget, promote, start_session,
    end_session, append_transcript, statistics, and the notes' create_note, get_note,
    list_notes, update_note, note_history, delete_note; resources memory://ID and
    session://ID/transcript.
    """
    try:
        from tiered_memory.integrations.mcp_server import serve
    except ImportError as exc:
        raise click.ClickException(
            f"the MCP server needs the mcp extra: pip install 'tiered-memory[mcp]' ({exc})"
        ) from exc
    serve(db, read_only=read_only, keywords_only=keywords_only, key=_key(), agent_id=_agent())
