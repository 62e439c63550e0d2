"""The soak's memories must reach the store as written: the journals compare contents,
so a redacted run id reads as every write lost (a run whose id ``29161-1796284380``
passed the Luhn check was all ``[REDACTED:card-number]``)."""

from __future__ import annotations

import random

from benchmarks.soak import Worker, run_id
from tiered_memory.redaction import SecretRedactor


def test_no_soak_content_is_taken_for_a_secret() -> None:
    redactor = SecretRedactor()
    rng = random.Random(45)
    worker = Worker.__new__(Worker)  # content() needs only these three
    worker.rng, worker.n, worker.name = rng, 0, "p15"
    for pid in (*range(2, 100_000, 997), 29161, 4_194_304):
        worker.run = run_id(pid, rng.uniform(1.6e9, 2.2e9))
        text = worker.content()
        assert redactor.redact(text).kinds == (), text
    assert redactor.redact("soak 29161-1796284380 p0").kinds == ("card-number",)  # the old id
