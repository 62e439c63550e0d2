"""TieredMemoryStore: LangGraph's BaseStore over a memory file, checked against LangGraph's
own InMemoryStore, used by a real StateGraph in two processes."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from persistence import InvalidInputError, InvalidTypeError, Tier
from tiered_memory import AgentMemoryManager
from tiered_memory.integrations.langgraph import TieredMemoryStore, TieredSearchItem

ROOT = Path(__file__).resolve().parents[2]


class TickingClock:
    """One millisecond later at every call: no two writes share an ``updated_at``."""

    def __init__(self) -> None:
        self.ticks = itertools.count(1_700_000_000_000)

    def __call__(self) -> int:
        return next(self.ticks)


class Reference(InMemoryStore):
    """InMemoryStore minus one quirk: a get on a missing namespace creates it empty (a
    defaultdict), and emptied namespaces stay listed. Stores backed by a database list
    only namespaces holding items; so does this one."""

    def _handle_list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        for namespace in [ns for ns, items in self._data.items() if not items]:
            del self._data[namespace]
        return super()._handle_list_namespaces(op)


@pytest.fixture
def store(any_store: str) -> Iterator[TieredMemoryStore]:
    """A store in RAM, on a file, on a PostgreSQL database."""
    with TieredMemoryStore.open(any_store, embedder=None) as opened:
        yield opened


LABELS = st.sampled_from(["a", "b"])  # few names: items collide, get rewritten, deleted
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
PREFIXES = st.lists(LABELS, min_size=0, max_size=2).map(tuple)
KEYS = st.sampled_from(["k1", "k2"])
VALUES = st.fixed_dictionaries(
    {"color": st.sampled_from(["red", "blue"]), "n": st.integers(0, 5)},
    optional={"meta": st.fixed_dictionaries({"x": st.integers(0, 2)}), "words": st.just("hi")},
)
FILTERS = st.one_of(
    st.none(),
    st.fixed_dictionaries({"color": st.sampled_from(["red", "blue"])}),
    st.builds(lambda n: {"n": {"$gt": n}}, st.integers(0, 5)),
    st.builds(
        lambda n, c: {"n": {"$lte": n}, "color": {"$ne": c}},
        st.integers(0, 5),
        st.sampled_from(["red", "blue"]),
    ),  # fmt: skip
    st.builds(lambda x: {"meta": {"x": x}}, st.integers(0, 2)),
)
PUT = st.builds(lambda ns, k, v: ("put", PutOp(ns, k, v)), NAMESPACES, KEYS, VALUES)
DELETE = st.builds(lambda ns, k: ("put", PutOp(ns, k, None)), NAMESPACES, KEYS)
GET = st.builds(lambda ns, k: ("get", GetOp(ns, k)), NAMESPACES, KEYS)
SEARCH = st.builds(
    lambda p, f, lim, off: ("search", SearchOp(p, f, lim, off)),
    PREFIXES, FILTERS, st.integers(1, 6), st.integers(0, 3),
)  # fmt: skip
CONDITION_PATHS = st.lists(st.one_of(LABELS, st.just("*")), min_size=1, max_size=2).map(tuple)
LIST = st.builds(
    lambda pre, suf, depth, lim, off: (
        "list",
        ListNamespacesOp(
            tuple([MatchCondition("prefix", pre)] if pre else [])
            + tuple([MatchCondition("suffix", suf)] if suf else []),
            depth, lim, off,
        ),
    ),
    st.none() | CONDITION_PATHS, st.none() | CONDITION_PATHS, st.none() | st.integers(1, 3),
    st.integers(1, 10), st.integers(0, 2),
)  # fmt: skip
OPS = st.one_of(PUT, PUT, DELETE, GET, SEARCH, LIST)


def _triple(item: Any) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def _emptied(location: str) -> AgentMemoryManager:
    """A manager on ``location`` holding no memory (one PostgreSQL database serves every
    example of a property test: what an earlier example left is forgotten first)."""
    if location == ":memory:":
        return AgentMemoryManager.in_memory(embedder=None, clock=TickingClock())
    memory = AgentMemoryManager.open(location, embedder=None, clock=TickingClock())
    left = [m.id for m in memory.query(None, limit=None)]
    if left:
        memory.forget_many(left)
    return memory


@pytest.mark.slow
@pytest.mark.property
@pytest.mark.parametrize("any_store", ["memory", "postgres"], indirect=True)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batches=st.lists(st.lists(OPS, min_size=1, max_size=3), min_size=1, max_size=20))
def test_same_results_as_langgraphs_in_memory_store(
    any_store: str, batches: list[list[tuple[str, Op]]]
) -> None:
    reference = Reference()
    written: dict[tuple[tuple[str, ...], str], int] = {}  # item -> when last written
    clock = itertools.count()
    with _emptied(any_store) as memory:
        store = TieredMemoryStore(memory)
        for batch in batches:
            ops = [op for _, op in batch]
            # search pages are compared against the reference's full match in the
            # documented order (most recently written first)
            full = [
                op._replace(limit=1000, offset=0) if isinstance(op, SearchOp) else op for op in ops
            ]
            expected = reference.batch(full)
            got = store.batch(ops)
            for (kind, op), want, have in zip(batch, expected, got, strict=True):
                if kind == "get":
                    assert _triple(have) == _triple(want), op
                elif kind == "search":
                    assert isinstance(op, SearchOp)
                    ordered = sorted(want, key=lambda i: -written[(i.namespace, i.key)])
                    page = ordered[op.offset : op.offset + op.limit]
                    assert [_triple(i) for i in have] == [_triple(i) for i in page], op
                elif kind == "list":
                    assert have == want, op
                else:
                    assert have is None
            for op in ops:
                if isinstance(op, PutOp):
                    written[(op.namespace, op.key)] = next(clock)


def test_query_search_is_recall_with_explanations(store: TieredMemoryStore) -> None:
    store.put(("docs", "u1"), "a", {"text": "Python tutorial for beginners", "kind": "guide"})
    store.put(("docs", "u1"), "b", {"text": "TypeScript handbook", "kind": "guide"})
    store.put(("docs", "u2"), "c", {"text": "Python packaging notes", "kind": "note"})
    store.put(("docs", "u1"), "hidden", {"text": "Python secrets"}, index=False)
    store.put(("other",), "d", {"text": "Python elsewhere"})
    hits = store.search(("docs",), query="python", limit=5)
    assert {h.key for h in hits} == {"a", "c"}  # not the unindexed one, nor outside docs
    assert all(isinstance(h, TieredSearchItem) and h.explanation is not None for h in hits)
    assert all(h.score is not None and h.score > 0 for h in hits)
    assert "keyword" in str(hits[0].explanation)
    only = store.search(("docs",), query="python", filter={"kind": "note"})
    assert [h.key for h in only] == ["c"]
    fields = store.search(("docs", "u1"), query="beginners")
    assert [h.key for h in fields] == ["a"]


def test_index_fields_choose_what_is_searchable(store: TieredMemoryStore) -> None:
    store.put(("n",), "x", {"title": "alpha", "body": "omega"}, index=["title"])
    assert [h.key for h in store.search(("n",), query="alpha")] == ["x"]
    assert store.search(("n",), query="omega") == []
    store.put(("n",), "x", {"title": "alpha", "body": "omega"})  # default: the whole value
    assert [h.key for h in store.search(("n",), query="omega")] == ["x"]


def test_a_batch_is_one_transaction(any_location: str) -> None:
    db = any_location
    with TieredMemoryStore.open(db, embedder=None) as store:
        store.put(("ns",), "kept", {"v": 1})
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("ns",), "new", {"v": 2}), PutOp(("bad.label",), "x", {"v": 3})])
        with pytest.raises(InvalidInputError, match="ttl"):
            store.batch([PutOp(("ns",), "new", {"v": 2}), PutOp(("ns",), "t", {"v": 3}, ttl=-5)])
        unserialisable = [PutOp(("ns",), "new", {"v": 2}), PutOp(("ns",), "y", {"v": {1, 2}})]
        with pytest.raises(Exception) as raised:
            store.batch(unserialisable)  # the second write fails after the first wrote
        assert "TieredMemoryError" in {c.__name__ for c in type(raised.value).__mro__}
        assert store.get(("ns",), "new") is None  # rolled back with it
        assert [i.key for i in store.search(("ns",))] == ["kept"]
    with AgentMemoryManager.open(db, embedder=None) as memory:
        assert len(memory.query(Tier.SEMANTIC, limit=None)) == 1


def test_async_api_and_updates_keep_created_at(any_store: str) -> None:
    async def main() -> None:
        with TieredMemoryStore.open(any_store, embedder=None) as store:
            await store.aput(("u",), "k", {"v": 1})
            first = await store.aget(("u",), "k")
            await store.aput(("u",), "k", {"v": 2})
            second = await store.aget(("u",), "k")
            assert first is not None and second is not None
            assert second.value == {"v": 2} and second.created_at == first.created_at
            assert second.updated_at >= first.updated_at
            assert await store.alist_namespaces() == [("u",)]
            await store.adelete(("u",), "k")
            assert await store.aget(("u",), "k") is None

    asyncio.run(main())


GRAPH = textwrap.dedent(
    """
    import sys
    from typing import TypedDict

    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    from tiered_memory.integrations.langgraph import TieredMemoryStore


    class State(TypedDict):
        user: str
        fact: str
        known: list[str]


    def remember(state: State) -> dict[str, list[str]]:
        store = get_store()
        namespace = ("memories", state["user"])
        store.put(namespace, f"fact-{len(store.search(namespace, limit=100))}",
                  {"text": state["fact"]})
        return {"known": [i.value["text"] for i in store.search(namespace, limit=100)]}


    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with TieredMemoryStore.open(sys.argv[1], embedder=None) as store:
        graph = builder.compile(store=store)
        out = graph.invoke({"user": "ann", "fact": sys.argv[2], "known": []})
        print(sorted(out["known"]))
    """
)


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_state_graph_in_a_second_process_sees_the_first_ones_memories(
    tmp_path: Path, any_location: str
) -> None:
    script = tmp_path / "graph.py"
    script.write_text(GRAPH)
    db = any_location

    def run(fact: str) -> str:
        result = subprocess.run(
            [sys.executable, str(script), db, fact],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert run("likes tea") == "['likes tea']"
    assert run("lives in Oslo") == "['likes tea', 'lives in Oslo']"


def test_items_with_the_same_value_under_other_keys_stay_apart(any_store: str) -> None:
    """The manager deduplicates identical text by default; a store item is more than its
    text (namespace and key), so deleting one must not take another with it."""
    value = {"color": "red", "n": 0}
    with TieredMemoryStore.open(any_store, embedder=None) as store:
        store.put(("a",), "k1", value)
        store.put(("a", "a"), "k1", value)
        store.put(("b",), "k2", value)
        store.delete(("a",), "k1")
        assert store.get(("a",), "k1") is None
        kept = [store.get(("a", "a"), "k1"), store.get(("b",), "k2")]
        assert [item.value if item else None for item in kept] == [value, value]


def test_an_indexed_put_without_text_is_refused_and_writes_nothing(
    store: TieredMemoryStore,
) -> None:
    store.put(("n",), "kept", {"text": "something to find"})
    before = len(store.memory.query(None, limit=100))
    for value, index in (({"text": "   \n"}, ["text"]), ({"text": "", "t": " "}, ["text", "t"])):
        with pytest.raises(InvalidInputError, match="no text in its indexed fields"):
            store.put(("n",), "blank", value, index=index)
    with pytest.raises(InvalidInputError):  # a batch with one blank put writes none of it
        store.batch(
            [PutOp(("n",), "fine", {"text": "fine"}), PutOp(("n",), "b", {"text": " "}, ["text"])]
        )
    assert store.get(("n",), "blank") is None and store.get(("n",), "fine") is None
    assert len(store.memory.query(None, limit=100)) == before
    store.put(("n",), "hidden", {"text": ""}, index=False)  # unsearchable on purpose
    assert store.get(("n",), "hidden").value == {"text": ""}  # type: ignore[union-attr]
    # none of the indexed fields present: kept (as LangGraph's stores keep it), unsearchable
    store.put(("n",), "fieldless", {"title": "x"}, index=["text"])
    assert store.get(("n",), "fieldless").value == {"title": "x"}  # type: ignore[union-attr]
    assert all(i.key != "fieldless" for i in store.search(("n",), query="title x"))


@pytest.mark.slow  # 2.6 s measured on a busy machine
def test_a_namespace_of_the_wrong_type_or_an_unknown_keyword_is_a_typed_error(
    store: TieredMemoryStore,
) -> None:
    """LangGraph's ``BaseStore`` iterates a namespace first: ``None`` or a number raised
    Python's TypeError (a dict: KeyError). Each is an InvalidTypeError, sync and async,
    and nothing is written."""
    store.put(("n",), "kept", {"text": "kept"})
    before = len(store.memory.query(None, limit=100))
    calls: list[Callable[[Any], object]] = [
        lambda b: store.put(b, "k", {"text": "x"}),
        lambda b: store.get(b, "kept"),
        lambda b: store.search(b),
        lambda b: store.delete(b, "kept"),
        lambda b: store.list_namespaces(prefix=b if b is not None else 1),
        lambda b: asyncio.run(store.aput(b, "k", {"text": "x"})),
        lambda b: asyncio.run(store.aget(b, "kept")),
        lambda b: asyncio.run(store.asearch(b)),
        lambda b: asyncio.run(store.adelete(b, "kept")),
        lambda b: asyncio.run(store.alist_namespaces(suffix=b if b is not None else 1)),
    ]
    for bad in (None, 12, 1.5, object(), {"a": 1}):
        for call in calls:
            with pytest.raises(InvalidTypeError):
                call(bad)
    loose: Any = store  # calls no signature allows
    unknowns: list[Callable[[], object]] = [
        lambda: loose.put(("n",), "k", {"text": "x"}, nope=1),
        lambda: loose.search(("n",), nope=1),
        lambda: loose.batch([], nope=1),
        lambda: loose.get(("n",), "kept", "surplus"),
        lambda: asyncio.run(loose.asearch(("n",), nope=1)),
    ]
    for unknown in unknowns:
        with pytest.raises(InvalidTypeError):
            unknown()
    assert len(store.memory.query(None, limit=100)) == before
    assert store.get(("n",), "kept") is not None  # valid calls still work
