"""Copy a whole memory from one location to another: file to server, server to file,
file to file (``tiered-memory copy SRC DST``).

Both locations are opened through :func:`persistence.build_backend`, so any location the
manager opens works here, and nothing changes when another backend arrives. The source
is read from one snapshot, read-only (it must exist and be at the current schema:
``tiered-memory migrate`` upgrades an older file); the destination must be new or empty
and is written in ONE transaction: after any failure it holds what it held before (and a
file this call created is removed). The copy is faithful: memories of every tier with
their vectors, the embedding model, sessions and transcripts, schedules, the promotion
and forgetting logs and the knowledge graph; an export of either side gives the same
JSON but for ``exported_at``. Nothing is re-embedded or redacted again.

The whole memory is held in RAM on the way (see :mod:`persistence.transfer.copy`): fine
up to ~100k memories.
"""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

from persistence import (
    DEFAULT_MAX_CONTENT_BYTES,
    CopyResult,
    InvalidInputError,
    Progress,
    SameDatabaseError,
    build_backend,
    copy_store,
    display,
    is_server_url,
)
from tiered_memory.redaction import total_in_file

__all__ = ["CopyResult", "copy_memory"]


def copy_memory(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    agent_id: str | None = None,
) -> CopyResult:
    """Copy everything at ``source`` into the new or empty ``destination``, all or
    nothing; return the rows copied per table (:class:`~persistence.CopyResult`).
    With ``agent_id`` only what that agent's scoped handle on ``source`` exports is copied.

    ``progress`` is told (done, total) as rows are read and then written. A destination
    that holds anything is refused with :class:`~persistence.InvalidInputError`, as is
    the source itself or ``":memory:"``.
    """
    for location in (source, destination):
        if not isinstance(location, str | os.PathLike):
            raise InvalidInputError(f"a location is a path or a URL, got {location!r}")
        if os.fspath(location) == ":memory:":
            raise InvalidInputError("copy needs a file or a server: ':memory:' keeps nothing")
    if _same(source, destination):
        raise SameDatabaseError(
            f"{display(source)} is both the source and the destination: nothing was copied"
        )
    created = not is_server_url(destination) and not Path(destination).exists()
    try:
        return _copy(source, destination, progress, agent_id or "")
    except BaseException:
        if created:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{os.fspath(destination)}{suffix}").unlink(missing_ok=True)
        raise


def _copy(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    progress: Progress | None,
    agent_id: str = "",
) -> CopyResult:
    src = build_backend(source, read_only=True, scope=agent_id)
    dst = build_backend(destination)
    with closing(src.store.open()), closing(dst.store.open()), src.backups.export_source() as rows:
        return copy_store(
            rows,
            dst.backups.import_sink,
            progress=progress,
            max_content_bytes=DEFAULT_MAX_CONTENT_BYTES,
            redacted=total_in_file(src.store),
            source_name=display(source),
            destination_name=display(destination),
        )


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Both locations name one database (the same URL, or one file by any name)."""
    if is_server_url(a) or is_server_url(b):
        return os.fspath(a) == os.fspath(b)
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()
