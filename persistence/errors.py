"""The exception hierarchy of tiered-memory, rooted at :class:`TieredMemoryError`.

Every error a user can act on has its own class; bad input raises a subclass of
:class:`InvalidInputError` (which is also a ``ValueError``) before anything is written.
"""

from __future__ import annotations


class TieredMemoryError(Exception):
    """Base class of every error raised by tiered-memory."""


# --- opening a file -------------------------------------------------------------------


class DatabaseOpenError(TieredMemoryError):
    """The database file cannot be opened as a tiered-memory store."""


class MissingDirectoryError(DatabaseOpenError, FileNotFoundError):
    """The directory that should hold the database file does not exist."""


class NotADatabaseError(DatabaseOpenError):
    """The file exists but is not a SQLite database; it was left untouched."""


class ForeignDatabaseError(DatabaseOpenError):
    """The file is a SQLite database of some other application; it was left untouched."""


class SchemaError(DatabaseOpenError):
    """The file's schema version is not the one this code reads; it was left untouched."""


class SchemaTooNewError(SchemaError):
    """The file was written by a newer tiered-memory; it was left untouched."""

    def __init__(self, found: int, supported: int, path: str) -> None:
        self.found = found
        self.supported = supported
        self.path = path
        super().__init__(
            f"{path} has schema version {found}, but this tiered-memory supports up to "
            f"{supported}: upgrade tiered-memory to open it (the file was not modified)"
        )


class MigrationRequiredError(SchemaError):
    """A read-only open of a file written by an older tiered-memory: it must be migrated
    first, and a read-only open never migrates."""

    def __init__(self, found: int, required: int, path: str) -> None:
        self.found = found
        self.required = required
        self.path = path
        super().__init__(
            f"{path} has schema version {found}, but this tiered-memory reads version "
            f"{required} and a read-only open never migrates: run `tiered-memory migrate "
            f"{path}` (or open it read-write) first (the file was not modified)"
        )


class MissingFileError(DatabaseOpenError, FileNotFoundError):
    """A file that was named (a snapshot, an export) does not exist."""


class EncryptionKeyError(DatabaseOpenError):
    """The key does not open the file: a wrong or missing key for an encrypted file, or a
    key given for a plain one. Nothing was changed; the key is never in the message."""


class EncryptionUnavailableError(EncryptionKeyError):
    """A key was given, but the installed ``apsw`` cannot encrypt (it is the plain APSW
    build, not ``apsw-sqlite3mc``); nothing was opened."""


class PlaintextExportError(TieredMemoryError):
    """Exporting an encrypted file to plain JSON was not allowed explicitly
    (``allow_plaintext=True`` / ``--allow-plaintext``); nothing was written."""


class UnsupportedOperationError(TieredMemoryError):
    """This backend cannot do that; the message says what to use instead (PostgreSQL,
    say, has no file key to set or rekey: its server encrypts). Nothing was changed."""


class StorageError(TieredMemoryError):
    """SQLite, the server or the file system failed underneath a call; what it was doing
    was undone.

    ``result_code`` is SQLite's extended result code when SQLite raised it (``5`` busy,
    ``11`` corrupt, ``13`` full, ...; ``None`` otherwise), ``sqlstate`` PostgreSQL's
    five-character code when the server did: branch on the class first, on these only
    for what the classes do not tell apart.
    """

    def __init__(
        self, *args: object, result_code: int | None = None, sqlstate: str | None = None
    ) -> None:
        super().__init__(*args)
        self.result_code = result_code
        self.sqlstate = sqlstate


class CorruptDatabaseError(StorageError):
    """SQLite reports the file (or a snapshot read from) damaged, found during a call;
    the call changed nothing: run ``tiered-memory check`` and restore a backup. Damage
    found while opening raises its subclass :class:`CorruptDatabaseOpenError`."""


class CorruptDatabaseOpenError(CorruptDatabaseError, DatabaseOpenError):
    """The file is a SQLite database that SQLite reports as damaged when opening it
    (caught both as a :class:`CorruptDatabaseError` and as a :class:`DatabaseOpenError`)."""


class StorageFullError(StorageError):
    """The disk (or quota) is full; the call changed nothing: free space and try again."""


class ReadOnlyError(StorageError):
    """A write to a store opened with ``read_only=True``, or to read-only storage; nothing
    was written."""


class BackupError(TieredMemoryError):
    """A backup could not be made or verified; no snapshot was left under its name."""


class DatabaseBusyError(StorageError):
    """Another connection held the write lock for longer than ``busy_timeout``; nothing
    was changed: try again."""


class DatabaseInUseError(DatabaseBusyError):
    """An operation that needs the file to itself (``rekey``, the restore of an encrypted
    file) was refused because other connections have it open; nothing was changed."""


class TransactionAbortedError(StorageError):
    """SQLite (or the server) rolled the whole transaction back after an error inside
    it; nothing of it was committed."""


class MigrationError(TieredMemoryError):
    """A migration failed; the file stays at the last version that committed."""


class StoreClosedError(TieredMemoryError):
    """The store or manager was used after it was closed."""


# --- bad input ------------------------------------------------------------------------


class InvalidInputError(TieredMemoryError, ValueError):
    """An argument is invalid; nothing was written."""


class InvalidTypeError(InvalidInputError, TypeError):
    """An argument has the wrong type; nothing was written."""


class InvalidEmbeddingError(InvalidInputError):
    """An embedding is not a finite 1-D vector of numbers; nothing was written."""


class EmbeddingDimensionError(InvalidEmbeddingError):
    """An embedding's length differs from the dimension the file was built with."""

    def __init__(self, got: int, expected: int) -> None:
        self.got = got
        self.expected = expected
        super().__init__(
            f"embedding has {got} dimensions but this store holds {expected}-dimensional "
            "embeddings: embed with the same model, or use a new file"
        )


class InvalidImportError(InvalidInputError):
    """A JSON document that cannot be imported; ``location`` names the first bad value."""

    def __init__(self, location: str, problem: str) -> None:
        self.location = location
        self.problem = problem
        super().__init__(f"{location}: {problem} (nothing was imported)")


class SecretsFoundError(InvalidImportError):
    """An import asked to refuse secrets found one; ``location`` names where."""


class EmbedderError(TieredMemoryError):
    """The embedding model could not be loaded or run (or returned vectors of the wrong
    shape); nothing was written."""


class ModelCacheError(EmbedderError):
    """A model that is built once (the default compact MiniLM, the quality profile)
    could not be written to its cache directory (not writable, full); nothing was
    written there or to the memory file."""


class EmbeddingModelMismatchError(TieredMemoryError):
    """The file's vectors come from another embedding model than the one configured."""


class DuplicateMemoryError(InvalidInputError):
    """A memory id is already used in another tier (each memory lives in exactly one)."""


class InvalidSupersessionError(InvalidInputError):
    """``supersedes=`` names a memory that cannot be superseded (unknown, forgotten,
    another agent's, in the scratchpad, or superseded already); nothing was written."""


class InvalidBudgetError(InvalidInputError):
    """A token budget (``context(max_tokens=...)``) that is not an int of at least 1;
    nothing was read or written."""


class EmptyQueryError(InvalidInputError):
    """A query with no text (``context("")``): there is nothing to look for; nothing was
    read or written."""


class InvalidPromotionError(InvalidInputError):
    """A promotion that does not go forward along scratchpad -> episodic -> semantic."""


class SameDatabaseError(BackupError, InvalidInputError):
    """A restore source or export target is the live database itself (or its WAL,
    shared-memory or journal file, by any name: a symlink or hard link too); nothing
    was changed."""


# --- lookups --------------------------------------------------------------------------


class NotFoundError(TieredMemoryError, LookupError):
    """Base class for a missing memory, session or other record."""


class MemoryNotFoundError(NotFoundError):
    """No memory with that id in the tier that was named."""


class SessionNotFoundError(NotFoundError):
    """No session with that id."""


class NoteNotFoundError(NotFoundError):
    """No note with that id (or not one this handle's agent wrote)."""


# --- a database server (PostgreSQL) ----------------------------------------------------


class ServerUnavailableError(DatabaseOpenError):
    """The database server cannot be reached (down, wrong host or port, restarting);
    nothing was written: start it or fix the address, then try again."""


class AuthenticationError(DatabaseOpenError):
    """The server refused the credentials (user, password, certificate); nothing was
    written."""


class DatabaseMissingError(DatabaseOpenError):
    """The server has no database of that name; create it (``createdb NAME``) first."""


class ExtensionMissingError(MigrationError):
    """The database lacks pgvector's ``vector`` extension and the role opening it may not
    create it (only a superuser may); nothing was made. A superuser runs ``CREATE
    EXTENSION vector`` in that database once; then the role opens it."""


class ConnectionLostError(StorageError):
    """The connection to the server broke during the call; it was rolled back (during
    a commit, the outcome is unknown: read before you retry)."""


class ExtraMissingError(TieredMemoryError, ImportError):
    """An optional part was asked for but its extra is not installed; the message names
    the ``pip install`` that brings it."""
