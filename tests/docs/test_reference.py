"""Every public name of ``tiered_memory`` has an entry in the API reference: a
mkdocstrings ``::: path`` directive in ``docs/reference/*.md`` that renders it (the
object itself, or a module whose ``__all__`` holds it)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import tiered_memory

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = sorted((ROOT / "docs" / "reference").glob("*.md"))
DIRECTIVE = re.compile(r"^::: *([\w.]+)[ \t]*\n((?:[ \t]+.*\n)*)", re.M)
PUBLIC = [name for name in tiered_memory.__all__ if not name.startswith("__")]
"""What a reader looks up (``__version__`` is a string, not an API)."""


def _resolve(path: str) -> Any:
    """The object a directive's dotted path names (a module, or an attribute of one)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"::: {path} names nothing importable")


def rendered(text: str) -> list[Any]:
    """The objects the ``:::`` directives of one page render: each named object, and a
    named module's public members unless its options say ``members: false``."""
    objects: list[Any] = []
    for path, options in DIRECTIVE.findall(text + "\n"):
        obj = _resolve(path)
        objects.append(obj)
        if isinstance(obj, ModuleType) and not re.search(r"members:\s*false", options):
            objects += [getattr(obj, name) for name in getattr(obj, "__all__", [])]
    return objects


def missing_entries(pages: list[str]) -> list[str]:
    """The public names of ``tiered_memory`` none of these pages renders."""
    objects = [obj for text in pages for obj in rendered(text)]
    return [
        name for name in PUBLIC if not any(obj is getattr(tiered_memory, name) for obj in objects)
    ]


def _pages() -> list[str]:
    return [page.read_text() for page in REFERENCE]


def test_every_public_name_has_a_reference_entry() -> None:
    assert len(PUBLIC) >= 35  # the package's __all__ was read
    assert missing_entries(_pages()) == []


def test_the_check_sees_a_name_whose_entry_is_removed() -> None:
    """The checker above would fail: drop one class's directive, or the errors module's,
    and the names they rendered are reported."""
    pages = _pages()
    without_memory = [re.sub(r"^::: tiered_memory\.Memory\n", "", t, flags=re.M) for t in pages]
    assert without_memory != pages
    assert missing_entries(without_memory) == ["Memory"]
    without_errors = [t.replace("::: tiered_memory.errors\n", "") for t in pages]
    assert without_errors != pages
    gone = missing_entries(without_errors)
    assert "TieredMemoryError" in gone and "EmbedderError" in gone
    silenced = [
        t.replace(
            "::: tiered_memory.errors\n",
            "::: tiered_memory.errors\n    options:\n      members: false\n",
        )
        for t in pages
    ]
    assert "StorageFullError" in missing_entries(silenced)


def test_every_directive_names_something_importable() -> None:
    for page in REFERENCE:
        for path, _ in DIRECTIVE.findall(page.read_text() + "\n"):
            assert _resolve(path) is not None, f"{page.name}: ::: {path}"
