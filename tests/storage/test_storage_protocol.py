"""persistence.storage.MemoryStorage and GraphStorage: SQLiteStore and GraphStore
implement them (and each part of SQLiteStore its record family's Protocol), and the
domain calls nothing on a store or on the graph's records that the Protocols do not list
(so a second backend that implements them is enough for the domain)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Generic, Protocol

import pytest

from persistence import (
    EntityPresence,
    GraphStorage,
    MemoryRecords,
    MemoryStorage,
    RecallIndex,
    ScheduleRecords,
    SessionRecords,
    StoreControl,
    StoreFiles,
    build_backend,
)
from persistence.postgres import PostgresStore
from persistence.sqlite import (
    BackupManager,
    GraphStore,
    IndexStore,
    MemoryStore,
    ScheduleStore,
    SessionStore,
    SQLiteStore,
)

ROOT = Path(__file__).resolve().parents[2]
STORE_NAMES = {"store", "_store"}  # how the domain's classes hold their store
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
    instance = store if implementation is SQLiteStore else implementation(store)
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


RECORD_FAMILIES = [f for f in FAMILIES if f[1] in ("memories", "sessions", "schedules")]


@pytest.mark.parametrize(
    ("protocol", "part"), RECORD_FAMILIES, ids=[p.__name__ for p, _ in RECORD_FAMILIES]
)
def test_each_record_part_of_the_postgres_store_implements_its_protocol(
    protocol: type, part: str
) -> None:
    instance = getattr(PostgresStore("postgresql://nobody@localhost/none"), part)
    assert isinstance(instance, protocol)
    assert _signature_problems(protocol, instance, type(instance)) == []


@pytest.mark.parametrize(("protocol", "part"), FAMILIES, ids=[p.__name__ for p, _ in FAMILIES])
def test_each_part_of_the_store_implements_its_family_protocol(protocol: type, part: str) -> None:
    store = SQLiteStore(":memory:")
    instance = store if part == "store" else getattr(store, part)
    assert isinstance(instance, protocol)
    assert _signature_problems(protocol, instance, type(instance)) == []


def test_memory_storage_is_exactly_the_families_together() -> None:
    families = [set(_members(protocol)) for protocol, _ in FAMILIES]
    assert sum(len(f) for f in families) == len(set().union(*families))  # no member twice
    assert set().union(*families) == set(_members(MemoryStorage))
    assert not set(vars(MemoryStorage)).intersection(_members(MemoryStorage))  # adds nothing


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


def test_the_domain_calls_only_what_the_graph_protocol_lists() -> None:
    # and the optional capability the recall signal checks with isinstance first
    allowed = set(_members(GraphStorage)) | set(_members(EntityPresence))
    outside = {
        f"{path.name}: {name}"
        for path in _domain_modules()
        for name in _store_attributes(
            path.read_text(), GRAPH_NAMES | GRAPH_NAMES_IN.get(path.name, set())
        )
        if name not in allowed
    }
    assert outside == set()
    assert "snapshot" in _store_attributes(
        (ROOT / "tiered_memory" / "recall" / "graph_signal.py").read_text(), GRAPH_NAMES
    )  # the check does see the recall signal's reads


def test_the_check_sees_a_call_outside_the_protocol() -> None:
    source = "def f(self):\n    with self.store.read_connection() as c:\n        c.execute('x')\n"
    assert _store_attributes(source) == {"read_connection"}
    assert "read_connection" not in _members()
