"""Entry points for agent runtimes, each behind an optional extra (the asyncio API needs
none and is ``tiered_memory.aio``).

``tiered_memory.integrations.langgraph`` (``pip install 'tiered-memory[langgraph]'``): a
LangGraph ``BaseStore`` over a memory file. ``tiered_memory.integrations.mcp_server``
(``pip install 'tiered-memory[mcp]'``): the memory served over the Model Context
Protocol (``tiered-memory mcp DB``). Importing this package imports neither framework.
"""
