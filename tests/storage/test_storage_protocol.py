"""persistence.storage.MemoryStorage and GraphStorage: SQLiteStore and GraphStore
implement them (the store is StoreControl and holds one part per record family, each
implementing its family's Protocol), and the domain calls nothing on a store, its parts
or the graph's records that the Protocols do not list (so a second backend that
implements them is enough for the domain)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Generic, Protocol

import pytest

from persistence import (
    GraphStorage,
    Memory,
    MemoryRecords,
    MemoryStorage,
    RecallIndex,
    RepetitionSchedule,
    ScheduleRecords,
    SessionRecords,
    StoreControl,
    StoreFiles,
    Tier,
    build_backend,
)
from persistence.engine import Engine
from persistence.postgres import PostgresStore
from persistence.postgres.graph_store import pg_graph_store
from persistence.sqlite import BackupManager, IndexStore, SQLiteStore
from persistence.sqlite.graph_store import sqlite_graph_store
from persistence.stores.graph import GraphStore
from persistence.stores.graph_engine import GraphSql
from persistence.stores.memories import MemoryStore
from persistence.stores.schedules import ScheduleStore
from persistence.stores.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[2]
STORE_NAMES = {"store", "_store"}  # how the domain's classes hold their store
PART_NAMES = ("memories", "sessions", "schedules", "indexes")  # the store's parts
GRAPH_NAMES = {"records"}  # how the domain holds the graph's records
GRAPH_NAMES_IN = {"extraction.py": {"graph"}}  # ExtractionQueue.graph is the records too


def _members(protocol: type = MemoryStorage) -> dict[str, object]:
    """The Protocol's members, those it inherits from the Protocols it joins too."""
    return {
        name: value
        for base in reversed(protocol.__mro__)
        if base not in (object, Protocol, Generic)
        for name, value in vars(base).items()
        if not name.startswith("_")
    }


def _domain_modules() -> list[Path]:
    """The domain's modules, its subpackages included."""
    return sorted((ROOT / "tiered_memory").rglob("*.py"))


def _store_attributes(source: str, names: set[str] = STORE_NAMES) -> set[str]:
    """Every ``X.store.name`` / ``store.name`` / ``self._store.name`` the source uses
    (with ``names``, held under those names instead)."""
    used = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        holder = node.value
        held_as = holder.id if isinstance(holder, ast.Name) else getattr(holder, "attr", None)
        if held_as in names:
            used.add(node.attr)
    return used


def _part_attributes(source: str) -> set[tuple[str, str]]:
    """Every ``(part, name)`` of ``store.part.name`` (the store held as in
    :func:`_store_attributes`) the source uses."""
    used = set()
    for node in ast.walk(ast.parse(source)):
        part = node.value if isinstance(node, ast.Attribute) else None
        if isinstance(part, ast.Attribute) and part.attr in PART_NAMES:
            holder = part.value
            held_as = holder.id if isinstance(holder, ast.Name) else getattr(holder, "attr", None)
            if held_as in STORE_NAMES:
                used.add((part.attr, node.attr))  # type: ignore[union-attr]
    return used


def _signature_problems(protocol: type, instance: object, implementation: type) -> list[str]:
    """What ``implementation`` lacks or does differently from each of the Protocol's members."""
    problems = []
    for name, member in _members(protocol).items():
        if not hasattr(instance, name):
            problems.append(f"{name}: missing")
            continue
        if isinstance(member, property):
            continue  # an attribute or a property of the same name satisfies it
        wanted = inspect.signature(member)  # type: ignore[arg-type]
        found = inspect.signature(getattr(implementation, name))
        for parameter in wanted.parameters.values():
            other = found.parameters.get(parameter.name)
            if other is None or other.kind != parameter.kind:
                problems.append(f"{name}: parameter {parameter.name} missing or of another kind")
            elif other.default != parameter.default:
                problems.append(f"{name}: default of {parameter.name} differs")
        extra = [
            p.name
            for p in found.parameters.values()
            if p.name not in wanted.parameters and p.default is inspect.Parameter.empty
        ]
        if extra:
            problems.append(f"{name}: requires {extra} the Protocol does not pass")
    return problems


@pytest.mark.parametrize(
    ("protocol", "implementation"),
    [(MemoryStorage, SQLiteStore), (GraphStorage, GraphStore), (StoreFiles, BackupManager)],
    ids=["MemoryStorage", "GraphStorage", "StoreFiles"],
)
def test_the_sqlite_classes_have_every_member_with_a_compatible_signature(
    protocol: type, implementation: type
) -> None:
    store = SQLiteStore(":memory:")
    made = {SQLiteStore: lambda s: s, GraphStore: lambda s: sqlite_graph_store(s.engine)}
    instance = made.get(implementation, implementation)(store)
    assert isinstance(instance, protocol)
    problems = _signature_problems(protocol, instance, implementation)
    assert problems == []


FAMILIES = [
    (StoreControl, "store"),
    (MemoryRecords, "memories"),
    (SessionRecords, "sessions"),
    (ScheduleRecords, "schedules"),
    (RecallIndex, "indexes"),
]


RECORD_FAMILIES = [f for f in FAMILIES if f[1] in ("store", "memories", "sessions", "schedules")]
PART_PROTOCOLS = {part: protocol for protocol, part in FAMILIES if part != "store"}


@pytest.mark.parametrize(
    ("protocol", "part"), RECORD_FAMILIES, ids=[p.__name__ for p, _ in RECORD_FAMILIES]
)
def test_each_record_part_of_the_postgres_store_implements_its_protocol(
    protocol: type, part: str
) -> None:
    store = PostgresStore("postgresql://nobody@localhost/none")
    assert isinstance(store, MemoryStorage)
    instance = store if part == "store" else getattr(store, part)
    assert isinstance(instance, protocol)
    assert _signature_problems(protocol, instance, type(instance)) == []


@pytest.mark.parametrize(("protocol", "part"), FAMILIES, ids=[p.__name__ for p, _ in FAMILIES])
def test_each_part_of_the_store_implements_its_family_protocol(protocol: type, part: str) -> None:
    store = SQLiteStore(":memory:")
    instance = store if part == "store" else getattr(store, part)
    assert isinstance(instance, protocol)
    assert _signature_problems(protocol, instance, type(instance)) == []


def test_memory_storage_is_the_store_control_and_one_part_per_family() -> None:
    families = [set(_members(protocol)) for protocol, _ in FAMILIES]
    assert sum(len(f) for f in families) == len(set().union(*families))  # no member twice
    assert set(_members(MemoryStorage)) == set(_members(StoreControl)) | set(PART_PROTOCOLS)
    for part, protocol in PART_PROTOCOLS.items():  # each part typed by its family's Protocol
        member = _members(MemoryStorage)[part]
        assert isinstance(member, property)
        assert member.fget.__annotations__["return"] == protocol.__name__  # type: ignore[union-attr]


def test_the_backend_hands_out_the_store_s_parts() -> None:
    backend = build_backend(":memory:")
    store = backend.store
    assert isinstance(store, SQLiteStore)
    parts = (backend.memories, backend.sessions, backend.schedules, backend.indexes)
    assert parts == (store.memories, store.sessions, store.schedules, store.indexes)
    assert [type(p) for p in parts] == [MemoryStore, SessionStore, ScheduleStore, IndexStore]


def test_the_domain_calls_only_what_the_protocol_lists() -> None:
    allowed = set(_members())
    outside = {
        f"{path.name}: {name}"
        for path in _domain_modules()
        for name in _store_attributes(path.read_text())
        if name not in allowed
    }
    assert outside == set()


def test_the_domain_calls_on_each_part_only_what_its_family_protocol_lists() -> None:
    used = {
        (path.name, part, name)
        for path in _domain_modules()
        for part, name in _part_attributes(path.read_text())
    }
    assert {part for _, part, _ in used} == set(PART_PROTOCOLS)  # the check sees every part
    outside = {
        f"{module}: {part}.{name}"
        for module, part, name in used
        if name not in _members(PART_PROTOCOLS[part])
    }
    assert outside == set()


def test_the_domain_calls_only_what_the_graph_protocol_lists() -> None:
    allowed = set(_members(GraphStorage))
    outside = {
        f"{path.name}: {name}"
        for path in _domain_modules()
        for name in _store_attributes(
            path.read_text(), GRAPH_NAMES | GRAPH_NAMES_IN.get(path.name, set())
        )
        if name not in allowed
    }
    assert outside == set()
    assert "engine" in _store_attributes(
        (ROOT / "tiered_memory" / "recall" / "graph_signal.py").read_text(), GRAPH_NAMES
    )  # the check does see the recall signal's reads (in the engine's snapshot)


def _engine_attributes(source: str) -> set[str]:
    """Every ``name`` of ``store.engine.name`` / ``records.engine.name`` the source uses."""
    used = set()
    for node in ast.walk(ast.parse(source)):
        engine = node.value if isinstance(node, ast.Attribute) else None
        if isinstance(engine, ast.Attribute) and engine.attr == "engine":
            holder = engine.value
            held_as = holder.id if isinstance(holder, ast.Name) else getattr(holder, "attr", None)
            if held_as in STORE_NAMES | GRAPH_NAMES:
                used.add(node.attr)  # type: ignore[union-attr]
    return used


def test_both_engines_databases_have_every_member_of_the_engine_protocol() -> None:
    file, server = SQLiteStore(":memory:"), PostgresStore("postgresql://nobody@localhost/none")
    for engine in (file.engine, server.engine):
        assert _signature_problems(Engine, engine, type(engine)) == []


def test_the_domain_asks_the_engine_only_what_the_engine_protocol_lists() -> None:
    """The transactions' hooks, other processes' commits and snapshots are the engine's
    (``store.engine.after_commit(...)``): the domain asks for nothing else of it."""
    used = {
        (path.name, name)
        for path in _domain_modules()
        for name in _engine_attributes(path.read_text())
    }
    assert {"after_commit", "check_external_changes", "snapshot"} <= {n for _, n in used}
    outside = {f"{module}: engine.{name}" for module, name in used if name not in _members(Engine)}
    assert outside == set()


def test_the_check_sees_a_call_outside_the_protocol() -> None:
    source = "def f(self):\n    with self.store.read_connection() as c:\n        c.execute('x')\n"
    assert _store_attributes(source) == {"read_connection"}
    assert "read_connection" not in _members()
    source = "def f(self):\n    self._store.memories.put_episodic(m)\n"
    assert _part_attributes(source) == {("memories", "put_episodic")}
    assert "put_episodic" not in _members(MemoryRecords)  # the reference API is not the domain's


def test_the_domain_never_asks_which_engine_it_runs_on() -> None:
    """No isinstance/hasattr on a store's or graph's capability in the domain: where an
    engine is quicker (one round trip, a cached "no alias"), that is its implementation
    of the same Protocol call (issue 41, item 4)."""
    import persistence.storage as storage

    protocols = {
        name for name, value in vars(storage).items()
        if isinstance(value, type) and value.__module__ == storage.__name__
    }  # fmt: skip
    asked = []
    for path in _domain_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id == "isinstance" and len(node.args) == 2:
                kinds = node.args[1]
                named = [kinds, *getattr(kinds, "elts", [])]
                asked += [f"{path.name}: isinstance {n.id}" for n in named
                          if isinstance(n, ast.Name) and n.id in protocols]  # fmt: skip
            elif node.func.id == "hasattr" and len(node.args) == 2:
                holder = node.args[0]
                held = holder.id if isinstance(holder, ast.Name) else getattr(holder, "attr", None)
                if held in STORE_NAMES | GRAPH_NAMES | {"graph"}:
                    asked.append(f"{path.name}: hasattr {held}")
    assert asked == []


def test_both_engines_have_what_once_only_the_server_had() -> None:
    """``rows_per_trip`` and ``remember_new`` (SQLite: always ``None``, its
    step-by-step path is the quick one) on every store, ``may_name_entities`` on every
    graph store: the domain calls them without asking."""
    file, server = SQLiteStore(":memory:"), PostgresStore("postgresql://nobody@localhost/none")
    assert (file.rows_per_trip, server.rows_per_trip) == (20, 60)
    for graph in (sqlite_graph_store(file.engine), pg_graph_store(server.engine)):
        assert isinstance(graph, GraphStorage)
        assert _signature_problems(GraphStorage, graph, type(graph)) == []
    with file.open():
        assert sqlite_graph_store(file.engine).may_name_entities() is True
        memory = Memory.create("a fact", Tier.EPISODIC, now=1)
        schedule = RepetitionSchedule(memory.id, 2, 1)
        assert file.memories.remember_new(memory, schedule, touch_at=None, dedup=True) is None
        assert file.memories.count(Tier.EPISODIC) == 0  # nothing written


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_each_engine_s_graph_sql_has_every_function_the_shared_store_calls(engine: str) -> None:
    """The graph is written once over GraphSql: each engine's module has every builder
    and decoder under the same name with the same parameters."""
    module = importlib.import_module(f"persistence.{engine}.sql.graph_sql")

    def shape(parameters: list[inspect.Parameter]) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in parameters]

    for name, member in _members(GraphSql).items():
        assert callable(member), name
        wanted = list(inspect.signature(member).parameters.values())[1:]  # without self
        found = list(inspect.signature(getattr(module, name)).parameters.values())
        assert shape(found) == shape(wanted), name
