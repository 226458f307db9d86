-- The SessionArchive port (adapters/postgres/sessions.py): the ledger of whole-session writes
-- (imports and forks) and the full-text index of message search.

CREATE TABLE session_imports (
    tenant_id TEXT NOT NULL,
    key       TEXT NOT NULL,
    record    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

-- Per session, the last seq whose message is in message_search (indexed lazily, at search time).
CREATE TABLE search_sessions (
    session_id  TEXT PRIMARY KEY,
    indexed_seq BIGINT NOT NULL DEFAULT 0
);

-- One row per searchable message: its tokens (agentvm.sessions.search.tokens, the one tokenizer
-- of every store) as lexemes, as they are, with no dictionary or stemming, each behind its
-- tenant's namespace (a hash prefix). Positions are not kept: the index finds the messages
-- holding every token, and the matcher checks phrases.
CREATE TABLE message_search (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    doc        TSVECTOR NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX message_search_doc ON message_search USING GIN (doc);

CREATE INDEX images_by_session ON images (session_id);

-- A deleted image takes its session's index with it, in the deleting transaction.
CREATE FUNCTION search_forget_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM message_search WHERE session_id = OLD.session_id;
    DELETE FROM search_sessions WHERE session_id = OLD.session_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER images_search_forget AFTER DELETE ON images
    FOR EACH ROW EXECUTE FUNCTION search_forget_session();
