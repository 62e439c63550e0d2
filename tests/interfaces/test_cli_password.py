"""No command of the command line prints a server URL's password: every command, taken
from the CLI's own command tree (a new command is covered without touching this file,
unless it takes an argument of a new name), run as an operator runs it (real
processes) on a ``postgresql://`` URL whose role must give a password: with the right
password (human output and ``--json``), with ids that are not there (the "not found"
messages), and with a wrong password (the refusal). ``serve`` runs until it has said
where it serves and answered a page, then is stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.support.inspector_server import announced_port, wait_for_port
from tests.support.pg_server import PgServer, password_role, with_password
from tiered_memory import AgentMemoryManager
from tiered_memory.cli import main

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

CLI = str(Path(sys.executable).with_name("tiered-memory"))
PASSWORD = "s3cr3t-Pw-XYZ"
WRONG = "wr0ng-Pw-QRS"
FAILS_ON_A_SERVER = {
    "rekey": "a server has no key",
    "restore": "restores into an empty database only",
    "salvage": "salvages a file",
}
"""Commands that refuse a populated server database with the right password (their
errors are read for the password too)."""


def commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> Iterator[
    tuple[str, click.Command]
]:  # fmt: skip
    """``(name, command)`` of every command of the CLI, subcommands by their full name."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))
        else:
            yield " ".join((*prefix, name)), command


def argv(name: str, command: click.Command, values: dict[str, str]) -> list[str]:
    """The command line of ``name`` with ``values`` for its arguments and required options,
    by parameter name (a name not in ``values`` fails the test: add a value for it)."""
    line = name.split()
    for param in command.params:
        if not (isinstance(param, click.Argument) or param.required):
            continue
        assert param.name in values, f"{name}: give the test a value for {param.name!r}"
        value = values[param.name]
        line += [value] if isinstance(param, click.Argument) else [param.opts[0], value]
    return line


def has_json(command: click.Command) -> bool:
    return any("--json" in getattr(p, "opts", ()) for p in command.params)


def run(line: list[str], cwd: Path) -> subprocess.Popen[str]:
    """Start the CLI with ``line`` in ``cwd`` (where a backup without --to goes)."""
    return subprocess.Popen([CLI, *line], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd)  # fmt: skip


def outcome(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Exit code and everything printed (stdout and stderr) of a finished command."""
    stdout, stderr = process.communicate(input="", timeout=300)
    return process.returncode, stdout + stderr


def serve_output(url: str, cwd: Path) -> str:
    """``serve URL``'s first line and the overview page (and its .json twin) it serves,
    then it is stopped."""
    process = run(["serve", url, "--port", "0", "--keywords-only"], cwd)
    try:
        port, first = announced_port(process)
        wait_for_port("127.0.0.1", port)
        pages = []
        for page in ("/", "/index.json"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{page}", timeout=30) as answer:
                pages.append(answer.read().decode())
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    return "\n".join([first, *pages, stdout, stderr])


def test_no_command_prints_the_password_of_a_server_url(
    pg_server: PgServer, tmp_path: Path
) -> None:
    with (
        password_role(pg_server, PASSWORD) as role,
        pg_server.database("cli_secret") as db_url,
        pg_server.database("cli_secret_copy") as copy_url,
    ):
        url, empty = with_password(db_url, role, PASSWORD), with_password(copy_url, role, PASSWORD)
        with AgentMemoryManager.open(url, embedder=None) as memory:
            fact = memory.remember("Ana met Bruno in Lisbon", relations=[("Ana", "met", "Bruno")])
            spare = memory.remember("a memory the forget command takes")
            note = memory.notes.create("Lisbon trip", "the plan", memories=[fact.id])
            spare_note = memory.notes.create("to delete", "the delete command takes it")
            export, snapshot = (
                memory.export_json(tmp_path / "export.json"),
                memory.backup(tmp_path / "snapshot.json"),
            )
        key_file = tmp_path / "key"
        key_file.write_text("a key the rekey command is given")
        values = {
            "db": url, "src": url, "dst": empty, "damaged": url,
            "memory_id": fact.id, "memory_ids": spare.id, "note_id": note.id,
            "entity": "Ana", "query": "Lisbon", "title": "a new note",
            "source": str(export), "snapshot": str(snapshot),
            "out": str(tmp_path / "out.json"), "new_key_file": str(key_file),
        }  # fmt: skip
        own = {"forget": {"memory_ids": spare.id}, "notes delete": {"note_id": spare_note.id},
               "salvage": {"out": str(tmp_path / "salvaged.db")}}  # fmt: skip
        flags = {"notes link": ["--memory", fact.id], "notes unlink": ["--memory", fact.id],
                 "rekey": ["--key-file", str(key_file)], "export": ["--force"]}  # fmt: skip

        def line(name: str, command: click.Command, given: dict[str, str]) -> list[str]:
            return [*argv(name, command, given | own.get(name, {})), *flags.get(name, [])]

        every = {n: c for n, c in commands() if n != "serve"}
        assert {"migrate", "stats", "copy", "notes add", "mcp"} <= set(every)
        printed: dict[str, str] = {}

        # The right password: each command in turn (some write), then each with --json.
        for name, command in every.items():
            code, text = outcome(run(line(name, command, values), tmp_path))
            printed[name] = text
            assert (code != 0) == (name in FAILS_ON_A_SERVER), (name, code, text)
        printed["serve"] = serve_output(url, tmp_path)
        jsons = {n: run([*line(n, c, values), "--json"], tmp_path)
                 for n, c in every.items() if has_json(c)}  # fmt: skip
        printed |= {f"{n} --json": outcome(p)[1] for n, p in jsons.items()}

        # Ids that are not there: the "no memory X in DB" messages.
        missing = {"memory_id": "no-such-id", "memory_ids": "no-such-id", "note_id": "no-such",
                   "entity": "Nobody"}  # fmt: skip
        named = {n: c for n, c in every.items() if {p.name for p in c.params} & set(missing)}
        running = {n: run([*argv(n, c, values | missing), *flags.get(n, [])], tmp_path)
                   for n, c in named.items()}  # fmt: skip
        printed |= {f"{n} (missing)": outcome(p)[1] for n, p in running.items()}
        assert "no memory no-such-id in" in printed["show (missing)"]

        # A wrong password: every command is refused, and says so without it.
        bad = {key: value.replace(PASSWORD, WRONG) for key, value in values.items()}
        everything = [*every.items(), ("serve", main.commands["serve"])]
        refused = {n: run(line(n, c, bad), tmp_path) for n, c in everything}
        for name, process in refused.items():
            code, text = outcome(process)
            printed[f"{name} (wrong password)"] = text
            reached = name not in FAILS_ON_A_SERVER  # those may refuse before connecting
            assert code != 0 and ("refused the credentials" in text or not reached), (name, text)
            assert WRONG not in text, (name, text)

    leaks = {name: text for name, text in printed.items() if PASSWORD in text}
    assert leaks == {}, f"the password was printed by {sorted(leaks)}"
    assert len(printed) > 2 * len(every)
