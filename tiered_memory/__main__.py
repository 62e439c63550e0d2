"""``python -m tiered_memory``: the ``tiered-memory`` command line."""

from tiered_memory.cli import main

if __name__ == "__main__":
    main(prog_name="tiered-memory")
