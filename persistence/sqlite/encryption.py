"""Encryption at rest: the key of a file, applied to every connection the library opens.

The cipher is SQLite3 Multiple Ciphers (ChaCha20-Poly1305 by default), which the
``apsw-sqlite3mc`` distribution builds into the ``apsw`` module this library depends on.
It encrypts every page of the database, its WAL and every ``VACUUM INTO`` snapshot with
the same key. A plain APSW build silently ignores ``PRAGMA key``, so a key is refused up
front there (:class:`EncryptionUnavailableError`) rather than writing plaintext.

The key is held as bytes and handed to SQLite as hex (``PRAGMA hexkey``), never logged
and never put in a message, a repr or a file name.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import apsw

from persistence.errors import (
    EncryptionKeyError,
    EncryptionUnavailableError,
    InvalidTypeError,
    NotADatabaseError,
)
from persistence.records import Key

SQLITE_HEADER = b"SQLite format 3\x00"

FileKind = Literal["missing", "empty", "plain", "encrypted", "foreign", "interrupted"]


def key_bytes(key: Key | None) -> bytes | None:
    """The key as bytes (``None`` for a plain file); an empty key or another type is refused."""
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes):
        raise InvalidTypeError(f"key must be str or bytes, got {type(key).__name__}")
    if not key:
        raise EncryptionKeyError("the key is empty: give a non-empty key (nothing was opened)")
    return key


@functools.cache
def cipher_available() -> bool:
    """True if the loaded ``apsw`` is built with SQLite3 Multiple Ciphers."""
    conn = apsw.Connection(":memory:")
    try:
        conn.execute("SELECT sqlite3mc_version()").fetchall()
        return True
    except apsw.SQLError:
        return False
    finally:
        conn.close()


def require_cipher() -> None:
    """Raise :class:`EncryptionUnavailableError` unless the loaded ``apsw`` can encrypt."""
    if not cipher_available():
        raise EncryptionUnavailableError(
            "a key was given, but the installed apsw cannot encrypt (plain APSW build): "
            "reinstall with `pip install --force-reinstall apsw-sqlite3mc` (nothing was opened)"
        )


def apply_key(conn: apsw.Connection, key: bytes) -> None:
    """Give a new connection its key, before anything reads the file."""
    require_cipher()
    try:
        conn.pragma("hexkey", key.hex())
    except apsw.Error:
        raise EncryptionKeyError("SQLite refused the key (nothing was opened)") from None


def rekey(conn: apsw.Connection, new_key: bytes) -> None:
    """Re-encrypt every page of ``conn``'s file with ``new_key``, in one transaction."""
    require_cipher()
    try:
        conn.pragma("hexrekey", new_key.hex())
    except apsw.Error as exc:
        kind = type(exc).__name__
        raise EncryptionKeyError(f"SQLite could not change the key ({kind})") from None


JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
"""The first bytes of a SQLite rollback journal's header."""


def file_kind(path: Path) -> FileKind:
    """What the first bytes of ``path`` say it is (see :func:`looks_encrypted`).

    ``"interrupted"``: first bytes of neither kind, but a rollback journal of this file
    beside it. A power cut while SQLite wrote the first page (creating the file, say)
    leaves that; SQLite's next open rolls the journal back and repairs it.
    """
    try:
        with path.open("rb") as handle:
            header = handle.read(24)
    except FileNotFoundError:
        return "missing"
    if not header:
        return "empty"
    if header[:16] == SQLITE_HEADER:
        return "plain"
    if looks_encrypted(header):
        return "encrypted"
    return "interrupted" if _has_hot_journal(path) else "foreign"


def _has_hot_journal(path: Path) -> bool:
    try:
        with open(f"{path}-journal", "rb") as handle:
            return handle.read(8) == JOURNAL_MAGIC
    except OSError:
        return False


def looks_encrypted(header: bytes) -> bool:
    """True for the first bytes of a SQLite3 Multiple Ciphers file.

    Bytes 0-15 (the salt) are random, but the cipher leaves bytes 16-23 of the header
    readable: page size, file format versions (1 or 2), reserved bytes per page (the
    cipher's nonce and tag) and the fixed payload fractions 64, 32, 32.
    """
    if len(header) < 24 or header[:16] == SQLITE_HEADER:
        return False
    page_size = int.from_bytes(header[16:18], "big")
    valid_size = page_size == 1 or (512 <= page_size <= 32768 and page_size & (page_size - 1) == 0)
    return (
        valid_size
        and header[18] in (1, 2)
        and header[19] in (1, 2)
        and header[20] > 0
        and header[21:24] == b"\x40\x20\x20"
    )


def check_file_for_key(path: Path, key: bytes | None, *, doing: str = "opened") -> None:
    """Refuse, before SQLite touches it, a file that the key (or its absence) cannot open.

    A key for a plain SQLite file, or no key for an encrypted one, raises
    :class:`EncryptionKeyError`; a file that is neither raises :class:`NotADatabaseError`.
    A missing or empty file passes (a key makes a new file encrypted), and so does an
    interrupted one (SQLite rolls its journal back; it then says what it found).
    """
    kind = file_kind(path)
    if kind == "foreign":
        raise NotADatabaseError(f"{path} is not a SQLite database (left untouched)")
    if kind == "plain" and key is not None:
        raise EncryptionKeyError(
            f"{path} is not encrypted, but a key was given: open it without a key "
            f"(nothing was {doing})"
        )
    if kind == "encrypted" and key is None:
        raise EncryptionKeyError(
            f"{path} is encrypted: give its key (key=..., TIERED_MEMORY_KEY or --key-file; "
            f"nothing was {doing})"
        )


def wrong_key(path: str | Path, doing: str = "opened") -> EncryptionKeyError:
    """The error for an encrypted file that SQLite cannot read with the key given."""
    return EncryptionKeyError(
        f"{path} cannot be decrypted with this key (wrong key, or the file is damaged); "
        f"nothing was {doing}"
    )
