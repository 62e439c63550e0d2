"""Version 11: the vector index in half precision (``halfvec``), the same vectors.

``tm_vectors.embedding`` keeps its float32 ``vector(d)``; only the HNSW index changes: it
is built over ``embedding::halfvec(d)`` (``halfvec_cosine_ops``), half the bytes per
vector in the graph. Searches order by that expression (the index's) and return the exact
float32 distance, which is what recall fuses and what ties are broken on; measured at
100k memories of 384-d vectors, a top-100 HNSW scan took 4.0-4.4 ms against 6.0-6.4 ms,
the same 100 results to 10 recalled. A database whose vector column is not typed yet
(no embedding so far) has no index: the first embedding creates the new form
(``vector_sql.ensure_vector_index``). HNSW on ``halfvec`` takes up to 4,000 dimensions;
a larger one keeps no index (an exact scan), as before above 2,000.
"""

VERSION = 11
DESCRIPTION = "the HNSW vector index over embedding::halfvec(d)"

STATEMENTS: tuple[str, ...] = (
    """DO $$
    DECLARE
        dim int;
        current text;
    BEGIN
        SELECT atttypmod INTO dim FROM pg_attribute
            WHERE attrelid = 'tm_vectors'::regclass AND attname = 'embedding';
        SELECT pg_get_indexdef(indexrelid) INTO current FROM pg_index
            WHERE indexrelid = to_regclass('tm_vectors_hnsw');
        IF current IS NOT NULL AND current LIKE '%halfvec%' THEN
            RETURN;
        END IF;
        DROP INDEX IF EXISTS tm_vectors_hnsw;
        IF dim > 0 AND dim <= 4000 THEN
            EXECUTE format('CREATE INDEX tm_vectors_hnsw ON tm_vectors '
                           'USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops)', dim);
        END IF;
    END $$""",
)
