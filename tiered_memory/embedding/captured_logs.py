"""Root-logger records of a third-party library, moved under the ``tiered_memory`` tree.

onnxruntime's quantizer logs with ``logging.warning(...)`` and ``logging.info(...)``:
on the root logger, and (when the root has no handler) by first calling
``logging.basicConfig()``, which installs a handler on the application's root logger
and prints to its stderr. :func:`root_records_to` stops both for the duration of a call:
the root gets a do-nothing handler if it had none (so ``basicConfig`` does not run), and
the records the library's own files log on the root are re-logged to a
``tiered_memory`` logger (INFO and below at DEBUG) instead of the root's handlers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_lock = threading.Lock()


class _Redirect(logging.Filter):
    """A filter on the root logger: records from ``folder`` go to ``target`` instead."""

    def __init__(self, folder: str, target: logging.Logger) -> None:
        super().__init__()
        self.folder = folder
        self.target = target

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.startswith(self.folder):
            return True  # someone else's record: the root handles it as usual
        record.name = self.target.name
        if record.levelno <= logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)
        return False


@contextmanager
def root_records_to(package_file: str, target: logging.Logger) -> Iterator[None]:
    """While the block runs, what code under ``package_file``'s package folder logs on
    the root logger goes to ``target``, and no ``basicConfig`` is triggered."""
    folder = str(Path(package_file).resolve().parent)
    root = logging.root
    redirect = _Redirect(folder, target)
    with _lock:
        placeholder = logging.NullHandler() if not root.handlers else None
        if placeholder is not None:
            root.addHandler(placeholder)
        root.addFilter(redirect)
        try:
            yield
        finally:
            root.removeFilter(redirect)
            if placeholder is not None:
                root.removeHandler(placeholder)
