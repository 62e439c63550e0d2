"""Kill campaign: SIGKILL a working process over and over and check every acknowledged op.

Run from the repository root (not collected by pytest, not run by CI)::

    .venv/bin/python benchmarks/kill_campaign.py --kills 1000
    .venv/bin/python benchmarks/kill_campaign.py --kills 100000 --seconds 600 --seed 7

Each round starts a worker process on one database. It writes (single memories and
transaction batches), forgets, promotes and, at random, runs ``decay()`` (memories fade in
seconds here), ``backup(keep=4)``, ``restore()`` of one of its snapshots and
``import_json()`` of a prepared export (replace or merge). It journals ``begin`` before
and ``end`` (with the result) after every call, line-buffered into a file outside the
database folder. The parent SIGKILLs it at a random moment: anywhere in the round, or
just after a backup, restore, import or decay began (within that operation's measured
duration). Then the parent replays the journal on its model of the file and checks:

- every acknowledged operation is in the file (*lost*: a memory missing or changed;
  *phantoms*: a memory no operation explains; *wrong tier*);
- the operation in flight at the kill happened entirely or not at all: a restore leaves
  exactly the old memories or exactly the snapshot's (*partial restores*), an import the
  old ones or the imported result (*partial imports*), a batch all or none of its writes;
- ``PRAGMA integrity_check`` and a fresh manager's ``check_integrity()`` pass
  (*integrity failures*); every acknowledged snapshot holds what the model held when it
  was taken (*bad snapshots*);
- *leftovers*: temporary files of killed backups and restores still there after the
  parent opened and checked the database (reported; a failure only with
  ``--strict-leftovers``).

The model then adopts the file's exact content (after a kill the in-flight operation's
outcome is known only from the file) and the next round starts. Prints one summary line;
exits 1 when any check failed. A failing round's journal and database are kept.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code

import apsw
import numpy as np
import orjson

from tiered_memory import AgentMemoryManager, Tier, TieredMemoryError

State = dict[str, tuple[str, str]]  # memory id -> (content, tier)
# Memories fade in seconds (stability 1.7 s to 8.6 s), so decay() forgets a lot, in batches.
CONFIG: dict[str, Any] = {"embedder": None, "initial_stability_days": 2e-5,
                          "decay_batch_size": 100}  # fmt: skip
WEIGHTS = {"write": 40, "batch": 10, "forget": 8, "promote": 12, "decay": 8, "backup": 8,
           "restore": 6, "import": 8}  # fmt: skip
LONG_OPS = ("backup", "restore", "import", "decay")
VECTOR_INDEX_ENV = "TM_KILL_VECTOR_INDEX"
"""``cells``: every process of the campaign opens the file with ``vector_index="cells"`` and
:class:`HashEmbedder` (set by ``--vector-index``; the workers inherit it)."""


class HashEmbedder:
    """A deterministic stand-in model: each text its own unit vector (128 dimensions, so a
    file of 1,024 of them or more keeps vector cells)."""

    model_id = "kill-campaign-hash"
    dim = 128

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([_hash_vector(text) for text in texts])


def _hash_vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(HashEmbedder.dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def config() -> dict[str, Any]:
    """The managers' options: :data:`CONFIG`, with cells and vectors under ``--vector-index
    cells`` (a background thread embeds new memories: kills land in its commits too)."""
    if os.environ.get(VECTOR_INDEX_ENV) != "cells":
        return CONFIG
    return {**CONFIG, "vector_index": "cells", "embedder": HashEmbedder()}


DOCS = {"A": 2000, "B": 600}  # prepared exports: memories in each


# --- the worker process ------------------------------------------------------------------


class Journal:
    """Line-buffered JSON lines: each write reaches the OS before the call returns."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.seq = 0

    def begin(self, op: str, **fields: Any) -> int:
        self.seq += 1
        self.write({"b": self.seq, "op": op, "t": time.time(), **fields})
        if op in LONG_OPS:
            print(f"B {op}", flush=True)  # the parent may aim its kill at this operation
        return self.seq

    def end(self, seq: int, **fields: Any) -> None:
        self.write({"e": seq, "t": time.time(), **fields})

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(orjson.dumps(record).decode() + "\n")


@dataclass
class SharedOps:
    """The operations every campaign's worker runs alike (``write``, ``batch``, ``forget``,
    ``promote``), each journaled before and after; ``seq``: the journal entry of the one
    in flight (0: none begun), for the caller's failure record."""

    memory: Any
    journal: Journal
    rng: random.Random
    text: Callable[[], str]
    everything: list[str]
    episodic: list[str]
    seq: int = 0

    def run(self, op: str) -> bool:
        """Run ``op`` if it is one of these (True); False for any other (nothing done)."""
        memory, journal, rng, everything, episodic = (
            self.memory, self.journal, self.rng, self.everything, self.episodic
        )  # fmt: skip
        if op == "write":
            content, tier = self.text(), "semantic" if rng.random() < 0.3 else "episodic"
            self.seq = journal.begin(op, content=content, tier=tier)
            stored = memory.remember(content, tier, importance=rng.random())
            journal.end(self.seq, id=stored.id)
            everything.append(stored.id)
            if tier == "episodic":
                episodic.append(stored.id)
        elif op == "batch":
            contents = [self.text() for _ in range(rng.randint(2, 6))]
            self.seq = journal.begin(op, contents=contents)
            with memory.transaction():
                ids = [memory.remember(c, importance=rng.random()).id for c in contents]
            journal.end(self.seq, ids=ids)
            episodic += ids
            everything += ids
        elif op == "forget":
            memory_id = rng.choice(everything)
            self.seq = journal.begin(op, id=memory_id)
            found = memory.forget(memory_id, reason="kill campaign")
            journal.end(self.seq, found=found)
            everything.remove(memory_id)
            if memory_id in episodic:
                episodic.remove(memory_id)
        elif op == "promote":
            memory_id = episodic.pop(rng.randrange(len(episodic)))
            self.seq = journal.begin(op, id=memory_id)
            memory.promote(memory_id, Tier.SEMANTIC, reason="kill campaign")
            journal.end(self.seq)
        else:
            return False
        return True


def worker(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    journal = Journal(args.journal)
    docs = {name: Path(args.exports) / f"{name}.json" for name in DOCS}
    weights = dict(WEIGHTS)
    if args.bias in weights:
        weights[args.bias] += 40
    memory = AgentMemoryManager.open(args.db, **config())
    print("READY", flush=True)
    episodic: list[str] = []
    everything: list[str] = []
    n = 0

    def reload() -> None:
        episodic[:] = [m.id for m in memory.query(Tier.EPISODIC, limit=None)]
        everything[:] = episodic + [m.id for m in memory.query(Tier.SEMANTIC, limit=None)]

    def text() -> str:
        nonlocal n
        n += 1
        return f"kill {args.round} {n} " + "k" * rng.randrange(0, 800)

    shared = SharedOps(memory, journal, rng, text, everything, episodic)
    reload()
    while True:
        op = rng.choices(list(weights), list(weights.values()))[0]
        if op in ("forget", "promote") and not episodic:
            op = "write"
        if op == "restore" and not memory.backups.list_backups():
            op = "backup"
        seq = shared.seq = 0
        try:
            if shared.run(op):
                pass
            elif op == "decay":
                seq = journal.begin(op)
                report = memory.decay()
                journal.end(seq, forgotten=list(report.forgotten_ids))
                gone = set(report.forgotten_ids)
                episodic[:] = [i for i in episodic if i not in gone]
                everything[:] = [i for i in everything if i not in gone]
            elif op == "backup":
                seq = journal.begin(op)
                path = memory.backup(keep=4)
                journal.end(seq, path=str(path))
            elif op == "restore":
                source = str(rng.choice(memory.backups.list_backups()))
                seq = journal.begin(op, path=source)
                memory.restore(source)
                journal.end(seq)
                reload()
            else:
                doc, mode = rng.choice(list(DOCS)), rng.choice(("replace", "merge"))
                seq = journal.begin(op, doc=doc, mode=mode)
                memory.import_json(docs[doc], mode)
                journal.end(seq)
                reload()
        except Exception as exc:
            seq = seq or shared.seq
            raw = not isinstance(exc, TieredMemoryError)
            journal.write({"x": seq, "op": op, "type": type(exc).__name__, "raw": raw,
                           "msg": str(exc)[:500]})  # fmt: skip
            reload()


# --- reading a database --------------------------------------------------------------------


def read_file(path: Path, live: bool = True) -> tuple[State, dict[str, int], list[str]]:
    """(memories, when decay last forgot each id, integrity_check problems), plain APSW.

    The live file is opened read-write: after a kill, reading its WAL may need recovery.
    """
    flags = apsw.SQLITE_OPEN_READWRITE if live else apsw.SQLITE_OPEN_READONLY
    conn = apsw.Connection(str(path), flags=flags)
    try:
        damage = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
        state: State = {}
        decayed: dict[str, int] = {}
        if "forgetting_log" not in tables:
            return state, decayed, []  # killed before the first migration committed
        for tier in Tier:
            for memory_id, content in conn.execute(f"SELECT id, content FROM {tier.value}"):
                if memory_id in state:
                    damage.append(f"memory {memory_id} in {state[memory_id][1]} and {tier.value}")
                state[memory_id] = (content, tier.value)
        for memory_id, at in conn.execute(
            "SELECT memory_id, max(forgotten_at) FROM forgetting_log "
            "WHERE reason LIKE 'decay%' GROUP BY memory_id"
        ):
            decayed[memory_id] = at
        return state, decayed, [d for d in damage if d != "ok"]
    finally:
        conn.close()


def library_check(db: Path) -> list[str]:
    """A fresh manager's ``check_integrity()`` (opening also runs any cleanup it does)."""
    try:
        with AgentMemoryManager.open(db, **config()) as memory:
            result = memory.check_integrity()
    except Exception as exc:
        return [f"open/check raised {type(exc).__name__}: {exc}"]
    return [f"{p.check}: {p.detail}" for p in result.problems]


def leftovers(db: Path) -> list[Path]:
    """Temporary files of backups and restores (``.NAME.xxxx.partial*``, ``.restore-*``)."""
    found = list(db.parent.glob(".restore-*"))
    backups = db.with_name(f"{db.stem}-backups")
    if backups.is_dir():
        found += [p for p in backups.iterdir() if p.name.startswith(".") and ".partial" in p.name]
    return found


# --- the parent's model --------------------------------------------------------------------


@dataclass(slots=True)
class Op:
    seq: int
    name: str
    begin: dict[str, Any]
    end: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def parse_journal(path: Path) -> tuple[list[Op], list[dict[str, Any]]]:
    """The operations, and errors raised before an operation began (complete lines only:
    a kill may cut the last one)."""
    ops: dict[int, Op] = {}
    orphans: list[dict[str, Any]] = []
    data = path.read_bytes() if path.exists() else b""
    for line in data.split(b"\n")[:-1]:
        record = orjson.loads(line)
        if "b" in record:
            ops[record["b"]] = Op(record["b"], record["op"], record)
        elif "e" in record:
            ops[record["e"]].end = record
        elif record["x"] in ops:
            ops[record["x"]].error = record
        else:
            orphans.append(record)
    return sorted(ops.values(), key=lambda o: o.seq), orphans


@dataclass(slots=True)
class Tally:
    kills: int = 0
    ops_verified: int = 0
    lost: int = 0
    phantoms: int = 0
    wrong_tier: int = 0
    partial_restores: int = 0
    partial_imports: int = 0
    partial_batches: int = 0
    integrity_failures: int = 0
    bad_snapshots: int = 0
    journal_anomalies: int = 0
    left_by_kills: int = 0
    leftovers_after_open: int = 0  # after the last round
    most_leftovers_after_open: int = 0
    mid_op: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    raw: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def failed(self, strict_leftovers: bool) -> bool:
        bad = (self.lost + self.phantoms + self.wrong_tier + self.partial_restores
               + self.partial_imports + self.partial_batches + self.integrity_failures
               + self.bad_snapshots + self.journal_anomalies + sum(self.raw.values()))  # fmt: skip
        return bad > 0 or (strict_leftovers and self.most_leftovers_after_open > 0)


class Campaign:
    """The parent: runs rounds, keeps the expected state, judges each kill."""

    def __init__(self, root: Path, db: Path, seed: int, strict_leftovers: bool) -> None:
        self.root, self.db, self.strict = root, db, strict_leftovers
        self.rng = random.Random(seed)
        self.seed = seed
        self.journals = root / "journals"
        self.exports = root / "exports"
        self.failures = root / "failures"
        for d in (self.journals, self.exports, self.failures, db.parent):
            d.mkdir(parents=True, exist_ok=True)
        self.docs = {name: self._prepare(name, count) for name, count in DOCS.items()}
        with AgentMemoryManager.open(db, **config()):
            pass
        self.state, _, damage = read_file(db)
        if damage:
            raise SystemExit(f"{db} is damaged before the campaign: {damage[0]}")
        self.snaps: dict[str, State] = {}
        for snapshot in self._snapshot_files():  # from an earlier campaign on this --db
            self.snaps[str(snapshot)] = read_file(snapshot, live=False)[0]
        self.durations: dict[str, list[float]] = {op: [] for op in LONG_OPS}
        self.tally = Tally()

    def _prepare(self, name: str, count: int) -> State:
        """An export of ``count`` memories (a third semantic), and what it holds."""
        prep = self.exports / f"{name}.db"
        target = self.exports / f"{name}.json"
        for stale in (prep, target):
            stale.unlink(missing_ok=True)
        rng = random.Random(f"{self.seed}-{name}")
        with AgentMemoryManager.open(prep, **config()) as memory, memory.transaction():
            for i in range(count):
                tier = Tier.SEMANTIC if i % 3 == 0 else Tier.EPISODIC
                content = f"import {name} {i} " + "i" * rng.randrange(100, 600)
                memory.remember(content, tier, importance=rng.random())
        with AgentMemoryManager.open(prep, **config()) as memory:
            memory.export_json(target)
        return read_file(prep)[0]

    def _snapshot_files(self) -> list[Path]:
        backups = self.db.with_name(f"{self.db.stem}-backups")
        if not backups.is_dir():
            return []
        return sorted(p for p in backups.glob(f"{self.db.stem}-*.db"))

    # --- one round ---------------------------------------------------------------------------

    def round(self, number: int) -> None:
        journal = self.journals / f"round-{number:06d}.jsonl"
        before = set(leftovers(self.db))
        roll = self.rng.random()
        bias = self.rng.choice(LONG_OPS) if roll < 0.55 else "none"
        command = [sys.executable, __file__, "--worker", "--db", str(self.db), "--journal",
                   str(journal), "--exports", str(self.exports), "--seed",
                   str(self.seed * 1_000_003 + number), "--bias", bias, "--round",
                   str(number)]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(process, lines), daemon=True)
        reader.start()
        if roll >= 0.95:  # early: maybe while opening
            time.sleep(self.rng.uniform(0.0, 0.6))
        elif self._wait_for(lines, "READY", 30.0):
            if bias == "none":
                time.sleep(self.rng.uniform(0.0, 2.0))
            elif all(self._wait_for(lines, f"B {bias}", 10.0)
                     for _ in range(self.rng.randint(1, 4))):  # fmt: skip
                time.sleep(self.rng.uniform(0.0, 1.2 * self._typical(bias)))
        process.send_signal(signal.SIGKILL)
        if process.wait(60) != -signal.SIGKILL:
            self.tally.raw[f"worker exited by itself ({process.returncode})"] += 1
        reader.join(10)
        self.tally.kills += 1
        self.judge(number, journal, before)

    def _wait_for(self, lines: queue.Queue[str], wanted: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                if lines.get(timeout=left).strip() == wanted:
                    return True
            except queue.Empty:
                break
        return False

    def _typical(self, op: str) -> float:
        seen = sorted(self.durations[op][-50:])
        return seen[len(seen) // 2] if seen else 0.2

    # --- judging -------------------------------------------------------------------------------

    def judge(self, number: int, journal: Path, before: set[Path]) -> None:
        """Check the file after a kill; ``before``: temporary files there before the round."""
        t = self.tally
        ops, orphans = parse_journal(journal)
        problems: list[str] = []
        for error in orphans:
            (t.raw if error["raw"] else t.errors)[error["type"]] += 1
            t.notes.append(f"round {number} before {error['op']}: {error['type']}: {error['msg']}")
        state = dict(self.state)
        inflight: Op | None = None
        for index, op in enumerate(ops):
            if op.end is None and op.error is None:
                if index != len(ops) - 1:
                    problems.append(f"op {op.seq} {op.name} neither ended nor failed")
                    t.journal_anomalies += 1
                inflight = op
                continue
            t.ops_verified += 1
            if op.error is not None:
                (t.raw if op.error["raw"] else t.errors)[op.error["type"]] += 1
                if op.error["raw"] or t.errors[op.error["type"]] == 1:
                    t.notes.append(f"round {number} {op.name}: {op.error['type']}: "
                                   f"{op.error['msg']}")  # fmt: skip
                continue  # a failed call changed nothing (checked below with the rest)
            if op.name in LONG_OPS:
                assert op.end is not None
                self.durations[op.name].append(op.end["t"] - op.begin["t"])
            problems += self._apply(op, state)
        actual, decayed, damage = read_file(self.db)
        if damage:
            t.integrity_failures += 1
            problems.append(f"integrity: {damage[:3]}")
        problems += self._judge_inflight(inflight, state, actual, decayed)
        problems += self._judge_snapshots(inflight, state)
        t.left_by_kills += len(set(leftovers(self.db)) - before)
        library = library_check(self.db)
        if library:
            t.integrity_failures += 1
            problems.append(f"check_integrity: {library[:3]}")
        remaining = leftovers(self.db)
        t.leftovers_after_open = len(remaining)
        t.most_leftovers_after_open = max(t.most_leftovers_after_open, len(remaining))
        if inflight is not None:
            t.mid_op[inflight.name] += 1
        self.state = actual  # the in-flight op's outcome is known only from the file
        if problems or (self.strict and remaining):
            keep = self.failures / f"round-{number:06d}"
            keep.mkdir(exist_ok=True)
            if journal.exists():  # a worker killed before it started has none
                shutil.copy(journal, keep)
            for suffix in ("", "-wal"):
                if Path(f"{self.db}{suffix}").exists():
                    shutil.copy(f"{self.db}{suffix}", keep)
            for problem in problems[:10]:
                t.notes.append(f"round {number}: {problem}")
            if remaining and self.strict:
                t.notes.append(f"round {number}: leftovers {[p.name for p in remaining]}")
        else:
            journal.unlink(missing_ok=True)

    def _judge_snapshots(self, inflight: Op | None, state: State) -> list[str]:
        """Each snapshot holds what the model held when it was last written to that name.

        (Names are reused: a rotation frees a name and the next backup in the same second
        takes it.) One published by a backup killed after publishing holds ``state``.
        """
        problems = []
        present = {str(p) for p in self._snapshot_files()}
        for path in sorted(present):
            content = read_file(Path(path), live=False)[0]
            if content != self.snaps.get(path):
                if inflight is None or inflight.name != "backup" or content != state:
                    self.tally.bad_snapshots += 1
                    problems.append(f"snapshot {path} holds what no backup took")
                self.snaps[path] = content
        self.snaps = {p: s for p, s in self.snaps.items() if p in present}
        return problems

    def _apply(self, op: Op, state: State) -> list[str]:
        """Apply one acknowledged operation to the model; return model disagreements."""
        b, e = op.begin, op.end
        assert e is not None
        if op.name == "write":
            state[e["id"]] = (b["content"], b["tier"])
        elif op.name == "batch":
            for memory_id, content in zip(e["ids"], b["contents"], strict=True):
                state[memory_id] = (content, "episodic")
        elif op.name == "forget":
            if (state.pop(b["id"], None) is not None) != e["found"]:
                return [f"forget {b['id']} returned {e['found']}, the model disagrees"]
        elif op.name == "promote":
            state[b["id"]] = (state[b["id"]][0], "semantic")
        elif op.name == "decay":
            unknown = [i for i in e["forgotten"] if state.pop(i, None) is None]
            if unknown:
                return [f"decay forgot {len(unknown)} memories the model does not hold"]
        elif op.name == "backup":
            self.snaps[e["path"]] = dict(state)
        elif op.name == "restore":
            if b["path"] not in self.snaps:
                self.tally.journal_anomalies += 1
                return [f"restore from {b['path']}, a snapshot the model does not know"]
            state.clear()
            state.update(self.snaps[b["path"]])
        elif op.name == "import":
            state.update(self._imported(state, b))
        return []

    def _imported(self, state: State, begin: dict[str, Any]) -> State:
        """The state after an import (merge: the newer row wins; the file's never is older)."""
        doc = self.docs[begin["doc"]]
        if begin["mode"] == "replace":
            state.clear()
            return dict(doc)
        return {i: v for i, v in doc.items() if i not in state}

    def _judge_inflight(self, op: Op | None, state: State, actual: State,
                        decayed: dict[str, int]) -> list[str]:  # fmt: skip
        """Is ``actual`` the model with the in-flight operation done entirely or not at all?"""
        t = self.tally
        if op is None or op.name == "backup":
            return self._diff(state, actual, "")
        b = op.begin
        if op.name in ("restore", "import"):
            after = dict(state)
            if op.name == "restore":
                if b["path"] not in self.snaps:
                    t.journal_anomalies += 1
                    return [f"restore from {b['path']}, a snapshot the model does not know"]
                after = dict(self.snaps[b["path"]])
            else:
                after.update(self._imported(after, b))
            t.ops_verified += 1
            if actual in (state, after):
                return []
            if op.name == "restore":
                t.partial_restores += 1
            else:
                t.partial_imports += 1
            old, new = _distance(state, actual), _distance(after, actual)
            return [f"partial {op.name} {b}: {old} memories from the old state, {new} from "
                    "the new one"]  # fmt: skip
        t.ops_verified += 1
        expected = dict(state)
        extras = {i: v for i, v in actual.items() if i not in state}
        if op.name == "write" and len(extras) == 1:
            ((memory_id, value),) = extras.items()
            if value == (b["content"], b["tier"]):
                expected[memory_id] = value
        elif op.name == "batch" and extras:
            if sorted(c for c, _ in extras.values()) == sorted(b["contents"]):
                expected.update(extras)
            else:
                t.partial_batches += 1
                return [f"batch of {len(b['contents'])} left {len(extras)} memories"]
        elif op.name == "forget" and b["id"] not in actual:
            expected.pop(b["id"], None)
        elif (
            op.name == "promote"
            and b["id"] in expected
            and actual.get(b["id"], ("", ""))[1] == "semantic"
        ):
            expected[b["id"]] = (expected[b["id"]][0], "semantic")
        elif op.name == "decay":
            began_ms = int(b["t"] * 1000) - 1
            for memory_id, (_, tier) in state.items():
                by_this_pass = decayed.get(memory_id, 0) >= began_ms
                if memory_id not in actual and tier == "episodic" and by_this_pass:
                    expected.pop(memory_id)
        return self._diff(expected, actual, f" (in flight: {op.name})")

    def _diff(self, expected: State, actual: State, where: str) -> list[str]:
        t = self.tally
        lost = [i for i, v in expected.items() if actual.get(i, (None,))[0] != v[0]]
        phantoms = [i for i in actual if i not in expected]
        tiers = [i for i, v in expected.items() if i in actual and actual[i] != v and i not in lost]
        t.lost += len(lost)
        t.phantoms += len(phantoms)
        t.wrong_tier += len(tiers)
        found = []
        if lost:
            found.append(f"lost {len(lost)}{where}, e.g. {lost[:3]}")
        if phantoms:
            found.append(f"phantoms {len(phantoms)}{where}, e.g. {phantoms[:3]}")
        if tiers:
            found.append(f"wrong tier {len(tiers)}{where}, e.g. {tiers[:3]}")
        return found


def _distance(reference: State, actual: State) -> int:
    """How many memories of ``actual`` match ``reference`` exactly."""
    return sum(1 for i, v in actual.items() if reference.get(i) == v)


def _pump(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)


# --- main --------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="rounds, each ending in SIGKILL")
    parser.add_argument("--seconds", type=float, help="stop after this long, even if fewer kills")
    parser.add_argument("--db", type=Path, help="database file (default: a new temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict-leftovers", action="store_true",
                        help="fail when temporary files survive the next open")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temporary files")
    parser.add_argument("--ledger", type=Path,
                        help="append this run's totals (one JSON line) and print the sum of all "
                        "runs in the file, e.g. benchmarks/results/kill_ledger.jsonl")  # fmt: skip
    parser.add_argument("--vector-index", choices=("ram", "cells"), default="ram",
                        help="cells: embed every memory (a hash model) and keep vector cells, "
                        "checked by check_integrity's vector_cells_match")  # fmt: skip
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--journal", "--exports", "--bias", "--round"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    if args.kills < 1:
        parser.error("--kills must be >= 1")
    os.environ[VECTOR_INDEX_ENV] = args.vector_index

    root = Path(tempfile.mkdtemp(prefix="kill-campaign-"))
    db = args.db if args.db is not None else root / "db" / "campaign.db"
    campaign = Campaign(root, db.resolve(), args.seed, args.strict_leftovers)
    start = time.monotonic()
    number = 0
    while number < args.kills and (args.seconds is None or time.monotonic() - start < args.seconds):
        number += 1
        campaign.round(number)
        if number % 50 == 0:
            t = campaign.tally
            print(f"... {number} kills, {time.monotonic() - start:.0f} s, ops verified "
                  f"{t.ops_verified}, memories {len(campaign.state)}, problems "
                  f"{t.failed(args.strict_leftovers)}", file=sys.stderr, flush=True)  # fmt: skip
    elapsed = time.monotonic() - start
    t = campaign.tally
    failed = t.failed(args.strict_leftovers)
    for note in t.notes[:40]:
        print(note, file=sys.stderr)
    print(f"kills mid-operation: {dict(t.mid_op)}; temporary files left by kills: "
          f"{t.left_by_kills}", file=sys.stderr)  # fmt: skip
    if failed or args.keep:
        print(f"files kept in {root}", file=sys.stderr)
    else:
        shutil.rmtree(root)
    errors = dict(t.errors + t.raw)
    print(
        f"kill_campaign: {t.kills} kills in {elapsed:.0f} s, ops verified {t.ops_verified}, "
        f"lost {t.lost}, phantoms {t.phantoms}, wrong tier {t.wrong_tier}, "
        f"partial restores {t.partial_restores}, partial imports {t.partial_imports}, "
        f"partial batches {t.partial_batches}, integrity failures {t.integrity_failures}, "
        f"bad snapshots {t.bad_snapshots}, errors {errors}, "
        f"raw exceptions {sum(t.raw.values())}, leftovers {t.leftovers_after_open} "
        f"(most after any open {t.most_leftovers_after_open})"
    )
    if args.ledger is not None:
        totals = append_ledger(args.ledger, run_record(t, args, elapsed, failed))
        print(f"kill_campaign ledger {args.ledger}: " + ", ".join(
            f"{k} {v}" for k, v in totals.items()))  # fmt: skip
    return 1 if failed else 0


LEDGER_SUMS = ("runs", "kills", "ops_verified", "lost", "phantoms", "wrong_tier",
               "partial_restores", "partial_imports", "partial_batches", "integrity_failures",
               "bad_snapshots", "raw_exceptions", "failed_runs")  # fmt: skip


def run_record(t: Tally, args: argparse.Namespace, elapsed: float, failed: bool) -> dict[str, Any]:
    """One run's totals for the ledger, with its command and the machine load."""
    counts = {k: getattr(t, k) for k in LEDGER_SUMS if hasattr(t, k)}
    return {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seed": args.seed,
            "seconds": round(elapsed), "load": [round(x, 2) for x in os.getloadavg()],
            "command": " ".join(sys.argv), "code": _code_version(), "runs": 1, **counts,
            "raw_exceptions": sum(t.raw.values()), "errors": dict(t.errors + t.raw),
            "failed_runs": int(failed)}  # fmt: skip


def _code_version() -> str:
    """The commit of the checkout whose code ran (``+`` when it has changes)."""
    root = Path(__file__).resolve().parents[1]
    try:
        command = ["git", "-C", str(root), "describe", "--always", "--dirty=+"]
        head = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        head = ""
    return head or "unknown"


def append_ledger(path: Path, record: dict[str, Any]) -> dict[str, int]:
    """Append ``record`` as one JSON line; return the sums over every line of the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(orjson.dumps(record) + b"\n")
    totals = dict.fromkeys(LEDGER_SUMS, 0)
    for line in path.read_bytes().splitlines():
        if line.strip():
            row = orjson.loads(line)
            for k in LEDGER_SUMS:
                totals[k] += int(row.get(k, 0))
    return totals


if __name__ == "__main__":
    sys.exit(main())
