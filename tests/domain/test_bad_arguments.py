"""Every public method of the manager, driven with wrong types and values: each call
raises a :class:`TieredMemoryError` subclass (never a builtin error) and leaves the
database file's bytes exactly as they were.

The methods are found by introspection, so a method added later is driven too: with an
unknown keyword and a surplus positional argument always, and with the bad values of
:data:`BAD` for each parameter whose name is listed there.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import InvalidInputError, TieredMemoryError
from tiered_memory import AgentMemoryManager
from tiered_memory.aio import AsyncAgentMemoryManager

pytestmark = pytest.mark.property

_NOT_STR = st.one_of(
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(min_size=1, max_size=4),
    st.lists(st.text(max_size=3), max_size=2),
    st.builds(object),
)
_NOT_BOOL = st.one_of(st.integers(), st.text(max_size=3), st.floats())
_BLANK = st.text(alphabet=" \t\n\r\u3000\xa0\u2028", max_size=6)
_NOT_UNIT = st.one_of(
    st.floats().filter(lambda x: not 0.0 <= x <= 1.0),
    st.integers().filter(lambda x: not 0 <= x <= 1),
    st.text(max_size=4),
    st.booleans(),
)
_NOT_POSITIVE_INT = st.one_of(
    st.integers(max_value=-1), st.text(max_size=3), st.floats(), st.booleans()
)
_NOT_PATH = st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.builds(object))
_TIERS = {"scratchpad", "episodic", "semantic"}

BAD: dict[str, st.SearchStrategy[Any]] = {
    "memory_id": _NOT_STR,
    "other_id": st.one_of(_NOT_STR, st.none()),
    "session_id": _NOT_STR,
    "agent_id": _NOT_STR,
    "role": st.one_of(_NOT_STR, st.none()),
    "reason": _NOT_STR,
    "speaker": _NOT_STR,
    "category": _NOT_STR,
    "key": _NOT_STR.filter(lambda v: not isinstance(v, bytes)),  # a cipher key may be bytes
    "query": st.one_of(_NOT_STR, st.none()),
    "content": st.one_of(_NOT_STR, _BLANK),
    "importance": _NOT_UNIT,
    "min_retention": _NOT_UNIT,
    "tags": st.one_of(
        st.text(min_size=1, max_size=4),
        st.lists(st.integers(), min_size=1, max_size=2),
        st.lists(st.just(""), min_size=1, max_size=2),
        st.integers(),
    ),
    "metadata": st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=3), st.integers()),
    "tier": st.one_of(st.text(max_size=8).filter(lambda t: t not in _TIERS), st.integers()),
    "to_tier": st.one_of(st.text(max_size=8).filter(lambda t: t not in _TIERS), st.none()),
    "k": _NOT_POSITIVE_INT,
    "limit": _NOT_POSITIVE_INT,
    "batch_size": _NOT_POSITIVE_INT,
    "keep": _NOT_POSITIVE_INT,
    "quality": st.one_of(
        st.integers().filter(lambda q: not 0 <= q <= 5), st.text(max_size=2), st.floats()
    ),
    "before": st.one_of(st.text(max_size=3), st.floats(), st.lists(st.integers(), max_size=1)),
    "created_after": st.one_of(st.text(max_size=3), st.floats()),
    "created_before": st.one_of(st.text(max_size=3), st.floats()),
    "relative_cut": st.one_of(
        st.floats().filter(lambda x: not 0.0 <= x <= 1.0), st.text(max_size=3), st.booleans()
    ),
    "min_score": st.one_of(st.text(max_size=3), st.floats(allow_nan=True).filter(math.isnan)),
    "dedup": _NOT_BOOL,
    "overwrite": _NOT_BOOL,
    "vacuum": _NOT_BOOL,
    "allow_plaintext": _NOT_BOOL,
    "refuse_secrets": _NOT_BOOL,
    "embedding": st.one_of(
        st.text(min_size=1, max_size=3),
        st.lists(st.text(max_size=2), min_size=1, max_size=3),
        st.just([math.nan] * 3),
    ),
    "entities": st.one_of(st.integers(), st.lists(st.integers(), min_size=1, max_size=2)),
    "relations": st.one_of(st.integers(), st.lists(st.integers(), min_size=1, max_size=2)),
    "progress": st.one_of(st.integers(), st.text(max_size=3)),
    "mode": st.text(max_size=8).filter(lambda m: m not in {"replace", "merge"}),
    "target": _NOT_PATH,
    "source": _NOT_PATH,
    "path": _NOT_PATH,
    "new_key": _NOT_PATH,
    "records": st.one_of(
        st.text(max_size=4),
        st.integers(),
        st.lists(_BLANK, min_size=1, max_size=2),
        st.lists(st.integers(), min_size=1, max_size=2),
    ),
}
"""Values no method takes for a parameter of that name (every method that has one)."""


def _own_names(cls: type) -> set[str]:
    """Public names of ``cls`` and of the library's classes it inherits from (the
    manager's ``*Calls`` parts: ``forget``, ``timeline``, ``start_session``, ...)."""
    return {
        name
        for owner in cls.__mro__
        if owner.__module__.startswith("tiered_memory")
        for name in vars(owner)
        if not name.startswith("_")
    }


def _methods() -> list[str]:
    return sorted(
        name
        for name in _own_names(AgentMemoryManager)
        if callable(getattr(AgentMemoryManager, name))
    )


def _digest(path: Path) -> str:
    """The bytes of the database and its WAL (the shared-memory index is not content)."""
    h = hashlib.sha256()
    for part in (path, Path(f"{path}-wal")):
        h.update(part.read_bytes() if part.exists() else b"<absent>")
    return h.hexdigest()


class _World:
    """One file with a memory or two, a session and a scratchpad entry, shared by all
    examples (every call must fail, so it stays as it is)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "bad-arguments.db"
        self.memory = AgentMemoryManager.open(self.path, embedder=None, extractor=None)
        m = self.memory
        self.session = m.start_session("s1").session_id
        self.first = m.remember("Alice prefers green tea in the morning", session_id=self.session)
        self.second = m.remember("Bob keeps a bicycle in the hall")
        m.remember("a scratch note", "scratchpad", key="note")
        m.append_transcript(self.session, "user", "hello there")
        m.flush()
        self.valid: dict[str, Callable[[], Any]] = {
            "memory_id": lambda: self.first.id,
            "other_id": lambda: self.second.id,
            "content": lambda: "a fresh and valid text",
            "query": lambda: "green tea",
            "session_id": lambda: self.session,
            "role": lambda: "user",
            "to_tier": lambda: "semantic",
            "quality": lambda: 4,
            "records": lambda: ["a valid record"],
            "path": lambda: self.path,
        }

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> BaseException:
        before = _digest(self.path)
        try:
            result = getattr(self.memory, name)(*args, **kwargs)
            if name in {"transaction"}:
                result.__enter__()
        except BaseException as exc:  # noqa: BLE001 - the assertion below is the point
            raised: BaseException = exc
        else:
            if isinstance(result, AgentMemoryManager):
                result.close()
            raise AssertionError(f"{name}(*{args!r}, **{kwargs!r}) did not fail: {result!r}")
        assert _digest(self.path) == before, f"{name}(*{args!r}, **{kwargs!r}) changed the file"
        assert isinstance(raised, TieredMemoryError), (
            f"{name}(*{args!r}, **{kwargs!r}) raised {type(raised).__name__}: {raised}"
        )
        return raised


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    made = _World(tmp_path_factory.mktemp("bad-arguments"))
    yield made
    made.memory.close()


def _parameters(name: str) -> list[inspect.Parameter]:
    signature = inspect.signature(getattr(AgentMemoryManager, name))
    return [p for p in signature.parameters.values() if p.name not in {"self", "cls"}]


def _required_args(world: _World, params: list[inspect.Parameter]) -> tuple[list[Any], bool]:
    """Valid values of the required positional parameters, and whether all were known."""
    values = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            if p.name not in world.valid:
                return values, False
            values.append(world.valid[p.name]())
    return values, True


@pytest.mark.parametrize("name", _methods())
def test_an_unknown_keyword_or_a_surplus_argument_is_a_typed_error(
    world: _World, name: str
) -> None:
    params = _parameters(name)
    required, _ = _required_args(world, params)
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        error = world.call(name, tuple(required), {"nope": 1})
        assert isinstance(error, InvalidInputError) and "nope" in str(error)
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        surplus = [world.valid.get(p.name, lambda: None)() for p in positional] + ["surplus"]
        assert isinstance(world.call(name, tuple(surplus), {}), InvalidInputError)


_CASES = sorted(
    (name, p.name)
    for name in _methods()
    for p in _parameters(name)
    if p.name in BAD and p.kind is not p.VAR_KEYWORD
)


@pytest.mark.slow  # 7.2 s measured on a busy machine
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(_CASES), data=st.data())
def test_every_bad_value_of_every_parameter_is_a_typed_error_and_writes_nothing(
    world: _World, case: tuple[str, str], data: st.DataObject
) -> None:
    name, parameter = case
    bad = data.draw(BAD[parameter], label=f"{name}({parameter}=...)")
    params = _parameters(name)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.name == parameter:
            if p.kind is p.POSITIONAL_ONLY:
                args.append(bad)
            else:
                kwargs[p.name] = bad
        elif p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if p.name not in world.valid:
                return  # no safe valid value for another required parameter
            if kwargs:
                kwargs[p.name] = world.valid[p.name]()
            else:
                args.append(world.valid[p.name]())
    world.call(name, tuple(args), kwargs)


def test_the_issue_examples(world: _World) -> None:
    m = world.memory
    for call in (
        lambda: m.remember("x", importance="high"),
        lambda: m.recall("tea", nope=1),
        lambda: m.query(nope=1),
        lambda: m.remember("   "),
        lambda: m.update(world.first.id, content=" \n"),
        lambda: m.remember_many(["fine", "\t"]),
    ):
        before = _digest(world.path)
        with pytest.raises(InvalidInputError):
            call()
        assert _digest(world.path) == before


def test_the_async_facade_raises_the_same_typed_errors(tmp_path: Path) -> None:
    path = tmp_path / "async.db"

    async def main() -> None:
        async with await AsyncAgentMemoryManager.open(path, embedder=None) as memory:
            kept = await memory.remember("a memory worth keeping")
            before = _digest(path)
            for call in (
                lambda: memory.remember("x", importance="high"),
                lambda: memory.recall("tea", nope=1),
                lambda: memory.remember("  "),
                lambda: memory.update(kept.id, content=""),
                lambda: memory.review(kept.id, "5"),
            ):
                with pytest.raises(InvalidInputError):
                    await call()
            for name in _async_methods():  # every coroutine: an unknown keyword (or none)
                with pytest.raises(InvalidInputError):
                    result = getattr(memory, name)(nope=1)
                    if inspect.isawaitable(result):
                        await result
            assert _digest(path) == before

    asyncio.run(main())


def _async_methods() -> list[str]:
    """The async manager's public methods that take no arbitrary keywords."""
    found = []
    for name, value in vars(AsyncAgentMemoryManager).items():
        target = value.__func__ if isinstance(value, classmethod) else value
        if name.startswith("_") or not callable(target):
            continue
        params = inspect.signature(target).parameters.values()
        if not any(p.kind is p.VAR_KEYWORD for p in params) or name in _MANAGER_DELEGATES:
            found.append(name)
    return sorted(found)


_MANAGER_DELEGATES = frozenset(_own_names(AgentMemoryManager)) - {"open", "in_memory", "query"}
"""Coroutines made from the manager's methods take ``**kwargs`` and pass them on: the
manager refuses an unknown one (``query`` takes filters as keywords)."""


def test_a_path_under_an_unknown_users_home_is_a_missing_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``~nosuchuser/m.db``: Python's expanduser raises RuntimeError (found by
    benchmarks/fuzz.py through `tiered-memory salvage`); the path stays as written, as a
    shell leaves it, and the open names the missing folder, creating nothing."""
    from persistence import MissingDirectoryError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(MissingDirectoryError, match="~no-such-user-here"):
        AgentMemoryManager.open("~no-such-user-here/m.db", embedder=None)
    assert list(tmp_path.iterdir()) == []
