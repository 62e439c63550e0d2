"""Child-process workloads for the concurrency and crash tests (run as a script).

``worker.py crash DB SEED``: writes and promotes memories forever, printing one line per
call *after* the call returned (``W id tier`` or ``P id from to``), until it is killed.
``worker.py checkpoint-crash DB SEED``: the same with a WAL checkpoint every 4 pages,
so that the background checkpointer is nearly always copying when the kill comes.
``worker.py merge-crash DB SEED``: episodic memories in bursts with pauses longer than
the background thread's idle time, so that it is merging the keyword index when the kill
comes; prints ``W id token`` (the memory's unique word) once stored.
``worker.py manager-crash DB SEED``: the same through AgentMemoryManager, with
``decay()`` passes on memories that fade in milliseconds (``D forgotten-count``).
``worker.py supersede-crash DB SEED``: forever, a new memory that supersedes the newest
of a chain (its metadata names the one it supersedes), printing ``S new old`` once it
returned.
``worker.py single-valued-crash DB SEED MODE``: forever, a memory saying ``Walker<SEED>``
lives in a new town, whose single-valued ``lives_in`` fact supersedes the previous one
on its own (its metadata names the previous memory); MODE ``relations`` passes the fact
with ``remember(relations=)``, ``extractor`` lets an extractor find it in a ``flush()``;
prints ``S new old`` once that returned.
``worker.py batch DB SEED``: forever, 40 memories at a time in interleaved sessions, by
``remember_many`` (prints ``B tag`` once it returned) or by ``remember()`` calls in one
``transaction()`` (``T tag``); each memory of a batch carries the batch's tag.
``worker.py operate OP DB ARG``: opens DB, prints ``GO``, runs ``restore`` / ``import`` /
``backup`` with ARG (``copy``: copies the memory at ARG into DB, opening both itself),
then prints ``DONE seconds``; ``paused-backup`` prints ``WORKING``
once its snapshot file has content and waits for a line on stdin before going on.
``worker.py write DB N TAG``: writes N episodic memories tagged TAG, printing each id.
``worker.py write-until-told DB TAG``: the same, forever, until a line on stdin.
``worker.py read DB ID``: prints the content of memory ID (or MISSING).
``worker.py encrypted-write DB``: writes episodic memories forever to DB encrypted with
``$TIERED_MEMORY_KEY``, printing each id once stored.
``worker.py rekey DB``: opens DB with ``$TIERED_MEMORY_KEY``, prints ``READY``, changes
the key to ``$NEW_KEY`` and prints ``REKEYED``.
``worker.py remember-on-cue DB CONTENT AGENT``: opens DB through AgentMemoryManager,
prints ``READY``, waits for a line on stdin, remembers CONTENT for AGENT and prints
``ID id``.
``worker.py open-on-cue DB``: prints ``READY``, waits for a line on stdin, opens DB through
AgentMemoryManager (a new database is created and migrated) and prints ``OPENED``, or
``FAILED`` with the error's type and first line.
``worker.py hold-transaction DB SCOPE``: opens a store scoped to SCOPE (a server URL; ''
for the whole store), writes one memory inside a transaction, prints ``HOLDING`` and
keeps the transaction open until a line on stdin, then commits and prints ``COMMITTED``;
``hold-busy-transaction DB SCOPE``: the same, but runs a 60 s statement after ``HOLDING``.
``worker.py change DB OP ID``: opens DB through AgentMemoryManager and runs ``forget`` or
``update`` (new content ``changed``) on memory ID, then prints ``DONE``.
DB is a file path or a ``postgresql://`` URL wherever the worker opens a store or manager.
``worker.py reembed DB``: re-embeds DB with :class:`HashEmbedder` ``("test-b", 8)``,
slowly, printing ``EMBEDDED n`` after each batch the model returned, then ``DONE``.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from persistence import Memory, MemoryNotFoundError, Tier
from persistence.locations import is_server_url
from persistence.sqlite import SQLiteStore
from persistence.sqlite.keyword_index import IDLE_ENV
from tiered_memory import AgentMemoryManager


class HashEmbedder:
    """A deterministic stand-in model: each text gets a fixed unit vector per model id."""

    def __init__(self, model_id: str, dim: int, delay: float = 0.0, announce: bool = False):
        self.model_id, self.dim, self.delay, self.announce = model_id, dim, delay, announce
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += texts
        time.sleep(self.delay)
        vectors = np.stack([hash_vector(self.model_id, self.dim, t) for t in texts])
        if self.announce:
            _say("EMBEDDED", str(len(texts)))
        return vectors


def hash_vector(model_id: str, dim: int, text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(f"{model_id}|{text}".encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def reembed(path: str) -> None:
    embedder = HashEmbedder("test-b", 8, delay=0.05, announce=True)
    options = {"reembed": True, "embed_in_background": False, "embedding_cache_size": 0}
    with AgentMemoryManager.open(path, embedder=embedder, **options) as memory:
        _say("READY")
        memory.flush()
        _say("DONE")


def _say(*parts: str) -> None:
    sys.stdout.write(" ".join(parts) + "\n")
    sys.stdout.flush()


def open_store(location: str, wal_autocheckpoint: int = 1000, scope: str = "") -> Any:
    """A store on ``location``: a SQLite file, or a PostgreSQL URL (scoped to ``scope``)."""
    if is_server_url(location):
        from persistence.postgres import PostgresStore

        return PostgresStore(location, scope=scope).open()
    return SQLiteStore(location, wal_autocheckpoint=wal_autocheckpoint).open()


def crash(path: str, seed: int, wal_autocheckpoint: int = 1000) -> None:
    rng = random.Random(seed)
    store = open_store(path, wal_autocheckpoint)
    _say("READY")
    promotable: list[tuple[str, Tier]] = []
    n = 0
    while True:
        n += 1
        roll = rng.random()
        if roll < 0.25 and promotable:
            memory_id, tier = promotable.pop(rng.randrange(len(promotable)))
            target = Tier.SEMANTIC if tier is not Tier.SEMANTIC else None
            if target is None:
                continue
            if tier is Tier.SCRATCHPAD and rng.random() < 0.5:
                target = Tier.EPISODIC
            store.promote_memory(memory_id, tier, target, reason=f"seed {seed}")
            _say("P", memory_id, tier.value, target.value)
            if target is Tier.EPISODIC:
                promotable.append((memory_id, target))
            continue
        tier = Tier.SCRATCHPAD if roll < 0.4 else (Tier.EPISODIC if roll < 0.85 else Tier.SEMANTIC)
        memory = Memory.create(
            f"memory {seed}-{n} " + "x" * rng.randrange(0, 2000),
            tier,
            tags=(f"seed{seed}", f"n{n % 7}"),
            metadata={"origin": tier.value},
            embedding=[rng.random() for _ in range(16)],
        )
        if tier is Tier.SCRATCHPAD:
            store.put_scratchpad(f"key-{seed}-{n}", memory)
        elif tier is Tier.EPISODIC:
            store.put_episodic(memory)
        else:
            store.put_semantic(memory)
        _say("W", memory.id, tier.value)
        promotable.append((memory.id, tier))


def merge_crash(path: str, seed: int) -> None:
    rng = random.Random(seed)
    store = SQLiteStore(path, wal_autocheckpoint=64).open()
    _say("READY")
    words = [f"w{i}" for i in range(300)]
    n = 0
    while True:
        for _ in range(rng.randrange(5, 30)):
            n += 1
            token = f"tok{seed}x{n}"
            content = " ".join([token, *rng.choices(words, k=12)])
            memory = Memory.create(content, Tier.EPISODIC, metadata={"origin": "episodic"})
            store.put_episodic(memory)
            _say("W", memory.id, token)
        time.sleep(rng.uniform(0.06, 0.2))  # the thread merges meanwhile


def manager_crash(path: str, seed: int) -> None:
    rng = random.Random(seed)
    # Stability of 2e-7 to 1e-6 days (17 to 86 ms): decay() forgets a lot, and often.
    memory = AgentMemoryManager.open(path, initial_stability_days=2e-7, decay_batch_size=40)
    _say("READY")
    episodic: list[str] = []
    while True:
        roll = rng.random()
        if roll < 0.6:
            m = memory.remember(
                f"memory {seed} " + "y" * rng.randrange(0, 1500),
                importance=rng.random(),
                tags=(f"seed{seed}", "crash"),
                metadata={"origin": "episodic"},
            )
            _say("W", m.id, "episodic")
            episodic.append(m.id)
        elif roll < 0.85 and episodic:
            memory_id = episodic.pop(rng.randrange(len(episodic)))
            try:
                memory.promote(memory_id, Tier.SEMANTIC, reason="crash test")
            except MemoryNotFoundError:
                continue  # decay forgot it first
            _say("P", memory_id, "episodic", "semantic")
        else:
            _say("D", str(memory.decay().forgotten))


def supersede_crash(path: str, seed: int) -> None:
    memory = AgentMemoryManager.open(path, embedder=None)
    _say("READY")
    rng = random.Random(seed)
    newest = memory.remember(f"chain {seed} start", metadata={"supersedes": None}).id
    while True:
        content = f"chain {seed} fact {rng.random()} " + "z" * rng.randrange(0, 800)
        new = memory.remember(content, metadata={"supersedes": newest}, supersedes=newest)
        _say("S", new.id, newest)
        newest = new.id


class TownExtractor:
    """Finds ``<who> lives in <town>`` (the single-valued-crash worker's fact)."""

    def extract(self, text: str) -> Any:
        from tiered_memory.graph.extraction import Extraction
        from tiered_memory.graph.facade import RelationFact

        words = text.split()
        if "in" not in words:
            return Extraction()
        return Extraction(
            relations=(RelationFact(words[0], "lives_in", words[words.index("in") + 1]),)
        )


def single_valued_crash(path: str, seed: int, mode: str) -> None:
    extractor = TownExtractor() if mode == "extractor" else None
    memory = AgentMemoryManager.open(
        path, embedder=None, extractor=extractor, extract_in_background=False
    )
    _say("READY")
    rng = random.Random(seed)
    who, newest = f"Walker{seed}", None
    for town in range(10**9):
        content = f"{who} lives in Town{town} " + "z" * rng.randrange(0, 800)
        fact = [(who, "lives_in", f"Town{town}")] if extractor is None else None
        new = memory.remember(content, metadata={"previous": newest}, relations=fact)
        if extractor is not None:
            memory.flush()  # the extractor's batch: the fact and its supersession
        _say("S", new.id, str(newest))
        newest = new.id


def batch(path: str, seed: int) -> None:
    rng = random.Random(seed)
    with AgentMemoryManager.open(path, embedder=None) as memory:
        sessions = [memory.start_session().session_id for _ in range(5)]
        _say("READY")
        for n in range(10**9):
            tag = f"b{seed}-{n}"
            records = [
                {"content": f"turn {seed} {n} {i} " + "z" * rng.randrange(0, 300),
                 "session_id": sessions[(n + i) % 5], "tags": [tag, "batch"],
                 "metadata": {"origin": "episodic"}, "importance": rng.random()}
                for i in range(40)
            ]  # fmt: skip
            if n % 2:
                memory.remember_many(records)
                _say("B", tag)
            else:
                with memory.transaction():
                    for record in records:
                        content = record.pop("content")
                        memory.remember(content, **record)
                _say("T", tag)


def operate(op: str, path: str, arg: str) -> None:
    if op == "copy":  # copy_memory(arg -> path): opens both locations itself
        from tiered_memory.copying import copy_memory

        _say("GO")
        start = time.monotonic()
        copy_memory(arg, path)
        _say("DONE", f"{time.monotonic() - start:.4f}")
        return
    with AgentMemoryManager.open(path) as memory:
        _say("GO")
        start = time.monotonic()
        if op == "restore":
            memory.restore(arg)
        elif op == "import":
            memory.import_json(arg)
        elif op == "backup":
            memory.backup(keep=int(arg))
        elif op == "paused-backup":  # says WORKING mid-snapshot, goes on after a stdin line
            memory.backup(keep=int(arg), progress=_pause_once())
        else:
            raise SystemExit(f"unknown operation {op}")
        _say("DONE", f"{time.monotonic() - start:.4f}")


def _pause_once() -> Callable[[int, int], None]:
    paused = False

    def progress(done: int, total: int) -> None:
        nonlocal paused
        if not paused and done > 0:
            paused = True
            _say("WORKING")
            sys.stdin.readline()

    return progress


def remember_on_cue(path: str, content: str, agent: str) -> None:
    with AgentMemoryManager.open(path, embedder=None) as memory:
        _say("READY")
        sys.stdin.readline()
        _say("ID", memory.remember(content, agent_id=agent).id)


def open_on_cue(path: str) -> None:
    if is_server_url(path):  # the driver loaded before the cue: the opens start together
        import persistence.postgres  # noqa: F401
    _say("READY")
    sys.stdin.readline()
    try:
        AgentMemoryManager.open(path, embedder=None).close()
    except Exception as exc:
        _say("FAILED", type(exc).__name__, str(exc).splitlines()[0])
        return
    _say("OPENED")


def hold_transaction(path: str, scope: str, busy: bool = False) -> None:
    store = open_store(path, scope=scope)
    try:
        with store.transaction() as conn:
            store.put_episodic(Memory.create(f"held by {scope or 'all'}"))
            _say("HOLDING")
            if busy:  # the server works on a statement (a long one) when the kill comes
                conn.execute("SELECT pg_sleep(60)")
            else:
                sys.stdin.readline()
        _say("COMMITTED")
    finally:
        store.close()


def change(path: str, op: str, memory_id: str) -> None:
    with AgentMemoryManager.open(path, embedder=None) as memory:
        if op == "forget":
            memory.forget(memory_id)
        else:
            memory.update(memory_id, content="changed")
        _say("DONE")


def write(path: str, count: int, tag: str) -> None:
    with open_store(path) as store:
        _say("READY")
        for i in range(count):
            memory = store.put_episodic(Memory.create(f"{tag} {i}", tags=(tag,)))
            _say(memory.id)


def write_until_told(path: str, tag: str) -> None:
    """Write episodic memories tagged ``tag``, printing each id, until stdin has a line
    (or closes): the parent decides when this writer stops."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    with SQLiteStore(path) as store:
        _say("READY")
        i = 0
        while not stop.is_set():
            memory = store.put_episodic(Memory.create(f"{tag} {i}", tags=(tag,)))
            _say(memory.id)
            i += 1


def read(path: str, memory_id: str) -> None:
    with open_store(path) as store:
        memory = store.memories.get_memory(memory_id)
        _say("MISSING" if memory is None else memory.content)


SENTENCE = "the lighthouse keeper hides the spare key under the blue stone"


def encrypted_write(path: str) -> None:
    with SQLiteStore(path, key=os.environ["TIERED_MEMORY_KEY"]) as store:
        _say("READY")
        n = 0
        while True:
            memory = store.put_episodic(Memory.create(f"{SENTENCE} {n}", tags=("enc",)))
            _say(memory.id)
            n += 1


def rekey(path: str) -> None:
    with SQLiteStore(path, key=os.environ["TIERED_MEMORY_KEY"]) as store:
        _say("READY")
        store.rekey(os.environ["NEW_KEY"])
        _say("REKEYED")


if __name__ == "__main__":
    os.environ.pop(IDLE_ENV, None)  # the test process's hour: here the default, merges included
    command, db, *rest = sys.argv[1:]
    if command == "crash":
        crash(db, int(rest[0]))
    elif command == "checkpoint-crash":  # the background checkpointer always at work
        crash(db, int(rest[0]), wal_autocheckpoint=4)
    elif command == "merge-crash":  # the background thread merging the keyword index
        merge_crash(db, int(rest[0]))
    elif command == "manager-crash":
        manager_crash(db, int(rest[0]))
    elif command == "supersede-crash":
        supersede_crash(db, int(rest[0]))
    elif command == "single-valued-crash":
        single_valued_crash(db, int(rest[0]), rest[1])
    elif command == "batch":
        batch(db, int(rest[0]))
    elif command == "operate":
        operate(db, rest[0], rest[1])
    elif command == "write-until-told":
        write_until_told(db, rest[0])
    elif command == "write":
        write(db, int(rest[0]), rest[1])
    elif command == "read":
        read(db, rest[0])
    elif command == "encrypted-write":
        encrypted_write(db)
    elif command == "rekey":
        rekey(db)
    elif command == "remember-on-cue":
        remember_on_cue(db, rest[0], rest[1])
    elif command == "open-on-cue":
        open_on_cue(db)
    elif command == "hold-transaction":
        hold_transaction(db, rest[0])
    elif command == "hold-busy-transaction":
        hold_transaction(db, rest[0], busy=True)
    elif command == "change":
        change(db, rest[0], rest[1])
    elif command == "reembed":
        reembed(db)
    else:
        raise SystemExit(f"unknown command {command}")
