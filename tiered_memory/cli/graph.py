"""The knowledge graph's commands of the ``tiered-memory`` command line: ``graph`` and
``entities``. Both open the database read-only (no byte changes)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from persistence import Entity, EntityNotFoundError, display
from tiered_memory.cli.app import _emit, _open, db_argument, json_option, main


def _entity_row(entity: Entity) -> dict[str, Any]:
    row = asdict(entity)
    row["aliases"] = list(entity.aliases)
    return row


@main.command()
@db_argument
@click.argument("entity")
@click.option("--depth", type=click.IntRange(1, 3), default=1, show_default=True,
              help="Hops to walk (1 to 3).")  # fmt: skip
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
def graph(db: str, entity: str, depth: int, limit: int, as_json: bool) -> None:
    """Show ENTITY (a name, any alias, or an id), its neighbours up to --depth hops and
    how many memories name it."""
    with _open(db) as memory:
        found = memory.graph.entity(entity)
        if found is None:
            raise EntityNotFoundError(f"no entity {entity!r} in {display(db)}")
        near = memory.graph.neighbors(found, depth=depth, limit=limit)
        about = memory.graph.memories_about(found, limit=10_000)
        names = {found.id: found.name} | {n.entity.id: n.entity.name for n in near}
    row = {
        "entity": _entity_row(found),
        "memories": len(about),
        "neighbors": [
            {"entity": _entity_row(n.entity), "depth": n.depth,
             "via": [asdict(r) for r in n.via]}
            for n in near
        ],
    }  # fmt: skip

    def human() -> None:
        aliases = ", ".join(a for a in found.aliases if a != found.name)
        aka = f"  aka {aliases}" if aliases else ""
        click.echo(f"{found.name} [{found.type}] {found.id}{aka}")
        if found.description:
            click.echo(f"  {found.description}")
        click.echo(f"  named by {len(about)} memories")
        for n in near:
            steps, at = [], found.id
            for r in n.via:
                forward = r.subject_id == at
                at = r.object_id if forward else r.subject_id
                arrow = f"-{r.predicate}->" if forward else f"<-{r.predicate}-"
                steps.append(f"{arrow} {names.get(at, at)}")
            click.echo(f"  {n.depth} hop(s): {n.entity.name} [{n.entity.type}]  "
                       f"{found.name} {' '.join(steps)}")  # fmt: skip

    _emit(as_json, row, human)


@main.command()
@db_argument
@click.option("--type", "type_", help="Only entities of this type (entity, email, url, ...).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=1000, show_default=True)
@json_option
def entities(db: str, type_: str | None, limit: int, as_json: bool) -> None:
    """List the knowledge graph's entities (of one --type), in id order."""
    with _open(db) as memory:
        found = memory.graph.entities(type_, limit=limit)

    def human() -> None:
        for e in found:
            click.echo(f"{e.id}  {e.type:<8}  {e.name}")

    _emit(as_json, [_entity_row(e) for e in found], human)
