"""The cluster host's stores on PostgreSQL (issue 28: ``avm serve`` nodes sharing one database).

The driver is psycopg 3 (``psycopg[binary]``) with ``psycopg_pool``, both from the psycopg project,
maintained with PostgreSQL's own releases in mind. Chosen over asyncpg because it is libpq-based
(every libpq connection option, TLS mode and ``PG*`` variable works as operators expect), natively
async with typed ``AsyncConnection``/``AsyncCursor``, supports pipeline mode (several statements per
round trip), and exposes LISTEN/NOTIFY as an async iterator (``conn.notifies()``), which the
cluster's cross-node fan-out needs next. Both ship type information (mypy needs no stubs).

They come with the ``cluster`` extra (and ``dev``), never in the Lambda layer; the hosts import this
package only when ``AVM_DATABASE_URL`` is set.

- ``database``: ``Database``, the node's one connection pool, shared by every store of the node.
- ``migrations``: the numbered ``.sql`` files of ``migrations/``, applied at start under an advisory
  lock (``migrate``).
- one module per port beside them (``store``, ``usage``, ``sessions``, ``keys``, ``budgets``,
  ``counters``, ``config``, ``tenants``, ``resources``, ``replies``, ``waits``, ``logs``,
  ``running``), each taking the node's ``Database``; docs/cluster.md says what each guarantees
  across nodes.
- ``notifications``: ``Notifications``, the node's one LISTEN connection (queue wake-ups, fan-out).
- ``queue``: ``PostgresTurnQueue``, the ``TurnQueue`` port and its consumer (migration 0200).
- ``connections``: ``PostgresConnections``, the ``Connections`` port for every node's sockets (0201).
- ``push``: ``PostgresPush``, the ``Push`` port across nodes over NOTIFY; ``PostgresSignals``.
"""
