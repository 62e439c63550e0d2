"""Where a memory lives: a file path, or a server's ``postgresql://`` URL.

Telling them apart needs no driver (this module imports nothing of the PostgreSQL
backend, so psycopg is loaded only when a server is actually opened).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server_url(location: str | os.PathLike[str]) -> bool:
    """True for a PostgreSQL URL (``postgresql://`` or ``postgres://``), False for a path."""
    return isinstance(location, str) and location.lower().startswith(SERVER_SCHEMES)


def display(location: str | os.PathLike[str]) -> str:
    """``location`` as messages show it: a path as it is, a URL without its password."""
    if not is_server_url(location):
        return os.fspath(location)
    text = os.fspath(location)
    try:
        parts = urlsplit(text)
    except ValueError:
        return "postgresql://(unparsable URL)"
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
