"""The README's quick start and the demo run as a newcomer would run them; every page of
the documentation (the README and ``docs/``) is checked the same way: its Python blocks
run, the names it uses are exported, the files it names exist."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tiered_memory
from tiered_memory import AgentMemoryManager

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # 1.6 s measured on a busy machine
def test_quick_start_runs_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[:1]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "agent.db").exists()
    with AgentMemoryManager.open(tmp_path / "agent.db", embedder=None) as memory:
        stats = memory.statistics().storage  # it forgot the memory, not its promotion
        assert stats.promotion_count >= 1 and stats.forgotten_count >= 1


@pytest.mark.slow  # 5.4 s measured on a busy machine
@pytest.mark.subprocess
def test_demo_runs_and_shows_what_survived_a_restart(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tiered_memory.demo", str(tmp_path / "demo.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "scratchpad goal: Ship v1 on Friday" in result.stdout
    assert "'The user prefers dark mode' in semantic" in result.stdout
    assert "promotion log: episodic -> semantic (confirmed)" in result.stdout
    first_hit = result.stdout.split("recall(")[1].splitlines()[1]
    assert "The user prefers dark mode" in first_hit
    assert "why: keyword #" in result.stdout


PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
"""Every page a reader reads: the README and the documentation site's pages."""


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _python_blocks(p)], ids=_page_id)
def test_every_example_runs_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page's Python blocks run in order in a fresh folder, as a reader pastes them."""
    monkeypatch.chdir(tmp_path)
    for n, code in enumerate(_python_blocks(page)):
        exec(compile(code, f"{_page_id(page)} python block {n + 1}", "exec"), {})


def test_the_pages_hold_the_examples() -> None:
    """The examples moved with their text: the README keeps the quick start, the site
    holds the rest (a page that lost its blocks would pass the test above unseen)."""
    counts = {_page_id(p): len(_python_blocks(p)) for p in PAGES}
    assert counts["README.md"] == 1  # the quick start
    assert sum(n for page, n in counts.items() if page != "README.md") >= 14, counts


def test_every_name_the_pages_use_is_exported_by_tiered_memory() -> None:
    """Names imported in the pages' code blocks (from ``tiered_memory`` or
    ``persistence``) and classes named in their prose come from the top-level package."""
    imported: set[str] = set()
    named: set[str] = set()
    for page in PAGES:
        for code in _python_blocks(page):
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and node.module in (
                    "tiered_memory",
                    "persistence",
                ):
                    imported |= {alias.name for alias in node.names}
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        named |= set(
            re.findall(r"`(?:tiered_memory\.|persistence\.)?([A-Z]\w*[a-z]\w*)[`(.]", prose)
        )
    assert {"AgentMemoryManager", "RecallSettings", "EmbedderError"} <= imported
    missing = sorted(name for name in imported | named if name not in tiered_memory.__all__)
    assert missing == [], f"the pages name what tiered_memory does not export: {missing}"
    for name in imported | named:
        getattr(tiered_memory, name)  # importable from the top-level package itself
    assert issubclass(tiered_memory.EmbedderError, tiered_memory.TieredMemoryError)


def test_the_pages_point_only_at_files_inside_the_repository() -> None:
    """A path a page names in its text is a file of the repository (relative to its
    root); a link is a file relative to the page."""
    paths: set[str] = set()
    broken: list[str] = []
    for page in PAGES:
        text = page.read_text()
        assert "../shared" not in text, _page_id(page)
        prose = re.sub(r"\]\([^)]*\)", "]", text)
        paths |= set(re.findall(r"(?<![\w/.])([\w.-]+(?:/[\w.-]+)+\.(?:py|md))", prose))
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in link and not (page.parent / link).is_file():
                broken.append(f"{_page_id(page)}: {link}")
    assert "benchmarks/eval_locomo.py" in paths
    assert sorted(p for p in paths if not (ROOT / p).is_file()) == []
    assert broken == []


def test_the_readme_is_a_short_front_door() -> None:
    """At most ~200 lines; its first lines give the two commands; no long table."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert lines[4].strip().endswith("python -m tiered_memory.demo")
    assert lines[8].strip() == ".venv/bin/python -m pytest -n 2"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1].strip() == lines[8].strip()  # CI runs exactly the README's test command
    tables = re.findall(r"(?:^\|.*\n)+", "\n".join(lines) + "\n", flags=re.M)
    assert max(len(t.splitlines()) for t in tables) <= 8


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (a warning fails it) with no network; the pages it
    writes load nothing from another host but links."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    html = "".join(p.read_text() for p in (tmp_path / "site").rglob("*.html"))
    assert "API reference" in html and 'id="tiered_memory.AgentMemoryManager"' in html
    rendered = set(re.findall(r'id="tiered_memory\.(?:\w+\.)*?(\w+)"', html))
    public = [name for name in tiered_memory.__all__ if not name.startswith("__")]
    assert [name for name in public if name not in rendered] == []  # each has its entry
    assert re.findall(r"<(?:script|link)[^>]+(?:src|href)=\"https?://", html) == []


LOCOMO_LIKE = [
    {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Biscuit."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I started learning the violin."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "The weather was rainy all week."},
            ],
            "session_2_date_time": "9:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "My violin teacher is strict."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Biscuit chewed my shoes today."},
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ann's puppy?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Which instrument is Bob learning?",
                "answer": "violin",
                "evidence": ["D1:2", "D2:1"],
                "category": 1,
            },
        ],
    }
]  # made-up conversation in LoCoMo's format (the real data is not in the repository)


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_locomo_evaluation_runs_from_the_repository(tmp_path: Path) -> None:
    data = tmp_path / "tiny-locomo.json"
    data.write_text(json.dumps(LOCOMO_LIKE))
    result = subprocess.run(
        [sys.executable, "benchmarks/eval_locomo.py", "--data", str(data),
         "--retriever", "benchmarks/locomo_adapter.py:TieredMemoryAdapter"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "1 conversations, 5 memories (turns), 2 questions" in result.stdout
    assert "| tiered-memory | overall (1-4) | 2 | 1.000 |" in result.stdout


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_locomo_budgets_evaluation_runs_from_the_repository(tmp_path: Path) -> None:
    """``--budgets``: context() against recall's hits filled by hand, per budget, per half."""
    data = tmp_path / "tiny-locomo.json"
    data.write_text(json.dumps(LOCOMO_LIKE))
    result = subprocess.run(
        [sys.executable, "benchmarks/eval_locomo.py", "--data", str(data), "--budgets",
         "15,400", "--halves", "conv-test", "--json-out", str(tmp_path / "out.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header = "| n | context@15 | filled@15 | context@400 | filled@400 |"
    assert header in result.stdout and "tuning half: conv-test" in result.stdout
    overall = next(line for line in result.stdout.splitlines() if "overall (1-4)" in line)
    assert overall.endswith("| 1.000 | 1.000 |")  # 400 tokens hold all five turns
    assert "p50 ms per call" in result.stdout
    rows = json.loads((tmp_path / "out.json").read_text())["results"][0]["rows"]
    assert len(rows) == 2 and all(r["context@15"] <= r["context@400"] for r in rows)


@pytest.mark.subprocess
def test_the_locomo_evaluation_says_where_to_get_the_data(tmp_path: Path) -> None:
    clone = tmp_path / "clone" / "benchmarks"  # no ../shared beside this one
    clone.mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "eval_locomo.py", clone)
    for args in ((), ("--data", str(tmp_path / "missing.json"))):
        result = subprocess.run([sys.executable, str(clone / "eval_locomo.py"), *args],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 1
        assert "github.com/snap-research/LoCoMo" in result.stderr and "--data" in result.stderr


def _cli_reference() -> str:
    """What ``docs/cli_reference.py`` writes now."""
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "docs" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page: str = module.page()
    return page


def test_the_command_line_reference_is_current() -> None:
    """docs/guides/cli-reference.md is what the commands' ``--help`` print today (else:
    ``.venv/bin/python docs/cli_reference.py > docs/guides/cli-reference.md``)."""
    assert (ROOT / "docs" / "guides" / "cli-reference.md").read_text() == _cli_reference()


def test_every_command_and_option_is_on_the_command_line_pages() -> None:
    """Each command and subcommand has its section, each option its line (sqlite-utils'
    test_docs.py is the model)."""
    import click

    from tiered_memory.cli import main

    pages = "".join(
        (ROOT / "docs" / "guides" / name).read_text() for name in ("cli.md", "cli-reference.md")
    )
    missing: list[str] = []

    def walk(command: click.Command, path: list[str], ctx: click.Context | None) -> None:
        here = click.Context(command, info_name=path[-1], parent=ctx)
        if f"`{' '.join(path)}`" not in pages:
            missing.append(" ".join(path))
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                missing.extend(f"{' '.join(path)} {o}" for o in param.opts if o not in pages)
        if isinstance(command, click.Group):
            for name in command.list_commands(here):
                sub = command.get_command(here, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], here)

    walk(main, ["tiered-memory"], None)
    assert missing == []
    assert len(main.commands) >= 20  # the walk saw the commands
