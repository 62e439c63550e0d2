"""The manager's parts a caller reaches through it (``memory.graph``, ``memory.notes``,
``memory.scratchpad``) driven with wrong types, unknown keywords and surplus arguments:
each call raises a :class:`TieredMemoryError` subclass (never a builtin error) and leaves
the file's bytes as they were. The methods are found by introspection, so one added
later is driven too (``tests/domain/test_bad_arguments.py`` does the same for the manager)."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import InvalidInputError, TieredMemoryError
from tiered_memory import AgentMemoryManager

pytestmark = pytest.mark.property

PARTS = ("graph", "notes", "scratchpad")
WRONG = st.one_of(
    st.builds(object),
    st.binary(min_size=1, max_size=3),
    st.complex_numbers(min_magnitude=1, allow_nan=False, allow_infinity=False),
    st.lists(st.builds(object), min_size=1, max_size=2),
    st.dictionaries(st.integers(), st.builds(object), min_size=1, max_size=2),
)
"""Values no parameter of these methods takes."""


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for part in (path, Path(f"{path}-wal")):
        h.update(part.read_bytes() if part.exists() else b"<absent>")
    return h.hexdigest()


class _World:
    def __init__(self, folder: Path) -> None:
        self.path = folder / "facades.db"
        self.memory = AgentMemoryManager.open(self.path, embedder=None)
        m = self.memory
        self.first = m.remember("Ann works at Acme", relations=[("Ann", "works_at", "Acme")])
        self.note = m.notes.create("Plan", "the plan")
        m.remember("a scratch note", "scratchpad", key="k")
        m.flush()
        rel = m.graph.relations("Ann")[0].id
        self.valid: dict[str, Any] = {
            "entity": "Ann", "subject": "Ann", "object": "Acme", "predicate": "works_at",
            "name": "Ann", "keep": "Ann", "drop": "Acme", "start": "Ann", "end": "Acme",
            "relation": rel, "relations": [rel], "note_id": self.note.id, "title": "T",
            "content": "c", "key": "k", "memory_id": self.first.id, "memory_ids": [],
            "reason": "why", "target": self.first.id, "kind": "memory",
        }  # fmt: skip

    def part(self, name: str) -> Any:
        return getattr(self.memory, name)

    def call(self, part: str, method: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        before = _digest(self.path)
        with pytest.raises(TieredMemoryError) as raised:
            getattr(self.part(part), method)(*args, **kwargs)
        assert _digest(self.path) == before, f"{part}.{method} changed the file"
        assert raised.value is not None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_World]:
    made = _World(tmp_path_factory.mktemp("facades"))
    yield made
    made.memory.close()


def _signatures() -> dict[tuple[str, str], inspect.Signature]:
    with AgentMemoryManager.in_memory(embedder=None) as memory:
        return {
            (part, name): inspect.signature(value)
            for part in PARTS
            for name, value in inspect.getmembers(getattr(memory, part), inspect.ismethod)
            if not name.startswith("_")
        }


SIGNATURES = _signatures()


def _parameters(world: _World, part: str, method: str) -> list[inspect.Parameter]:
    signature = inspect.signature(getattr(world.part(part), method))
    return list(signature.parameters.values())


def _required(world: _World, params: list[inspect.Parameter]) -> list[Any]:
    return [
        world.valid.get(p.name, "x")
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]


@pytest.mark.parametrize(("part", "method"), sorted(SIGNATURES))
def test_an_unknown_keyword_or_a_surplus_argument_is_a_typed_error(
    world: _World, part: str, method: str
) -> None:
    params = _parameters(world, part, method)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        world.call(part, method, _required(world, params), {"nope": 1})
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        surplus = [world.valid.get(p.name, "x") for p in positional] + ["surplus"]
        with pytest.raises(InvalidInputError):
            getattr(world.part(part), method)(*surplus)


_CASES = sorted(
    (part, method, p.name)
    for (part, method), signature in SIGNATURES.items()
    for p in signature.parameters.values()
    if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
)


@pytest.mark.slow  # 6.1 s measured on a busy machine
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(_CASES), data=st.data())
def test_a_wrong_type_for_any_parameter_is_a_typed_error_and_writes_nothing(
    world: _World, case: tuple[str, str, str], data: st.DataObject
) -> None:
    part, method, parameter = case
    bad = data.draw(WRONG, label=f"{part}.{method}({parameter}=...)")
    params = _parameters(world, part, method)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.name == parameter:
            if p.kind is p.POSITIONAL_ONLY:
                args.append(bad)
            else:
                kwargs[p.name] = bad
        elif p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            value = world.valid.get(p.name, "x")
            if kwargs:
                kwargs[p.name] = value
            else:
                args.append(value)
    world.call(part, method, args, kwargs)
