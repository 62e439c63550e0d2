"""The arrows of the layout: tiered_memory -> persistence (through its package exports
only) -> migrations (its runners only); none back."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's syntax tree, parsed and walked once per session: the
    tests below read the same few hundred files many times (parsing was their cost)."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def _imports(package: str, *, names: bool = False) -> list[tuple[str, str]]:
    """``(file name, imported module)`` for every import in ``package``'s modules (with
    ``names``, also ``module.name`` for each name a ``from`` import takes)."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):  # subpackages (integrations) too
        name = str(path.relative_to(ROOT / package))
        for node in _nodes(path):
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


def test_persistence_never_imports_the_domain() -> None:
    assert [(f, m) for f, m in _imports("persistence") if m.startswith("tiered_memory")] == []


_VERSION_MODULE = re.compile(r"^migrations\.(?:\w+\.)?v\d{3}_")


def test_runtime_code_imports_no_migration_module() -> None:
    """The frozen modules of either chain are history: the runtime takes only a runner."""
    versions = [
        (f, m)
        for package in ("persistence", "tiered_memory")
        for f, m in _imports(package, names=True)
        if _VERSION_MODULE.match(m)
    ]
    assert versions == []
    assert _VERSION_MODULE.match("migrations.sqlite.v008_keyword_window_order")
    assert _VERSION_MODULE.match("migrations.postgres.v004_row_level_security")


def test_the_domain_runs_no_sql_and_holds_no_connection() -> None:
    """SQL lives in persistence's ``*_sql`` modules, behind the storage Protocols: the
    domain names none of them and never imports the SQLite driver."""
    found = []
    for path in sorted((ROOT / "tiered_memory").rglob("*.py")):
        for node in _nodes(path):
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
        for node in _nodes(path)
        if isinstance(node, ast.Name) and node.id in sqlite_classes and path.name != "cli.py"
    )
    assert named == []
    manager = (ROOT / "tiered_memory" / "manager.py").read_text()
    assert "build_backend(" in manager


# --- rooms (issue 26): no circles, the driver in one room, a narrow top level ----------

PACKAGES = ("tiered_memory", "persistence", "migrations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """``module -> modules of the project it imports``, every import counted (function
    level and ``TYPE_CHECKING`` ones too: a circle drawn there is still a circle)."""
    paths = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _nodes(path):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                           for a in node.names]  # fmt: skip
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                found = known(target) if target.split(".")[0] in PACKAGES else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_anywhere() -> None:
    assert _circles(_import_graph()) == []


def test_the_circle_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert "tiered_memory.manager" in _import_graph()["tiered_memory"]


DRIVERS = {
    "sqlite": {"apsw", "sqlite3", "sqlite_vec"},
    "postgres": {"psycopg", "psycopg_pool", "pgvector"},
}


def _driver_imports_outside_their_engine() -> list[str]:
    """Each engine's driver imported anywhere in production code but its two rooms,
    ``persistence/<engine>/`` and ``migrations/<engine>/`` (tests and benchmarks aside)."""
    return sorted(
        f"{package}/{f}: {m}"
        for package in PACKAGES
        for f, m in _imports(package)
        for engine, drivers in DRIVERS.items()
        if m.split(".")[0] in drivers
        and not (package in ("persistence", "migrations") and f.startswith(f"{engine}/"))
    )


def test_each_driver_is_imported_only_in_its_engines_rooms() -> None:
    assert _driver_imports_outside_their_engine() == []


def test_the_driver_check_sees_the_drivers_where_they_are() -> None:
    found = {
        (package, f.split("/")[0], m.split(".")[0])
        for package in ("persistence", "migrations")
        for f, m in _imports(package)
    }
    assert ("persistence", "sqlite", "apsw") in found
    assert ("migrations", "sqlite", "apsw") in found
    assert ("persistence", "postgres", "psycopg") in found


def test_the_contract_names_no_engine() -> None:
    """persistence's top level and its formats import no engine; only build_backend (and
    the package's own re-exports of it) picks one."""
    engine = sorted(
        f"{f}: {m}"
        for f, m in _imports("persistence")
        if m.startswith("persistence.sqlite") and not f.startswith("sqlite/")
        and f not in ("backend.py",)
    )  # fmt: skip
    assert engine == []


def test_the_top_level_holds_what_a_user_imports() -> None:
    import tiered_memory
    from tiered_memory import errors

    names = tiered_memory.__all__
    assert len(names) <= 40 and len(set(names)) == len(names)
    for name in names:
        assert getattr(tiered_memory, name) is not None
    assert {"AgentMemoryManager", "MemoryConfig", "Memory", "TieredMemoryError"} <= set(names)
    assert not any(name.startswith("require_") for name in names)  # helpers stay inside
    every_error = {n for n in errors.__all__}
    assert all(issubclass(getattr(errors, n), errors.TieredMemoryError) for n in every_error)


def _classes() -> list[tuple[int, str]]:
    return [
        (node.end_lineno - node.lineno + 1, f"{path.relative_to(ROOT)}: {node.name}")
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in _nodes(path)
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    ]


def test_no_class_is_over_500_lines() -> None:
    assert sorted(c for c in _classes() if c[0] > 500) == []


# --- SQL built apart from running it --------------------------------------------------

_CONNECTION_NAMES = {"conn", "connection", "cur", "cursor", "db"}
_RUNNING_CALLS = {"execute", "executemany", "cursor", "fetchone", "fetchall", "changes"}


def _running_code(source: str) -> list[str]:
    """Where a module's code takes a connection or runs SQL: each function with a
    connection parameter, each call of a driver's running method."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            taken = [a.arg for a in args if a.arg in _CONNECTION_NAMES]
            if taken:
                found.append(f"{node.name}({', '.join(taken)})")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _RUNNING_CALLS
        ):
            found.append(f"line {node.lineno}: .{node.func.attr}()")
    return found


def test_engine_sql_modules_only_build_statements() -> None:
    """An engine's ``sql/`` modules build :class:`persistence.statements.Statement`s and
    decode rows; the stores run them (the issue's ``(sql, params)`` builders)."""
    running = {
        str(path.relative_to(ROOT)): _running_code(path.read_text())
        for path in sorted(ROOT.glob("persistence/*/sql/*.py"))
    }
    assert {module: where for module, where in running.items() if where} == {}


def test_the_builder_check_sees_running_code() -> None:
    assert _running_code("def f(conn, x):\n    return x\n") == ["f(conn)"]
    assert _running_code("X = 1\ndef g(x):\n    return q.execute('SELECT 1')\n") == [
        "line 3: .execute()"
    ]
    assert _running_code("def h(memory_id: str) -> tuple:\n    return ('SELECT 1', ())\n") == []


def test_the_shared_stores_run_sql_only_through_statements() -> None:
    """The stores and the transfer, written once for both engines, call no driver: they
    run built statements with :mod:`persistence.statements`."""
    shared = sorted(
        [*ROOT.glob("persistence/stores/*.py"), *ROOT.glob("persistence/transfer/*.py")]
    )
    assert len(shared) >= 20
    calls = {
        str(path.relative_to(ROOT)): [
            w for w in _running_code(path.read_text()) if " line" in f" {w}"
        ]
        for path in shared
    }
    assert {module: where for module, where in calls.items() if where} == {}
