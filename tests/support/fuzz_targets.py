"""Seeded fuzzing of the four ways bad input reaches the library: import documents, CLI
arguments, MCP tool arguments and damaged database pages.

Each target takes a ``random.Random`` and a number of inputs and returns a :class:`Tally`.
The promises checked for every input:

- *raw*: nothing but a :class:`TieredMemoryError` escapes (the CLI: exit 0, 1 or 2 and
  no traceback; MCP: a ``ToolError`` caused by the library's error or by argument
  validation, nothing else);
- *partial*: an input that was refused changed nothing (a checksum of every row);
- *lost*: a memory acknowledged before is still there after a refused input, and (damaged
  pages) an input the library accepted leaves a file whose check says what it found.

Used by ``benchmarks/fuzz.py`` (100k inputs) and ``tests/faults/test_fuzz.py`` (a few hundred).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import shutil
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.support import data_checks
from tiered_memory import AgentMemoryManager, Tier, TieredMemoryError

CONFIG: dict[str, Any] = {"embedder": None}


@dataclass(slots=True)
class Tally:
    """Per-target counts; ``raw`` and ``notes`` say what went wrong."""

    target: str
    inputs: int = 0
    accepted: int = 0
    refused: int = 0
    lost: int = 0
    partial: int = 0
    raw: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.notes) < 20:
            self.notes.append(text[:400])

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.partial or self.raw)

    def line(self) -> str:
        return (f"{self.target}: {self.inputs} inputs, accepted {self.accepted}, refused "
                f"{self.refused}, lost {self.lost}, partial {self.partial}, raw errors "
                f"{sum(self.raw.values())} {dict(self.raw) or ''}")  # fmt: skip


# --- random values ----------------------------------------------------------------------

WEIRD_STRINGS = ["", " ", "\n\t", "\x00", "a\x00b", "é" * 3, "🦜", "\ud800".encode(
    "utf-8", "surrogatepass").decode("utf-8", "replace"), "x" * 70_000, "'; DROP TABLE x;--",
    "%s", "{}", "null", "-1", "1e309", "NaN", "../../etc/passwd", "semantic", "episodic",
    "scratchpad"]  # fmt: skip


def data_checksum(path: Path) -> str:
    """The data checksum without FTS5's segment tables, whose layout the keyword index's
    background merges change without changing what it holds."""
    return data_checks.data_checksum(path, fts_segments=False)


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(WEIRD_STRINGS)
    alphabet = string.printable + "éß中\u200b\U0001f600"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -1, 5, 2**31, 2**63, -(2**63) - 1, 10**30, rng.randrange(-9, 99)])
    if kind == 3:
        return rng.choice([0.0, -0.5, 0.5, 1.5, 1e308, -1e-308, float("inf"), float("nan")])
    if kind in (4, 5):
        return random_text(rng)
    if kind in (6, 7):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {random_text(rng): random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}


def populated(path: Path, n: int = 30) -> list[str]:
    """A store with ``n`` memories in two tiers, a session and a transcript; their ids."""
    with AgentMemoryManager.open(path, **CONFIG) as memory:
        session = memory.start_session(session_id="fuzz-session")
        ids = [
            memory.remember(f"memory {k} about the lighthouse and tide {k % 7}",
                            "semantic" if k % 3 == 0 else "episodic",
                            session_id=session.session_id if k % 2 else None,
                            agent_id="fuzz-agent" if k % 5 == 0 else None,
                            tags=("fuzz", f"t{k % 4}"), importance=0.5).id
            for k in range(n)
        ]  # fmt: skip
        memory.append_transcript(session.session_id, "user", "hello lighthouse")
        memory.maintain()
    return ids


def contents(memory: AgentMemoryManager) -> dict[str, str]:
    return {m.id: m.content for t in Tier for m in memory.query(t, limit=None)}


# --- import documents -------------------------------------------------------------------


def _slots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a JSON value, depth first."""
    found: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        for key in list(node):
            found += [(node, key), *_slots(node[key])]
    elif isinstance(node, list):
        for index in range(len(node)):
            found += [(node, index), *_slots(node[index])]
    return found


def _mutate_document(doc: Any, rng: random.Random) -> bytes:
    """One to three random changes to a valid export, then (sometimes) damaged bytes."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        nodes = _slots(doc)
        if not nodes:
            break
        parent, key = rng.choice(nodes)
        action = rng.randrange(5)
        if action == 0:
            parent[key] = random_value(rng)
        elif action == 1:
            del parent[key]
        elif action == 2 and isinstance(parent, dict):
            parent[random_text(rng)] = random_value(rng)
        elif action == 3 and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))  # a duplicate row
        else:
            parent[key] = copy.deepcopy(rng.choice(nodes)[0])  # a value from elsewhere
    try:
        data = orjson.dumps(doc)
    except TypeError:
        data = repr(doc).encode()
    if rng.random() < 0.15:
        cut = rng.randrange(len(data) + 1)
        data = data[:cut] if rng.random() < 0.5 else data[:cut] + bytes([rng.randrange(256)])
    return data


def fuzz_import(rng: random.Random, inputs: int, work: Path) -> Tally:
    tally = Tally("import documents")
    db = work / "import.db"
    populated(db)
    source = work / "source.db"
    populated(source, n=8)
    with AgentMemoryManager.open(source, **CONFIG) as memory:
        base = orjson.loads(memory.export_json(work / "base.json").read_bytes())
    doc_path = work / "fuzzed.json"
    with AgentMemoryManager.open(db, **CONFIG) as memory:
        checksum = data_checksum(db)
        for _ in range(inputs):
            tally.inputs += 1
            doc_path.write_bytes(_mutate_document(base, rng))
            mode = rng.choice(["replace", "merge", "replace", "merge", random_text(rng)])
            try:
                memory.import_json(doc_path, mode)
            except TieredMemoryError:
                tally.refused += 1
                if data_checksum(db) != checksum:
                    tally.partial += 1
                    tally.note(f"refused import changed the file: {doc_path.read_bytes()[:200]!r}")
                    checksum = data_checksum(db)
                continue
            except Exception as exc:
                tally.raw[type(exc).__name__] += 1
                tally.note(f"import {mode!r}: {type(exc).__name__}: {exc}")
                checksum = data_checksum(db)
                continue
            tally.accepted += 1
            result = memory.check_integrity()
            if not result.ok:
                tally.lost += 1
                tally.note(f"an accepted import left problems: {result.problems[:2]}")
            checksum = data_checksum(db)
    return tally


# --- CLI arguments ----------------------------------------------------------------------

COMMANDS = ["backup", "check", "copy", "entities", "export", "forget", "graph", "import",
            "list", "maintain", "migrate", "rekey", "restore", "salvage", "search",
            "sessions", "show", "stats", "notes add", "notes delete", "notes edit",
            "notes history", "notes link", "notes list", "notes show", "notes unlink"]  # fmt: skip
OPTIONS = ["--json", "--to", "--keep", "--force", "--allow-plaintext", "--session", "--agent",
           "--reason", "--type", "--limit", "--depth", "--mode", "--refuse-secrets", "--tier",
           "--tag", "--category", "--offset", "--vacuum", "--new-key-file", "-k",
           "--reinforce", "--all", "--agent-id", "--key-file", "--help", "--bogus"]  # fmt: skip
MUTATING = {"backup", "copy", "forget", "import", "maintain", "migrate", "rekey", "restore",
            "notes"}  # fmt: skip


def _cli_args(rng: random.Random, db: Path, files: list[str]) -> list[str]:
    command = rng.choice(COMMANDS).split() if rng.random() < 0.95 else [random_text(rng)]
    args = [*command]
    if rng.random() < 0.9:
        args.append(str(db) if rng.random() < 0.8 else rng.choice(files))
    for _ in range(rng.randrange(0, 5)):
        roll = rng.random()
        if roll < 0.4:
            args.append(rng.choice(OPTIONS))
        elif roll < 0.6:
            args.append(rng.choice(files))
        else:
            args.append(str(random_value(rng)) if rng.random() < 0.5 else random_text(rng))
    if command[0] == "search":
        args.append("--keywords-only")  # the model's load takes a second a call
    return [a.replace("\x00", "") for a in args]  # argv cannot hold NUL


def fuzz_cli(rng: random.Random, inputs: int, work: Path) -> Tally:
    """Relative paths among the arguments name files in ``work`` (the current folder)."""
    with contextlib.chdir(work):
        return _fuzz_cli(rng, inputs, work)


def _fuzz_cli(rng: random.Random, inputs: int, work: Path) -> Tally:
    from click.testing import CliRunner

    import tiered_memory.cli  # noqa: F401 (registers the commands)
    from tiered_memory.cli.app import main

    tally = Tally("CLI arguments")
    pristine = work / "cli-pristine.db"
    populated(pristine)
    db = work / "cli.db"
    (work / "garbage.db").write_bytes(b"not a database at all" * 100)
    (work / "empty.db").write_bytes(b"")
    (work / "key.txt").write_text("a key of some length")
    (work / "dir").mkdir(exist_ok=True)
    with AgentMemoryManager.open(pristine, **CONFIG) as memory:
        memory.export_json(work / "cli-export.json")
        backup = memory.backup()
        known = sorted(contents(memory))
    files = [str(work / n) for n in ("garbage.db", "empty.db", "key.txt", "dir", "missing.db",
                                     "cli-export.json", "new.db", "out.json")]  # fmt: skip
    files += [str(backup), *known[:3], str(work / "dir" / "nested" / "x.db")]
    runner = CliRunner()
    checksum = ""
    for n in range(inputs):
        if n % 200 == 0 or not db.exists():
            _fresh_copy(pristine, db)
            checksum = data_checksum(db)
        tally.inputs += 1
        args = _cli_args(rng, db, files)
        result = runner.invoke(main, args, catch_exceptions=True)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            tally.raw[type(result.exception).__name__] += 1
            tally.note(f"{args[:6]}: {type(result.exception).__name__}: {result.exception}")
            _fresh_copy(pristine, db)
            checksum = data_checksum(db)
            continue
        if result.exit_code not in (0, 1, 2):
            tally.raw[f"exit {result.exit_code}"] += 1
            tally.note(f"{args[:6]}: exit {result.exit_code}")
        if result.exit_code == 0:
            tally.accepted += 1
        else:
            tally.refused += 1
        if "Traceback" in result.output:
            tally.raw["traceback printed"] += 1
            tally.note(f"{args[:6]}: {result.output[-300:]}")
        try:
            now = data_checksum(db)
        except Exception:  # rekey encrypted it, say: start again from the pristine copy
            _fresh_copy(pristine, db)
            checksum = data_checksum(db)
            continue
        # `forget A B` exits 1 when an id is missing and forgets the others (documented);
        # `search --reinforce` records a review.
        writes = args[0] in MUTATING or (args[0] == "search" and "--reinforce" in args)
        by_design = args[0] == "forget" and ("not found: " in result.output
                                             or '"missing"' in result.output)  # fmt: skip
        if now != checksum and not by_design and (result.exit_code != 0 or not writes):
            tally.partial += 1
            tally.note(f"{args[:6]} exit {result.exit_code} changed the file")
        checksum = now
    return tally


def _fresh_copy(pristine: Path, db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(pristine, db)


# --- MCP tool arguments -------------------------------------------------------------------


def fuzz_mcp(rng: random.Random, inputs: int, work: Path) -> Tally:
    return asyncio.run(_fuzz_mcp(rng, inputs, work))


async def _fuzz_mcp(rng: random.Random, inputs: int, work: Path) -> Tally:
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    from tiered_memory.integrations.mcp_server import serving

    tally = Tally("MCP tool arguments")
    done = 0
    while done < inputs:
        db = work / f"mcp-{done}.db"
        ids = populated(db)
        async with serving(db, keywords_only=True) as server:
            tools = {t.name: list(t.input_schema.get("properties", {})) for t in
                     await server.list_tools()}  # fmt: skip
            checksum = data_checksum(db)
            for _ in range(min(2000, inputs - done)):
                done += 1
                tally.inputs += 1
                name = rng.choice(sorted(tools))
                arguments = _mcp_arguments(rng, tools[name], ids)
                try:
                    await server.call_tool(name, arguments)
                except ToolError as exc:
                    tally.refused += 1
                    cause = exc.__cause__
                    while isinstance(cause, ToolError):  # the server wraps the tool's
                        cause = cause.__cause__
                    if cause is not None and not isinstance(
                        cause, TieredMemoryError | ValidationError
                    ):
                        tally.raw[type(cause).__name__] += 1
                        tally.note(f"{name} {arguments!r:.200}: {type(cause).__name__}: {cause}")
                    if data_checksum(db) != checksum:  # a refusal, of any tool, wrote nothing
                        tally.partial += 1
                        tally.note(f"refused {name} {arguments!r:.200} changed the file")
                    continue
                except Exception as exc:
                    tally.raw[type(exc).__name__] += 1
                    tally.note(f"{name} {arguments!r:.200}: {type(exc).__name__}: {exc}")
                    continue
                tally.accepted += 1
                checksum = data_checksum(db)  # what any accepted tool wrote (notes too)
            survivors = await server.call_tool("statistics", {})
            del survivors
        with AgentMemoryManager.open(db, **CONFIG) as memory:
            if not memory.check_integrity().ok:
                tally.lost += 1
                tally.note(f"{db}: check failed after the MCP calls")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        shutil.rmtree(work / f"mcp-{done}-backups", ignore_errors=True)
    return tally


def _mcp_arguments(rng: random.Random, names: list[str], ids: list[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name in names:
        if rng.random() < 0.7:
            if name.endswith("id") and rng.random() < 0.5:
                arguments[name] = rng.choice([*ids, "fuzz-session", "fuzz-agent"])
            else:
                arguments[name] = random_value(rng) if rng.random() < 0.6 else random_text(rng)
    if rng.random() < 0.2:
        arguments[random_text(rng)] = random_value(rng)
    return arguments


# --- damaged pages ----------------------------------------------------------------------


def _damage(data: bytes, rng: random.Random) -> bytes:
    page = 4096
    pages = max(len(data) // page, 1)
    out = bytearray(data)
    action = rng.randrange(7)
    target = rng.randrange(pages) if rng.random() < 0.8 else 0
    start = target * page
    if action == 0:  # random bytes over part of a page
        a = start + rng.randrange(page)
        size = rng.randrange(1, 256)
        out[a : a + size] = rng.randbytes(size)
    elif action == 1:  # a zeroed page
        out[start : start + page] = bytes(page)
    elif action == 2:  # a torn page: the second half from another page
        other = rng.randrange(pages) * page
        out[start + page // 2 : start + page] = data[other + page // 2 : other + page]
    elif action == 3:  # cut off
        out = out[: rng.randrange(len(out) + 1)]
    elif action == 4:  # one bit
        a = rng.randrange(len(out))
        out[a] ^= 1 << rng.randrange(8)
    elif action == 5:  # the header
        a = rng.randrange(100)
        out[a] = rng.randrange(256)
    else:  # two pages swapped
        other = rng.randrange(pages) * page
        out[start : start + page], out[other : other + page] = (
            data[other : other + page], data[start : start + page])  # fmt: skip
    return bytes(out)


def fuzz_pages(rng: random.Random, inputs: int, work: Path) -> Tally:
    tally = Tally("damaged pages")
    pristine = work / "pages-pristine.db"
    ids = populated(pristine, n=60)
    data = pristine.read_bytes()
    db = work / "pages.db"
    calls: list[Callable[[AgentMemoryManager], object]] = [
        lambda m: m.check_integrity(),
        lambda m: m.query(Tier.EPISODIC, limit=None),
        lambda m: m.query(Tier.SEMANTIC, limit=None),
        lambda m: m.recall("lighthouse tide", k=5),
        lambda m: m.get(rng.choice(ids)),
        lambda m: m.statistics(),
        lambda m: m.remember("a new memory on a damaged file"),
        lambda m: m.forget(rng.choice(ids)),
        lambda m: m.promote(rng.choice(ids), Tier.SEMANTIC),
        lambda m: m.decay(),
        lambda m: m.get_transcript("fuzz-session"),
    ]
    for _ in range(inputs):
        tally.inputs += 1
        for suffix in ("-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        db.write_bytes(_damage(data, rng))
        refusals = 0
        try:
            with AgentMemoryManager.open(db, **CONFIG) as memory:
                for call in rng.sample(calls, 4):
                    try:
                        call(memory)
                    except TieredMemoryError:
                        refusals += 1
        except TieredMemoryError:
            refusals += 1
        except Exception as exc:
            tally.raw[type(exc).__name__] += 1
            tally.note(f"{type(exc).__name__}: {exc}")
            continue
        if refusals:
            tally.refused += 1
        else:
            tally.accepted += 1
    return tally


TARGETS: dict[str, Callable[[random.Random, int, Path], Tally]] = {
    "import": fuzz_import,
    "cli": fuzz_cli,
    "mcp": fuzz_mcp,
    "pages": fuzz_pages,
}
