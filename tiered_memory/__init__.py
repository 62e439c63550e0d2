"""tiered-memory: durable, fast, explainable three-tier memory for LLM agents.

Users import from here; the store, cache and backup classes are also in ``persistence``.
"""

from persistence import *  # noqa: F403 - the records and errors are part of this API
from persistence import __all__ as _persistence_all

__version__ = "0.1.0.dev0"
__all__ = [*_persistence_all, "__version__"]
