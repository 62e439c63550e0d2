"""SQL of the SQLite engine, one module per table family, built apart from running it:
each function takes a connection and parameters, and nothing else runs SQL."""
