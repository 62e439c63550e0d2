"""The suite runs with the network refused (tests/conftest.py): prove the guard bites."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import NetworkAccessError
from tiered_memory import AgentMemoryManager


def test_the_network_guard_refuses_connections_and_lookups() -> None:
    # 192.0.2.1 is TEST-NET-1: the hook refuses it before any packet could leave.
    with pytest.raises(NetworkAccessError):
        socket.create_connection(("192.0.2.1", 9), timeout=1)
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("example.com", 443)
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("localhost", 443)  # a name to look up, even this one


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])  # all of 127.0.0.0/8 is loopback
def test_the_network_guard_lets_a_loopback_server_of_the_test_through(host: str) -> None:
    with socket.create_server((host, 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection((host, port), timeout=1):
            pass


def test_recall_with_the_default_model_needs_no_network() -> None:
    with AgentMemoryManager.in_memory(embed_in_background=False) as memory:
        memory.remember("The cat sits on the mat")
        memory.remember("Quarterly revenue grew 5%")
        (hit,) = memory.recall("a kitten resting on a rug", k=1)
    assert hit.memory.content == "The cat sits on the mat"
    assert [s.signal for s in hit.explanation.signals] == ["vector"]
