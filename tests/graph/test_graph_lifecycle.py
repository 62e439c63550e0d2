"""The graph follows the memories: provenance-safe forgetting (forget, update, decay,
import), promotion keeps provenance, background extraction (default extractor, a
failing or garbage one, an old file), and export/import round trips."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from persistence import Tier
from persistence.records import Memory
from tests.conftest import FakeClock, old_schema_store
from tiered_memory import AgentMemoryManager
from tiered_memory.graph.extraction import DefaultExtractor, Extraction

DAY = 86_400_000


def entity_names(memory: AgentMemoryManager) -> set[str]:
    return {e.name for e in memory.graph.entities()}


# --- provenance-safe forgetting -----------------------------------------------------------


@pytest.mark.slow  # 1.2 s measured on a busy machine
def test_update_re_extracts_and_drops_what_only_the_old_text_named(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None)
    m = memory.remember("Ana met Bruno in Lisbon", entities=["Keeper"])
    memory.flush()
    assert {"Ana", "Bruno", "Lisbon", "Keeper"} <= entity_names(memory)
    memory.update(m.id, content="Ana met Carla in Porto")
    assert "Bruno" not in entity_names(memory)  # gone in the update's own transaction
    assert "Keeper" in entity_names(memory)  # the caller's facts stay with the memory
    memory.flush()
    assert {"Ana", "Carla", "Porto", "Keeper"} <= entity_names(memory)
    assert not {"Bruno", "Lisbon"} & entity_names(memory)
    assert memory.check_integrity().ok


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_promotion_keeps_provenance_and_does_not_re_extract(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None)
    m = memory.remember("Ana met Bruno", relations=[("Ana", "met", "Bruno")])
    memory.flush()
    memory.promote(m.id, Tier.SEMANTIC)
    assert memory.statistics().graph.extraction_pending == 0
    assert [x.id for x in memory.graph.memories_about("Bruno")] == [m.id]
    assert sorted(r.predicate for r in memory.graph.relations("Ana")) == ["mentioned_with", "met"]
    pad = memory.remember("Dora likes tea", Tier.SCRATCHPAD, entities=["Dora"])
    memory.promote(pad.id, Tier.EPISODIC)
    assert [x.id for x in memory.graph.memories_about("Dora")] == [pad.id]
    assert memory.check_integrity().ok


def test_decay_collects_what_forgotten_memories_supported(
    make_memory: Callable[..., AgentMemoryManager], clock: FakeClock
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    facts = [("Ana", "visited", "Oslo")]
    old = memory.remember("Ana visited Oslo", importance=0.0, relations=facts)
    memory.graph.add_entity("Oslo")  # also added directly: kept
    clock.advance(60 * DAY)
    fresh = memory.remember("Ana likes Bergen", relations=[("Ana", "likes", "Bergen")])
    report = memory.decay()
    assert old.id in report.forgotten_ids and fresh.id not in report.forgotten_ids
    assert entity_names(memory) == {"Ana", "Oslo", "Bergen"}
    assert [r.predicate for r in memory.graph.relations("Ana")] == ["likes"]
    assert memory.check_integrity().ok


@pytest.mark.slow  # 2.7 s measured on a busy machine
def test_export_import_round_trip_is_lossless(
    make_memory: Callable[..., AgentMemoryManager], tmp_path: Path, clock: FakeClock
) -> None:
    memory = make_memory(embedder=None)
    a = memory.remember("Caroline went to the Pride parade with Melanie")
    memory.remember("Melanie paints in Paris", relations=[("Melanie", "paints_in", "Paris")])
    memory.flush()
    memory.graph.add_entity("Caroline", description="a counsellor")
    rel = memory.graph.relate("Caroline", "works_at", "Agency", confidence=0.7)
    memory.graph.invalidate(rel, at=clock() + 5)
    memory.graph.add_entity("Mel")
    memory.graph.merge_entities("Melanie", "Mel")
    memory.remember("pending one about Oslo")  # still queued for extraction
    memory.forget(a.id)
    first = memory.export_json(tmp_path / "one.json")
    with AgentMemoryManager.open(tmp_path / "copy.db", embedder=None, extractor=None) as copy:
        result = copy.import_json(first, "replace")
        assert result.tables["relations"].inserted == memory.graph.statistics().relations
        assert copy.check_integrity().ok
        second = copy.export_json(tmp_path / "two.json")
    one, two = orjson.loads(first.read_bytes()), orjson.loads(second.read_bytes())
    one.pop("exported_at"), two.pop("exported_at")
    assert one == two
    assert one["tables"]["graph_queue"] and one["tables"]["entities"]


@pytest.mark.slow  # 3.1 s measured on a busy machine
def test_import_merge_follows_the_kept_version_of_each_memory(
    make_memory: Callable[..., AgentMemoryManager], tmp_path: Path, clock: FakeClock
) -> None:
    memory = make_memory(embedder=None, extractor=None)
    m = memory.remember("v1", relations=[("Ana", "knows", "Bo")])
    memory.graph.add_entity("Direct")
    exported = memory.export_json(tmp_path / "old.json")
    clock.advance(1000)
    memory.forget(m.id)
    memory.remember("other", relations=[("Cy", "knows", "Di")])
    result = memory.import_json(exported, "merge")
    assert result.tables["memory_relations"].inserted == 1
    assert {"Ana", "Bo", "Cy", "Di", "Direct"} <= entity_names(memory)
    assert memory.check_integrity().ok
    memory.import_json(exported, "replace")
    assert entity_names(memory) == {"Ana", "Bo", "Direct"}
    assert memory.check_integrity().ok


@pytest.mark.slow  # 1.1 s measured on a busy machine
def test_an_export_without_a_graph_is_imported_and_queued(
    make_memory: Callable[..., AgentMemoryManager], tmp_path: Path
) -> None:
    memory = make_memory(embedder=None)
    memory.remember("Ana met Bruno")
    exported = memory.export_json(tmp_path / "new.json")
    doc = orjson.loads(exported.read_bytes())
    for table in ("entities", "entity_aliases", "relations", "memory_entities",
                  "memory_relations", "graph_queue"):  # fmt: skip
        del doc["tables"][table]
    old = tmp_path / "old.json"
    old.write_bytes(orjson.dumps(doc))
    memory.import_json(old, "replace")
    assert memory.statistics().graph.extraction_pending == 1
    memory.flush()
    assert entity_names(memory) == {"Ana", "Bruno"}


@pytest.mark.slow  # 2.6 s measured on a busy machine
def test_a_partial_graph_in_a_document_is_refused(
    make_memory: Callable[..., AgentMemoryManager], tmp_path: Path
) -> None:
    from persistence import InvalidImportError

    memory = make_memory(embedder=None)
    memory.remember("Ana met Bruno")
    exported = memory.export_json(tmp_path / "new.json")
    doc = orjson.loads(exported.read_bytes())
    del doc["tables"]["relations"]
    broken = tmp_path / "broken.json"
    broken.write_bytes(orjson.dumps(doc))
    with pytest.raises(InvalidImportError, match="part of the knowledge graph"):
        memory.import_json(broken, "replace")
    doc = orjson.loads(exported.read_bytes())
    doc["tables"]["memory_entities"] = [
        {"memory_id": "nope", "entity_id": "ent_" + "0" * 24, "origin": "caller"}
    ]
    broken.write_bytes(orjson.dumps(doc))
    with pytest.raises(InvalidImportError):
        memory.import_json(broken, "merge")


# --- extraction ---------------------------------------------------------------------------


def test_default_extractor_finds_names_handles_tags_mails_and_urls() -> None:
    found = DefaultExtractor().extract(
        'Caroline met "The Grand Budapest" crew in New York City; mail ana@acme.com, '
        "see https://acme.com/x, ping @bob_k #moving. The Museum of Modern Art is next."
    )
    assert {(e.name, e.type) for e in found.entities} == {
        ("Caroline", "entity"), ("The Grand Budapest", "entity"), ("New York City", "entity"),
        ("ana@acme.com", "email"), ("https://acme.com/x", "url"), ("@bob_k", "handle"),
        ("#moving", "tag"), ("Museum of Modern Art", "entity"),
    }  # fmt: skip
    assert all(r.predicate == "mentioned_with" for r in found.relations)
    assert len(found.relations) == 8 * 7 // 2
    assert DefaultExtractor().extract("the cat sat on the mat. It was nice.") == Extraction()


def test_mentioned_with_weight_counts_co_occurring_memories(
    make_memory: Callable[..., AgentMemoryManager],
) -> None:
    memory = make_memory(embedder=None)
    for text in ("Ana and Bruno cooked", "Bruno met Ana again", "Ana went to Rome"):
        memory.remember(text)
    assert memory.statistics().graph.extraction_pending == 3
    assert memory.flush() == 0  # nothing to embed; the extraction ran too
    weights = {n.entity.name: n.via[0].weight for n in memory.graph.neighbors("Ana")}
    assert weights == {"Bruno": 2, "Rome": 1}
    assert memory.statistics().graph.extraction_pending == 0


def test_extraction_runs_in_the_background(any_location: str) -> None:
    done = threading.Event()

    class Signalling(DefaultExtractor):
        def extract(self, text: str) -> Extraction:
            found = super().extract(text)
            done.set()
            return found

    with AgentMemoryManager.open(
        any_location, embedder=None, extractor=Signalling(), extract_in_background=True
    ) as memory:
        memory.remember("Ana met Bruno")
        assert done.wait(30)
        memory.extraction.flush()  # waits for the thread's batch (same lock)
        assert entity_names(memory) == {"Ana", "Bruno"}


class Failing:
    """Raises until ``fixed``, then finds one entity."""

    def __init__(self) -> None:
        self.fixed = False

    def extract(self, text: str) -> Extraction | Mapping[str, Any]:
        if not self.fixed:
            raise RuntimeError("model unavailable")
        return {"entities": ["Ana"]}


class Garbage:
    def extract(self, text: str) -> object:
        return ["not", "an", "extraction"]


@pytest.mark.slow  # 1.1 s measured on a busy machine
@pytest.mark.parametrize("broken", [Failing, Garbage])
def test_a_broken_extractor_keeps_the_memory_counts_and_retries_later(
    make_memory: Callable[..., AgentMemoryManager],
    clock: FakeClock,
    broken: type,
    caplog: pytest.LogCaptureFixture,
) -> None:
    extractor = broken()
    memory = make_memory(embedder=None, extractor=extractor)
    m = memory.remember("Ana met Bruno")
    memory.flush()  # fails: logged, counted, postponed
    assert memory.get(m.id) is not None
    stats = memory.statistics().graph
    assert (stats.extraction_pending, stats.extraction_failed, stats.extraction_errors) == (1, 1, 1)
    assert stats.last_extraction_error and "extraction failed" in caplog.text
    memory.flush()  # not due yet: not tried again
    assert memory.statistics().graph.extraction_errors == 1
    if isinstance(extractor, Failing):
        extractor.fixed = True
        clock.advance(10 * 60_000)
        memory.flush()
        assert entity_names(memory) == {"Ana"}
        assert memory.statistics().graph.extraction_pending == 0


def test_an_old_file_gets_its_graph_built_in_batches(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "old.db"
    with old_schema_store(path, 8) as old:
        for n in range(7):
            old.put_episodic(Memory.create(f"Ana met Person{n} in Town{n}"))
    with AgentMemoryManager.open(path, clock=clock, embedder=None,
                                 embed_in_background=False) as memory:  # fmt: skip
        assert memory.statistics().graph.extraction_pending == 7
        assert memory.extraction.flush(batch_size=3) == 7
        assert memory.statistics().graph.extraction_pending == 0
        assert len(memory.graph.neighbors("Ana")) == 14
        assert memory.check_integrity().ok
