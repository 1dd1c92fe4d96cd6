"""A conversation memory's persistence: the protocol (:mod:`.protocol`) and its backends,
chosen by :func:`open_conversation_storage` from where the memory lives.

Examples
--------
>>> storage = open_conversation_storage(":memory:", user="alice", busy_timeout_s=5.0)
>>> type(storage).__name__, storage.user
('SQLiteConversationStorage', 'alice')
>>> storage.close()
"""

from __future__ import annotations

import os

from synapse_retriever.config import Operations
from synapse_retriever.persistence.conversation.postgres import PostgresConversationStorage
from synapse_retriever.persistence.conversation.protocol import (
    MAX_USER_LENGTH,
    ConversationStorage,
    EntityRow,
    Links,
    Loaded,
    TurnRecord,
    TypedEdgeKey,
    TypedEdgeRow,
    check_user,
)
from synapse_retriever.persistence.conversation.sqlite import SQLiteConversationStorage
from synapse_retriever.persistence.postgres import is_postgres_url

__all__ = [
    "MAX_USER_LENGTH",
    "ConversationStorage",
    "EntityRow",
    "Links",
    "Loaded",
    "PostgresConversationStorage",
    "SQLiteConversationStorage",
    "TurnRecord",
    "TypedEdgeKey",
    "TypedEdgeRow",
    "check_user",
    "open_conversation_storage",
]


def open_conversation_storage(
    where: str | os.PathLike[str],
    *,
    user: str | None,
    busy_timeout_s: float,
    listen: bool = True,
) -> ConversationStorage:
    """The storage of ``user``'s conversation memory at ``where``: an SQLite file (or
    ``":memory:"``), or a ``postgresql://`` URL (many users' memories in one database,
    :class:`~synapse_retriever.persistence.conversation.postgres.PostgresConversationStorage`;
    ``busy_timeout_s`` bounds each wait for a lock or a connection, ``listen`` chooses
    ``LISTEN`` or polling). The one place a memory's backend is chosen."""
    busy_timeout_s = Operations(busy_timeout_s=busy_timeout_s).busy_timeout_s  # checked
    if is_postgres_url(where):
        return PostgresConversationStorage(
            str(where), user=user, timeout_s=busy_timeout_s, listen=listen
        )
    return SQLiteConversationStorage(where, user=user, busy_timeout_s=busy_timeout_s)
