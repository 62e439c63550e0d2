"""serving(): run ``tiered-memory serve`` as a real process on a free loopback port, wait
until it answers, and stop it (SIGINT, as Ctrl-C would) when the block ends."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = "from tiered_memory.cli import main; main()"


def announced_port(process: subprocess.Popen[str]) -> tuple[int, str]:
    """The port a ``serve ... --port 0`` process got, read from its first stderr line
    (``serving http://HOST:PORT/...``), and that line. (A port picked free beforehand
    could be taken by another process, a second pytest worker say, before it binds.)"""
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"http://[^/\s:]+:(\d+)", line)
    if not line.startswith("serving ") or found is None:
        raise RuntimeError(f"serve did not announce its address: {line}{process.stderr.read()}")
    return int(found.group(1)), line


def wait_for_port(host: str, port: int, timeout: float = 30.0) -> None:
    """Return once ``host:port`` accepts a connection (a server is listening, so its
    Ctrl-C handler is in place); raise ``TimeoutError`` after ``timeout`` seconds.

    A child started from a shell's background job inherits SIGINT ignored, and a SIGINT
    that lands before the server installs its handler is then lost: stop it after this."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port}") from None
            time.sleep(0.05)


@contextmanager
def serving(db: Path | str, *args: str, timeout: float = 60.0) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:PORT``) of a server of ``db`` started with
    ``args``; its stderr is kept in the exception if it never answers."""
    process = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", str(db), "--port", "0", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        port, _ = announced_port(process)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited {process.returncode}: {process.stderr.read()}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(f"{base}/index.json", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
