"""Threads and processes sharing one file: nothing raised, nothing lost, readers never wait."""

from __future__ import annotations

import gc
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from persistence import (
    DatabaseBusyError,
    InvalidInputError,
    Memory,
    QueryOptions,
    StoreClosedError,
    Tier,
)
from persistence.sqlite import SQLiteStore

WORKER = str(Path(__file__).parents[2] / "support" / "worker.py")


@pytest.mark.slow
def test_eight_threads_mixed_reads_and_writes_lose_nothing(file_store: SQLiteStore) -> None:
    deadline = time.monotonic() + 3.0
    errors: list[BaseException] = []
    written: dict[int, dict[str, Tier]] = {n: {} for n in range(8)}

    def work(n: int) -> None:
        rng = random.Random(n)
        mine = written[n]
        try:
            while time.monotonic() < deadline:
                roll = rng.random()
                if roll < 0.4:
                    memory = file_store.put_episodic(Memory.create(f"t{n}", tags=(f"thread{n}",)))
                    mine[memory.id] = Tier.EPISODIC
                elif roll < 0.5 and mine:
                    memory_id = rng.choice(list(mine))
                    if mine[memory_id] is Tier.EPISODIC:
                        file_store.promote_memory(memory_id, Tier.EPISODIC, Tier.SEMANTIC)
                        mine[memory_id] = Tier.SEMANTIC
                elif roll < 0.6:
                    with file_store.transaction():
                        for _ in range(3):
                            memory = file_store.put_semantic(
                                Memory.create(f"t{n}", Tier.SEMANTIC, tags=(f"thread{n}",))
                            )
                            mine[memory.id] = Tier.SEMANTIC
                elif mine:
                    memory_id = rng.choice(list(mine))
                    got = file_store.memories.get_memory(memory_id)
                    assert got is not None and got.tier is mine[memory_id]
                    file_store.query_episodic(QueryOptions(tags=(f"thread{n}",), limit=5))
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    total = sum(len(m) for m in written.values())
    assert total > 100
    for n, mine in written.items():
        for tier, query in ((Tier.EPISODIC, file_store.query_episodic),
                            (Tier.SEMANTIC, file_store.query_semantic)):  # fmt: skip
            found = {m.id for m in query(QueryOptions(tags=(f"thread{n}",), limit=None))}
            assert found == {i for i, t in mine.items() if t is tier}


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_second_process_reads_and_writes_while_the_first_has_it_open(
    file_store: SQLiteStore, db_path: Path
) -> None:
    child = subprocess.Popen(
        [sys.executable, WORKER, "write", str(db_path), "200", "child"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "READY"
    mine = [file_store.put_episodic(Memory.create(f"parent {i}", tags=("parent",))).id
            for i in range(200)]  # fmt: skip
    theirs = [line.strip() for line in child.stdout]
    assert child.wait(timeout=60) == 0
    assert len(theirs) == 200
    assert {
        m.id for m in file_store.query_episodic(QueryOptions(tags=("child",), limit=None))
    } == set(theirs)
    reader = subprocess.run(
        [sys.executable, WORKER, "read", str(db_path), mine[-1]],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert reader.stdout.strip() == "parent 199"


@pytest.mark.slow
@pytest.mark.subprocess
def test_readers_do_not_wait_for_an_open_write_transaction(
    file_store: SQLiteStore, db_path: Path
) -> None:
    committed = file_store.put_episodic(Memory.create("committed"))
    writing = threading.Event()
    release = threading.Event()
    pending: list[str] = []

    def writer() -> None:
        with file_store.transaction():
            pending.append(file_store.put_episodic(Memory.create("pending")).id)
            writing.set()
            release.wait(timeout=60)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert writing.wait(timeout=10)
        # Same process, another thread: sees the committed row, not the pending one.
        assert file_store.get_episodic(committed.id) == committed
        assert file_store.get_episodic(pending[0]) is None
        # Another process reads while the write lock is held.
        reader = subprocess.run(
            [sys.executable, WORKER, "read", str(db_path), committed.id],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert reader.stdout.strip() == "committed"
        assert thread.is_alive(), "the writer still holds its transaction"
    finally:
        release.set()
        thread.join()
    assert file_store.get_episodic(pending[0]) is not None


def test_two_stores_on_one_file_write_in_turn(db_path: Path) -> None:
    with SQLiteStore(db_path) as first, SQLiteStore(db_path) as second:
        ids: list[str] = []
        errors: list[BaseException] = []

        def work(store: SQLiteStore, name: str) -> None:
            try:
                for i in range(100):
                    with store.transaction():
                        ids.append(store.put_episodic(Memory.create(f"{name} {i}")).id)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(s, n))
                   for s, n in ((first, "a"), (second, "b"))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert {m.id for m in first.query_episodic(QueryOptions(limit=None))} == set(ids)
        assert len(ids) == 200


@pytest.mark.slow  # 3.0 s measured on a busy machine
def test_close_waits_for_a_read_in_another_thread(file_store: SQLiteStore) -> None:
    for i in range(2000):
        file_store.put_episodic(Memory.create(f"m{i}", tags=("t",)))
    errors: list[BaseException] = []
    reading = threading.Event()

    def reader() -> None:
        try:
            reading.set()
            while True:
                file_store.query_episodic(QueryOptions(tags=("t",), limit=None))
        except StoreClosedError:
            pass  # the store closed between two reads: expected
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    reading.wait()
    time.sleep(0.05)
    file_store.close()
    thread.join(timeout=30)
    assert errors == [] and not thread.is_alive()
    assert file_store._readers == []


def test_close_inside_a_transaction_is_refused(file_store: SQLiteStore) -> None:
    with file_store.transaction():
        with pytest.raises(InvalidInputError, match="inside a transaction"):
            file_store.close()
        file_store.put_episodic(Memory.create("still works"))
    assert len(file_store.query_episodic()) == 1


def test_reader_connections_are_released_when_their_thread_ends(file_store: SQLiteStore) -> None:
    def read_once() -> None:
        file_store.get_episodic("x")

    for _ in range(50):
        thread = threading.Thread(target=read_once)
        thread.start()
        thread.join()
    gc.collect()
    assert len(file_store._readers) <= 1


def test_a_writer_held_too_long_gives_database_busy(db_path: Path) -> None:
    with (
        SQLiteStore(db_path, busy_timeout_ms=50) as first,
        SQLiteStore(db_path, busy_timeout_ms=50) as second,
    ):
        with first.transaction():
            first.put_episodic(Memory.create("holding the lock"))
            with pytest.raises(DatabaseBusyError, match="locked by another writer"):
                second.put_episodic(Memory.create("waits too long"))
        second.put_episodic(Memory.create("now it can"))
        assert len(first.query_episodic()) == 2


_COUNT = """
import sys
from persistence.sqlite import SQLiteStore
with SQLiteStore(sys.argv[1]) as store:
    for _ in range(int(sys.argv[2])):
        store.increment_meta("hits")
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_counter_in_the_file_loses_no_update_across_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "count.db")
    with SQLiteStore(path) as store:
        store.set_meta("hits", "5")
        workers = [subprocess.Popen([sys.executable, "-c", _COUNT, path, "150"]) for _ in range(3)]
        for _ in range(150):
            store.increment_meta("hits")
        assert [w.wait(timeout=120) for w in workers] == [0, 0, 0]
        assert store.get_meta("hits") == "605"
        with pytest.raises(InvalidInputError):
            store.increment_meta("", 1)
        assert store.increment_meta("hits", -5) == 600
