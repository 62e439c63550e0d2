"""A Unix-socket proxy in front of the test server that counts round trips.

:class:`RoundTripProxy` listens on a socket of its own (``.s.PGSQL.<port>`` in a
temporary folder: a libpq URL with ``host=<folder>`` connects through it) and relays every
connection to the real server's socket. A round trip is counted each time a client sends
after the server last spoke on that connection (the first message of a connection counts
too): a pipeline of many statements is one, a statement waited for, then another, two.
"""

from __future__ import annotations

import os
import re
import select
import socket
import tempfile
import threading
from contextlib import suppress
from pathlib import Path


class RoundTripProxy:
    """Relays connections to ``server_socket`` and counts their round trips (see the
    module docstring); a context manager that stops it."""

    def __init__(self, server_socket: str) -> None:
        self._target = server_socket
        self.folder = tempfile.mkdtemp(prefix="tm-trips-")
        os.chmod(self.folder, 0o755)
        self._path = str(Path(self.folder) / Path(server_socket).name)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self._path)
        self._listener.listen(16)
        self._lock = threading.Lock()
        self._trips = 0
        self._stop = False
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def trips(self) -> int:
        with self._lock:
            return self._trips

    def url(self, server_url: str) -> str:
        """``server_url`` with its ``host=`` pointing at the proxy."""
        return re.sub(r"host=[^&]+", f"host={self.folder}", server_url)

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._target)
            relay = threading.Thread(target=self._relay, args=(client, server), daemon=True)
            self._threads.append(relay)
            relay.start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        server_spoke = True  # the first message of a connection is a round trip
        with client, server, suppress(OSError):  # a side that hung up ends the relay
            while not self._stop:
                ready, _, _ = select.select([client, server], [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        if server_spoke:
                            with self._lock:
                                self._trips += 1
                        server_spoke = False
                        server.sendall(data)
                    else:
                        server_spoke = True
                        client.sendall(data)

    def close(self) -> None:
        self._stop = True
        self._listener.close()
        for thread in self._threads:
            thread.join(2)
        Path(self._path).unlink(missing_ok=True)
        os.rmdir(self.folder)

    def __enter__(self) -> RoundTripProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
