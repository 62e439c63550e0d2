"""Power loss at every sync point: a workload through the public API on a store whose
files go through :class:`tests.support.power_cut_vfs.RecordingVFS`, then the store as a power cut
would leave it at each sync point, reopened and judged.

:func:`run_workload` does ``ops`` operations (writes, transaction batches, promotions,
reviews, forgets, imports of a prepared export (merge and replace), backups, decay
passes (memories fade in seconds), consolidation passes and checkpoints through
``maintain()``), reading the memories back (id, content, tier) after each one: that is the
state the operation acknowledged, and the event index at its return says which cuts
acknowledge it.

:func:`judge` materialises each cut in a temporary folder, opens it with a fresh manager
(which recovers the WAL), runs ``check_integrity()`` and reads the memories. The file
holds the state after operation ``j`` when it equals what ``j`` acknowledged (the newest
such ``j``); failing that, operation ``j`` is half-way when each memory is as after
``j - 1`` or as after ``j`` (allowed for decay and consolidation, which commit in
batches; a *half-done* failure for an operation of one transaction); a state neither
explains is *unexplained*. ``lost`` = operations acknowledged at the cut minus ``j``.
Cuts before the first open returned acknowledged nothing: they must give no file, an
empty store or a specific error.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.power_cut_vfs import Recording, RecordingVFS, write_cut
from tiered_memory import AgentMemoryManager, Tier, TieredMemoryError

State = dict[str, tuple[str, str]]  # memory id -> (content, tier)
CONFIG: dict[str, Any] = {"embedder": None, "initial_stability_days": 2e-5,
                          "decay_batch_size": 25, "consolidation_min_reviews": 1,
                          "consolidation_min_retention": 0.0}  # fmt: skip
WEIGHTS = {"write": 34, "batch": 8, "promote": 8, "review": 8, "forget": 6, "import": 4,
           "backup": 4, "decay": 10, "consolidate": 6, "checkpoint": 10}  # fmt: skip
ATOMIC = frozenset({"write", "batch", "promote", "review", "forget", "import",
                    "checkpoint", "backup"})  # fmt: skip
"""Operations of one transaction: a cut holds all of one or none of it."""


@dataclass(slots=True)
class Run:
    """What the workload did: the recording, and per operation its name, the event index
    at its return and the memories after it (index 0: the store before any operation)."""

    recording: Recording
    names: list[str] = field(default_factory=lambda: ["open"])
    marks: list[int] = field(default_factory=lambda: [0])
    states: list[State] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class Verdict:
    """The figures over every cut judged."""

    cuts: int = 0
    check_failures: int = 0
    open_failures: int = 0
    unexplained: int = 0  # a state no prefix of the operations explains
    half_done: int = 0  # an operation of one transaction found partly applied
    lost_acknowledged: Counter[int] = field(default_factory=Counter)  # ops lost -> cuts
    during_creation: Counter[str] = field(default_factory=Counter)  # before open returned
    notes: list[str] = field(default_factory=list)

    @property
    def most_lost(self) -> int:
        return max(self.lost_acknowledged, default=0)

    @property
    def corrupt(self) -> int:
        bad_creation = sum(
            n for k, n in self.during_creation.items() if k.startswith(("raw", "store"))
        )
        return (self.check_failures + self.open_failures + self.unexplained + self.half_done
                + bad_creation)  # fmt: skip


def read_state(memory: AgentMemoryManager) -> State:
    return {
        m.id: (m.content, tier.value)
        for tier in (Tier.EPISODIC, Tier.SEMANTIC)
        for m in memory.query(tier, limit=None)
    }


def prepare_export(folder: Path, count: int, seed: int) -> Path:
    """An export of ``count`` memories (made before recording starts)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "source.db"
    with AgentMemoryManager.open(db, **CONFIG) as memory:
        for n in range(count):
            memory.remember(f"imported {seed} {n} " + "i" * (n % 300), importance=0.5)
        target = folder / "export.json"
        memory.export_json(target)
    return target


def run_workload(db: Path, ops: int, seed: int, synchronous: str) -> Run:
    """``ops`` operations on a new store at ``db`` through the recording VFS."""
    rng = random.Random(seed)
    export = prepare_export(db.parent / "export-source", 40, seed)
    with RecordingVFS(db) as vfs:
        run = Run(vfs.recording)
        with AgentMemoryManager.open(db, synchronous=synchronous, **CONFIG) as memory:
            run.states.append(read_state(memory))
            run.marks[0] = vfs.recording.mark()
            for n in range(ops):
                name = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
                try:
                    _operation(memory, name, n, rng, export, run.states[-1])()
                except Exception as exc:  # counted: the judge fails a run with any
                    run.errors[f"{name}: {type(exc).__name__}: {exc}"[:200]] += 1
                run.states.append(read_state(memory))
                run.marks.append(vfs.recording.mark())
                run.names.append(name)
    return run


def _operation(
    memory: AgentMemoryManager, name: str, n: int, rng: random.Random, export: Path, state: State
) -> Callable[[], object]:
    episodic = [i for i, (_, tier) in state.items() if tier == "episodic"]
    text = f"power cut {n} " + "p" * rng.randrange(0, 1500)
    if name == "write" or (name in ("promote", "review", "forget") and not episodic):
        tier = "semantic" if rng.random() < 0.3 else "episodic"
        return lambda: memory.remember(text, tier, importance=rng.random())
    if name == "batch":

        def batch() -> None:
            with memory.transaction():
                for k in range(rng.randint(2, 5)):
                    memory.remember(f"{text} batch {k}", importance=rng.random())

        return batch
    if name == "promote":
        return lambda: memory.promote(rng.choice(episodic), Tier.SEMANTIC, reason="power cut")
    if name == "review":
        return lambda: memory.review(rng.choice(episodic), 5)
    if name == "forget":
        return lambda: memory.forget(rng.choice(episodic), reason="power cut")
    if name == "import":
        mode = "replace" if rng.random() < 0.3 else "merge"
        return lambda: memory.import_json(export, mode)
    if name == "backup":
        return lambda: memory.backup(keep=3)
    if name == "decay":
        return memory.decay
    if name == "consolidate":
        return memory.consolidate
    return memory.maintain


def judge(run: Run, every: int = 1, log: Callable[[str], None] | None = None) -> Verdict:
    """Reopen the store cut at every ``every``-th sync point (and at the end); see module doc."""
    points = run.recording.sync_points()
    wanted = set(points[::every]) | {points[-1]}
    verdict = Verdict()
    scratch = Path(tempfile.mkdtemp(prefix="power-cut-"))
    started = time.monotonic()
    try:
        for index, files in run.recording.cuts(wanted):
            folder = scratch / f"cut-{index}"
            db = write_cut(files, run.recording.watched, folder)
            _judge_one(run, index, db, verdict)
            shutil.rmtree(folder)
            if log and verdict.cuts % 100 == 0:
                log(f"... {verdict.cuts}/{len(wanted)} cuts, {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return verdict


def _judge_one(run: Run, index: int, db: Path, verdict: Verdict) -> None:
    verdict.cuts += 1
    if index < run.marks[0]:  # the first open had not returned: nothing was acknowledged
        verdict.during_creation[_creation_outcome(db)] += 1
        return
    acked = max(j for j, mark in enumerate(run.marks) if mark <= index)
    if not db.exists():
        verdict.open_failures += 1
        verdict.notes.append(f"cut {index}: the database file is gone")
        return
    else:
        try:
            with AgentMemoryManager.open(db, **CONFIG) as memory:
                result = memory.check_integrity()
                actual = read_state(memory)
        except Exception as exc:
            verdict.open_failures += 1
            verdict.notes.append(f"cut {index}: open raised {type(exc).__name__}: {exc}")
            return
        if not result.ok:
            verdict.check_failures += 1
            verdict.notes.append(f"cut {index}: check found {result.problems[:2]}")
    newest = min(acked + 1, len(run.states) - 1)
    # The newest state the file holds exactly; failing that, an operation half-way (a
    # lost WAL tail drops whole transactions, so an exact older state is preferred).
    held = next((j for j in range(newest, -1, -1) if actual == run.states[j]), None)
    if held is None:
        partial = [j for j in range(newest, 0, -1)
                   if _between(run.states[j - 1], run.states[j], actual)]  # fmt: skip
        if not partial:
            verdict.unexplained += 1
            verdict.notes.append(
                f"cut {index}: {len(actual)} memories match no operation <= {newest}"
            )
            return
        if run.names[partial[0]] in ATOMIC:
            verdict.half_done += 1
            verdict.notes.append(f"cut {index}: {run.names[partial[0]]} "
                                 f"(operation {partial[0]}) half done")  # fmt: skip
        held = partial[0] - 1
    verdict.lost_acknowledged[max(acked - held, 0)] += 1


def _creation_outcome(db: Path) -> str:
    """What opening a store cut while it was being created gives: a usable (empty) store
    or which error (a :class:`TieredMemoryError`: nothing was acknowledged, but the file
    is then left for the user to deal with)."""
    try:
        with AgentMemoryManager.open(db, **CONFIG) as memory:
            ok = memory.check_integrity().ok and not read_state(memory)
        return "empty store" if ok else "store with problems"
    except TieredMemoryError as exc:
        return type(exc).__name__
    except Exception as exc:
        return f"raw {type(exc).__name__}"


def _between(before: State, after: State, actual: State) -> bool:
    """Each memory as before or as after (present or absent in each)."""
    return all(actual.get(i) in (before.get(i), after.get(i)) for i in {*before, *after, *actual})
