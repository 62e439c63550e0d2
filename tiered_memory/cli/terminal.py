"""What the command line prints for people is safe on a terminal: control characters in
stored text (a NUL, an escape sequence, a backspace) are shown escaped (``\\x00``,
``\\x1b``), never sent raw, so a memory cannot hide itself, rewrite the screen or ring the
bell. Tabs and newlines pass. Content is stored as given; ``--json`` output (bytes, with
JSON's own escapes) and the MCP server's wire (bytes) are not touched."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline as ``\\xNN``."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


class _PrintableStream:
    """A text stream that escapes control characters in what is written to it; every
    other attribute (``buffer``, ``fileno``, ``isatty``, ``encoding``) is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(printable(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def printable_stdout() -> Iterator[None]:
    """Escape control characters in text written to ``sys.stdout`` inside the block."""
    original = sys.stdout
    sys.stdout = _PrintableStream(original)
    try:
        yield
    finally:
        sys.stdout = original
