"""PLACEHOLDER for version 2 (the recall index, written on another branch)."""

VERSION = 2
DESCRIPTION = "placeholder for the recall index"
STATEMENTS: tuple[str, ...] = ()
