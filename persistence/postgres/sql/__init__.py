"""The PostgreSQL backend's SQL, one module per table family (parameters only)."""
