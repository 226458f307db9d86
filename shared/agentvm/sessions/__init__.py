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

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.

Every public name is importable from here and loaded from its module on first use
(``agentvm.lazy``); ``tests/unit/package/test_exports.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentvm.lazy import lazy_exports

if TYPE_CHECKING:
    from agentvm.sessions.export import (
        MAX_EXPORT_BYTES,
        export_session,
        session_image,
    )
    from agentvm.sessions.fork import (
        fork_session,
    )
    from agentvm.sessions.imports import (
        import_session,
    )
    from agentvm.sessions.jsonl import (
        CONFIG_FIELDS,
        EXPORT_ID,
        FORMAT,
        MEDIA_TYPE,
        VERSION,
        SessionExport,
        read_export,
        write_export,
    )
    from agentvm.sessions.search import (
        DEFAULT_LIMIT,
        MAX_LIMIT,
        decode_cursor,
        encode_cursor,
        hit_to_wire,
        matches,
        normalise,
        parse_query,
        scan,
        search_sessions,
        searchable_text,
        snippet,
        tokens,
    )
    from agentvm.sessions.writer import (
        LEASE_MS,
        archive_of,
        fresh_copies,
        write_session,
    )

__all__ = [
    "CONFIG_FIELDS",
    "DEFAULT_LIMIT",
    "EXPORT_ID",
    "FORMAT",
    "LEASE_MS",
    "MAX_EXPORT_BYTES",
    "MAX_LIMIT",
    "MEDIA_TYPE",
    "SessionExport",
    "VERSION",
    "archive_of",
    "decode_cursor",
    "encode_cursor",
    "export_session",
    "fork_session",
    "fresh_copies",
    "hit_to_wire",
    "import_session",
    "matches",
    "normalise",
    "parse_query",
    "read_export",
    "scan",
    "search_sessions",
    "searchable_text",
    "session_image",
    "snippet",
    "tokens",
    "write_export",
    "write_session",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "export": [
            "MAX_EXPORT_BYTES",
            "export_session",
            "session_image",
        ],
        "fork": [
            "fork_session",
        ],
        "imports": [
            "import_session",
        ],
        "jsonl": [
            "CONFIG_FIELDS",
            "EXPORT_ID",
            "FORMAT",
            "MEDIA_TYPE",
            "SessionExport",
            "VERSION",
            "read_export",
            "write_export",
        ],
        "search": [
            "DEFAULT_LIMIT",
            "MAX_LIMIT",
            "decode_cursor",
            "encode_cursor",
            "hit_to_wire",
            "matches",
            "normalise",
            "parse_query",
            "scan",
            "search_sessions",
            "searchable_text",
            "snippet",
            "tokens",
        ],
        "writer": [
            "LEASE_MS",
            "archive_of",
            "fresh_copies",
            "write_session",
        ],
    },
)
