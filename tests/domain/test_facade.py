"""The manager is a facade: where it hands a call on whole, its collaborator takes the
same arguments with the same defaults (remember_many's scratchpad records go straight to
the writer, so a default changed in one place only would change what they get)."""

from __future__ import annotations

import inspect

from tiered_memory import AgentMemoryManager
from tiered_memory.writer import MemoryWriter


def test_the_writer_takes_remember_s_arguments_with_its_defaults() -> None:
    facade = inspect.signature(AgentMemoryManager.remember).parameters
    writer = inspect.signature(MemoryWriter.remember).parameters
    assert [(p.name, p.kind, p.default) for p in facade.values()] == [
        (p.name, p.kind, p.default) for p in writer.values()
    ]
    assert len(facade) > 10
