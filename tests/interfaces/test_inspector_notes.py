"""Notes in the inspector over HTTP (Starlette's TestClient): the notes list (tags facet,
search, sorting, paging) and a note's page (links, every version with who, when and what
changed), each with its ``.json`` twin; notes in the overview, on memory and entity pages
and as hits of their own kind in the recall playground; escaping; and editing notes
(create, update, delete, link, unlink) under ``--allow-edits`` with the CSRF token, each
one transaction, refused without it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support.inspector_data import ATLAS_NOTES, SCRIPT, build
from tests.support.inspector_data import open_inspected as _open
from tiered_memory import AgentMemoryManager
from tiered_memory.inspector.app import create_app

BASE = "http://127.0.0.1"
NOTES = 3 + ATLAS_NOTES
EDITS = ("", "/x/update", "/x/delete", "/x/link", "/x/unlink")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("inspector-notes") / "agent.db"
    return path, build(path, hub_relations=20)


@pytest.fixture(scope="module")
def client(built: tuple[Path, dict[str, Any]]) -> Iterator[TestClient]:
    with _open(built[0]) as memory:
        yield TestClient(create_app(memory), base_url=BASE)


@pytest.mark.slow  # 1.0 s measured on a busy machine
def test_the_notes_list_has_a_tags_facet_search_sorting_and_paging(client: TestClient) -> None:
    everything = client.get("/notes.json?per_page=500").json()
    assert everything["total"] == len(everything["notes"]) == NOTES
    facets = dict(everything["facets"]["tags"])
    assert facets["atlas"] == ATLAS_NOTES and facets["move"] == 1 and facets["urgent"] == 1
    updated = [n["updated_at"] for n in everything["notes"]]
    assert updated == sorted(updated, reverse=True)  # most recently edited first
    atlas = client.get("/notes.json?tag=atlas").json()
    assert atlas["total"] == ATLAS_NOTES and all("atlas" in n["tags"] for n in atlas["notes"])
    both = client.get("/notes.json?tag=move&tag=urgent").json()["notes"]
    assert [n["title"] for n in both] == ["Lisbon move checklist"]
    assert client.get("/notes.json?tag=move&tag=atlas").json()["total"] == 0
    found = client.get("/notes.json?q=flat+river").json()["notes"]
    assert [n["title"] for n in found] == ["Lisbon move checklist"]  # the current text
    assert client.get("/notes.json?q=office").json()["total"] == 0  # not an old version's
    titles = [n["title"] for n in client.get("/notes.json?sort=title").json()["notes"]]
    assert titles == sorted(titles, key=str.casefold)
    pages = [client.get(f"/notes.json?per_page=4&page={p}").json()["notes"] for p in (1, 2, 3)]
    assert [len(p) for p in pages] == [4, 4, NOTES - 8]
    assert len({n["id"] for p in pages for n in p}) == NOTES
    html = client.get("/notes?per_page=4").text
    assert 'rel="next"' in html and "page=2" in html
    assert html.count('class="note-row"') == 4
    assert client.get("/notes?tag=atlas").text.count('class="note-row"') == ATLAS_NOTES
    bad = client.get("/notes.json?sort=content")
    assert bad.status_code == 400 and "sort must be one of" in bad.json()["error"]
    assert client.get("/notes?per_page=0").status_code == 400


def test_a_note_page_shows_its_links_and_every_version(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    ids = built[1]
    lisbon = ids["notes"]["lisbon"]
    data = client.get(f"/notes/{lisbon}.json").json()
    note = data["note"]
    assert (note["title"], note["version"], note["created_by"], note["updated_by"]) == (
        "Lisbon move checklist", 2, "ana", "bo"
    )  # fmt: skip
    assert note["tags"] == ["move", "family", "urgent"]
    assert [m["id"] for m in data["memories"]] == [ids["facts"][2]]
    assert data["memories"][0]["content"] == "Caroline's sister moved to Lisbon for work"
    assert [e["name"] for e in data["entities"]] == ["Lisbon"]
    first, second = data["history"]
    assert (first["version"], first["author"], first["diff"]) == (1, "ana", None)
    assert first["content"] == "Find a flat near the office\nBook the movers"
    assert (second["version"], second["author"]) == (2, "bo")
    assert second["changed"] == ["content", "tags"] and second["at"] > first["at"]
    assert second["diff"]["tags"] == {"added": ["urgent"], "removed": []}
    lines = second["diff"]["content"]
    assert "-Find a flat near the office" in lines and "+Find a flat near the river" in lines
    assert "+New bank" in lines and " Book the movers" in lines
    assert "title" not in second["diff"]
    html = client.get(f"/notes/{lisbon}").text
    assert html.count('class="version"') == 2
    assert f'href="/memories/{ids["facts"][2]}"' in html
    assert f'href="/graph/{data["entities"][0]["id"]}"' in html
    assert '<span class="add">+New bank</span>' in html
    assert 'by <span class="author">bo</span>' in html
    missing = client.get("/notes/nope.json")
    assert missing.status_code == 404 and "no note nope" in missing.json()["error"]
    assert client.get("/notes/nope").status_code == 404


def test_notes_show_on_the_overview_and_on_memory_and_entity_pages(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    ids = built[1]
    with _open(built[0]) as memory:
        latest = memory.notes.list(limit=5)
    overview = client.get("/index.json").json()["notes"]
    assert overview["total"] == NOTES
    assert [n["id"] for n in overview["recent"]] == [n.id for n in latest]
    assert 'href="/notes"' in client.get("/").text
    fact = client.get(f"/memories/{ids['facts'][2]}.json").json()
    assert fact["notes"] == [{"id": ids["notes"]["lisbon"], "title": "Lisbon move checklist"}]
    fact_page = client.get(f"/memories/{ids['facts'][2]}").text
    assert f'href="/notes/{ids["notes"]["lisbon"]}"' in fact_page
    assert client.get(f"/memories/{ids['prefs']}.json").json()["notes"] == []
    caroline = client.get(f"/graph/{ids['caroline']}.json").json()["notes"]
    assert [n["id"] for n in caroline] == [ids["notes"]["adoption"]]
    entity_page = client.get(f"/graph/{ids['caroline']}").text
    assert f'href="/notes/{ids["notes"]["adoption"]}"' in entity_page


def test_a_memory_page_shows_the_contents_update_replaced(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    weak = built[1]["weak"]
    versions = client.get(f"/memories/{weak}.json").json()["versions"]
    assert [(v["version"], v["author"], v["content"]) for v in versions] == [
        (1, None, "A passing remark about the weather"),
        (2, "ana", "A passing remark about the rainy weather"),
    ]
    assert versions[1]["at"] > versions[0]["at"]
    html = client.get(f"/memories/{weak}").text
    assert html.count('class="version"') == 2 and 'by <span class="author">ana</span>' in html
    assert client.get(f"/memories/{built[1]['prefs']}.json").json()["versions"] == []
    assert 'id="memory-versions"' not in client.get(f"/memories/{built[1]['prefs']}").text


def test_the_recall_playground_shows_notes_as_their_own_kind_of_hit(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    without = client.get("/recall.json?q=adoption+agency+monday&k=5").json()["hits"]
    assert {h["kind"] for h in without} == {"memory"}
    data = client.get("/recall.json?q=adoption+agency+monday&k=5&notes=1").json()
    assert data["notes"] is True
    with _open(built[0]) as memory:
        hits = memory.recall("adoption agency monday", k=5, notes=True)
    assert [h.kind for h in hits] == [h["kind"] for h in data["hits"]]
    notes = [h for h in data["hits"] if h["kind"] == "note"]
    assert [h["note"]["id"] for h in notes] == [built[1]["notes"]["adoption"]]
    assert [h["score"] for h in data["hits"]] == pytest.approx([h.score for h in hits], rel=1e-9)
    assert "a note: written on purpose" in notes[0]["explanation"]
    assert notes[0]["factors"] == {"importance": 1.0, "retention": 1.0, "recency": 1.0}
    html = client.get("/recall?q=adoption+agency+monday&k=5&notes=1").text
    assert html.count('class="hit note-hit"') == 1
    assert f'href="/notes/{built[1]["notes"]["adoption"]}"' in html
    assert 'id="recall-notes" checked' in html


def test_a_note_holding_a_script_shows_it_as_text(
    client: TestClient, built: tuple[Path, dict[str, Any]]
) -> None:
    script = built[1]["notes"]["script"]
    for path in ("/notes", f"/notes/{script}", "/notes?q=pwned", "/recall?q=pwned+note&notes=1"):
        html = client.get(path).text
        assert "<script>window" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;window.__pwned" in html, path  # shown, as text
    page = client.get(f"/notes/{script}").text
    assert "&lt;b&gt;odd&lt;/b&gt;" in page
    data = client.get(f"/notes/{script}.json").json()["note"]
    assert data["title"] == SCRIPT and data["content"] == f"pwned note {SCRIPT}"


def test_without_allow_edits_the_note_forms_are_absent_and_posts_refused(
    tmp_path: Path, built: tuple[Path, dict[str, Any]]
) -> None:
    path = tmp_path / "copy.db"
    shutil.copy(built[0], path)
    lisbon = built[1]["notes"]["lisbon"]
    with _open(path) as memory:
        client = TestClient(create_app(memory), base_url=BASE)
        token = client.app.state.inspector.csrf_token  # type: ignore[attr-defined]
        assert 'id="create-note-form"' not in client.get("/notes").text
        page = client.get(f"/notes/{lisbon}").text
        for form in ("update-note-form", "delete-note-form", "link-note-form"):
            assert f'id="{form}"' not in page
        fields = {"csrf": token, "title": "t", "kind": "entity", "target": "Lisbon"}
        for suffix in EDITS:
            address = "/notes" + suffix.replace("/x/", f"/{lisbon}/")
            answer = client.post(address, data=fields)
            assert answer.status_code == 403 and "--allow-edits" in answer.text, address
        assert memory.notes.count() == NOTES and memory.notes.get(lisbon).version == 2  # type: ignore[union-attr]


def _edit_client(memory: AgentMemoryManager) -> tuple[TestClient, str]:
    app = create_app(memory, allow_edits=True)
    return TestClient(app, base_url=BASE), app.state.inspector.csrf_token


@pytest.mark.postgres
@pytest.mark.slow
def test_notes_are_created_updated_linked_and_deleted_through_the_page(any_location: str) -> None:
    ids = build(any_location, hub_relations=5)
    with _open(any_location, read_only=False) as memory:
        client, token = _edit_client(memory)
        assert f'name="csrf" value="{token}"' in client.get("/notes").text
        made = client.post("/notes", follow_redirects=False, data={
            "csrf": token, "title": "Party <plan>", "content": "Cake\r\nBalloons",
            "tags": "home, a,b , party", "author": "dana",
        })  # fmt: skip
        assert made.status_code == 303
        note_id = made.headers["location"].removeprefix("/notes/")
        note = memory.notes.get(note_id)
        assert note is not None and note.title == "Party <plan>"
        assert note.content == "Cake\nBalloons"  # the browser's CRLF, as LF
        assert note.tags == ("home", "a", "b", "party") and note.created_by == "dana"
        page = client.get(f"/notes/{note_id}").text
        assert 'value="home, a, b, party"' in page and "Save as v2" in page
        memory.notes.update(note_id, tags=["home", "a,b"])  # a tag holding a comma (v2)
        client.post(f"/notes/{note_id}/update", data={
            "csrf": token, "title": "Party <plan>", "content": "Cake\r\nBalloons\r\nMusic",
            "tags": "home, a,b",  # as the page shows the tags: left alone
        })  # fmt: skip
        after = memory.notes.get(note_id)
        assert after is not None and after.version == 3
        assert after.content == "Cake\nBalloons\nMusic" and after.tags == ("home", "a,b")
        last = memory.notes.history(note_id)[-1]
        assert (last.changed, last.author) == (("content",), "inspector")
        same = client.post(f"/notes/{note_id}/update", data={
            "csrf": token, "title": "Party <plan>", "content": "Cake\r\nBalloons\r\nMusic",
            "tags": "home, a,b", "author": "eve",
        })  # fmt: skip
        assert same.status_code == 200 and memory.notes.get(note_id).version == 3  # type: ignore[union-attr]
        to_caroline = {"csrf": token, "kind": "entity", "target": "Caroline"}
        linked = client.post(f"/notes/{note_id}/link", data=to_caroline, follow_redirects=False)
        assert linked.status_code == 303
        client.post(f"/notes/{note_id}/link",
                    data={"csrf": token, "kind": "memory", "target": ids["prefs"]})  # fmt: skip
        assert [n.id for n in memory.notes.about(entity="Caroline")][-1] == note_id
        assert [n.id for n in memory.notes.about(memory=ids["prefs"])] == [note_id]
        to_prefs = {"csrf": token, "kind": "memory", "target": ids["prefs"]}
        unlinked = client.post(f"/notes/{note_id}/unlink", data=to_prefs, follow_redirects=False)
        assert unlinked.status_code == 303 and memory.notes.about(memory=ids["prefs"]) == []
        gone = client.post(f"/notes/{note_id}/delete", data={"csrf": token},
                           follow_redirects=False)  # fmt: skip
        assert gone.status_code == 303 and gone.headers["location"] == "/notes"
        assert memory.notes.get(note_id) is None
        assert client.get(f"/notes/{note_id}").status_code == 404
        again = client.post(f"/notes/{note_id}/delete", data={"csrf": token})
        assert again.status_code == 400 and "no note" in again.text
    with _open(any_location) as memory:  # committed: another handle sees it
        assert memory.notes.get(note_id) is None
        assert memory.notes.count() == NOTES


def test_note_edits_need_the_csrf_token_and_bad_input_changes_nothing(
    tmp_path: Path, built: tuple[Path, dict[str, Any]]
) -> None:
    path = tmp_path / "copy.db"
    shutil.copy(built[0], path)
    lisbon = built[1]["notes"]["lisbon"]
    with _open(path, read_only=False) as memory:
        client, token = _edit_client(memory)
        for suffix in EDITS:
            address = "/notes" + suffix.replace("/x/", f"/{lisbon}/")
            for form in ({"title": "forged"}, {"csrf": "forged", "title": "forged"}):
                answer = client.post(address, data=form)
                assert answer.status_code == 403 and "CSRF" in answer.text, address
        before = memory.notes.history(lisbon)
        for address, form in [
            ("/notes", {"title": "   "}),  # no title
            (f"/notes/{lisbon}/update", {"title": "x" * 501}),
            (f"/notes/{lisbon}/update", {"tags": ", ".join(f"t{i}" for i in range(65))}),
            (f"/notes/{lisbon}/link", {"kind": "memory", "target": "no-such-memory"}),
            (f"/notes/{lisbon}/link", {"kind": "entity", "target": "Nobody Known"}),
            (f"/notes/{lisbon}/link", {"kind": "note", "target": "x"}),
            (f"/notes/{lisbon}/unlink", {"kind": "memory", "target": "not-linked"}),
            ("/notes/missing/update", {"title": "t"}),
        ]:
            answer = client.post(address, data={"csrf": token, **form})
            assert answer.status_code == 400, (address, form, answer.text[:200])
            assert 'class="error"' in answer.text
        assert memory.notes.count() == NOTES
        assert memory.notes.history(lisbon) == before
    with _open(path) as memory:
        assert memory.notes.history(lisbon) == before
        assert len(memory.notes.get(lisbon).links) == 2  # type: ignore[union-attr]
