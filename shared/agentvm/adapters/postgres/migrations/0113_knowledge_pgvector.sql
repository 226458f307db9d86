-- pgvector for knowledge search (adapters/postgres/knowledge.py, docs/embeddings.md "pgvector"):
-- the `vector` extension when this server has it and the migrating role may create it. No column
-- changes: chunk vectors stay ``embedding real[]`` (every node, with or without pgvector, reads and
-- writes them; a rolling upgrade needs nothing), and the HNSW indexes are expression indexes on
-- ``embedding::vector(n)``, one partial index per dimension (``WHERE dimensions = n``), created by
-- the adapter the first time it stores vectors of that dimension. Without the extension (not
-- installed, or `vector` is not a trusted extension and the role is no superuser) nothing happens
-- here: search runs the exact scan and says so once in the log. Installed later:
-- ``CREATE EXTENSION vector`` as a superuser, then restart the nodes.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        CREATE EXTENSION IF NOT EXISTS vector;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgvector is available but this role may not create it: exact vector search';
END
$$;
