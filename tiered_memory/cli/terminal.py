"""What the command line prints for people is safe on a terminal: control characters in
stored text (a NUL, an escape sequence, a backspace) are shown escaped (``\\x00``,
``\\x1b``), never sent raw, so a memory cannot hide itself, rewrite the screen or ring the
bell. Tabs and newlines pass. Content is stored as given; ``--json`` output (bytes, with
JSON's own escapes: no control byte to escape) passes unchanged."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b-\x1f]")


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline as ``\\xNN``."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def printable_bytes(data: bytes) -> bytes:
    """``data`` with every C0 control byte but tab and newline as ``\\xNN``: JSON, which
    escapes all of them itself, passes unchanged (it may hold DEL and C1 characters raw,
    so those are left alone here: text written as text escapes them)."""
    return _CONTROL_BYTES.sub(lambda found: b"\\x%02x" % found.group()[0], data)


class _PrintableBuffer:
    """The binary stream under stdout, escaping control bytes (click writes text there
    itself when stdout's encoding looks wrong, ``PYTHONIOENCODING=ascii`` say)."""

    def __init__(self, buffer: Any) -> None:
        self._buffer = buffer

    def write(self, data: bytes) -> int:
        self._buffer.write(printable_bytes(bytes(data)))
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._buffer, name)


class _PrintableStream:
    """A text stream that escapes control characters in what is written to it, and in
    what is written to its ``buffer``; every other attribute (``fileno``, ``isatty``,
    ``encoding``) is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.buffer = _PrintableBuffer(stream.buffer) if hasattr(stream, "buffer") else None

    def write(self, text: str) -> int:
        self._stream.write(printable(text))
        return len(text)

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
