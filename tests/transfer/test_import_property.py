"""Property: no broken document changes the database, whatever is broken about it.

Hypothesis breaks a real export in one way at a time (a value of the wrong type, a
missing or unknown field, a duplicate row, a dangling reference, a bad header, cut-off
bytes) and checks that import raises ``InvalidImportError`` and that a checksum of
every row in the file is what it was.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persistence import InvalidImportError
from persistence.records import SUPERSESSION_FIELDS
from tests.conftest import FakeClock
from tests.support.data_checks import data_checksum
from tests.support.populate import populate
from tiered_memory import AgentMemoryManager

Path_ = tuple[Any, ...]


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AgentMemoryManager, dict[str, Any], str, Path]]:
    root = tmp_path_factory.mktemp("property")
    clock = FakeClock()
    memory = AgentMemoryManager.open(root / "db.db", clock=clock, embed_in_background=False)
    populate(memory, clock, n=6)
    base = orjson.loads(memory.export_json(root / "base.json").read_bytes())
    memory.maintain()
    yield memory, base, data_checksum(root / "db.db"), root
    memory.shutdown()


def _leaves(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every value's path, except inside free-form metadata (where any JSON is valid)."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            if key != "metadata":
                yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from _leaves(value, (*path, n))


def _other_type(value: Any) -> list[Any]:
    """Values of a JSON type that the field at hand never accepts."""
    if value is None:
        return [[1], {"x": 1}]
    if isinstance(value, bool):
        return [1, "true", []]
    if isinstance(value, int | float):
        return ["7", [7], {"v": 7}, True]
    if isinstance(value, str):
        return [7, ["s"], {"s": 1}, False]
    if isinstance(value, list):
        return ["[]", 3, {"list": True}]
    return ["{}", 3, [1]]


def _at(doc: Any, path: Path_) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def broken_documents(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    doc = copy.deepcopy(base)
    kind = draw(
        st.sampled_from(
            ["retype", "drop", "extra", "duplicate", "dangle", "range", "cut", "header"]
        )
    )
    # embedding_model is optional and may be null: it has its own header cases below
    leaves = [(p, v) for p, v in _leaves(doc) if p and p != ("embedding_model",)]
    if kind == "retype":
        path, value = draw(st.sampled_from(leaves))
        _at(doc, path[:-1])[path[-1]] = draw(st.sampled_from(_other_type(value)))
    elif kind in ("drop", "extra"):
        objects = [p for p, v in _leaves(doc) if isinstance(v, dict) and v]
        path = draw(st.sampled_from(objects))
        target = _at(doc, path)
        if kind == "drop":
            # speaker and the supersession fields are optional too: documents from
            # before schema version 9 (18) lack them
            optional = {"embedding_model", "speaker", *SUPERSESSION_FIELDS}
            del target[draw(st.sampled_from(sorted(set(target) - optional)))]
        else:
            target[draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in target))] = 1
    elif kind == "duplicate":
        table = draw(st.sampled_from([t for t, rows in doc["tables"].items() if rows]))
        rows = doc["tables"][table]
        rows.append(copy.deepcopy(draw(st.sampled_from(rows))))
    elif kind == "dangle":
        table, field = draw(st.sampled_from([("session_transcripts", "session_id"),
                                              ("repetition_schedules", "memory_id"),
                                              ("promotion_log", "memory_id")]))  # fmt: skip
        row = draw(st.sampled_from(doc["tables"][table]))
        row[field] = "no-such-" + draw(st.text(alphabet="abcdef0123456789", min_size=4))
    elif kind == "range":
        table, field, value = draw(st.sampled_from([
            ("episodic", "importance", 1.5), ("semantic", "retention", -0.1),
            ("semantic", "token_count", -3), ("sessions", "turn_number", -1),
            ("repetition_schedules", "ease_factor", 0.0), ("promotion_log", "id", 0),
            ("episodic", "embedding", "AAAA"), ("semantic", "embedding", "@@not base64@@"),
            ("scratchpad", "key", None), ("semantic", "tags", ["same", "same"]),
            ("promotion_log", "to_tier", "scratchpad"), ("forgetting_log", "tier", "attic"),
            ("episodic", "access_count", 2**63 - 1), ("semantic", "session_id", ""),
            ("episodic", "created_at", -1), ("session_transcripts", "timestamp", -1),
            ("repetition_schedules", "review_count", 2**62 + 1),
            ("forgetting_log", "forgotten_at", -1),
        ]))  # fmt: skip
        draw(st.sampled_from(doc["tables"][table]))[field] = value
    elif kind == "header":
        key, value = draw(st.sampled_from([
            ("format", "mem0"), ("format_version", 2), ("schema_version", 999),
            ("schema_version", 0), ("embedding_dim", 5), ("exported_at", "now"),
            ("embedding_model", 5), ("embedding_model", ""),
        ]))  # fmt: skip
        doc[key] = value
    raw = orjson.dumps(doc)
    if kind == "cut":
        raw = raw[: draw(st.integers(min_value=0, max_value=len(raw) - 2))]
    return raw


def test_the_base_document_is_valid(setup: Any) -> None:
    memory, base, _, root = setup
    assert all(base["tables"][t] for t in ("episodic", "semantic", "scratchpad", "forgetting_log"))
    with AgentMemoryManager.open(root / "check.db", embed_in_background=False) as fresh:
        path = root / "valid.json"
        path.write_bytes(orjson.dumps(base))
        assert fresh.import_json(path).inserted > 0


def test_a_boolean_format_version_is_refused(setup: Any) -> None:
    """``true == 1`` in Python: the header check must not take a boolean for version 1."""
    memory, base, checksum, root = setup
    path = root / "bool-version.json"
    path.write_bytes(orjson.dumps({**base, "format_version": True}))
    with pytest.raises(InvalidImportError, match="format_version"):
        memory.import_json(path)
    assert data_checksum(root / "db.db") == checksum


@pytest.mark.slow
@pytest.mark.property
@settings(max_examples=1500, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(data=st.data(), mode=st.sampled_from(["replace", "merge"]))
def test_no_broken_document_changes_the_file(setup: Any, data: st.DataObject, mode: str) -> None:
    memory, base, checksum, root = setup
    raw = data.draw(broken_documents(base))
    path = root / "broken.json"
    path.write_bytes(raw)
    with pytest.raises(InvalidImportError):
        memory.import_json(path, mode=mode)
    assert data_checksum(root / "db.db") == checksum
