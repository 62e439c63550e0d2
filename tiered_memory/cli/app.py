"""The ``tiered-memory`` command group and what every command shares: the key, opening a
database read-only or for writing, JSON or human output, progress bars."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import orjson

from persistence import (
    Memory,
    TieredMemoryError,
    check_current,
    is_server_url,
    memory_to_json,
)
from tiered_memory import __version__
from tiered_memory.cli.terminal import printable, printable_stdout
from tiered_memory.manager import AgentMemoryManager

ProgressFn = Callable[[int, int], None]


GLOBAL_OPTIONS = ("--key-file", "--agent")
"""Options of the group that are accepted after the command too (unless the command has
an option of that name itself, as ``list --agent`` does)."""


class _Commands(click.Group):
    """Turns library and OS errors into exit code 1 with a one-line reason, and takes the
    group's options after the command as well as before it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self._globals_first(ctx, args))

    def _globals_first(self, ctx: click.Context, args: list[str]) -> list[str]:
        """``args`` with the group's options that follow the command moved before it."""
        position, i = None, 0
        while i < len(args):  # find the command: the first word that is not an option
            arg = args[i]
            if arg == "--":
                return args
            if arg in GLOBAL_OPTIONS:
                i += 2
                continue
            if not arg.startswith("-"):
                position = i
                break
            i += 1
        if position is None:
            return args
        command = self.get_command(ctx, args[position])
        if command is None:
            return args
        own = {name for p in command.params for name in getattr(p, "opts", ())}
        moved: list[str] = []
        rest: list[str] = []
        tail = args[position + 1 :]
        j = 0
        while j < len(tail):
            arg = tail[j]
            if arg == "--":
                rest += tail[j:]
                break
            name = arg.split("=", 1)[0]
            if name in GLOBAL_OPTIONS and name not in own:
                if "=" in arg:
                    moved.append(arg)
                    j += 1
                else:
                    moved += tail[j : j + 2]
                    j += 2
                continue
            rest.append(arg)
            j += 1
        return [*args[:position], *moved, args[position], *rest]

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with printable_stdout():  # stored text never reaches a terminal raw
                return super().invoke(ctx)
        except BrokenPipeError:
            # The reader (`| head`, say) has gone: not a failure of the command.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except (TieredMemoryError, OSError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            click.echo(f"error: {printable(message)}", err=True)
            ctx.exit(1)


KEY_ENV = "TIERED_MEMORY_KEY"
AGENT_META = "tiered_memory.agent_id"


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="tiered-memory")
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False),
    help=f"File holding the key of an encrypted database (else ${KEY_ENV}).",
)
@click.option(
    "--agent",
    "agent_id",
    help="Open the memory scoped to this agent: only its memories are read or written.",
)
@click.pass_context
def main(ctx: click.Context, key_file: str | None, agent_id: str | None) -> None:
    """Inspect, back up, restore, export and import a tiered-memory database."""
    ctx.obj = read_key_file(key_file) if key_file else os.environ.get(KEY_ENV) or None
    ctx.meta[AGENT_META] = agent_id


def read_key_file(path: str) -> bytes:
    """The key in ``path``: its bytes, without one trailing newline."""
    data = Path(path).read_bytes()
    return data[:-2] if data.endswith(b"\r\n") else data.removesuffix(b"\n")


def _key() -> str | bytes | None:
    """The key given to this invocation (``--key-file`` or the environment), if any."""
    key: str | bytes | None = click.get_current_context().find_root().obj
    return key


def _agent() -> str | None:
    """The agent this invocation is scoped to (``--agent``), if any."""
    agent: str | None = click.get_current_context().meta.get(AGENT_META)
    return agent


def _open(db: str, *, write: bool = False, **config: Any) -> AgentMemoryManager:
    """An existing tiered-memory database at the current schema, read-only unless
    ``write``: a missing, empty, foreign or older file is refused, never created or
    migrated (``migrate`` upgrades one). The model loads on first need, unless the
    command says ``load_model_at_open=True`` (it searches)."""
    key = _key()
    config.setdefault("load_model_at_open", False)
    if not write:
        return AgentMemoryManager.open(
            db, read_only=True, key=key, agent_id=_agent(), embed_in_background=False, **config
        )
    check_current(db, key=key)  # refuses what is not ready
    return AgentMemoryManager.open(
        db, key=key, agent_id=_agent(), embed_in_background=False, **config
    )


@contextmanager
def _open_or_create(db: str) -> Iterator[AgentMemoryManager]:
    """Open DB, creating it if missing; a failure removes a database this call created."""
    created = not is_server_url(db) and not Path(db).exists()
    try:
        with AgentMemoryManager.open(
            db,
            key=_key(),
            agent_id=_agent(),
            embed_in_background=False,
            load_model_at_open=False,
        ) as memory:
            yield memory
    except BaseException:
        if created:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
        raise


def _emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        sys.stdout.buffer.write(
            orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        )
    else:
        human()


@contextmanager
def _progress(label: str, as_json: bool) -> Iterator[ProgressFn | None]:
    """A progress callback drawing a bar on an interactive stderr, else ``None``."""
    if as_json or not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=1, label=label, file=sys.stderr) as bar:

        def update(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        yield update


def _memory_row(memory: Memory) -> dict[str, Any]:
    """A memory for display: the embedding is shown by its size, not its 1.5 kB of base64
    (``export`` writes the vectors)."""
    row = {"tier": memory.tier.value, **memory_to_json(memory)}
    del row["embedding"]
    row["embedding_dim"] = None if memory.embedding is None else len(memory.embedding)
    return row


def _location(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A database argument: a ``postgresql://`` URL as it is, else a file path checked as
    ``click.Path(dir_okay=False)`` checks it (with the same messages)."""
    if is_server_url(value):
        return value
    return str(click.Path(dir_okay=False).convert(value, param, ctx))


def location_argument(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command argument naming a database: a file or a ``postgresql://`` URL."""
    return click.argument(name, callback=_location)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
db_argument = location_argument("db")
