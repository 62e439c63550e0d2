"""persistence.storage.MemoryStorage and GraphStorage: SQLiteStore and GraphStore
implement them, and the domain calls nothing on a store or on the graph's records that
the Protocols do not list (so a second backend that implements them is enough for the
domain)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from persistence import GraphStorage, MemoryStorage
from persistence.sqlite import GraphStore, SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
STORE_NAMES = {"store", "_store"}  # how the domain's classes hold their store
GRAPH_NAMES = {"records"}  # how the domain holds the graph's records
GRAPH_NAMES_IN = {"extraction.py": {"graph"}}  # ExtractionQueue.graph is the records too


def _members(protocol: type = MemoryStorage) -> dict[str, object]:
    return {name: value for name, value in vars(protocol).items() if not name.startswith("_")}


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


@pytest.mark.parametrize(
    ("protocol", "implementation"),
    [(MemoryStorage, SQLiteStore), (GraphStorage, GraphStore)],
    ids=["MemoryStorage", "GraphStorage"],
)
def test_the_sqlite_classes_have_every_member_with_a_compatible_signature(
    protocol: type, implementation: type
) -> None:
    store = SQLiteStore(":memory:")
    instance = store if implementation is SQLiteStore else GraphStore(store)
    assert isinstance(instance, protocol)
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
    assert problems == []


def test_the_domain_calls_only_what_the_protocol_lists() -> None:
    allowed = set(_members())
    outside = {
        f"{path.name}: {name}"
        for path in sorted((ROOT / "tiered_memory").rglob("*.py"))
        for name in _store_attributes(path.read_text())
        if name not in allowed
    }
    assert outside == set()


def test_the_domain_calls_only_what_the_graph_protocol_lists() -> None:
    allowed = set(_members(GraphStorage))
    outside = {
        f"{path.name}: {name}"
        for path in sorted((ROOT / "tiered_memory").rglob("*.py"))
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
