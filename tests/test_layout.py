"""The arrows of the layout: tiered_memory -> persistence (through its package exports
only) -> migrations (its runner only); none back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(package: str, *, names: bool = False) -> list[tuple[str, str]]:
    """``(file name, imported module)`` for every import in ``package``'s modules (with
    ``names``, also ``module.name`` for each name a ``from`` import takes)."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):  # subpackages (integrations) too
        name = str(path.relative_to(ROOT / package))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found += [(name, node.module)]
                if names:
                    found += [(name, f"{node.module}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                found += [(name, a.name) for a in node.names]
    return found


def test_the_domain_imports_only_what_persistence_exports() -> None:
    private = [(f, m) for f, m in _imports("tiered_memory") if m.startswith("persistence.")]
    assert private == []


@pytest.mark.slow
def test_persistence_never_imports_the_domain() -> None:
    assert [(f, m) for f, m in _imports("persistence") if m.startswith("tiered_memory")] == []


def test_runtime_code_imports_no_migration_module() -> None:
    versions = [
        (f, m)
        for package in ("persistence", "tiered_memory")
        for f, m in _imports(package, names=True)
        if m.startswith("migrations.v0")
    ]
    assert versions == []


def test_the_domain_runs_no_sql_and_holds_no_connection() -> None:
    """SQL lives in persistence's ``*_sql`` modules, behind the storage Protocols: the
    domain names none of them and never imports the SQLite driver."""
    found = []
    for path in sorted((ROOT / "tiered_memory").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            named = (
                [node.id] if isinstance(node, ast.Name)
                else [node.attr] if isinstance(node, ast.Attribute)
                else [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom)
                else []
            )  # fmt: skip
            found += [
                f"{path.name}: {n}"
                for n in named
                if n.endswith("_sql") or n.split(".")[0] in {"apsw", "sqlite3", "sqlite_vec"}
            ]
    assert found == []


def test_the_manager_gets_its_storage_from_build_backend() -> None:
    """The SQLite classes are named in one place for the domain (persistence.backend);
    only the CLI's file commands (check a file opens, migrate it) name SQLiteStore."""
    sqlite_classes = {"SQLiteStore", "GraphStore", "BackupManager", "Database"}
    named = sorted(
        f"{path.name}: {node.id}"
        for path in sorted((ROOT / "tiered_memory").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Name) and node.id in sqlite_classes and path.name != "cli.py"
    )
    assert named == []
    manager = (ROOT / "tiered_memory" / "manager.py").read_text()
    assert "build_backend(" in manager
