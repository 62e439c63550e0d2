"""Stored text with control characters (a NUL, escape sequences, a bell, a backspace) is
kept as given, and every command shows it escaped on a terminal (``\\x00``, ``\\x1b``):
a memory cannot hide itself, rewrite the screen or ring the bell. ``--json`` keeps the
exact text (JSON's own escapes)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.subprocess

HOSTILE = "bell\x07 nul\x00 esc\x1b[2J\x1b[31mred back\x08\x08 cr\rdel\x7f csi\x9b tab\tend"
RAW = [b"\x07", b"\x00", b"\x1b", b"\x08", b"\r", b"\x7f", "\x9b".encode()]
CLI = [sys.executable, "-m", "tiered_memory"]
ROOT = Path(__file__).resolve().parents[2]


def on_a_terminal(*args: str, encoding: str | None = None) -> tuple[int, bytes]:
    """Exit code and the bytes a command wrote to its stdout, a real terminal (a pty),
    with stdout's encoding forced to ``encoding`` if given."""
    env = dict(os.environ, **({"PYTHONIOENCODING": encoding} if encoding else {}))
    leader, follower = pty.openpty()
    process = subprocess.Popen([*CLI, *args], stdout=follower, stderr=subprocess.DEVNULL,
                               cwd=ROOT, env=env)  # fmt: skip
    os.close(follower)
    drawn = b""
    try:
        while chunk := os.read(leader, 4096):
            drawn += chunk
    except OSError:  # the terminal closed with the process
        pass
    os.close(leader)
    return process.wait(timeout=120), drawn


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    db = tmp_path_factory.mktemp("control") / "agent.db"
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        memory_id = memory.remember(HOSTILE, tags=["bell\x07"]).id
        note_id = memory.notes.create("title\x1b]0;owned\x07", content=HOSTILE).id
    return db, memory_id, note_id


@pytest.mark.parametrize(
    "command",
    [
        ("list", "{db}"),
        ("show", "{db}", "{memory}"),
        ("search", "{db}", "bell nul", "--keywords-only"),
        ("notes", "list", "{db}"),
        ("notes", "show", "{db}", "{note}"),
    ],
    ids=lambda c: "-".join(c[:2]).replace("-{db}", ""),
)
def test_a_terminal_never_gets_a_raw_control_character(
    stored: tuple[Path, str, str], command: tuple[str, ...]
) -> None:
    db, memory_id, note_id = stored
    args = [a.format(db=db, memory=memory_id, note=note_id) for a in command]
    code, drawn = on_a_terminal(*args)
    assert code == 0, drawn
    shown = drawn.replace(b"\r\n", b"\n")  # the terminal's own line endings
    assert not [c for c in RAW if c in shown], shown
    assert b"\\x1b" in shown and b"\\x07" in shown  # shown escaped, not dropped


def test_an_ascii_terminal_gets_no_raw_control_character_either(
    stored: tuple[Path, str, str],
) -> None:
    """With stdout's encoding ASCII, click writes through the byte stream below it."""
    code, drawn = on_a_terminal("list", str(stored[0]), encoding="ascii")
    assert code == 0, drawn
    shown = drawn.replace(b"\r\n", b"\n")
    c0 = [c for c in RAW if len(c) == 1 and c < b"\x20"]  # the byte layer escapes C0
    assert not [c for c in c0 if c in shown], shown
    assert b"\\x07" in shown


def test_json_keeps_the_exact_text_and_errors_are_escaped(stored: tuple[Path, str, str]) -> None:
    db, memory_id, _ = stored
    shown = subprocess.run([*CLI, "show", str(db), memory_id, "--json"], capture_output=True,
                           cwd=ROOT, timeout=120, check=True)  # fmt: skip
    assert orjson.loads(shown.stdout)["content"] == HOSTILE
    missing = subprocess.run([*CLI, "show", str(db), "no\x07such"], capture_output=True,
                             cwd=ROOT, timeout=120)  # fmt: skip
    assert missing.returncode == 1 and b"\x07" not in missing.stdout + missing.stderr
    assert b"no\\x07such" in missing.stderr
