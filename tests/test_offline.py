"""The suite runs with the network refused (tests/conftest.py): prove the guard bites."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import NetworkAccessError
from tiered_memory import AgentMemoryManager


def test_the_network_guard_refuses_connections_and_lookups() -> None:
    with pytest.raises(NetworkAccessError):
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("example.com", 443)


def test_recall_with_the_default_model_needs_no_network() -> None:
    with AgentMemoryManager.in_memory(embed_in_background=False) as memory:
        memory.remember("The cat sits on the mat")
        memory.remember("Quarterly revenue grew 5%")
        (hit,) = memory.recall("a kitten resting on a rug", k=1)
    assert hit.memory.content == "The cat sits on the mat"
    assert [s.signal for s in hit.explanation.signals] == ["vector"]
