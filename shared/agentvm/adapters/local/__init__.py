"""The local adapters: SQLite store and queue, in-memory connections, in-process push."""
