"""Connections whose every transaction bounds its own lock waits.

A ``SET lock_timeout`` for the session lands, behind a connection pooler in transaction mode
(PgBouncer's ``pool_mode = transaction``), on whichever server backend ran it: it stays there
for the pooler's other clients, while this library's later transactions run on backends that
never got it and wait on a lock without bound. So each transaction sets its own bound,
transaction-local (``SET LOCAL``): :class:`BoundedCursor` sends it as a transaction begins,
whatever statement begins it, in the round trip of psycopg's ``BEGIN`` (not a
``conn.transaction()`` block, which sends its own: the library uses none).

In the same round trip each transaction reads its floats exactly (:data:`EXACT_FLOATS`): a
server, database or role set to ``extra_float_digits = 0`` (or a client's ``PGOPTIONS``)
prints a ``float8`` to 15 digits, and a time or a score read back would not be the one
written (two turns a microsecond apart had one time).

Imported by :class:`~synapse_retriever.persistence.postgres.Connections`, once psycopg (the
``postgres`` extra) is known to be installed.
"""

from __future__ import annotations

from typing import Any, Self

import psycopg
from psycopg.pq import PipelineStatus, TransactionStatus

__all__ = ["EXACT_FLOATS", "BoundedConnection", "BoundedCursor"]

EXACT_FLOATS = "SET LOCAL extra_float_digits = 3"
"""Run as every transaction begins: a ``float8`` is printed (and read back) as the shortest
text that reads as the same number, whatever the server's, the database's or the role's
``extra_float_digits`` (psycopg reads results as text)."""


class BoundedConnection(psycopg.Connection[Any]):
    """A connection whose transactions run :attr:`bound` first (with :class:`BoundedCursor`
    as its ``cursor_factory``)."""

    bound: str
    """The statement that bounds a transaction's lock waits
    (:func:`~synapse_retriever.persistence.postgres.lock_timeout`), set by whoever opens
    the connection, before its first transaction."""


class BoundedCursor(psycopg.Cursor[Any]):
    """A cursor whose statement, when it begins a transaction, is preceded by its
    connection's :attr:`~BoundedConnection.bound` and :data:`EXACT_FLOATS` (psycopg sends ``BEGIN``
    before the first statement of each transaction; autocommit statements begin none).
    Every statement of this library runs through :meth:`execute` or :meth:`executemany`
    (none through ``copy`` or ``stream``)."""

    # psycopg's own signatures, passed on whole (they differ between its versions)
    def execute(self, *args: Any, **kwargs: Any) -> Self:
        self._begin()
        return super().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> None:
        self._begin()
        super().executemany(*args, **kwargs)

    def _begin(self) -> None:
        conn = self.connection
        if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            return  # no transaction to begin, or one begun already
        assert isinstance(conn, BoundedConnection)
        bound = conn.bound
        # a cursor of its own: this one's results are the caller's statement's
        if conn.info.pipeline_status != PipelineStatus.OFF:
            for statement in (bound, EXACT_FLOATS):  # sent with what follows
                psycopg.Cursor(conn).execute(statement, prepare=False)
            return
        with conn.pipeline():  # the BEGIN, the bound and exact floats in one round trip
            for statement in (bound, EXACT_FLOATS):
                psycopg.Cursor(conn).execute(statement, prepare=False)
