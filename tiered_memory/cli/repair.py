"""The command line's damage commands: ``check`` (what is wrong, and on a file too damaged
to open, what is still readable) and ``salvage`` (every readable row into a new file)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from persistence import (
    AuthenticationError,
    CorruptDatabaseError,
    DatabaseBusyError,
    DatabaseMissingError,
    EncryptionKeyError,
    EncryptionUnavailableError,
    ForeignDatabaseError,
    MigrationRequiredError,
    MissingDirectoryError,
    MissingFileError,
    NotADatabaseError,
    SalvageResult,
    SchemaTooNewError,
    ServerUnavailableError,
    TableSalvage,
    TieredMemoryError,
    display,
    inspect_damage,
    is_server_url,
)
from persistence import (
    salvage as salvage_file,
)
from tiered_memory.cli.app import (
    _emit,
    _key,
    _open,
    db_argument,
    json_option,
    location_argument,
    main,
)
from tiered_memory.cli.terminal import printable


@main.command()
@db_argument
@json_option
def check(db: str, as_json: bool) -> None:
    """Integrity check plus the library's invariants; exit 1 if anything is wrong.

    On a damaged file (one too damaged to open, too) it also reads every table: per
    table the rows that can be read and the ones that cannot, and the memories lost
    (``salvage`` copies the readable rows into a new file).
    """
    try:
        with _open(db) as memory:
            result = memory.check_integrity()
    except CorruptDatabaseError as exc:
        _report(db, [{"check": "open", "detail": str(exc).splitlines()[0]}], ["open"],
                as_json, opened=False)  # fmt: skip
        sys.exit(1)
    except (TieredMemoryError, OSError) as exc:
        _refused(db, exc, as_json)
    problems = [{"check": p.check, "detail": p.detail} for p in result.problems]
    if not result.ok and not is_server_url(db) and any(p.check == "integrity_check"
                                                       for p in result.problems):  # fmt: skip
        _report(db, problems, list(result.checks), as_json, opened=True)
        sys.exit(1)
    verdict = "ok" if result.ok else "problems"
    _emit(as_json, {"verdict": verdict, "ok": result.ok, "checks": result.checks,
                    "problems": problems}, lambda: None)  # fmt: skip
    if not as_json:
        for problem in result.problems:
            click.echo(f"{problem.check}: {problem.detail}")
        if result.ok:
            click.echo(f"ok: {len(result.checks)} checks passed")
    if not result.ok:
        click.echo(f"error: {len(result.problems)} problem(s) found", err=True)
        sys.exit(1)


VERDICTS: tuple[tuple[type[Exception], str], ...] = (
    (MissingFileError, "missing"),
    (MissingDirectoryError, "missing"),
    (DatabaseMissingError, "missing"),
    (EncryptionUnavailableError, "encryption_unavailable"),
    (EncryptionKeyError, "wrong_key"),
    (SchemaTooNewError, "newer_schema"),
    (MigrationRequiredError, "older_schema"),
    (ForeignDatabaseError, "foreign"),
    (NotADatabaseError, "not_sqlite"),
    (AuthenticationError, "authentication"),
    (ServerUnavailableError, "unreachable"),
    (DatabaseBusyError, "busy"),
    (CorruptDatabaseError, "damaged"),
)
"""``check``'s verdict for a database it could not open, by the error that said why
(the first that fits); ``error`` for any other."""


def verdict_of(db: str, exc: BaseException) -> str:
    """The verdict ``check --json`` prints for ``db``, which could not be opened."""
    verdict = next((name for kind, name in VERDICTS if isinstance(exc, kind)), "error")
    if verdict == "not_sqlite" and not is_server_url(db) and Path(db).is_file():
        return "empty" if Path(db).stat().st_size == 0 else verdict
    return verdict


def _refused(db: str, exc: TieredMemoryError | OSError, as_json: bool) -> NoReturn:
    """``check`` on a database it cannot open: the verdict (JSON) and the reason, exit 1."""
    where = display(db)
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    data = {"verdict": verdict_of(db, exc), "ok": False, "opened": False,
            "database": where, "detail": detail}  # fmt: skip
    _emit(as_json, data, lambda: None)
    click.echo(f"error: {printable(detail)}", err=True)
    sys.exit(1)


def _report(db: str, problems: list[dict[str, str]], checks: list[str], as_json: bool, *,
            opened: bool) -> None:  # fmt: skip
    """``check``'s report on a damaged file: ``problems`` found so far, then SQLite's
    integrity check (if it has not run) and what every table still yields."""
    try:
        report = inspect_damage(db, key=_key())
    except (TieredMemoryError, OSError) as exc:  # not even the schema can be read, say
        _refused(db, exc, as_json)
    where = display(db)
    seen = {p["detail"] for p in problems}
    problems += [{"check": "integrity_check", "detail": d} for d in report.damage if d not in seen]
    problems += [{"check": "readable_rows", "detail": _loss_line(t)}
                 for t in report.tables if not t.complete]  # fmt: skip
    checks = [*checks, *(c for c in ("integrity_check", "readable_rows") if c not in checks)]
    data = {"verdict": "damaged", "ok": False, "opened": opened, "checks": checks,
            "problems": problems,
            "readable_memories": report.memories, "lost_memories": report.lost_memories,
            "tables": report.tables}  # fmt: skip

    def human() -> None:
        for problem in problems:
            click.echo(f"{problem['check']}: {problem['detail']}")
        click.echo(f"readable: {report.memories} memories" + _lost_memories_line(report))
        click.echo(f"salvage: `tiered-memory salvage {where} NEW.db` copies every readable row")

    _emit(as_json, data, human)
    click.echo(f"error: {where} is damaged: {len(problems)} problem(s) found", err=True)


def _loss_line(table: TableSalvage) -> str:
    parts = [f"{table.copied} rows readable"]
    if table.unreadable:
        parts.append("unreadable: " + "; ".join(table.unreadable))
    if table.rejected:
        parts.append(f"{table.rejected} rows with impossible values")
    if table.dropped:
        parts.append(f"{table.dropped} rows pointing at lost rows")
    return f"{table.table}: " + ", ".join(parts)


def _lost_memories_line(result: SalvageResult) -> str:
    lost = result.lost_memories
    if not lost:
        return ""
    shown = ", ".join(lost[:5]) + (", ..." if len(lost) > 5 else "")
    return f"; {len(lost)} lost ({shown})"


@main.command()
@location_argument("damaged")
@click.argument("out", type=click.Path(dir_okay=False))
@json_option
def salvage(damaged: str, out: str, as_json: bool) -> None:
    """Copy every row still readable of the damaged file DAMAGED into the new file OUT
    (keys, vectors and indexes rebuilt there) and say what could not be read.

    Exit 0 when OUT was written, even if rows were lost (they are listed); 1 if nothing
    could be written. DAMAGED is only read; an encrypted one gives OUT its key.
    """
    result = salvage_file(damaged, out, key=_key())
    data = {"source": result.source, "target": result.target, "memories": result.memories,
            "complete": result.complete, "lost_memories": result.lost_memories,
            "lost": [_loss_line(t) for t in result.lost], "damage": result.damage,
            "tables": result.tables}  # fmt: skip

    def human() -> None:
        click.echo(f"salvaged {result.memories} memories from {result.source} into {out}"
                   + _lost_memories_line(result))  # fmt: skip
        for table in result.lost:
            click.echo(f"lost: {_loss_line(table)}")
        if result.complete:
            click.echo("nothing was lost: every row was read")

    _emit(as_json, data, human)
