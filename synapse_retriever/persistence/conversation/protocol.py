"""What a conversation memory's backend must do: :class:`ConversationStorage`, per user.

A :class:`~synapse_retriever.conversation.ConversationMemory` reads and writes its turns, their
vectors, its temporal graph and its consolidation state through this protocol only, so
that SQLite (:mod:`.sqlite`) and PostgreSQL (:mod:`.postgres`) are two modules, not two
memories. One storage object serves one user of one database: no method reads, counts
or writes another user's rows, whatever the arguments.

The vector and lexical indexes are not here: a memory loads its user's vectors and texts
at open into in-process indexes (FAISS, FTS5), the same on every backend, so both give
the same rankings.

Examples
--------
>>> check_user("alice"), check_user(None)
('alice', '')
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from synapse_retriever.errors import (
    InvalidTypeError,
    InvalidValueError,
    StorageUnavailableError,
    shown,
)

__all__ = [
    "MAX_USER_LENGTH",
    "ConversationStorage",
    "EntityRow",
    "Links",
    "Loaded",
    "TurnRecord",
    "TypedEdgeKey",
    "TypedEdgeRow",
    "check_user",
    "restored_under",
]

MAX_USER_LENGTH = 256
"""The longest user name, in characters."""


def check_user(user: object) -> str:
    """``user`` as stored: None is the default user (``""``, the memory of a caller who
    names none); a name is 1 to :data:`MAX_USER_LENGTH` characters with no control
    character (NUL, newline, ...) and no lone surrogate (which no file or server can
    store). Quotes, SQL and any other Unicode are plain data.

    Raises
    ------
    InvalidTypeError
        ``user`` is not a str or None.
    InvalidValueError
        ``user`` is empty, too long, or holds a control character or a lone surrogate.

    Examples
    --------
    >>> check_user("O'Brien; DROP TABLE users --")
    "O'Brien; DROP TABLE users --"
    >>> check_user("a\\x00b")
    Traceback (most recent call last):
    ...
    synapse_retriever.errors.InvalidValueError: user 'a\\x00b' holds a control character (U+0000)
    """
    if user is None:
        return ""
    if not isinstance(user, str):
        raise InvalidTypeError(
            f"user must be a str or None, got {type(user).__name__} {shown(user)}"
        )
    if not user:
        raise InvalidValueError("user must not be empty (None is the default user)")
    if len(user) > MAX_USER_LENGTH:
        raise InvalidValueError(
            f"user {user[:40]!r}... is {len(user)} characters, more than {MAX_USER_LENGTH}"
        )
    bad = next((char for char in user if unicodedata.category(char) in ("Cc", "Cs")), None)
    if bad is not None:
        what = "a control character" if unicodedata.category(bad) == "Cc" else "a lone surrogate"
        raise InvalidValueError(f"user {user!r} holds {what} (U+{ord(bad):04X})")
    return user


def restored_under(where: str, user: str, found: str) -> StorageUnavailableError:
    """The error of a memory whose user's turns in the database are fewer than it took in,
    ``found`` saying how (turns are never deleted: the database was restored into, or
    emptied, while the memory was open).

    >>> print(restored_under("chat.db", "alice", "the last is 2, not 3"))
    'chat.db' holds fewer turns of user 'alice' than this memory took in (the last is 2, \
not 3): it was restored from a backup, or emptied, while the memory was open; nothing was \
written: open it again
    """
    return StorageUnavailableError(
        f"{where!r} holds fewer turns of user {user!r} than this memory took in ({found}): it "
        "was restored from a backup, or emptied, while the memory was open; nothing was "
        "written: open it again"
    )


@dataclass
class TurnRecord:
    """One stored turn (``id`` 0 until inserted).

    ``surprise`` and ``repeats`` are measured once, against the turns before it;
    ``chunks`` and ``summary`` are None until consolidation condenses the turn;
    ``boost`` is what replay added to its importance; ``speaker`` who said it, if the
    caller said (a name, e.g. ``"Caroline"``; the role says which side of the
    conversation); ``key`` the caller's own id for it, if given (one turn per key and
    user: a retried ``add_turn`` stores nothing twice). Ids grow in the order turns are
    stored, across users; one user's turns are in id order by time.

    Examples
    --------
    >>> from synapse_retriever.conversation import ConversationMemory
    >>> with ConversationMemory(":memory:") as memory:
    ...     _ = memory.add_turn("I moved the deploy to Fridays.", at=0)
    ...     turn = memory.turns()[0]
    >>> turn.id, turn.role, turn.surprise, turn.repeats, turn.chunks
    (1, 'user', 1.0, 0, None)
    """

    id: int
    session: str
    role: str
    text: str
    at: float
    surprise: float
    repeats: int
    boost: float
    chunks: str | None
    summary: str | None
    speaker: str | None = None
    key: str | None = None


class EntityRow(NamedTuple):
    """An entity node of the temporal graph (turn nodes are ``"turn:<id>"``)."""

    node: str
    kind: str
    label: str


class TypedEdgeRow(NamedTuple):
    """A typed edge of the temporal graph: its ends, its type, when it was made or last
    strengthened, its reinforcements (the ``count`` of its strength) and the traversals
    toward the next one (column ``count`` in the tables: ``tuple.count`` is a method)."""

    source: str
    target: str
    type: str
    at: float
    reinforcements: int = 0
    traversals: int = 0


TypedEdgeKey = tuple[str, str, str]
"""A typed edge's key: ``(source, target, type)``."""

Links = Callable[[int], tuple[Sequence[EntityRow], Sequence[TypedEdgeRow]]]
"""Given a new turn's id, the entity nodes and edges to store with it."""


@dataclass
class Loaded:
    """What a memory reads at open (or catching up): turns in id order, their stored
    vectors and the embedder's name, graph rows and the consolidation marks."""

    turns: list[TurnRecord] = field(default_factory=list)
    embedders: list[str] = field(default_factory=list)
    embeddings: list[bytes] = field(default_factory=list)
    consolidated_through: int = 0
    entities: list[EntityRow] = field(default_factory=list)
    edges: list[TypedEdgeRow] = field(default_factory=list)
    graph_through: int = 0
    relations_through: int = 0
    summary_style: int = 0
    """The telegram rule this user's stored extractive summaries follow (0: never marked,
    the rule of release 0.1.0): :data:`~synapse_retriever.conversation.summarize.SUMMARY_STYLE`."""


class ConversationStorage(Protocol):
    """One user's conversation memory in one database (SQLite file or PostgreSQL).

    Every write is one transaction: all of it is stored, or none. Errors are the
    store's: :class:`~synapse_retriever.errors.ReadOnlyStoreError`,
    :class:`~synapse_retriever.errors.NotASynapseDatabaseError` (another application's
    file, a newer schema), :class:`~synapse_retriever.errors.StorageUnavailableError`,
    :class:`~synapse_retriever.errors.WriteConflictError`; never a driver's own.
    """

    where: str
    """The path, or the URL without its password: for messages."""

    user: str
    """Whose rows these are (:func:`check_user`'s form)."""

    def changed(self) -> bool:
        """Whether any process committed rows of this user since the last call (the
        first call is True); cheap: no table scan. It may also be True after another
        user's commit (SQLite watches the whole file), never False after one of this
        user's."""
        ...

    def load(self, after: int = 0) -> Loaded:
        """This user's turns with an id above ``after`` in id order, with their vectors;
        the graph rows (all, or with ``after`` those that touch the turns returned) and
        the marks; one consistent snapshot."""
        ...

    def insert(
        self,
        record: TurnRecord,
        embedder: str,
        embedding: bytes,
        links: Links | None = None,
        *,
        after: int | None = None,
    ) -> int | None:
        """Store a new turn of this user and what ``links(its id)`` returns, in one
        transaction; returns its id. With ``after``, only if this user's last turn is
        still the one of that id (0: none), else nothing is stored and None is returned:
        another process added a turn the caller has not seen (a last turn older than
        ``after``, turns the caller holds and the database no longer has, restored under it,
        is :class:`~synapse_retriever.errors.StorageUnavailableError`). A turn whose ``key`` names
        a stored turn of this user is not stored either (None). Concurrent inserts for one
        user take turns, so ids grow with time within a user."""
        ...

    def add_graph(
        self,
        entities: Sequence[EntityRow],
        edges: Sequence[TypedEdgeRow],
        through: int,
        *,
        key: str = "graph_through",
    ) -> None:
        """Store entity nodes and edges (existing ones are kept as they are) and record in
        mark ``key`` that they cover the turns up to id ``through``; one transaction."""
        ...

    def traverse_edges(
        self, keys: Sequence[TypedEdgeKey], step: Callable[[TypedEdgeRow], TypedEdgeRow]
    ) -> list[TypedEdgeRow]:
        """In one transaction under this user's write lock: read the edges ``keys`` name
        (``(source, target, type)``; those not stored are skipped), store ``step`` of each
        (its ``at``, ``count`` and ``traversals``) and return what was stored. Read under
        the lock, so two processes' traversals of one edge both count."""
        ...

    def consolidate(
        self,
        condensed: Sequence[tuple[int, str, str]],
        boosts: Sequence[tuple[int, float]],
        themes: Sequence[str],
        through: int,
        *,
        graph: tuple[Sequence[EntityRow], Sequence[TypedEdgeRow], int] | None = None,
    ) -> bool:
        """One consolidation, atomically: ``(id, chunks, summary)`` rows, ``(id, boost)``
        rows, the replay's themes, how many turns it covered and, if given, the relations
        it found (entity rows, edge rows, the last turn id they cover). False, and
        nothing written, when this user's consolidation already covers ``through`` turns
        (another process did it)."""
        ...

    def consolidation_turn(self) -> AbstractContextManager[bool]:
        """Hold this user's consolidation lock while the block runs, if no other process
        holds it: the block gets True, else False at once (the caller skips). Released at
        the block's end; if the process dies holding it, by the backend (a lease that
        expires on SQLite, :data:`.sqlite.CONSOLIDATION_LEASE_S`)."""
        ...

    def replace_embeddings(self, embedder: str, rows: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors recomputed with another embedder, ``(turn id, vector bytes)``."""
        ...

    def restyle_summaries(self, rows: Sequence[tuple[int, str]], style: int) -> None:
        """Store summaries redone in telegram style ``style``, ``(turn id, summary)``, and
        mark this user's summaries as following it (``summary_style``); one transaction."""
        ...

    def themes(self) -> list[tuple[int, list[str]]]:
        """Every replay so far of this user: (turns covered, themes), oldest first."""
        ...

    def close(self) -> None:
        """Release the connection (idempotent)."""
        ...
