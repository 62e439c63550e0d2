"""Write the command line's reference page (docs/guides/cli-reference.md) from the
commands themselves: every command's and subcommand's ``--help``, in order.

Run from the repository root after changing a command:

    .venv/bin/python docs/cli_reference.py > docs/guides/cli-reference.md

``tests/docs/test_pages.py`` fails while the page differs from this script's output.
"""

from __future__ import annotations

import click

from tiered_memory.cli import main

WIDTH = 88


def _help(command: click.Command, path: list[str], parent: click.Context | None) -> str:
    ctx = click.Context(
        command, info_name=path[-1], parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
    )
    return command.get_help(ctx)


def _sections(command: click.Command, path: list[str], parent: click.Context | None) -> list[str]:
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    level = "#" * min(len(path) + 1, 4)
    out = [f"{level} `{' '.join(path)}`", "", "```text", _help(command, path, parent), "```", ""]
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += _sections(sub, [*path, name], ctx)
    return out


def page() -> str:
    """The reference page's Markdown."""
    head = [
        "# Command-line reference",
        "",
        "Every command of `tiered-memory` with its options, as `--help` prints them",
        "(written by `docs/cli_reference.py`; the [command line](cli.md) page explains them).",
        "",
    ]
    return "\n".join(head + _sections(main, ["tiered-memory"], None)).rstrip() + "\n"


if __name__ == "__main__":
    print(page(), end="")
