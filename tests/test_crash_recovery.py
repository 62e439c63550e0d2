"""Crash recovery with real processes: SIGKILL a writer at random moments, many times.

After every kill the file must pass ``PRAGMA integrity_check``, hold every write whose
call had returned (the child reports an id only after the call returned), and show no
half-done promotion: each memory is in exactly one tier and the log agrees.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import orjson

from persistence import SQLiteStore, Tier

WORKER = str(Path(__file__).with_name("worker.py"))
KILLS = 60


def _kill_after(process: subprocess.Popen[str], delay: float) -> list[str]:
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    out, _ = process.communicate(timeout=30)
    lines = out.split("\n")
    return lines[:-1]  # the last piece is an unfinished line (or empty)


def _check(path: Path, reported: dict[str, Tier]) -> int:
    """Assert the crash invariants; return how many memories the file holds."""
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    where: dict[str, list[Tier]] = {}
    origin: dict[str, Tier] = {}
    for tier in Tier:
        for memory_id, metadata in conn.execute(f"SELECT id, metadata FROM {tier.value}"):
            where.setdefault(memory_id, []).append(tier)
            origin[memory_id] = Tier(orjson.loads(metadata)["origin"])
    log: dict[str, list[tuple[Tier, Tier]]] = {}
    for memory_id, src, dst in conn.execute(
        "SELECT memory_id, from_tier, to_tier FROM promotion_log ORDER BY id"
    ):
        log.setdefault(memory_id, []).append((Tier(src), Tier(dst)))
    tags = dict(conn.execute("SELECT memory_id, count(*) FROM memory_tags GROUP BY memory_id"))
    conn.close()

    for memory_id, tiers in where.items():
        assert len(tiers) == 1, f"{memory_id} is in {tiers}"
        tier = tiers[0]
        chain = log.get(memory_id, [])
        current = origin[memory_id]
        for src, dst in chain:
            assert src is current, f"log of {memory_id} does not chain: {chain}"
            current = dst
        assert current is tier, f"{memory_id} is in {tier} but its log ends at {current}"
        assert tags.get(memory_id) == 2, f"{memory_id} lost its tags"
    for memory_id, tier in reported.items():
        assert memory_id in where, f"returned write {memory_id} was lost"
        assert where[memory_id][0].rank >= tier.rank, f"returned promotion of {memory_id} lost"
    assert set(log) <= set(where), "promotion logged for a memory that is not there"
    return len(where)


def test_sigkill_at_random_moments_loses_nothing_that_returned(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    rng = random.Random(20261122)
    reported: dict[str, Tier] = {}
    writes_seen = promotions_seen = 0
    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    for kill in range(KILLS):
        process = subprocess.Popen(
            [sys.executable, WORKER, "crash", str(path), str(kill)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        # Mostly mid-write; now and then during start-up and migration.
        delay = rng.uniform(0.0, 0.25) if kill % 10 == 0 else rng.uniform(0.3, 0.7)
        for line in _kill_after(process, delay):
            parts = line.split()
            if parts[0] == "W":
                reported[parts[1]] = Tier(parts[2])
                writes_seen += 1
            elif parts[0] == "P":
                assert reported[parts[1]] is Tier(parts[2])
                reported[parts[1]] = Tier(parts[3])
                promotions_seen += 1
        held = _check(path, reported)
        assert held >= len(reported)
    print(f"{KILLS} kills, {writes_seen} returned writes, {promotions_seen} returned promotions")
    assert writes_seen > KILLS and promotions_seen > KILLS // 2
    with SQLiteStore(path) as store:  # the library itself reopens the crashed file
        stats = store.get_statistics()
        total = stats.scratchpad_count + stats.episodic_count + stats.semantic_count
        assert total >= len(reported)
