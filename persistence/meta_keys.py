"""Names of the facts and counters a store keeps about itself (``get_meta``,
``set_meta``, ``increment_meta``): the same on every backend."""

EMBEDDING_DIM_KEY = "embedding_dim"
EMBEDDING_MODEL_KEY = "embedding_model"
EMBEDDING_ERRORS_KEY = "embedding_errors"
LAST_EMBEDDING_ERROR_KEY = "last_embedding_error"
REDACTIONS_KEY = "redactions"
DEDUPLICATED_KEY = "graph_deduplicated"  # remember() calls answered by an existing memory
NEAR_DUPLICATES_KEY = "graph_near_duplicates_merged"  # memories consolidate() folded
REBUILD_MODEL_KEY = "rebuild_model"  # the model a re-embedding under way stages vectors of
REBUILD_DIM_KEY = "rebuild_dim"  # and their size
