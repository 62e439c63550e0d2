"""The inspector: ``tiered-memory serve DB``, a local web page over a memory file or server.

Needs the ``serve`` extra (Starlette, uvicorn, Jinja2); importing this package imports none
of them, so :mod:`tiered_memory.inspector.svg` (the server-drawn charts, shared with
``benchmarks/report.py``) works without it. :func:`tiered_memory.inspector.app.create_app`
builds the application; each page lives in its own module under ``pages``.
"""
