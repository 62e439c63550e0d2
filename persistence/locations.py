"""Where a memory lives: a file path, or a server's ``postgresql://`` URL; telling them
apart and printing a URL without its secrets (logs, errors, ``repr``, statistics never
show a password). Imports no driver: psycopg loads only when a server is opened."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from persistence.errors import InvalidInputError

SERVER_SCHEMES = ("postgresql://", "postgres://")
_SECRET_PARAMS = frozenset({"password", "sslpassword", "passfile", "sslkey"})
POOLER_PARAM = "tm_pooler"
"""The URL query parameter that names a pooler in front of the server (the library's
own: it is taken out before the URL reaches libpq, which refuses parameters it does not
know). ``tm_pooler=transaction``: a transaction-mode pooler (PgBouncer, Supavisor,
pgcat), as ``PoolSettings(pooler=True)``; ``tm_pooler=session``: a session-mode one,
which keeps sessions (nothing changes)."""
_POOLER_MODES = {"transaction": True, "session": False}


def is_server_url(location: object) -> bool:
    """True for a PostgreSQL URL (``postgresql://`` or ``postgres://``), False for a path."""
    return isinstance(location, str) and location.lower().startswith(SERVER_SCHEMES)


def display(location: str | os.PathLike[str]) -> str:
    """``location`` as messages show it: a path as it is, a URL without its password."""
    text = os.fspath(location)
    return redact(text) if is_server_url(text) else text


def redact(url: str) -> str:
    """``url`` without a password (in the user part or the query) or other secrets."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.split(':', 1)[0]}@{host}"
        query = urlencode(
            [
                (k, v)
                for k, v in parse_qsl(parts.query, keep_blank_values=True)
                if k.lower() not in _SECRET_PARAMS
            ],  # fmt: skip
            safe="/",
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "postgresql://(unparsable URL)"


def split_pooler(url: str) -> tuple[str, bool]:
    """``url`` without its :data:`POOLER_PARAM`, and whether that named a
    transaction-mode pooler; another value raises :class:`InvalidInputError`."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    named = [v for k, v in pairs if k == POOLER_PARAM]
    if not named:
        return url, False
    mode = named[-1].lower()
    if mode not in _POOLER_MODES:
        raise InvalidInputError(
            f"{POOLER_PARAM}={named[-1]!r} in {redact(url)}: say 'transaction' (PgBouncer, "
            "Supavisor or pgcat in transaction mode) or 'session'"
        )
    query = urlencode([(k, v) for k, v in pairs if k != POOLER_PARAM], safe="/")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment)), (
        _POOLER_MODES[mode]
    )


def scrub(text: str, url: str) -> str:
    """``text`` (a driver's message) with the URL's password taken out wherever it shows."""
    try:
        parts = urlsplit(url)
        secrets = [parts.password or ""]
        secrets += [v for k, v in parse_qsl(parts.query) if k.lower() in _SECRET_PARAMS]
    except ValueError:
        return text
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
