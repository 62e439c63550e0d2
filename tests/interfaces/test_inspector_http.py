"""The inspector over HTTP (Starlette's TestClient, and a real ``serve`` process): every
page and its ``.json`` twin, facets and search, the forgetting curve's figures, the graph's
provenance, escaping, the CSRF and token guards, and a browsing session that leaves the
file's bytes as they were."""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support.inspector_data import SCRIPT, build
from tests.support.inspector_data import open_inspected as _open
from tests.support.inspector_server import CLI, announced_port, serving, wait_for_port
from tiered_memory.inspector.app import create_app

BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("inspector") / "agent.db"
    return path, build(path)


@pytest.fixture(scope="module")
def client(built: tuple[Path, dict[str, Any]]) -> Iterator[TestClient]:
    with _open(built[0]) as memory:
        yield TestClient(create_app(memory), base_url=BASE)


def pages(ids: dict[str, Any]) -> list[str]:
    """One address of each page (with the data ``build`` wrote)."""
    return [
        "/", "/memories", "/memories?q=adoption&tag=adoption", f"/memories/{ids['prefs']}",
        "/recall?q=adoption+agency", "/sessions", f"/sessions/{ids['session']}", "/graph",
        f"/graph/{ids['caroline']}", f"/graph/{ids['atlas']}", "/notes",
        "/notes?q=flat&tag=move&sort=title", f"/notes/{ids['notes']['lisbon']}",
        f"/notes/{ids['notes']['script']}", "/recall?q=adoption+agency&notes=1",
    ]  # fmt: skip


def twin(path: str) -> str:
    bare, _, query = path.partition("?")
    base = "/index" if bare == "/" else bare
    return f"{base}.json" + (f"?{query}" if query else "")


@pytest.mark.slow  # 5.2 s measured on a busy machine
def test_every_page_and_its_json_twin_answer(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    for path in pages(built[1]):
        page = client.get(path)
        assert page.status_code == 200, (path, page.text[:300])
        assert page.headers["content-type"].startswith("text/html")
        assert f'href="{twin(path).replace("&", "&amp;")}"' in page.text  # the page links it
        data = client.get(twin(path))
        assert data.status_code == 200, path
        assert data.headers["content-type"] == "application/json"
        assert isinstance(data.json(), dict)
        assert "default-src 'self'" in page.headers["content-security-policy"]


def test_overview_counts_what_the_file_holds(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    data = client.get("/index.json").json()
    with _open(built[0]) as memory:
        s = memory.statistics().storage
    assert data["tiers"] == {"scratchpad": s.scratchpad_count, "episodic": s.episodic_count,
                             "semantic": s.semantic_count}  # fmt: skip
    assert data["tiers"]["semantic"] == 1 and data["tiers"]["scratchpad"] == 1
    assert data["sessions"]["total"] == 1
    assert data["promotions"] == 1
    assert [p["memory_id"] for p in data["recent_promotions"]] == [built[1]["prefs"]]
    weakest = data["next_forgotten"]["memories"]
    lowest = [w for w in weakest if w["retention_now"] == weakest[0]["retention_now"]]
    assert built[1]["weak"] in [w["memory"]["id"] for w in lowest]  # importance 0: the weakest
    assert all(w["memory"]["importance"] == 0.0 for w in lowest)
    assert [r["retention_now"] for r in weakest] == sorted(r["retention_now"] for r in weakest)


def test_memories_facets_search_sort_and_paging(client: TestClient) -> None:
    everything = client.get("/memories.json?per_page=500").json()
    assert everything["total"] == len(everything["memories"]) == 21
    facets = dict(everything["facets"]["tags"])
    assert facets["atlas"] == 12 and facets["adoption"] == 2
    assert dict(everything["facets"]["speaker"]) == {"Caroline": 3, "mallory": 1}
    by_tag = client.get("/memories.json?tag=atlas&tag=m1").json()
    assert by_tag["total"] == 4
    assert all({"atlas", "m1"} <= set(m["tags"]) for m in by_tag["memories"])
    found = client.get("/memories.json?q=dark+mode").json()
    assert found["memories"][0]["content"] == "The user prefers dark mode in every editor"
    speaker = client.get("/memories.json?speaker=Caroline&sort=created_at&order=asc").json()
    assert [m["content"] for m in speaker["memories"]][0].startswith("Caroline visited")
    by_importance = client.get("/memories.json?sort=importance&per_page=500").json()["memories"]
    values = [m["importance"] for m in by_importance]
    assert values == sorted(values, reverse=True)
    first = client.get("/memories.json?per_page=5&page=1").json()["memories"]
    second = client.get("/memories.json?per_page=5&page=2").json()["memories"]
    assert len(first) == len(second) == 5
    assert not {m["id"] for m in first} & {m["id"] for m in second}
    html = client.get("/memories?per_page=5").text
    assert 'rel="next"' in html and "page=2" in html


def test_bad_parameters_are_a_400_page_with_the_reason(client: TestClient) -> None:
    answer = client.get("/memories.json?sort=content")
    assert answer.status_code == 400
    assert "sort must be one of" in answer.json()["error"]
    assert client.get("/memories?page=zero").status_code == 400
    assert client.get("/memories/nope.json").status_code == 404
    assert client.get("/graph/nobody").status_code == 404


def test_a_memory_page_has_its_curve_schedule_audit_and_facts(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    ids = built[1]
    data = client.get(f"/memories/{ids['prefs']}.json").json()
    curve = data["curve"]
    assert curve["threshold"] == 0.1
    assert curve["points"][0] == [0.0, 1.0]  # full retention at creation
    review_day = curve["review_days"][0]
    assert review_day == pytest.approx(2.0, abs=0.01)  # reviewed two days after creation
    before = [v for d, v in curve["points"] if d < review_day]
    assert before == sorted(before, reverse=True)  # decays until the review...
    at_review = [v for d, v in curve["points"] if d == review_day]
    s0 = curve["initial_stability_days"]
    assert s0 == pytest.approx(1.0 * (1 + 4.0 * 0.9))  # the defaults, importance 0.9
    expected = math.exp(-review_day / s0)
    assert at_review == [pytest.approx(expected), 1.0]  # ...which restores it
    assert curve["next_review_day"] == pytest.approx(3.0, abs=0.01)
    assert data["schedule"]["review_count"] == 1
    assert [p["to_tier"] for p in data["promotions"]] == ["semantic"]
    html = client.get(f"/memories/{ids['prefs']}").text
    assert 'class="series"' in html and 'class="hline"' in html and "next review" in html
    facts = client.get(f"/memories/{ids['again']}.json").json()["relations"]
    assert [(r["subject"], r["predicate"], r["object"]) for r in facts] == [
        ("Caroline", "visited", "adoption agency")
    ]
    assert set(facts[0]["asserted_by"]) == {ids["again"], ids["facts"][0]}


def test_recall_playground_shows_the_figures_recall_returns(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    data = client.get("/recall.json?q=adoption+agency&k=3").json()
    with _open(built[0]) as memory:
        hits = memory.recall("adoption agency", k=3)
    assert [h["memory"]["id"] for h in data["hits"]] == [h.memory.id for h in hits]
    # (recency moves with the clock between the two calls: equal to 1e-9)
    assert [h["score"] for h in data["hits"]] == pytest.approx([h.score for h in hits], rel=1e-9)
    assert [h["explanation"] for h in data["hits"]] == [str(h.explanation) for h in hits]
    first = data["hits"][0]
    assert [s["contribution"] for s in first["signals"]] == pytest.approx(
        [s.contribution for s in hits[0].explanation.signals], rel=1e-9
    )
    assert {s["signal"] for s in first["signals"]} >= {"keyword", "vector"}
    html = client.get("/recall?q=adoption+agency&k=3").text
    assert html.count('class="bar"') == sum(len(h["bars"]) for h in data["hits"])


def test_session_page_places_each_memory_under_its_turn(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    data = client.get(f"/sessions/{built[1]['session']}.json").json()
    turns = data["turns"]
    assert [t["turn_number"] for t in turns] == sorted(t["turn_number"] for t in turns)
    produced = [[m["id"] for m in t["memories"]] for t in turns]
    assert produced == [[built[1]["facts"][0]], [], [built[1]["facts"][1]], [built[1]["facts"][2]]]


def test_an_entity_with_hundreds_of_relations_lists_them_all_with_provenance(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    ids = built[1]
    data = client.get(f"/graph/{ids['atlas']}.json").json()
    depends = [r for r in data["relations"] if r["predicate"] == "depends_on"]
    assert len(depends) == 300
    assert all([a["id"] for a in r["asserted_by"]] == [ids["hub_memory"]] for r in depends)
    drawn = {n[1] for n in data["drawing"]["nodes"]}
    assert 0 < len(drawn) <= 60  # the drawing stays small...
    direct = {r["other_id"] for r in data["relations"]}
    assert len(direct - {d.removeprefix("/graph/") for d in drawn}) == data["drawing"]["more"]
    caroline = client.get(f"/graph/{ids['caroline']}.json").json()
    visited = next(r for r in caroline["relations"] if r["predicate"] == "visited")
    assert {a["id"] for a in visited["asserted_by"]} == {ids["again"], ids["facts"][0]}


def test_content_is_escaped_everywhere(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    ids = built[1]
    for path in (f"/memories/{ids['script']}", "/memories?per_page=500", "/memories?q=pwned",
                 "/recall?q=window+pwned+document+title"):  # fmt: skip
        html = client.get(path).text
        assert "window.__pwned" in html, path  # shown...
        assert "<script>window" not in html and "<img src=x" not in html, path  # ...as text
        assert "&lt;script&gt;" in html, path
    assert "&lt;b&gt;odd&lt;/b&gt;" in client.get(f"/memories/{ids['script']}").text
    assert client.get(f"/memories/{ids['script']}.json").json()["memory"]["content"] == SCRIPT


def test_a_page_for_another_host_name_is_refused(client: TestClient) -> None:
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400


def test_a_token_server_refuses_requests_without_it(built: tuple[Path, dict[str, Any]]) -> None:
    with _open(built[0]) as memory:
        client = TestClient(create_app(memory, token="s3cret", allowed_hosts=("*",)),
                            base_url="http://192.0.2.1")  # fmt: skip
        assert client.get("/index.json").status_code == 403
        assert client.get("/index.json?token=wrong").status_code == 403
        entry = client.get("/memories?token=s3cret", follow_redirects=False)
        assert entry.status_code == 303 and "token" not in entry.headers["location"]
        assert client.get("/index.json").status_code == 200  # the cookie carries it now


def test_edits_need_allow_edits_and_the_csrf_token(
    tmp_path: Path, built: tuple[Path, dict[str, Any]]
) -> None:
    path = tmp_path / "copy.db"
    shutil.copy(built[0], path)
    ids = built[1]
    with _open(path) as memory:
        read_only = TestClient(create_app(memory), base_url=BASE)
        refused = read_only.post(f"/memories/{ids['weak']}/forget", data={"csrf": "x"})
        assert refused.status_code == 403 and "--allow-edits" in refused.text
    with _open(path, read_only=False) as memory:
        app = create_app(memory, allow_edits=True)
        client = TestClient(app, base_url=BASE)
        token = app.state.inspector.csrf_token
        page = client.get(f"/memories/{ids['weak']}").text
        assert f'name="csrf" value="{token}"' in page
        for form in ({}, {"csrf": "forged"}):
            answer = client.post(f"/memories/{ids['weak']}/forget", data=form)
            assert answer.status_code == 403 and "CSRF" in answer.text
        assert memory.get(ids["weak"]) is not None
        bad = client.post(f"/memories/{ids['weak']}/review", data={"csrf": token, "quality": 9})
        assert bad.status_code == 400 and "quality" in bad.text
        weak = f"/memories/{ids['weak']}"
        done = client.post(f"{weak}/review", data={"csrf": token, "quality": "5"},
                           follow_redirects=False)  # fmt: skip
        assert done.status_code == 303
        done = client.post(f"{weak}/forget", data={"csrf": token, "reason": "test"},
                           follow_redirects=False)  # fmt: skip
        assert done.status_code == 303
    with _open(path) as memory:
        assert memory.get(ids["weak"]) is None
        assert memory.forgetting_log(ids["weak"])[-1].reason == "test"


def _digest(path: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (path, Path(f"{path}-wal"))
        if p.exists()
    }


@pytest.mark.subprocess
@pytest.mark.slow
def test_browsing_a_served_file_leaves_its_bytes_unchanged(
    tmp_path: Path, built: tuple[Path, dict[str, Any]]
) -> None:
    path = tmp_path / "agent.db"
    for suffix in ("", "-wal"):
        if Path(f"{built[0]}{suffix}").exists():
            shutil.copy(f"{built[0]}{suffix}", f"{path}{suffix}")
    before = _digest(path)
    assert path.name in before
    with serving(path) as base:
        for page in pages(built[1]):
            for address in (page, twin(page)):
                with urllib.request.urlopen(base + address) as answer:
                    assert answer.status == 200
        form = urllib.parse.urlencode({"csrf": "x", "title": "t", "content": "c"}).encode()
        lisbon = built[1]["notes"]["lisbon"]
        for action in (f"/memories/{built[1]['weak']}/forget", "/notes",
                       f"/notes/{lisbon}/update", f"/notes/{lisbon}/delete"):  # fmt: skip
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + action, data=form)
            assert refused.value.code == 403, action
    assert _digest(path) == before


@pytest.mark.postgres
@pytest.mark.slow
def test_every_page_answers_on_postgresql(pg_url: str) -> None:
    ids = build(pg_url, hub_relations=40)
    with _open(pg_url) as memory:
        client = TestClient(create_app(memory), base_url=BASE)
        for path in pages(ids):
            assert client.get(path).status_code == 200, path
            assert client.get(twin(path)).status_code == 200, path
        data = client.get(f"/graph/{ids['caroline']}.json").json()
        visited = next(r for r in data["relations"] if r["predicate"] == "visited")
        assert {a["id"] for a in visited["asserted_by"]} == {ids["again"], ids["facts"][0]}
        found = client.get("/memories.json?q=dark+mode").json()["memories"]
        assert found[0]["id"] == ids["prefs"]
        assert re.search(r"postgresql://", client.get("/").text)


@pytest.mark.slow  # 4.4 s measured on a busy machine
@pytest.mark.subprocess
def test_serving_another_host_prints_an_address_with_a_token(
    built: tuple[Path, dict[str, Any]],
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", str(built[0]), "--host", "127.0.0.2",
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        port, line = announced_port(process)
        wait_for_port("127.0.0.2", port)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()  # never leave the server running past the test
            process.wait()
            raise
    found = re.search(rf"http://127\.0\.0\.2:{port}/\?token=([\w-]{{20,}})", line)
    assert found is not None, line
    assert "read-only" in line


@pytest.mark.slow  # 4.1 s measured on a busy machine
@pytest.mark.subprocess
def test_serve_refuses_a_missing_file(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CLI, "serve", str(tmp_path / "missing.db")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1 and result.stderr.startswith("error: ")
    assert not (tmp_path / "missing.db").exists()
