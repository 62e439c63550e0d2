"""A worker for tests/faults/test_notes_crash.py: on the file ``argv[1]`` it writes notes and
edits them as fast as it can, printing ``NOTE id version`` after each call returned, until
it is killed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's code

from tiered_memory import AgentMemoryManager  # noqa: E402


def main() -> None:
    with AgentMemoryManager.open(sys.argv[1], embedder=None, embed_in_background=False) as memory:
        print("READY", flush=True)
        n = 0
        while True:
            note = memory.notes.create(f"note {n}", f"text {n}", tags=["crash"])
            print(f"NOTE {note.id} 1", flush=True)
            edited = memory.notes.update(note.id, content=f"text {n} edited", author="w")
            print(f"NOTE {edited.id} {edited.version}", flush=True)
            n += 1


if __name__ == "__main__":
    main()
