"""The inspector's pages show numbers as people write them: no ``0.8999999999999999``
(the .json twins keep the exact values)."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from tests.support.inspector_data import open_inspected
from tiered_memory import AgentMemoryManager
from tiered_memory.inspector.app import create_app

LONG_DECIMAL = re.compile(r"\d\.\d{5,}")
SVG = re.compile(r"<svg.*?</svg>", re.S)


def test_pages_show_short_decimals_and_the_twin_keeps_the_value(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    importance = 0.7 + 0.2  # 0.8999999999999999
    with AgentMemoryManager.open(db, embedder=None, embed_in_background=False) as memory:
        session = memory.start_session().session_id
        memory_id = memory.remember(
            "The spare key is under the red pot", importance=importance, session_id=session
        ).id
    with open_inspected(db) as memory:
        client = TestClient(create_app(memory), base_url="http://127.0.0.1")
        page = client.get(f"/memories/{memory_id}").text
        assert "<td>importance</td><td>0.9</td>" in page
        for path in ("/", "/memories", f"/memories/{memory_id}", "/recall?q=spare+key",
                     "/sessions", f"/sessions/{session}"):  # fmt: skip
            html = client.get(path).text
            shown = SVG.sub("", html)  # a chart's coordinates are not read by people
            assert not LONG_DECIMAL.search(shown), (path, LONG_DECIMAL.findall(shown))
        twin = client.get(f"/memories/{memory_id}.json").json()
        assert twin["memory"]["importance"] == importance
