"""remember() with the default redactor on vs off, in the same run (target: on keeps >= 90%).

Run: ``.venv/bin/python -m pytest benchmarks/test_redaction_bench.py -s``. Two files are
written alternately, a block of ``remember()`` calls at a time, so that load on a shared
machine falls on both sides alike. The texts are conversational (with the words the
redactor's first look reacts to: key, password, token, ...) and one in 20 holds a fake
secret from the test corpus.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from benchmarks.smoke import size, smoke
from tests.support.secret_corpus import corpus
from tiered_memory import AgentMemoryManager
from tiered_memory.redaction import SecretRedactor

CALLS = size(6_000, 40)
BLOCK = size(250, 10)
TEXT = (
    "the user said they moved to a new flat last week and the key to the shed is under "
    "the blue pot; their password manager reminded them about the token for the gym app "
    "we talked about pottery classes, the camping trip, secret recipes and a bearer of news"
)
WORDS = TEXT.split()  # noqa: SIM905


def _texts(n: int) -> list[str]:
    rng = random.Random(5)
    secrets = [case.text for case in corpus()]
    texts = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        texts.append(f"{words} {rng.choice(secrets)}" if i % 20 == 0 else words)
    return texts


def test_remember_rate_with_the_redactor_on_vs_off(tmp_path: Path) -> None:
    texts = _texts(CALLS)
    options = {"embedder": None, "embed_in_background": False, "recall_review_quality": None}
    spent = {"on": 0.0, "off": 0.0}
    with (
        AgentMemoryManager.open(tmp_path / "on.db", **options) as on,
        AgentMemoryManager.open(tmp_path / "off.db", redact=False, **options) as off,
    ):
        for start in range(0, CALLS, BLOCK):
            block = texts[start : start + BLOCK]
            sides = (("on", on), ("off", off))
            for side, memory in sides if start % 2 else sides[::-1]:
                begin = time.perf_counter()
                for text in block:
                    memory.remember(text)
                spent[side] += time.perf_counter() - begin
        redacted = on.statistics().redactions
    redactor = SecretRedactor()
    begin = time.perf_counter()
    for text in texts:
        redactor.redact(text)
    alone = (time.perf_counter() - begin) / CALLS * 1e6
    rate = {side: CALLS / seconds for side, seconds in spent.items()}
    ratio = rate["on"] / rate["off"]
    print(
        f"\nremember() x{CALLS}: redactor on {rate['on']:,.0f}/s, off {rate['off']:,.0f}/s "
        f"(on at {ratio:.1%} of off); redactor alone {alone:.1f} µs per text; "
        f"{redacted} secrets redacted"
    )
    assert redacted >= CALLS // 20
    if not smoke():
        assert ratio >= 0.9
