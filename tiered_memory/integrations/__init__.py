"""Entry points for agent runtimes.

``tiered_memory.integrations.aio``: ``AsyncAgentMemoryManager``, the manager's API as
coroutines for asyncio runtimes (no extra needed). The others are each behind an optional
extra: ``tiered_memory.integrations.langgraph`` (``pip install 'tiered-memory[langgraph]'``): a
LangGraph ``BaseStore`` over a memory file. ``tiered_memory.integrations.mcp_server``
(``pip install 'tiered-memory[mcp]'``): the memory served over the Model Context
Protocol (``tiered-memory mcp DB``). Importing this package imports neither framework.
"""
