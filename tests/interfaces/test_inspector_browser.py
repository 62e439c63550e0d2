"""The inspector in a real browser: Playwright driving Debian's chromium
(``/usr/bin/chromium``; ``.ci/run`` installs it) against a real ``tiered-memory serve``
process. One browser and one read-only server for the module; the edit test starts its
own server with ``--allow-edits`` on a copy of the file.

Every request the pages make goes through a route that lets only the server through:
anything else is aborted and recorded, and the tests require that nothing was."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright import sync_api

from tests.support.inspector_data import build
from tests.support.inspector_server import serving
from tiered_memory import AgentMemoryManager

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [pytest.mark.subprocess, pytest.mark.slow]  # a browser and servers: ~10 s


class Watched:
    """A page whose console errors, page errors, dialogs and outbound requests are kept."""

    def __init__(self, browser: Any, base: str) -> None:
        self.base = base
        self.errors: list[str] = []
        self.outbound: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1200, "height": 900})
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", self._dialog)
        self.page.route("**/*", self._route)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.accept()

    def _route(self, route: Any) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.outbound.append(route.request.url)
            route.abort()

    def goto(self, path: str) -> Any:
        answer = self.page.goto(self.base + path)
        assert answer is not None and answer.status == 200, path
        return self.page


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("browser") / "agent.db"
    return path, build(path)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def base(built: tuple[Path, dict[str, Any]]) -> Iterator[str]:
    with serving(built[0]) as url:
        yield url


@pytest.fixture
def tab(browser: Any, base: str) -> Iterator[Watched]:
    watched = Watched(browser, base)
    yield watched
    watched.page.close()
    assert watched.outbound == []
    assert watched.errors == []


def test_each_page_renders_without_errors_or_outbound_requests(
    tab: Watched, built: tuple[Path, dict[str, Any]]
) -> None:
    ids = built[1]
    for path, heading in [
        ("/", "Overview"), ("/memories", "Memories"), (f"/memories/{ids['prefs']}", "Memory"),
        ("/recall?q=dark+mode", "Recall playground"), ("/sessions", "Sessions"),
        (f"/sessions/{ids['session']}", "Session"), ("/graph", "Knowledge graph"),
        (f"/graph/{ids['caroline']}", "Caroline"), (f"/graph/{ids['atlas']}", "Atlas"),
        ("/notes", "Notes"), (f"/notes/{ids['notes']['lisbon']}", "Note: Lisbon move"),
        ("/recall?q=adoption+agency+monday&notes=1", "Recall playground"),
    ]:  # fmt: skip
        page = tab.goto(path)
        assert page.locator("h1").inner_text().startswith(heading), path
        assert page.locator("nav a").count() == 6
        twin = page.locator("#json-twin").get_attribute("href")
        assert twin is not None and ".json" in twin


def test_a_keyword_search_shows_the_expected_memory(tab: Watched) -> None:
    page = tab.goto("/memories")
    page.fill("#memory-search", "dark mode")
    page.press("#memory-search", "Enter")
    page.wait_for_url("**/memories?q=dark+mode*")
    rows = page.locator("tr.memory-row")
    assert rows.first.inner_text().startswith("The user prefers dark mode in every editor")
    page.get_by_role("link", name="atlas").count()  # facets are links
    page.goto(tab.base + "/memories?tag=atlas")
    assert page.locator("tr.memory-row").count() == 12


def test_a_recall_shows_the_expected_hits_with_their_bars(tab: Watched) -> None:
    page = tab.goto("/recall")
    page.fill("#recall-query", "adoption agency")
    page.click("button[type=submit]")
    page.wait_for_url("**/recall?q=adoption+agency*")
    hits = page.locator("li.hit")
    assert hits.count() == 5
    first = hits.first.locator(".hit-head a").inner_text()
    assert "adoption agency" in first
    assert hits.first.locator("rect.bar").count() >= 4  # signals and the three factors
    assert "keyword" in hits.first.locator(".why").inner_text()


def test_a_note_search_and_a_note_page_show_the_note_and_its_versions(
    tab: Watched, built: tuple[Path, dict[str, Any]]
) -> None:
    page = tab.goto("/notes")
    page.fill("#note-search", "flat river")
    page.press("#note-search", "Enter")
    page.wait_for_url("**/notes?q=flat+river*")
    rows = page.locator("tr.note-row")
    assert rows.count() == 1 and rows.first.locator("a.note-title").inner_text() == (
        "Lisbon move checklist"
    )
    page.click("tr.note-row a.note-title")
    page.wait_for_url(f"**/notes/{built[1]['notes']['lisbon']}")
    versions = page.locator("#note-history li.version")
    assert versions.count() == 2
    newest = versions.first.inner_text()
    assert "v2" in newest and "by bo" in newest and "changed content, tags" in newest
    assert "+New bank" in newest and "+urgent" in newest
    assert "Caroline's sister moved to Lisbon" in page.locator("#note-memories").inner_text()
    assert page.locator("#note-entities").inner_text().startswith("Lisbon")
    assert page.locator("#update-note-form").count() == 0  # read-only: no forms
    page = tab.goto("/recall")
    page.fill("#recall-query", "adoption agency monday")
    page.check("#recall-notes")
    page.click("button[type=submit]")
    page.wait_for_url("**/recall?q=adoption+agency+monday*notes=1*")
    note_hits = page.locator("li.note-hit")
    assert note_hits.count() == 1
    assert note_hits.first.locator(".hit-head a").inner_text() == "Adoption agency follow-up"
    assert note_hits.first.locator("rect.bar").count() >= 4


def test_a_memory_page_draws_its_forgetting_curve(
    tab: Watched, built: tuple[Path, dict[str, Any]]
) -> None:
    page = tab.goto(f"/memories/{built[1]['prefs']}")
    curve = page.locator("#forgetting-curve svg")
    assert curve.is_visible()
    box = curve.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    points = curve.locator("polyline.series").get_attribute("points")
    assert points is not None and len(points.split()) > 100
    assert curve.locator("line.hline").count() == 1  # the threshold
    assert curve.locator("line.marker").count() == 3  # the review, now, the next review
    assert "next review" in (curve.text_content() or "")


def test_a_script_in_a_memory_or_a_note_never_runs(
    tab: Watched, built: tuple[Path, dict[str, Any]]
) -> None:
    for path in (f"/memories/{built[1]['script']}", "/memories?per_page=100",
                 "/recall?q=window+pwned+document+title", f"/notes/{built[1]['notes']['script']}",
                 "/notes", "/recall?q=pwned+note&notes=1"):  # fmt: skip
        page = tab.goto(path)
        assert page.evaluate("window.__pwned") is None, path
        assert page.title() != "pwned"
        assert "<script>window.__pwned = 1" in page.locator("main").inner_text(), path
    assert tab.dialogs == []


def test_an_edit_through_the_page_is_in_the_file_afterwards(
    browser: Any, tmp_path: Path, built: tuple[Path, dict[str, Any]]
) -> None:
    path = tmp_path / "edited.db"
    shutil.copy(built[0], path)
    ids = built[1]
    with serving(path, "--allow-edits") as url:
        tab = Watched(browser, url)
        page = tab.goto(f"/memories/{ids['weak']}")
        page.select_option("#review-form select[name=quality]", "5")
        page.click("#review-form button")
        page.wait_for_load_state()
        assert "edits allowed" in page.locator("header").inner_text()
        page = tab.goto(f"/memories/{ids['again']}")
        page.select_option("#promote-form select[name=to_tier]", "semantic")
        page.fill("#promote-form input[name=reason]", "promoted <b>by hand</b>")
        page.click("#promote-form button")
        page.wait_for_url(f"**/memories/{ids['again']}")
        assert "promoted <b>by hand</b>" in page.locator("#promotions").inner_text()
        page = tab.goto(f"/memories/{ids['weak']}")
        page.fill("#forget-form input[name=reason]", "wrong, said the user")
        page.click("#forget-form button")
        page.wait_for_url("**/memories")
        assert tab.dialogs and "Forget this memory" in tab.dialogs[0]  # asked first
        assert tab.errors == [] and tab.outbound == []
        tab.page.close()
    with AgentMemoryManager.open(path, read_only=True, embed_in_background=False) as memory:
        assert memory.get(ids["weak"]) is None
        assert memory.forgetting_log(ids["weak"])[-1].reason == "wrong, said the user"
        assert memory.promotion_history(ids["again"])[-1].reason == "promoted <b>by hand</b>"
        assert memory.get(ids["again"]).tier.value == "semantic"  # type: ignore[union-attr]


def test_note_edits_through_the_page_are_in_the_file_afterwards(
    browser: Any, tmp_path: Path, built: tuple[Path, dict[str, Any]]
) -> None:
    path = tmp_path / "notes.db"
    shutil.copy(built[0], path)
    ids = built[1]
    with serving(path, "--allow-edits") as url:
        tab = Watched(browser, url)
        page = tab.goto("/notes")
        form = "#create-note-form"
        page.fill(f"{form} input[name=title]", "Trip <to> Porto")
        page.fill(f"{form} textarea[name=content]", "Train on Friday\nHotel near the river")
        page.fill(f"{form} input[name=tags]", "travel, porto")
        page.fill(f"{form} input[name=author]", "ana")
        page.click(f"{form} button")
        page.wait_for_url("**/notes/*")
        created = page.url.rsplit("/", 1)[1]
        assert page.locator("#note-title").inner_text() == "Trip <to> Porto"
        form = "#update-note-form"
        content = page.locator(f"{form} textarea[name=content]").input_value()
        assert content == "Train on Friday\nHotel near the river"  # as written, line breaks too
        page.fill(f"{form} textarea[name=content]", content + "\nBook the museum")
        page.fill(f"{form} input[name=author]", "bo")
        page.click(f"{form} button")
        page.wait_for_url(f"**/notes/{created}")
        assert page.locator("#note-history li.version").count() == 2
        page.select_option("#link-note-form select[name=kind]", "memory")
        page.fill("#link-note-form input[name=target]", ids["prefs"])
        page.click("#link-note-form button")
        page.wait_for_url(f"**/notes/{created}")
        assert "dark mode" in page.locator("#note-memories").inner_text()
        page = tab.goto(f"/notes/{ids['notes']['adoption']}")
        page.click("#delete-note-form button")
        page.wait_for_url("**/notes")
        assert tab.dialogs and "Delete this note" in tab.dialogs[0]  # asked first
        assert tab.errors == [] and tab.outbound == []
        tab.page.close()
    with AgentMemoryManager.open(path, read_only=True, embed_in_background=False) as memory:
        note = memory.notes.get(created)
        assert note is not None and note.tags == ("travel", "porto")
        assert note.content == "Train on Friday\nHotel near the river\nBook the museum"
        history = memory.notes.history(created)
        assert [(v.author, v.changed) for v in history] == [
            ("ana", ("title", "content", "tags")), ("bo", ("content",))
        ]  # fmt: skip
        assert [n.id for n in memory.notes.about(memory=ids["prefs"])] == [created]
        assert memory.notes.get(ids["notes"]["adoption"]) is None
