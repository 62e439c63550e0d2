"""Where a memory lives: a file path, or a server's ``postgresql://`` URL; telling them
apart and printing a URL without its secrets (logs, errors, ``repr``, statistics never
show a password). Imports no driver: psycopg loads only when a server is opened."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SERVER_SCHEMES = ("postgresql://", "postgres://")
_SECRET_PARAMS = frozenset({"password", "sslpassword", "passfile", "sslkey"})


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
