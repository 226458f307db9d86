-- The KnowledgeIndex (adapters/postgres/knowledge.py): every chunk of every knowledge version, one
-- row, keyed by (tenant, resource, version, document, ordinal). ``words`` is its full-text vector
-- ('english': Snowball stemming and stop words, as FTS5's porter tokenizer locally), the heading
-- path weighing A, the title B, the text D, plus one lexeme naming its version (``scope``) so the
-- GIN index answers a version's matches, not every tenant's. ``embedding``: its vector (NULL: words
-- only), ``norm`` its length, for cosine similarity computed in SQL (no pgvector in Debian bookworm).
CREATE TABLE knowledge_chunks (
    tenant_id    TEXT NOT NULL,
    resource     TEXT NOT NULL,
    version      TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,
    title        TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    location     TEXT NOT NULL,
    text         TEXT NOT NULL,
    embedding    REAL[],
    dimensions   INTEGER,
    norm         REAL,
    words        tsvector GENERATED ALWAYS AS (
        array_to_tsvector(ARRAY['s' || md5(tenant_id || chr(1) || resource || chr(1) || version)])
        || setweight(to_tsvector('english', heading_path), 'A')
        || setweight(to_tsvector('english', title), 'B')
        || setweight(to_tsvector('english', text), 'D')
    ) STORED,
    PRIMARY KEY (tenant_id, resource, version, document_id, ordinal)
);
CREATE INDEX knowledge_chunks_words ON knowledge_chunks USING GIN (words);
