"""Where a benchmark's conversation memories live, and how they are filled fast.

:func:`place` gives a new SQLite file in a temporary folder, or, with a PostgreSQL URL,
a new schema in that database (the role must be allowed to create one), dropped with
everything in it at the end. :func:`prefill` stores a user's turns in bulk as a memory
written before the graph existed (one transaction on SQLite, ``COPY`` on PostgreSQL); the
next :class:`~synapse_retriever.conversation.ConversationMemory` opened for that user links
them. :func:`stored_bytes` is what the memories take on disk.

Examples
--------
>>> with place() as where:
...     where.endswith("memory.db")
True
>>> in_schema("postgresql://me@db/team?sslmode=require", "bench_1")
'postgresql://me@db/team?sslmode=require&options=-csearch_path%3Dbench_1'
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np

from synapse_retriever.bench.memory import Turn
from synapse_retriever.conversation.embed import Embedder, embedded
from synapse_retriever.persistence.conversation import (
    PostgresConversationStorage,
    SQLiteConversationStorage,
)
from synapse_retriever.persistence.postgres import SCHEMA_OID, is_postgres_url

__all__ = ["embed_turns", "in_schema", "place", "prefill", "stored_bytes"]


def in_schema(url: str, schema: str) -> str:
    """``url`` with ``schema`` as its search path (where its tables are made and read)."""
    parts = urlsplit(url)
    query = "&".join(filter(None, [parts.query, urlencode({"options": f"-csearch_path={schema}"})]))
    return urlunsplit(parts._replace(query=query))


@contextmanager
def place(postgres: str | None = None) -> Iterator[str]:
    """A new, empty place for memories: an SQLite file in a temporary folder, or (given a
    ``postgresql://`` URL) a new schema ``synapse_bench_<random>`` in that database; both
    removed on leaving the block."""
    if postgres is None:
        with tempfile.TemporaryDirectory() as folder:
            yield os.path.join(folder, "memory.db")
        return
    import psycopg
    from psycopg import sql

    name = f"synapse_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield in_schema(postgres, name)
    finally:
        with psycopg.connect(postgres, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def embed_turns(embedder: Embedder, turns: Sequence[Turn]) -> list[bytes]:
    """Each turn's stored vector (unit rows of float32), embedded 1,000 at a time."""
    blobs: list[bytes] = []
    for begin in range(0, len(turns), 1000):
        chunk = turns[begin : begin + 1000]
        vectors = embedded(embedder, [t.text for t in chunk])
        blobs.extend(np.ascontiguousarray(row).tobytes() for row in vectors)
    return blobs


def prefill(
    where: str, user: str | None, embedder: str, turns: Sequence[Turn], vectors: Sequence[bytes]
) -> None:
    """Store ``turns`` of ``user`` with their ``vectors`` (by embedder ``embedder``) in
    bulk, as a memory written before the graph existed: each turn's surprise (1.0) and
    repeats (0) are placeholders (they weigh in ranking, not in speed)."""
    rows = [
        (t.session, t.role, t.text, t.at, 1.0, 0, embedder, vector)
        for t, vector in zip(turns, vectors, strict=True)
    ]
    columns = "session, role, text, at, surprise, repeats, embedder, embedding"
    if not is_postgres_url(where):
        storage = SQLiteConversationStorage(where, user=user)
        try:
            with storage._write() as db:
                db.executemany(
                    f"INSERT INTO context_turns (user, {columns}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(storage.user, *row) for row in rows],
                )
        finally:
            storage.close()
        return
    import psycopg

    PostgresConversationStorage(where, user=user).close()  # the tables and the user's row
    with psycopg.connect(where) as conn:
        [(number,)] = conn.execute(
            "SELECT id FROM context_users WHERE name = %s", (user or "",)
        ).fetchall()
        with conn.cursor().copy(f"COPY context_turns (user_id, {columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row((number, *row))


def stored_bytes(where: str) -> int:
    """The bytes the memories at ``where`` take: the SQLite file with its journal, or the
    conversation tables with their indexes and TOAST."""
    if not is_postgres_url(where):
        folder = os.path.dirname(where)
        return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
    import psycopg

    with psycopg.connect(where) as conn:
        [(total,)] = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            f"WHERE c.relnamespace = {SCHEMA_OID} AND c.relkind = 'r' "
            "AND c.relname LIKE 'context\\_%'"
        ).fetchall()
    return int(total)
