"""PLACEHOLDER for version 5 (the embedding queue of branch pgperf, renumbered at merge).

Nothing to do; this file is dropped when the real version 5 is merged.
"""

VERSION = 5
DESCRIPTION = "placeholder (dropped at merge)"
STATEMENTS: tuple[str, ...] = ()
