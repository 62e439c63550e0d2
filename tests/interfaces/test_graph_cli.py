"""`tiered-memory graph` and `tiered-memory entities`."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from click.testing import CliRunner

from tiered_memory import AgentMemoryManager
from tiered_memory.cli import main


def build(db: Path) -> None:
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        memory.remember("Caroline went to the Pride parade with Melanie")
        memory.remember("Melanie paints in Paris", relations=[("Melanie", "paints_in", "Paris")])
        memory.remember("write to ana@acme.com")
        memory.flush()


def test_graph_shows_an_entity_its_neighbours_and_memories(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    build(db)
    runner = CliRunner()
    result = runner.invoke(main, ["graph", str(db), "caroline", "--depth", "2", "--json"])
    assert result.exit_code == 0, result.output
    row = orjson.loads(result.output)
    assert row["entity"]["name"] == "Caroline" and row["memories"] == 1
    assert {(n["entity"]["name"], n["depth"]) for n in row["neighbors"]} == {
        ("Pride", 1), ("Melanie", 1), ("Paris", 2)
    }  # fmt: skip
    human = runner.invoke(main, ["graph", str(db), "Caroline", "--depth", "2"])
    assert re.search(  # either relation between Melanie and Paris may be the one shown
        r"2 hop\(s\): Paris \[entity\]  Caroline <-mentioned_with- Melanie -(paints_in|"
        r"mentioned_with)-> Paris",
        human.output,
    ), human.output
    missing = runner.invoke(main, ["graph", str(db), "Nobody"])
    assert missing.exit_code == 1 and "no entity 'Nobody'" in missing.output
    too_deep = runner.invoke(main, ["graph", str(db), "Caroline", "--depth", "4"])
    assert too_deep.exit_code == 2


def test_entities_lists_by_type(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    build(db)
    runner = CliRunner()
    result = runner.invoke(main, ["entities", str(db), "--type", "email", "--json"])
    assert result.exit_code == 0, result.output
    assert [e["name"] for e in orjson.loads(result.output)] == ["ana@acme.com"]
    everything = runner.invoke(main, ["entities", str(db)])
    assert {line.split()[-1] for line in everything.output.splitlines()} >= {
        "Caroline", "Melanie", "Paris", "Pride", "ana@acme.com"
    }  # fmt: skip
    bad = runner.invoke(main, ["entities", str(db), "--type", "not a type"])
    assert bad.exit_code == 1 and "not a short identifier" in bad.output
