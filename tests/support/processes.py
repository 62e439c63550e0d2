"""spawn_worker(): start a worker script of tests/, wait for its first report, SIGKILL
it at a chosen moment and reap it, so the crash tests share one spawn-and-kill block."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).parent


class Worker:
    """A running worker process and the complete lines it has printed so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def readline(self) -> str:
        """The next output line without its newline ("" once the output has ended)."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line:
            self.lines.append(line.rstrip("\n"))
        return line.rstrip("\n")

    def wait_for(self, word: str) -> bool:
        """Read lines until one starts with ``word``; False if the output ended first."""
        assert self.process.stdout is not None
        for line in self.process.stdout:  # blocks until the worker prints (or exits)
            self.lines.append(line.rstrip("\n"))
            if line.startswith(word):
                return True
        return False

    def kill(self, after: float = 0.0) -> list[str]:
        """SIGKILL the worker ``after`` seconds from now, reap it, and return every
        complete line it printed (the last, unfinished piece is dropped)."""
        time.sleep(after)
        self.process.send_signal(signal.SIGKILL)
        return self._reap()

    def finish(self, timeout: float) -> list[str]:
        """Let the worker end by itself within ``timeout`` seconds (a piped stdin is
        closed first); return its lines. For workers that print little: the output
        waits in the pipe (64 KiB) until the worker has exited."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=timeout)
        return self._reap()

    def _reap(self) -> list[str]:
        # communicate() would read the pipe past the text buffer that already holds lines.
        assert self.process.stdout is not None
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        rest = self.process.stdout.read()  # EOF once the process is gone
        self.process.stdout.close()
        self.process.wait(timeout=30)
        self.lines += rest.split("\n")[:-1]  # the last piece is an unfinished line (or empty)
        return self.lines


def spawn_worker(
    *args: str,
    script: str = "worker.py",
    ready: str | None = "READY",
    env: Mapping[str, str] | None = None,
    stdin: bool = False,
    quiet: bool = True,
) -> Worker:
    """Start ``tests/<script> args`` unbuffered with its output piped as text.

    With ``ready`` it returns once the worker printed a line starting with that word (or
    its output ended), so a later kill's delay counts from there and a loaded machine's
    slow interpreter start-up does not eat the kill window. ``quiet`` sends stderr to
    /dev/null; ``stdin`` pipes a stdin; ``env`` adds variables to this process's own.
    """
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"} | dict(env or {}),
    )
    worker = Worker(process)
    if ready is not None:
        worker.wait_for(ready)
    return worker
