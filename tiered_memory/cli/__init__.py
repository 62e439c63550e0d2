"""The ``tiered-memory`` command line (entry point :func:`main`).

``app`` holds the command group and what commands share; ``commands`` the memory and file
commands; ``context`` a query's prompt text; ``graph`` the knowledge graph's; ``notes``
the notes'; ``repair`` the damage commands (``check``, ``salvage``); ``serve`` the
inspector (a local web page). Importing this package registers them all.
"""

from tiered_memory.cli import commands as _commands  # noqa: F401 - registers the commands
from tiered_memory.cli import context as _context  # noqa: F401 - registers `context`
from tiered_memory.cli import erasure as _erasure  # noqa: F401 - registers `forget`
from tiered_memory.cli import graph as _graph  # noqa: F401 - registers `graph` and `entities`
from tiered_memory.cli import notes as _notes  # noqa: F401 - registers `notes ...`
from tiered_memory.cli import repair as _repair  # noqa: F401 - registers `check` and `salvage`
from tiered_memory.cli import serve as _serve  # noqa: F401 - registers `serve`
from tiered_memory.cli.app import main

__all__ = ["main"]
