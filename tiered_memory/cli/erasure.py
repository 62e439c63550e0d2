"""The ``forget`` command: erase memories by id, a session, or an agent, for good.

All of one invocation lands in one transaction (a failure forgets nothing); once the
command returns, the file is closed and, on SQLite, no byte of the forgotten content or
its vector remains in it (see the README's "Forget means forgotten").
"""

from __future__ import annotations

import click

from persistence import InvalidInputError, check_current
from tiered_memory import AgentMemoryManager
from tiered_memory.cli.app import _agent, _emit, _key, db_argument, json_option, main
from tiered_memory.erasure import DEFAULT_REASON, ErasureReport


@main.command()
@db_argument
@click.argument("memory_ids", nargs=-1)
@click.option("--session", "session_id", help="Forget every memory of this session, and "
              "delete the session with its transcript.")  # fmt: skip
@click.option("--agent", "agent_id", help="Forget every memory of this agent, and the "
              "sessions it started with their transcripts.")  # fmt: skip
@click.option("--reason", default=DEFAULT_REASON, show_default=True,
              help="Kept in the forgetting log (with the ids; never the content).")  # fmt: skip
@json_option
def forget(
    db: str,
    memory_ids: tuple[str, ...],
    session_id: str | None,
    agent_id: str | None,
    reason: str,
    as_json: bool,
) -> None:
    """Forget MEMORY_IDS (or --session S, or --agent A) for good: no byte of their content
    or vectors stays in the file. Backups made before keep them. Exits 1 if an id was
    not found (the others are forgotten)."""
    chosen = sum((bool(memory_ids), session_id is not None, agent_id is not None))
    if chosen != 1:
        raise click.UsageError("give memory ids, or --session S, or --agent A (one of them)")
    scope = agent_id if agent_id is not None else _agent()
    if agent_id is not None and _agent() not in (None, agent_id):
        raise InvalidInputError(f"--agent {agent_id} differs from the global --agent {_agent()}")
    key = _key()
    check_current(db, key=key)
    with AgentMemoryManager.open(
        db, key=key, agent_id=scope, embed_in_background=False, load_model_at_open=False
    ) as m:
        if session_id is not None:
            report = m.forget_session(session_id, reason)
        elif agent_id is not None:
            report = m.forget_agent(agent_id, reason)
        else:
            report = m.forget_many(list(memory_ids), reason)
    _emit(as_json, report.to_dict(), lambda: _say(report))
    if report.missing:
        raise SystemExit(1)


def _say(report: ErasureReport) -> None:
    click.echo(f"forgot {len(report.memories)} memories")
    for memory_id in report.memories:
        click.echo(f"  {memory_id}")
    if report.sessions:
        click.echo(f"deleted {len(report.sessions)} sessions: {', '.join(report.sessions)}")
    for memory_id in report.missing:
        click.echo(f"not found: {memory_id}", err=True)
