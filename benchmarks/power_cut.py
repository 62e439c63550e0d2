"""Power loss at every sync point: reopen the store as a power cut would leave it.

Run from the repository root (not collected by pytest, not run by CI)::

    .venv/bin/python benchmarks/power_cut.py --ops 1000
    .venv/bin/python benchmarks/power_cut.py --ops 1000 --synchronous FULL --every 5 --seed 3

For each ``synchronous`` level, a workload of ``--ops`` operations (writes, batches,
promotions, reviews, forgets, imports, backups, decay, consolidation, checkpoints) runs
through the public API on a store whose files go through a recording VFS
(``tests/support/power_cut_vfs.py``); then, at every sync point (``--every N``: every N-th), the
files as a power cut would leave them (unsynced writes dropped, the last unsynced write
of each file torn) are reopened by a fresh manager, checked with ``check_integrity()``
and compared with what each operation acknowledged (``tests/support/power_cut_run.py``). Prints
one line per level; exits 1 when any cut is damaged, holds a state no prefix of the
operations explains, or (``FULL``) lost an acknowledged operation.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.power_cut_run import judge, run_workload  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--every", type=int, default=1, help="judge every N-th sync point")
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL", "both"), default="both")
    args = parser.parse_args()
    levels = ("FULL", "NORMAL") if args.synchronous == "both" else (args.synchronous,)
    failed = False
    for level in levels:
        root = Path(tempfile.mkdtemp(prefix="power-cut-run-"))
        try:
            started = time.monotonic()
            run = run_workload(root / "db" / "memory.db", args.ops, args.seed, level)
            ran = time.monotonic() - started
            verdict = judge(run, args.every, log=lambda s: print(s, file=sys.stderr, flush=True))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        for note in verdict.notes[:20]:
            print(note, file=sys.stderr)
        lost = verdict.lost_acknowledged
        cuts_losing = sum(n for k, n in lost.items() if k > 0)
        bad = verdict.corrupt > 0 or bool(run.errors) or (level == "FULL" and verdict.most_lost > 0)
        failed |= bad
        print(
            f"power_cut synchronous={level}: {args.ops} ops ({dict(run.errors) or 'no errors'}) "
            f"in {ran:.0f} s, {len(run.recording.events)} writes/syncs recorded, "
            f"{verdict.cuts} cuts judged in {time.monotonic() - started - ran:.0f} s "
            f"(every {args.every}); damaged {verdict.check_failures}, open failed "
            f"{verdict.open_failures}, unexplained {verdict.unexplained}, half-done "
            f"{verdict.half_done}; acknowledged ops lost: most {verdict.most_lost}, "
            f"cuts losing any {cuts_losing}, by count {dict(sorted(lost.items()))}; "
            f"cuts while the store was created {dict(verdict.during_creation)}; "
            f"load {os.getloadavg()[0]:.2f}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
