"""The session centre: export, import, search, fork and title a session (docs/sessions.md).

* ``jsonl``: the export format (JSON Lines, version 1), written and read strictly.
* ``export``: a session as an export; ``imports``: an export into a container (idempotent by
  export id, all or nothing); ``writer``: writing a whole session at once under a ledger claim,
  shared by imports and forks.
* ``search``: the query syntax, the one tokenizer, matching, paging (stores implement
  ``ports.SessionArchive.search_messages``: SQLite FTS5, DynamoDB by reading messages).
* ``fork``: a new image whose history is a prefix of another's.
* ``title``: a session's title (its image's name), set or generated after the first turn.

The HTTP routes are in ``agentvm.api.sessions``; the stores in ``adapters/local/sqlite_sessions``
and ``adapters/aws/dynamodb_sessions``.
"""
