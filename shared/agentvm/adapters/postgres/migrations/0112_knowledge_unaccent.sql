-- Knowledge search folds accents (adapters/postgres/knowledge.py): "cafe" finds "café" and "café"
-- finds "cafe", as on the local and AWS hosts, whose FTS5 tokenizer (unicode61 remove_diacritics 2)
-- does. ``avm_knowledge`` is the 'english' text search configuration with the ``unaccent``
-- dictionary before the stemmer for the token types that may hold non-ASCII letters (PostgreSQL's
-- documented way to use unaccent in full-text search: rows and queries both pass through it, and
-- ``to_tsvector(regconfig, text)`` stays IMMUTABLE, as a generated column needs). ASCII words keep
-- the plain 'english' mapping (nothing to fold, no dictionary lookup).
-- unaccent ships in PostgreSQL's contrib (Debian: in the postgresql-NN package) and is a trusted
-- extension since PostgreSQL 13: a database owner without superuser may create it.
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE TEXT SEARCH CONFIGURATION avm_knowledge (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION avm_knowledge
    ALTER MAPPING FOR word, hword, hword_part WITH unaccent, english_stem;
ALTER TEXT SEARCH CONFIGURATION avm_knowledge
    ALTER MAPPING FOR numword, numhword, hword_numpart WITH unaccent, simple;
-- A generated column's expression cannot change in place before PostgreSQL 17: ``words`` (and its
-- GIN index with it) is dropped and added again, computed through the new configuration. During a
-- rolling upgrade an older node still parses its queries with 'english': it keeps working, but an
-- accented query word misses the folded rows until that node is upgraded.
ALTER TABLE knowledge_chunks DROP COLUMN words;
ALTER TABLE knowledge_chunks ADD COLUMN words tsvector GENERATED ALWAYS AS (
    array_to_tsvector(ARRAY['s' || md5(tenant_id || chr(1) || resource || chr(1) || version)])
    || setweight(to_tsvector('avm_knowledge', heading_path), 'A')
    || setweight(to_tsvector('avm_knowledge', title), 'B')
    || setweight(to_tsvector('avm_knowledge', text), 'D')
) STORED;
CREATE INDEX knowledge_chunks_words ON knowledge_chunks USING GIN (words);
-- No planner statistics for the columns no query filters on: ANALYZE (autovacuum's, and the one
-- ``add_chunks`` runs after a publish) then skips computing element statistics of every vector and
-- samples of the text, most of its cost.
ALTER TABLE knowledge_chunks
    ALTER COLUMN embedding SET STATISTICS 0,
    ALTER COLUMN text SET STATISTICS 0,
    ALTER COLUMN title SET STATISTICS 0,
    ALTER COLUMN heading_path SET STATISTICS 0,
    ALTER COLUMN location SET STATISTICS 0,
    ALTER COLUMN norm SET STATISTICS 0;
