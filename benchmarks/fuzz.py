"""Fuzz the four ways bad input reaches the library; count lost, partial and raw errors.

Run from the repository root (not collected by pytest, not run by CI)::

    .venv/bin/python benchmarks/fuzz.py --inputs 100000
    .venv/bin/python benchmarks/fuzz.py --inputs 20000 --targets mcp,pages --seed 3

``--inputs`` is split evenly over the targets (tests/support/fuzz_targets.py): import documents
(a real export broken one to three ways, sometimes cut off, imported with a random
mode), CLI arguments (random commands, options and values, in process with click's
runner), MCP tool arguments (random values for each tool's parameters, through the
server's ``call_tool``) and damaged pages (random bytes, a zeroed, torn or swapped page,
a flipped bit or header byte, a cut-off file; then open and four random calls). Prints
one line per target and a total; exits 1 when anything was lost or partly done, or an
error other than ``TieredMemoryError`` escaped.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fuzz_targets import TARGETS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1000, help="in all, split over targets")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = [t for t in args.targets.split(",") if t]
    unknown = set(names) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets {sorted(unknown)}; use {sorted(TARGETS)}")
    logging.disable(logging.CRITICAL)  # SQLite reports every damaged page it meets
    started = time.monotonic()
    tallies = []
    for n, name in enumerate(names):
        work = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
        try:
            began = time.monotonic()
            tally = TARGETS[name](random.Random(args.seed * 100 + n), args.inputs // len(names),
                                  work)  # fmt: skip
        finally:
            shutil.rmtree(work, ignore_errors=True)
        tallies.append(tally)
        for note in tally.notes:
            print(f"  {name}: {note}", file=sys.stderr)
        print(f"fuzz {tally.line()} ({time.monotonic() - began:.0f} s)", flush=True)
    total = sum(t.inputs for t in tallies)
    bad = [t for t in tallies if t.failed]
    print(f"fuzz total: {total} inputs in {time.monotonic() - started:.0f} s, lost "
          f"{sum(t.lost for t in tallies)}, partial {sum(t.partial for t in tallies)}, raw "
          f"errors {sum(sum(t.raw.values()) for t in tallies)}; seed {args.seed}; load "
          f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
