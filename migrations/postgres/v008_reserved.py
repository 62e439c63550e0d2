"""Version 8: reserved for another branch's migration (merged separately).

This branch's notes are version 9; the runner wants an unbroken chain, so this stand-in
does nothing. The branch that owns version 8 replaces this file when both are merged.
"""

VERSION = 8
DESCRIPTION = "reserved (no change)"

STATEMENTS: tuple[str, ...] = ()
