"""`ConversationMemory`: a chat history that fades like a brain inside a fixed token budget.

Every turn keeps a detail level (FULL, CHUNKS, SUMMARY, DROPPED) that degrades smoothly
with its importance for the current query; the last turns stay verbatim; aging turns are
condensed in the background; themes the conversation keeps coming back to are
reinforced. Turns, condensations, boosts and repeat counts persist in SQLite, in the
same file as a :class:`~synapse_retriever.SynapseStore` by default, through one storage
object per user (:mod:`synapse_retriever.persistence.conversation`).

Examples
--------
>>> memory = ConversationMemory(":memory:", config=ContextConfig(working_memory=2))
>>> for text in ["I moved the deploy to Fridays.", "Nice weather today.", "Lunch?", "Sure!"]:
...     _ = memory.add_turn(text, at=0)
>>> [t.level.value for t in memory.assemble("when do we deploy?", 1000, at=0)]
['full', 'full', 'full', 'full']
>>> [(t.level.value, t.text) for t in memory.assemble("when do we deploy?", 8, at=0)]
[('summary', 'moved deploy to Fridays.'), ('full', 'Sure!')]
>>> memory.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import threading
import time
import unicodedata
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import NoReturn, SupportsIndex, TypeVar

import networkx as nx
import numpy as np
import numpy.typing as npt

from synapse_retriever._text import blank
from synapse_retriever._types import FloatArray
from synapse_retriever.capture.coactivation import check_unicode
from synapse_retriever.clock import MAX_CLOCK_SKEW_S, Clock, finite_real, not_ahead, to_seconds
from synapse_retriever.config import Operations, check_flag
from synapse_retriever.conversation.assemble import (
    AssembledTurn,
    TurnsView,
    importances,
    plan_context,
)
from synapse_retriever.conversation.config import ContextConfig, checked_context
from synapse_retriever.conversation.consolidate import Consolidator, wait_timeout
from synapse_retriever.conversation.embed import (
    Embedder,
    HashingEmbedder,
    TurnIndex,
    Vectors,
    as_embedder,
    checked_embedder,
    embedded,
    embedder_dim,
)
from synapse_retriever.conversation.graph.cues import cue_factor, date_window, named
from synapse_retriever.conversation.graph.edges import LINK_TYPES, traversed, turn_links
from synapse_retriever.conversation.graph.entities import Entity, extract_entities
from synapse_retriever.conversation.graph.hybrid import Retrieval, ranked, spread
from synapse_retriever.conversation.graph.modes import (
    ModeDetector,
    canonical_mode,
    detect_mode,
    mode_weights,
)
from synapse_retriever.conversation.graph.relations import Relation, RelationExtractor
from synapse_retriever.conversation.graph.walk import TemporalGraph, TypedEdge
from synapse_retriever.conversation.lexical import LexicalIndex
from synapse_retriever.conversation.relevance import fuse
from synapse_retriever.conversation.replay import TfidfThemes, ThemeExtractor, matching
from synapse_retriever.conversation.summarize import (
    SUMMARY_STYLE,
    Condensed,
    ExtractiveSummarizer,
    Summarizer,
    restyled,
)
from synapse_retriever.conversation.text import TermStats
from synapse_retriever.errors import (
    ClosedError,
    InvalidTypeError,
    InvalidValueError,
    SynapseError,
    WriteConflictError,
    refused_number,
    shown,
)
from synapse_retriever.persistence.conversation import (
    ConversationStorage,
    EntityRow,
    Loaded,
    TurnRecord,
    TypedEdgeKey,
    TypedEdgeRow,
    check_user,
    open_conversation_storage,
)
from synapse_retriever.persistence.postgres import is_postgres_url, split_url
from synapse_retriever.persistence.protocols import releasing_while_busy
from synapse_retriever.persistence.sqlite import file_path
from synapse_retriever.tokens import TokenCounter, check_tokens, checked_counter, is_int

__all__ = ["ROLES", "ConversationMemory", "finished_if_cancelled"]

log = logging.getLogger(__name__)

_RETRIEVAL_DEPTH = 100
"""How many turns each channel of ``retrieve`` ranks (or 2k, if larger)."""

_ASSEMBLY_DEPTH = 1000
"""How many turns each channel ranks for an assembly (a budget of whole turns rarely
holds more; the gradient plans the rest)."""

_FRUITLESS_RETRIES = 3
"""How many times in a row ``add_turn`` may be refused (another turn stored, or its key
taken) without finding any new turn, before it gives up: the storage then holds a turn
this memory cannot read (a row written by hand)."""
MAX_NAME_CHARS = 200
"""The longest session, speaker name or key ``add_turn`` takes."""

ROLES = (
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "function",
    "model",
    "chatbot",
    "human",
    "ai",
)
"""The roles a turn may have: the chat roles of OpenAI-style APIs (user, assistant,
system, developer, tool, function), LlamaIndex's other message roles (model, chatbot),
which its memory block stores as they are, and LangChain's message types (human, ai).
Anything else (``"god"``, ``"User"``) is refused: a role is shown to the model with its
turn, so a typo would be too."""


class ConversationMemory:
    """A persistent conversation whose assembled context always fits a token budget.

    Parameters
    ----------
    path : str or PathLike
        A synapse database file (shared with a :class:`~synapse_retriever.SynapseStore`,
        created if missing), ``":memory:"``, or a ``postgresql://`` URL: many users'
        memories in one database (docs/how-to/team-memory.md).
    token_counter : callable, optional
        ``str -> int``; every budget decision uses it. Default:
        :func:`~synapse_retriever.approximate_tokens` (see
        :mod:`synapse_retriever.tokens` for why not tiktoken by default).
    config : ContextConfig, optional
        The method's constants (``ContextConfig()``; ``ContextConfig.published()`` for the
        method exactly as published).
    embedder : Embedder, optional
        Similarities (default: :class:`~synapse_retriever.conversation.HashingEmbedder`); a
        LangChain ``Embeddings`` or a LlamaIndex ``BaseEmbedding`` too, with its
        integration package installed (see :func:`~synapse_retriever.conversation.as_embedder`).
    summarizer : Summarizer, optional
        Condenses aging turns in the background (default: extractive, no model).
    themes : ThemeExtractor, optional
        Replay's theme extractor (default: TF-IDF over the conversation).
    mode_detector : ModeDetector, optional
        Names a query's mode for ``retrieve(mode="auto")`` (default:
        :func:`~synapse_retriever.conversation.graph.modes.detect_mode`, by cue words).
    relations : RelationExtractor, optional
        Proposes typed relations (CAUSED_BY, SOLVED_BY, RELATES_TO, decisions) among the
        turns of each consolidation (e.g. a model through
        :class:`~synapse_retriever.conversation.graph.relations.PromptRelationExtractor`);
        default: none, the graph holds FOLLOWED_BY and MENTIONS only.
    background : bool
        Consolidate on a worker thread (default) or, if False, inside :meth:`add_turn`.
    busy_timeout_s : float
        How long a write waits for another process's lock on the file.
    user : str, optional
        Whose memory this is (mem0's ``user_id``): every user's turns live in the same
        file, and this memory reads, counts, summarises and links only its user's
        (:meth:`retrieve`, :meth:`assemble`, :meth:`turns`, ``len``, :meth:`graph`,
        :meth:`replays`, :meth:`used`, consolidation, and the turns other processes add).
        Its lexical index holds its user's turns only, so another user's turns never
        change its BM25 scores. Any name of 1 to 256 characters without a control
        character (quotes and SQL are plain data:
        :func:`~synapse_retriever.persistence.conversation.check_user`). None (default)
        is the default user, which owns the turns of a file written before users existed.
        Links across conversations (sessions) stay within the user; for a memory shared
        by several people (a team's channel), name a shared user (``user="team:ops"``)
        and open it from each of them.
    listen : bool
        PostgreSQL: learn of other processes' turns from ``LISTEN``/``NOTIFY`` (no SQL
        until one came). False reads the user's ``writes`` mark before each read instead
        (one primary-key lookup), as a memory behind a pooler in transaction mode must:
        there a ``LISTEN`` lands on a backend the pooler hands to others, and hears
        nothing. An SQLite file has no listener: ignored.

    Attributes
    ----------
    path : str
        The database file (or ``":memory:"``).
    user : str or None
        The user passed (None: the default user).

    Raises
    ------
    NotASynapseDatabaseError
        ``path`` is a file of another application (left untouched).
    InvalidValueError, InvalidTypeError
        ``user`` is not a valid user name (nothing is opened).

    Examples
    --------
    A restart loses nothing: turns (and their condensations, boosts and repeat counts)
    live in the file.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "chat.db")
    >>> with ConversationMemory(path) as memory:
    ...     _ = memory.add_turn("I moved the deploy to Fridays.", session="monday", at=0)
    ...     _ = memory.add_turn("Noted: Fridays.", role="assistant", session="monday", at=60)
    >>> with ConversationMemory(path) as memory:
    ...     [(t.role, t.level.value, t.text) for t in memory.assemble("deploy?", 100, at=120)]
    [('user', 'full', 'I moved the deploy to Fridays.'), ('assistant', 'full', 'Noted: Fridays.')]

    Two users in one file: neither sees the other's turns.

    >>> with ConversationMemory(path, user="alice") as alice:
    ...     _ = alice.add_turn("My locker code is 4711.", at=0)
    >>> with ConversationMemory(path, user="bob") as bob:
    ...     len(bob), bob.retrieve("locker code?")
    (0, [])
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        token_counter: TokenCounter | None = None,
        config: ContextConfig | None = None,
        *,
        embedder: Embedder | object | None = None,
        summarizer: Summarizer | None = None,
        themes: ThemeExtractor | None = None,
        mode_detector: ModeDetector | None = None,
        relations: RelationExtractor | None = None,
        background: bool = True,
        busy_timeout_s: float = Operations.busy_timeout_s,
        user: str | None = None,
        listen: bool = True,
    ) -> None:
        stored_user = check_user(user)  # a bad name is refused before the file is touched
        check_flag("background", background)
        check_flag("listen", listen)
        checked_context(config)
        resolved = (
            checked_embedder(as_embedder(embedder)) if embedder is not None else HashingEmbedder()
        )
        if summarizer is not None and not isinstance(summarizer, Summarizer):
            raise InvalidTypeError(
                f"summarizer must have condense(text, ...), got {type(summarizer).__name__} "
                f"{shown(summarizer)}"
            )
        if themes is not None and not isinstance(themes, ThemeExtractor):
            raise InvalidTypeError(
                f"themes must have themes(texts), got {type(themes).__name__} {shown(themes)}"
            )
        if mode_detector is not None and not isinstance(mode_detector, ModeDetector):
            raise InvalidTypeError(
                f"mode_detector must have mode(query), got {type(mode_detector).__name__} "
                f"{shown(mode_detector)}"
            )
        self.mode_detector = mode_detector
        if relations is not None and not isinstance(relations, RelationExtractor):
            raise InvalidTypeError(
                f"relations must have relations(turns), got {type(relations).__name__} "
                f"{shown(relations)}"
            )
        self.relations = relations
        self.config = config or ContextConfig()
        self.path = split_url(str(path))[1] if is_postgres_url(path) else file_path(path)
        """The file, or the database without its user and password (as a store shows it)."""
        self.token_counter = checked_counter(token_counter)
        self._cached_count = functools.lru_cache(maxsize=16_384)(self.token_counter)
        self.embedder: Embedder = resolved
        self._stats = TermStats()
        self._extractive = ExtractiveSummarizer(self.token_counter, self._stats.idf)
        self.summarizer: Summarizer = summarizer or self._extractive
        self.themes: ThemeExtractor = themes or TfidfThemes(
            self.config.replay_themes, idf=self._stats.idf
        )
        self._lock = threading.RLock()
        self._closed = False
        self.user: str | None = stored_user or None
        self._storage: ConversationStorage = open_conversation_storage(
            path, user=user, busy_timeout_s=busy_timeout_s, listen=listen
        )
        try:
            self._load()
        except BaseException:
            self._storage.close()
            raise
        # the worker holds the memory weakly: a memory dropped without close() is collected,
        # and its finalizer stops the worker and closes the database
        self._consolidator = Consolidator(
            _weakly(self, ConversationMemory._consolidate), background=background
        )
        self._release = weakref.finalize(self, _release, self._consolidator, self._storage)
        self._closed_fully = threading.Event()  # set when a close returns
        self._release.atexit = False
        if self._due():
            self._consolidator.request()  # a consolidation due before the last close

    # -- lifecycle ---------------------------------------------------------------------

    def _load(self) -> None:
        self._turns: list[TurnRecord] = []
        self._tokens: list[int] = []
        self._lexical = LexicalIndex()  # row i is self._turns[i], as in the vector index
        self._times = np.zeros(0, dtype=np.float64)  # the turns' times, in a growing buffer
        self._timed = 0
        self._graph = TemporalGraph()
        self._labels: dict[str, tuple[str, str]] = {}
        self._row: dict[int, int] = {}
        self._last_in_session: dict[str, int] = {}
        self._speakers: dict[str, None] = {}  # every speaker named, in order first seen
        self._keyed: dict[str, int] = {}  # the turns' own keys (add_turn's key) -> their ids
        self._consolidated_through = self._relations_through = 0
        self._skipped_at = 0  # turns in view when another process held the consolidation
        self._behind = False  # another writer's turns not taken in yet (a call failed)
        self._storage.changed()  # sets the mark the catch-ups compare with
        loaded = self._storage.load()
        # the stored vectors' length, if they are all this model's: a reopened memory asks
        # the model nothing (a new one, or one of another model, learns it from the model)
        self._index = TurnIndex(
            _stored_dim(loaded, self.embedder.name) or embedder_dim(self.embedder)
        )
        self._take(loaded)
        if loaded.summary_style < SUMMARY_STYLE:
            self._restyle()

    def _restyle(self) -> None:
        """Redo the stored summaries an earlier release's telegram rule made (it dropped
        negations: :func:`~.summarize.restyled`) and mark the user's summaries as today's
        (a memory with none yet is marked too: its summaries will be today's, and are never
        read as an earlier rule's)."""
        summaries = [(turn, turn.summary) for turn in self._turns if turn.summary is not None]
        redone = [(turn, restyled(turn.text, summary)) for turn, summary in summaries]
        rows = [(turn.id, summary) for turn, summary in redone if summary is not None]
        if rows:
            log.info("redoing %d summaries in today's telegram style", len(rows))
        self._storage.restyle_summaries(rows, SUMMARY_STYLE)
        for turn, summary in redone:
            if summary is not None:
                turn.summary = summary

    def _catch_up(self, *, force: bool = False) -> None:
        """Take in the turns other processes stored since this memory last looked, with
        their vectors and graph rows. Nothing committed elsewhere: one PRAGMA, no read."""
        if not self._closed and (self._storage.changed() or force or self._behind):
            self._behind = True  # until they are taken in: a failure is tried again next time
            self._take(self._storage.load(after=self._turns[-1].id if self._turns else 0))
            self._behind = False

    def _take(self, loaded: Loaded) -> None:
        """Append ``loaded``'s turns (ids after this memory's last) to every mirror. What can
        fail (the token counter, the embedder re-embedding another's vectors) runs first: a
        failure leaves every mirror as it was, and the next call takes the turns in again."""
        turns = loaded.turns
        tokens = [self.token_counter(t.text) for t in turns]
        vectors = self._vectors(loaded)
        self._turns.extend(turns)
        self._tokens.extend(tokens)
        self._lexical.add(t.text for t in turns)
        for turn in turns:
            self._stats.add(turn.text)
            if turn.speaker is not None:
                self._speakers[turn.speaker] = None
            if turn.key is not None:
                self._keyed[turn.key] = turn.id
        self._index.add(vectors)
        for turn in turns:
            self._times = _appended(self._times, self._timed, turn.at)
            self._timed += 1
        self._load_graph(turns, loaded.entities, loaded.edges, loaded.graph_through)
        self._consolidated_through = max(self._consolidated_through, loaded.consolidated_through)
        self._relations_through = max(self._relations_through, loaded.relations_through)

    def _vectors(self, loaded: Loaded) -> npt.NDArray[np.float32]:
        """The vectors of ``loaded``'s turns in this memory's embedder: as stored, or
        recomputed (and stored again) where another embedder, or another size, wrote them."""
        turns = loaded.turns
        dim = self._index.dim
        width = dim * np.dtype(np.float32).itemsize
        stale = [  # another embedder's, or this name's at another size (e.g. a new dimensions=)
            i
            for i, (name, blob) in enumerate(zip(loaded.embedders, loaded.embeddings, strict=True))
            if name != self.embedder.name or len(blob) != width
        ]
        if stale:
            vectors = np.zeros((len(turns), dim), dtype=np.float32)
            stale_rows = set(stale)  # a list would make re-embedding every turn quadratic
            for i, blob in enumerate(loaded.embeddings):
                if i not in stale_rows:
                    vectors[i] = np.frombuffer(blob, dtype=np.float32)
        else:  # every vector is this embedder's: one buffer, not a copy per turn
            joined = bytearray().join(loaded.embeddings)
            vectors = np.frombuffer(joined, dtype=np.float32).reshape(len(turns), dim)
        if stale:  # stored by another embedder: recompute them in this one's space
            log.info("re-embedding %d turns with %s", len(stale), self.embedder.name)
            fresh = embedded(self.embedder, [turns[i].text for i in stale])
            if fresh.shape[1] != dim:  # the model's vectors are not the length stored
                self._fit(fresh.shape[1])
                return self._vectors(loaded)  # at the model's length now
            vectors[stale] = fresh
            self._storage.replace_embeddings(
                self.embedder.name,
                [(turns[i].id, fresh[k].tobytes()) for k, i in enumerate(stale)],
            )
        return vectors

    def _fit(self, dim: int) -> None:
        """Embed every turn again if the model's vectors are ``dim`` long and the stored
        ones are not: the model changed its size under the same name (a ``dimensions=``
        setting), found at its first embedding, since a memory reopened over its stored
        vectors asks the model nothing. Under the lock."""
        if dim == self._index.dim:
            return
        log.info(
            "re-embedding %d turns with %s: its vectors are %d long, the stored ones %d",
            len(self._turns), self.embedder.name, dim, self._index.dim,
        )  # fmt: skip
        fresh = embedded(self.embedder, [turn.text for turn in self._turns])
        if self._turns:
            self._storage.replace_embeddings(
                self.embedder.name,
                [(turn.id, fresh[i].tobytes()) for i, turn in enumerate(self._turns)],
            )
        index = TurnIndex(dim)
        index.add(fresh)
        self._index = index

    def _load_graph(
        self,
        turns: Sequence[TurnRecord],
        entities: Sequence[EntityRow],
        edges: Sequence[TypedEdgeRow],
        through: int,
    ) -> None:
        """Add ``turns`` and graph rows to the graph mirror; turns stored before the graph
        existed are linked now."""
        for node, kind, label in entities:
            self._labels.setdefault(node, (kind, label))
        missing_entities: list[EntityRow] = []
        missing_edges: list[TypedEdgeRow] = []
        for turn in turns:
            self._row[turn.id] = len(self._row)
            self._graph.add_turn()
            previous = self._last_in_session.get(turn.session)
            self._last_in_session[turn.session] = turn.id
            if turn.id > through:  # a file written before the graph: link it once
                nodes, rows = turn_links(turn.id, previous, extract_entities(turn.text), turn.at)
                missing_entities.extend(nodes)
                missing_edges.extend(rows)
        for node, kind, label in missing_entities:
            self._labels.setdefault(node, (kind, label))
        for row in [*edges, *missing_edges]:
            self._graph.add_edge(
                row.source,
                row.target,
                row.type,
                at=row.at,
                count=row.reinforcements,
                traversals=row.traversals,
            )
        if missing_edges or (turns and through < turns[-1].id):
            self._storage.add_graph(missing_entities, missing_edges, turns[-1].id)

    def close(self, timeout: float | None = None) -> None:
        """Finish pending consolidation, then close the database. Past ``timeout`` (seconds)
        the memory closes at once, and a consolidation under way stops at its next turn and
        stores nothing: it releases this user's consolidation lease, and the database closes
        after it. A process that exits before then leaves the lease until it expires
        (``CONSOLIDATION_LEASE_S``, 600 s), as a killed process does. Later calls that read
        or write turns (``add_turn``, ``retrieve``, ``assemble``, ``turns``, ``len``...) raise
        :class:`~synapse_retriever.errors.ClosedError`; ``close`` again does nothing, and
        ``consolidate`` returns False (nothing to run). A ``close`` while another thread's
        runs waits for that one within its own ``timeout``, then closes at once: when it
        returns, the memory is closed. Called from the consolidation itself (a summarizer's
        call), it closes at once, as past its timeout: the run cannot be waited for from
        inside it."""
        if self._closed_fully.is_set():
            return
        timeout = wait_timeout(timeout)  # before anything closes: a bad one closes nothing
        if self._release.detach() is None:  # another thread's close got there first
            if self._consolidator.running_here() or not self._closed_fully.wait(timeout):
                self._stop_calls()  # closed when this close returns, as past a timeout
            return
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            # a cancelled aclose (_stop_calls) ends the wait at once, as a timeout does
            finished = self._consolidator.wait(timeout, until=lambda: self._closed)
            # not under the lock, which a catch-up holds through an embedder's call (turns
            # another embedder stored): a call under way ends as it began, the storage
            # closes under the lock after it
            self._closed = True  # no call from now on; a run still under way stores nothing
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._consolidator.close(left if finished else 0.0, then=self._close_storage)
        finally:
            self._closed_fully.set()

    def _close_storage(self) -> None:
        with self._lock:
            self._storage.close()

    async def aclose(self, timeout: float | None = None) -> None:
        """:meth:`close` for a coroutine: the wait for a consolidation under way (its
        model calls) in a worker thread, not on the event loop.

        A cancelled await (``asyncio.wait_for``, ``asyncio.timeout``) closes the memory at
        once, as :meth:`close` does past its ``timeout``: a consolidation under way stops at
        its next turn, storing nothing, and the cancellation is raised once the memory is
        closed (never a memory that answers calls now and is closed a moment later).

        Examples
        --------
        >>> import asyncio
        >>> async def chat() -> int:
        ...     async with ConversationMemory(":memory:", background=False) as memory:
        ...         await memory.aadd_turn("The deploy moved to Fridays.", at=0)
        ...         return len(memory)
        >>> asyncio.run(chat())
        1
        """
        timeout = wait_timeout(timeout)  # a bad one closes nothing, cancelled or not
        closing = asyncio.ensure_future(asyncio.to_thread(self.close, timeout))
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await finished_if_cancelled(self._closed_at_once(closing))
            raise

    async def _closed_at_once(self, closing: asyncio.Future[None]) -> None:
        """Close at once the memory ``closing`` (a :meth:`close` in a worker thread) closes:
        no call from now on, so the consolidation it waits for stops at its next turn."""
        await asyncio.to_thread(self._stop_calls)
        await asyncio.wait([closing])
        closing.exception()  # retrieved: the caller gets the cancellation, not the error

    def _stop_calls(self) -> None:
        self._closed = True  # no call from now on (not under the lock: see close)
        self._consolidator.wake()  # close's wait for the run ends now, as past its timeout

    def __enter__(self) -> ConversationMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ConversationMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            self._catch_up()
            return len(self._turns)

    def __repr__(self) -> str:
        user = "" if self.user is None else f", user={self.user!r}"
        return f"ConversationMemory({self.path!r}{user}, turns={len(self._turns)})"

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        """Refused: a memory holds an open database connection, its lock, its index and a
        consolidation thread, which neither a pickle nor a copy can carry (a copy shared the
        storage, which the original's finalizer closed under it). Open the memory again from
        its path or URL (and ``user``)."""
        raise InvalidTypeError(
            f"cannot pickle or copy a ConversationMemory of {self.path!r}: it holds an open "
            "database; open the memory again from its path or URL in each process"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this ConversationMemory is closed")

    # -- writing -----------------------------------------------------------------------

    def add_turn(
        self,
        text: str,
        role: str = "user",
        at: Clock = None,
        session: str = "default",
        *,
        speaker: str | None = None,
        key: str | None = None,
    ) -> int:
        """Store one turn; returns its id. Every ``consolidation_interval`` turns, starts a
        consolidation in the background.

        Parameters
        ----------
        text : str
            What was said: valid Unicode, with a non-blank character.
        role : str
            One of :data:`ROLES` (``user``, ``assistant``, ``system``, ``tool``...).
        at : datetime, float or None
            When it was said; None means now (or the previous turn's time, if later).
        session : str
            A non-empty label for the conversation it belongs to, up to 200 characters.
        speaker : str, optional
            Who said it, by name (``"Caroline"``; LangChain's ``message.name``): a
            question that names a speaker finds what they said first
            (``ContextConfig.speaker_boost``). Up to 200 characters.
        key : str, optional
            Your own id for the turn (a message id of your application, a request id), up
            to 200 characters: a turn whose key this user's memory holds already (stored by this
            process or another) is not stored again, and its id is returned. Retrying an
            ``add_turn`` that failed without saying whether it was stored (a connection
            lost as the server committed) with the same key stores it once.

        Raises
        ------
        InvalidTypeError
            ``text``, ``role`` or ``session`` is not a str (multimodal content: pass its
            text parts), or ``speaker`` or ``key`` is neither None nor a str.
        InvalidValueError
            ``text`` is empty or blank; ``role`` or ``session`` is empty; ``role`` is not
            one of :data:`ROLES`; ``session`` is longer than 200 characters, ``speaker`` or
            ``key`` blank or longer, or ``key`` names a turn of other text, role, session or
            speaker;
            ``text``, ``role``, ``session``, ``speaker`` or ``key`` holds a lone surrogate
            (what ``os.fsdecode`` or ``errors="surrogateescape"`` make of bytes that are
            not UTF-8; it cannot be stored), or a NUL; ``speaker`` or ``key`` a control
            character; or ``at`` is earlier than the previous turn's
            time, or more than a day ahead of the clock (a millisecond time, which would
            hold back every later turn). Nothing is stored then.
        WriteConflictError
            The turn was refused three times as following another, or for its key, and no
            other turn could be read (rows written by hand): nothing is stored.

        Examples
        --------
        >>> memory = ConversationMemory(":memory:")
        >>> memory.add_turn("Deploys move to Fridays.", role="user", at=0)
        1
        >>> memory.add_turn("Noted.", role="god", at=60)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: role must be one of ('user', ...), got 'god'
        >>> memory.add_turn(b"caf\\xe9".decode("utf-8", "surrogateescape"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        synapse_retriever.errors.InvalidValueError: text must be valid Unicode, got 'caf\\udce9'...
        >>> memory.add_turn("Lunch?", at=120, key="msg-7"), memory.add_turn("Lunch?", key="msg-7")
        (2, 2)
        >>> len(memory)
        2
        >>> memory.close()
        """
        prepared = self._prepare_turn(text, role, at, session, speaker, key)
        turn_id, due = self._store_turn(prepared)
        if due:
            self._consolidator.request()
        return turn_id

    async def aadd_turn(
        self,
        text: str,
        role: str = "user",
        at: Clock = None,
        session: str = "default",
        *,
        speaker: str | None = None,
        key: str | None = None,
    ) -> int:
        """:meth:`add_turn` off the event loop: the same turn, id and errors.

        The embedder, the token counter and the SQLite write run in worker threads
        (``asyncio.to_thread``), so a slow embedder never holds up the loop. Cancelling the
        await while the turn is being embedded stores nothing; once its write has begun,
        the turn is stored whole and the cancellation is raised when the write is done
        (never a turn half in the file, half in memory). With ``background=False`` the
        consolidation an :meth:`add_turn` would run inline runs in a worker thread too.

        Examples
        --------
        >>> import asyncio
        >>> async def chat(memory: ConversationMemory) -> list[int]:
        ...     first = await memory.aadd_turn("Deploys move to Fridays.", at=0)
        ...     second = await memory.aadd_turn("Noted.", role="assistant", at=60)
        ...     return [first, second]
        >>> with ConversationMemory(":memory:") as memory:
        ...     asyncio.run(chat(memory))
        [1, 2]
        """
        prepared = await asyncio.to_thread(
            self._prepare_turn, text, role, at, session, speaker, key
        )
        stored = asyncio.to_thread(self._store_and_request, prepared)
        turn_id, due = await finished_if_cancelled(stored)
        if due:  # without a background thread: the caller's to run, off the loop
            await asyncio.to_thread(self._consolidator.request)
        return turn_id

    def _store_and_request(self, prepared: _PreparedTurn) -> tuple[int, bool]:
        """:meth:`_store_turn`, and a background consolidation it makes due requested with
        the write (a request returns at once): a cancelled :meth:`aadd_turn` put it off to
        the next turn. Whether one is still due (none in the background: the caller runs it)."""
        turn_id, due = self._store_turn(prepared)
        if due and self._consolidator.background:
            self._consolidator.request()
            due = False
        return turn_id, due

    def _prepare_turn(
        self,
        text: str,
        role: str,
        at: Clock,
        session: str,
        speaker: str | None,
        key: str | None = None,
    ) -> _PreparedTurn:
        """The checks and the work of :meth:`add_turn` that touch no shared state: the
        turn's time, vector, tokens and entities (what a slow embedder makes slow)."""
        _check_turn(text, role, session, speaker, key)
        seconds = to_seconds(at)
        if at is not None:  # a millisecond time would hold back every later turn
            not_ahead(seconds, skew_s=MAX_CLOCK_SKEW_S)
        return _PreparedTurn(
            text,
            role,
            session,
            seconds,
            at is not None,
            embedded(self.embedder, [text])[0],
            self.token_counter(text),
            extract_entities(text),
            speaker,
            key,
        )

    def _store_turn(self, prepared: _PreparedTurn) -> tuple[int, bool]:
        """Store a prepared turn in one transaction and in every mirror, under the lock
        (released while the insert waits for another process's write lock: reads go on,
        and the turn is prepared again from what is stored); returns its id and whether a
        consolidation is due."""
        text, role, session, seconds = (
            prepared.text, prepared.role, prepared.session, prepared.seconds
        )  # fmt: skip
        vector, tokens, entities = prepared.vector, prepared.tokens, prepared.entities
        speaker, key = prepared.speaker, prepared.key

        def attempt() -> tuple[int, bool]:
            self._check_open()
            record = TurnRecord(
                0, session, role, text, seconds, 0.0, 0, 0.0, None, None, speaker, key
            )
            stored: list[tuple[list[EntityRow], list[TypedEdgeRow]]] = []

            def link(turn_id: int) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
                previous = self._last_in_session.get(session)
                stored.append(turn_links(turn_id, previous, entities, record.at))
                return stored[-1]

            retry, fruitless = False, 0
            while True:  # stored only after the last turn in view: times stay in id order
                seen = len(self._turns)
                self._catch_up(force=retry)
                self._fit(len(vector))
                fruitless = fruitless + 1 if retry and len(self._turns) == seen else 0
                if fruitless == _FRUITLESS_RETRIES:  # refused, yet no turn came: never loop
                    raise WriteConflictError(
                        f"{self._storage.where!r}: the turn was refused {fruitless} times "
                        "as another's, and no other turn of this user could be read; "
                        "nothing was stored"
                    )
                if key is not None and key in self._keyed:  # stored already (a retry)
                    return self._keyed_turn(record), False
                last = self._turns[-1] if self._turns else None
                if last is not None and record.at < last.at:
                    if prepared.explicit_at:
                        raise InvalidValueError(
                            f"at={seconds} is earlier than the previous turn's {last.at}"
                        )
                    record.at = last.at
                if np.any(vector):  # else no content terms ("ok", "?"): nothing new
                    nearest, repeats = self._index.nearest_and_count(
                        vector, self.config.habituation_similarity
                    )
                    record.surprise, record.repeats = 1.0 - nearest, repeats
                turn_id = self._storage.insert(
                    record, self.embedder.name, vector.tobytes(), link, after=last.id if last else 0
                )
                if turn_id is not None:
                    break
                retry = True  # another process stored a turn meanwhile: take it in, again
            record.id = turn_id
            nodes, edges = stored[-1]
            for node, kind, label in nodes:
                self._labels.setdefault(node, (kind, label))
            for row in edges:
                self._graph.add_edge(row.source, row.target, row.type, at=row.at)
            self._graph.add_turn()
            self._last_in_session[session] = record.id
            self._row[record.id] = len(self._turns)
            self._turns.append(record)
            if key is not None:
                self._keyed[key] = record.id
            if speaker is not None:
                self._speakers[speaker] = None
            self._tokens.append(tokens)
            self._index.add(vector.reshape(1, -1))
            self._lexical.add([text])
            self._times = _appended(self._times, self._timed, record.at)
            self._timed += 1
            self._stats.add(text)
            due = self._due()
            return record.id, due

        # the lock is released while the insert waits for another process's write lock
        return releasing_while_busy(self._lock, attempt)

    def _keyed_turn(self, record: TurnRecord) -> int:
        """The id of the stored turn holding ``record``'s key, if it says what ``record``
        says; else :class:`~synapse_retriever.errors.InvalidValueError`."""
        assert record.key is not None
        stored = self._turns[self._row[self._keyed[record.key]]]
        fields = ("text", "role", "session", "speaker")
        differ = [name for name in fields if getattr(stored, name) != getattr(record, name)]
        if differ:
            raise InvalidValueError(
                f"key {shown(record.key)} names turn {stored.id}, stored with another "
                f"{' and '.join(differ)}; nothing was stored"
            )
        return stored.id

    # -- reading -----------------------------------------------------------------------

    def assemble(
        self,
        query: str | None,
        budget_tokens: int,
        at: Clock = None,
        *,
        mode: str | None = None,
        turn_overhead: int = 0,
        sessions: Sequence[str] | None = None,
    ) -> list[AssembledTurn]:
        """The context for ``query``: kept turns in conversation order, within the budget.

        Parameters
        ----------
        query : str or None
            What the next model call is about (usually the new user message); None or
            blank for no query (relevance 0 for every turn).
        budget_tokens : int
            The most tokens, by ``token_counter``, the texts may total.
        at : datetime, float or None
            The time of the query (wall-clock recency; default now).
        mode : str, optional
            ``analytical``, ``creative`` or ``conversational`` (its temperature), an alias
            (``exploratory``, ``balanced``), or ``auto`` (the mode detector's choice, as
            in :meth:`retrieve`); default: the configured mode. Each assembled turn says
            which (``AssembledTurn.mode``).
        turn_overhead : int
            Tokens the caller's formatting adds to each kept turn (a role label, a
            separator); the texts plus this per kept turn fit ``budget_tokens``.
        sessions : sequence of str, optional
            Only turns of these sessions are assembled, as if they were the whole memory
            (working memory is their newest turns); default: every session of the user.

        Returns
        -------
        list of AssembledTurn
            Dropped turns are absent; an empty memory (or none of ``sessions``) gives ``[]``.

        Raises
        ------
        ContextBudgetError
            Working memory alone exceeds the budget (with the default ``overflow``).
        """
        if query is not None and not isinstance(query, str):
            raise InvalidTypeError(
                f"query must be a str or None, got {type(query).__name__} {shown(query)}"
            )
        if query is not None:
            check_unicode("query", query)
        budget_tokens = check_tokens("budget_tokens", budget_tokens)
        turn_overhead = check_tokens("turn_overhead", turn_overhead)
        allowed = None if sessions is None else _session_set(sessions)
        now = to_seconds(at)
        with self._lock:
            self._check_open()
        mode = self._mode(query, mode) or self.config.mode
        self.config.temperature(mode)  # validates the mode against the configured ones
        vector = None
        if query is not None and query.strip():
            vector = embedded(self.embedder, [query])[0]
        with self._lock:  # FAISS must not grow while it is searched: add_turn waits
            self._check_open()
            self._catch_up()
            if vector is not None:
                self._fit(len(vector))
            rows = None
            if allowed is not None:
                rows = [row for row, turn in enumerate(self._turns) if turn.session in allowed]
                if not rows:
                    return []
            ranking = None
            if query is not None and vector is not None:
                ranking = self._assembly_ranking(query, vector, now, allowed)
            if rows is not None and ranking is not None:
                position = {row: i for i, row in enumerate(rows)}
                ranking = [position[row] for row in ranking if row in position]
            view = self._view(rows=rows, turn_overhead=turn_overhead, ranking=ranking)
            turns = list(self._turns) if rows is None else [self._turns[row] for row in rows]
            decisions = plan_context(
                view,
                query,
                budget_tokens,
                config=self.config,
                embedder=self.embedder,
                token_counter=self._cached_count,
                fallback=self._fallback,
                now=now,
                mode=mode,
                query_vector=vector,
            )
        return [
            AssembledTurn(
                turns[d.index].id,
                turns[d.index].role,
                d.level,
                d.text,
                d.tokens,
                d.importance,
                turns[d.index].session,
                mode,
            )
            for d in decisions
        ]

    async def aassemble(
        self,
        query: str | None,
        budget_tokens: int,
        at: Clock = None,
        *,
        mode: str | None = None,
        turn_overhead: int = 0,
        sessions: Sequence[str] | None = None,
    ) -> list[AssembledTurn]:
        """:meth:`assemble` off the event loop: the same turns and errors.

        The query's embedding and the planning run in a worker thread
        (``asyncio.to_thread``). A cancelled await leaves nothing behind: an assembly
        writes no turn (the call already running finishes in its thread, unseen).

        Examples
        --------
        >>> import asyncio
        >>> memory = ConversationMemory(":memory:")
        >>> _ = memory.add_turn("I moved the deploy to Fridays.", at=0)
        >>> turns = asyncio.run(memory.aassemble("when do we deploy?", 100, at=60))
        >>> turns == memory.assemble("when do we deploy?", 100, at=60)
        True
        >>> [(t.level.value, t.text) for t in turns]
        [('full', 'I moved the deploy to Fridays.')]
        >>> memory.close()
        """
        return await asyncio.to_thread(
            functools.partial(
                self.assemble,
                query,
                budget_tokens,
                at,
                mode=mode,
                turn_overhead=turn_overhead,
                sessions=sessions,
            )
        )

    def retrieve(
        self,
        query: str,
        k: int = 10,
        mode: str = "auto",
        at: Clock = None,
        *,
        sessions: Sequence[str] | None = None,
        weights: tuple[float, float] | None = None,
    ) -> list[Retrieval]:
        """The turns ``query`` needs: BM25 and the embedder fused, the graph on top.

        The lexical channel (BM25 over the turns, :mod:`~synapse_retriever.conversation.lexical`)
        and the dense channel (the embedder's cosine) each rank their best turns; the two
        are fused by weighted reciprocal rank (``retrieval_lexical_weight`` to the
        embedder's 1, k = ``retrieval_rrf_k``); then each turn gains a share of its best
        time neighbour's score in the temporal graph (the turn before or after it in its
        session, or a typed relation), the share set by the mode
        (:mod:`~synapse_retriever.conversation.graph.hybrid`).

        Parameters
        ----------
        query : str
            What is asked.
        k : int
            The most results (>= 1).
        mode : str
            ``"auto"`` (the mode detector's choice), ``"analytical"``, ``"creative"``,
            ``"conversational"`` or an alias (``"exploratory"``, ``"balanced"``): how much
            the graph adds (analytical most).
        at : datetime, float or None
            When it is asked (default now); recorded in each result's mode only.
        sessions : sequence of str, optional
            Only turns of these sessions are returned (their neighbours may be in others),
            the best ``k`` of them however low they rank among the others: each channel
            reads as deep as that takes, up to every turn (measured: 20,000 turns in 50
            sessions, 0.3 s against 0.04 s without ``sessions``).
        weights : (float, float), optional
            ``(relevance, graph)`` instead of the mode's: ``(1, 0)`` is the two channels
            fused without the graph, ``(0, 1)`` the turns the graph reaches from them,
            ranked by the graph alone.

        Returns
        -------
        list of Retrieval
            Best first; ``origin`` and ``path`` say how each was found.

        Examples
        --------
        >>> memory = ConversationMemory(":memory:")
        >>> _ = memory.add_turn("Login fails: verify_token() rejects valid tokens.", at=0)
        >>> _ = memory.add_turn("Found it: the clock skew in verify_token().", at=60)
        >>> _ = memory.add_turn("Lunch at noon?", at=120)
        >>> [(r.turn_id, r.origin) for r in memory.retrieve("why did verify_token fail?", k=2,
        ...                                                  at=180)]
        [(1, 'both'), (2, 'both')]
        >>> memory.close()
        """
        if not isinstance(query, str):
            raise InvalidTypeError(
                f"query must be a str, got {type(query).__name__} {shown(query)}"
            )
        check_unicode("query", query)
        if not is_int(k):
            raise InvalidTypeError(f"k must be an int, got {type(k).__name__} {shown(k)}")
        k = int(k)  # a NumPy integer too
        if k < 1:
            raise InvalidValueError(f"k must be >= 1, got {shown(k)}")
        k = min(k, 2**31 - 1)  # more turns than a memory holds is all of them, in any index
        with self._lock:
            self._check_open()
        used_mode = self._mode(query, mode) or self.config.mode
        allowed = None if sessions is None else _session_set(sessions)
        relevance, graph = mode_weights(used_mode) if weights is None else _weights(weights)
        now = to_seconds(at)  # validated: a bad time is refused even where it changes nothing
        if not query.strip():
            return []
        vector = embedded(self.embedder, [query])[0]
        depth = max(_RETRIEVAL_DEPTH, 2 * k)
        with self._lock:
            self._check_open()
            self._catch_up()
            self._fit(len(vector))
            if not self._turns:
                return []
            turns = self._turns
            ranking = self._ranking(query, vector, (relevance, graph), depth, now, allowed)
            scores, fused = ranking.scores, ranking.fused
            neighbours = ranking.neighbours
            if allowed is not None:
                scores = {t: s for t, s in scores.items() if turns[self._row[t]].session in allowed}
            found_lexical, found_dense = ranking.lexical, ranking.dense
            results = []
            for turn_id in ranked(scores, k):
                turn = turns[self._row[turn_id]]
                origin = (
                    "both" if turn_id in found_lexical and turn_id in found_dense
                    else "lexical" if turn_id in found_lexical
                    else "vector" if turn_id in found_dense
                    else "graph"
                )  # fmt: skip
                lifted = scores[turn_id] > fused.get(turn_id, 0.0) or relevance == 0
                path = self._link_from(turn_id, fused, scores, neighbours) if lifted else ()
                results.append(
                    Retrieval(turn_id, turn.session, scores[turn_id], origin, used_mode, path,
                              turn.text, turn.role, turn.at)
                )  # fmt: skip
            return results

    async def aretrieve(
        self,
        query: str,
        k: int = 10,
        mode: str = "auto",
        at: Clock = None,
        *,
        sessions: Sequence[str] | None = None,
        weights: tuple[float, float] | None = None,
    ) -> list[Retrieval]:
        """:meth:`retrieve` off the event loop: the same results and errors.

        The query's embedding, the BM25 query and the ranking run in a worker thread
        (``asyncio.to_thread``); a cancelled await leaves nothing behind.

        Examples
        --------
        >>> import asyncio
        >>> memory = ConversationMemory(":memory:")
        >>> _ = memory.add_turn("Login fails: verify_token() rejects valid tokens.", at=0)
        >>> _ = memory.add_turn("Found it: the clock skew in verify_token().", at=60)
        >>> found = asyncio.run(memory.aretrieve("why did verify_token fail?", k=2, at=120))
        >>> [(r.turn_id, r.origin) for r in found]
        [(1, 'both'), (2, 'both')]
        >>> memory.close()
        """
        return await asyncio.to_thread(
            functools.partial(self.retrieve, query, k, mode, at, sessions=sessions, weights=weights)
        )

    def _ranking(
        self,
        query: str,
        vector: Vectors,
        weights: tuple[float, float],
        depth: int,
        now: float,
        allowed: frozenset[str] | None = None,
    ) -> _Ranking:
        """The turns ``query`` needs, scored (the rule of :meth:`retrieve`), asked at
        ``now``, each channel deep enough to hold ``depth`` turns of the sessions
        ``allowed`` (None: any); the caller holds the lock and has caught up."""
        config = self.config
        lexical, dense = self._channels(query, vector, depth, allowed)
        channel_weights = [config.retrieval_lexical_weight, 1.0]
        fused = self._cued(
            query, fuse([lexical, dense], channel_weights, k=config.retrieval_rrf_k), now
        )
        neighbours = functools.lru_cache(maxsize=None)(self._time_neighbours)
        relevance, graph = weights
        if relevance > 0:
            share = config.neighbour_share * graph / (relevance + graph)
            scores = spread(fused, neighbours, share, depth=config.graph_depth)
        else:  # the graph alone: the turns it reaches from the fused ones
            reached = spread(fused, neighbours, config.graph_damping, depth=config.graph_depth)
            scores = {t: s - fused.get(t, 0.0) for t, s in reached.items()}
            scores = {t: s for t, s in scores.items() if s > 0}
        return _Ranking(scores, fused, frozenset(lexical), frozenset(dense), neighbours)

    def _channels(
        self, query: str, vector: Vectors, depth: int, allowed: frozenset[str] | None = None
    ) -> tuple[list[int], list[int]]:
        """The best turn ids by BM25 and by the embedder, best first: ``depth`` of them, or
        as many more as it takes for ``depth`` of the sessions ``allowed`` (None: any), each
        channel's ranks those of the whole memory."""
        turns = self._turns

        def best(top: Callable[[int], list[tuple[int, float]]]) -> list[int]:
            size = depth
            while True:
                rows = [row for row, _ in top(size)]
                mine = rows if allowed is None else [r for r in rows if turns[r].session in allowed]
                if len(mine) >= depth or len(rows) < size or size >= len(turns):
                    return [turns[row].id for row in rows]
                size *= 4

        return (
            best(lambda size: self._lexical.top(query, size)),
            best(lambda size: self._index.top(vector, size)),
        )

    def _assembly_ranking(
        self, query: str, vector: Vectors, now: float, allowed: frozenset[str] | None = None
    ) -> list[int]:
        """The rows ``query`` needs first in an assembly, best first: BM25, the embedder
        and novelty (each turn's surprise when it was added) fused by rank as a message
        list is (``lexical_weight``, 1, ``novelty_weight``, k = ``rrf_k``), raised for the
        speakers and the time the question names. No graph: its neighbours cost tokens
        the budget needs for the turns that answer (:meth:`retrieve` lifts them). With
        ``allowed``, each channel reaches deep enough for the turns of those sessions."""
        config = self.config
        lexical, dense = self._channels(query, vector, _ASSEMBLY_DEPTH, allowed)
        channels, weights = [lexical, dense], [config.lexical_weight, 1.0]
        if config.novelty_weight > 0:
            mine = [t for t in self._turns if allowed is None or t.session in allowed]
            surprise = np.fromiter((t.surprise for t in mine), np.float64, count=len(mine))
            ids = np.fromiter((t.id for t in mine), np.int64, count=len(mine))
            by_surprise = np.lexsort((-ids, -surprise))[:_ASSEMBLY_DEPTH]  # NumPy's sort
            channels.append(ids[by_surprise].tolist())  # lets go of the interpreter
            weights.append(config.novelty_weight)
        found = self._cued(query, fuse(channels, weights, k=config.rrf_k), now)
        return [self._row[turn_id] for turn_id in ranked(found, len(found))]

    def _cued(self, query: str, fused: dict[int, float], now: float) -> dict[int, float]:
        """``fused`` with the turns of the speakers and the time ``query`` names raised
        (:mod:`~synapse_retriever.conversation.graph.cues`)."""
        config = self.config
        speakers = named(query, self._speakers) if config.speaker_boost > 0 else frozenset()
        window = date_window(query, now) if config.date_boost > 0 else None
        if not speakers and window is None:
            return fused
        start, end = window or (0.0, 0.0)
        end += config.date_margin_days * 86_400.0
        out = {}
        for turn_id, score in fused.items():
            turn = self._turns[self._row[turn_id]]
            factor = cue_factor(
                spoke=turn.speaker in speakers,
                dated=window is not None and start <= turn.at < end,
                speaker_boost=config.speaker_boost,
                date_boost=config.date_boost,
            )
            out[turn_id] = score * factor
        return out

    def _time_neighbours(self, turn_id: int) -> tuple[int, ...]:
        """The turns linked to ``turn_id`` by a turn–turn edge of the graph (FOLLOWED_BY
        either way, typed relations), in this memory's view."""
        node = f"turn:{turn_id}"
        linked = []
        for edge in self._graph.neighbours(node):
            other = edge.target if edge.source == node else edge.source
            if other.startswith("turn:") and int(other[5:]) in self._row:
                linked.append(int(other[5:]))
        return tuple(linked)

    def _link_from(
        self,
        turn_id: int,
        fused: Mapping[int, float],
        scores: Mapping[int, float],
        neighbours: Callable[[int], Iterable[int]],
    ) -> tuple[TypedEdgeKey, ...]:
        """The edge between ``turn_id`` and the neighbour that raised it most (by fused
        score, then final score), as stored; of several edges joining the two, FOLLOWED_BY,
        else the first by type: the same edge whatever order the edges were loaded in."""
        best = max(
            neighbours(turn_id),
            key=lambda t: (fused.get(t, 0.0), scores.get(t, 0.0), -t),
            default=None,
        )
        node, other = f"turn:{turn_id}", f"turn:{best}"
        joining = [e for e in self._graph.neighbours(node) if other in (e.source, e.target)]
        if best is None or not joining:
            return ()
        edge = min(joining, key=lambda e: (e.type != "FOLLOWED_BY", e.type, e.source))
        return ((edge.source, edge.type, edge.target),)

    def _mode(self, query: str | None, mode: str | None) -> str | None:
        """``mode`` resolved: ``"auto"`` asks the detector, an alias becomes its mode."""
        if mode is None:
            return None
        if mode == "auto":
            text = query or ""
            detected = self.mode_detector.mode(text) if self.mode_detector else detect_mode(text)
            return canonical_mode(detected)
        return canonical_mode(mode)

    def used(self, results: Sequence[Retrieval], at: Clock = None) -> int:
        """Tell the memory these retrieved turns were used: the edges that reached them
        count one traversal each, and strengthen every ``reinforcement_threshold``
        traversals (their clock restarts then). One transaction; returns the edges touched.
        A result this memory did not return (another memory's, or made by hand) raises
        InvalidValueError before anything is written.

        Examples
        --------
        >>> memory = ConversationMemory(":memory:", config=ContextConfig(reinforcement_threshold=1))
        >>> _ = memory.add_turn("Deploys of app.py fail on Fridays.", at=0)
        >>> _ = memory.add_turn("Lunch?", at=10)
        >>> _ = memory.add_turn("We fixed app.py: pinned the base image.", at=20)
        >>> results = memory.retrieve("what broke app.py?", k=3, at=30)
        >>> memory.used(results, at=30) > 0
        True
        >>> memory.close()
        """
        now = to_seconds(at)
        if at is not None:  # stamped on the edges: a far-future one would never decay
            not_ahead(now, skew_s=MAX_CLOCK_SKEW_S)
        threshold = self.config.reinforcement_threshold
        if isinstance(results, Retrieval) or not isinstance(results, Iterable):
            raise InvalidTypeError(
                f"results must be a sequence of Retrieval objects, got {type(results).__name__} "
                f"{shown(results)}"
            )
        results = list(results)

        def attempt() -> int:
            self._check_open()
            keys: dict[TypedEdgeKey, None] = {}  # in order, once each
            for result in results:
                if not isinstance(result, Retrieval):
                    raise InvalidTypeError(
                        f"results must be Retrieval objects, got {type(result).__name__} "
                        f"{shown(result)}"
                    )
                row = self._row.get(result.turn_id)
                if row is None or self._turns[row].text != result.text:
                    raise InvalidValueError(
                        f"result for turn {result.turn_id} was not retrieved from this memory"
                    )
                keys.update(dict.fromkeys(edge.key for edge in self._path_edges(result)))
            # stepped from the stored rows under the write lock: another process's
            # traversals of the same edges since this memory read them count too
            stored = self._storage.traverse_edges(
                list(keys), functools.partial(traversed, at=now, threshold=threshold)
            )
            for new in stored:
                edge = self._graph.edges[(new.source, new.target, new.type)]
                edge.at, edge.count = new.at, new.reinforcements
                edge.traversals = new.traversals
            return len(stored)

        # the lock is released while the write waits for another process's write lock
        return releasing_while_busy(self._lock, attempt)

    def _path_edges(self, result: Retrieval) -> list[TypedEdge]:
        """The stored edges of ``result.path``: (source, type, target) triples of this
        graph, in a chain that ends at the result's turn, as :meth:`retrieve` makes them;
        else :class:`~synapse_retriever.errors.InvalidTypeError` (not triples of str) or
        :class:`~synapse_retriever.errors.InvalidValueError` (an edge this memory does not
        hold, or a path elsewhere: a result made by hand would strengthen any edge)."""
        path = result.path
        if not isinstance(path, tuple | list) or not all(
            isinstance(step, tuple | list) and len(step) == 3
            and all(isinstance(part, str) for part in step)
            for step in path
        ):  # fmt: skip
            raise InvalidTypeError(
                f"result for turn {result.turn_id}: path must be (source, type, target) "
                f"triples of str, got {shown(path, 120)}"
            )
        edges = []
        reached = f"turn:{result.turn_id}"
        for source, kind, target in reversed(path):  # from the turn back to where it began
            edge = self._graph.edges.get((source, target, kind))
            if edge is None or reached not in (source, target):
                raise InvalidValueError(
                    f"result for turn {result.turn_id}: its path {shown(path, 120)} was not "
                    "retrieved from this memory"
                )
            reached = source if target == reached else target
            edges.append(edge)
        return edges

    def graph(self, at: Clock = None) -> nx.MultiDiGraph:
        """The temporal graph as a networkx ``MultiDiGraph``.

        Turn nodes (``turn:<id>``) carry ``kind="turn"``, ``session``, ``role``, ``text``
        and ``at``; entity nodes their ``kind`` and ``label``. Each edge is keyed by its type
        and carries ``type``, ``strength`` (at ``at``, default now), ``count`` and
        ``traversals``.

        Examples
        --------
        >>> memory = ConversationMemory(":memory:")
        >>> _ = memory.add_turn("The deploy of app.py failed.", at=0, session="ops")
        >>> _ = memory.add_turn("Rolled back app.py.", at=60, session="ops")
        >>> g = memory.graph(at=60)
        >>> sorted((u, v, d["type"]) for u, v, d in g.edges(data=True))
        [('turn:1', 'file:app.py', 'MENTIONS'), ('turn:1', 'turn:2', 'FOLLOWED_BY'), \
('turn:2', 'file:app.py', 'MENTIONS')]
        >>> memory.close()
        """
        now = to_seconds(at)
        with self._lock:
            self._check_open()
            self._catch_up()
            graph = nx.MultiDiGraph()
            for turn in self._turns:
                graph.add_node(
                    f"turn:{turn.id}",
                    kind="turn",
                    session=turn.session,
                    role=turn.role,
                    text=turn.text,
                    at=turn.at,
                )
            for node, (kind, label) in self._labels.items():
                graph.add_node(node, kind=kind, label=label)
            for edge in self._graph.edges.values():
                graph.add_edge(
                    edge.source,
                    edge.target,
                    key=edge.type,
                    type=edge.type,
                    strength=edge.strength(now, self.config.edge_decay_rate),
                    count=edge.count,
                    traversals=edge.traversals,
                )
            return graph

    def turns(self) -> list[TurnRecord]:
        """Copies of the stored turns, oldest first."""
        with self._lock:
            self._check_open()
            self._catch_up()
            return [TurnRecord(**vars(t)) for t in self._turns]

    def replays(self) -> list[tuple[int, list[str]]]:
        """Each replay so far: (turns it covered, its themes)."""
        with self._lock:
            self._check_open()
            return self._storage.themes()

    def _view(
        self,
        start: int = 0,
        *,
        rows: Sequence[int] | None = None,
        turn_overhead: int = 0,
        ranking: Sequence[int] | None = None,
    ) -> TurnsView:
        """What the planner reads about the turns from row ``start`` on, or about the
        ``rows`` given (every turn by default; a part costs what it holds, not what the
        conversation does): stored turns are never pinned, grouped or whole-only; each
        costs ``turn_overhead`` more."""
        chosen = list(range(start, len(self._turns))) if rows is None else list(rows)
        whole = rows is None and not start
        turns = self._turns if whole else [self._turns[row] for row in chosen]
        n = len(turns)
        index = self._index
        if not whole:
            index = TurnIndex(self._index.dim)
            vectors = self._index.vectors(start) if rows is None else self._index.rows(chosen)
            index.add(vectors)
        return TurnsView(
            texts=[t.text for t in turns],
            index=index,
            surprise=np.array([t.surprise for t in turns], dtype=np.float64),
            repeats=np.array([t.repeats for t in turns], dtype=np.float64),
            boost=np.array([t.boost for t in turns], dtype=np.float64),
            at=self._times[: len(self._turns)][chosen] if not whole else self._times[:n].copy(),
            condensed=_Stored(list(turns)),
            pinned=[False] * n,
            groups=[None] * n,
            degradable=[True] * n,
            fixed_tokens=[turn_overhead] * n,
            full_tokens=self._tokens[:] if whole else [self._tokens[row] for row in chosen],
            ranking=ranking,
        )

    def _fallback(self, text: str) -> Condensed:
        return self._extractive.condense(
            text, chunks_ratio=self.config.chunks_ratio, summary_ratio=self.config.summary_ratio
        )

    # -- consolidation -----------------------------------------------------------------

    def consolidate(self) -> bool:
        """Run a consolidation now, in the caller's thread (even if none is due); True if
        it ran.

        False, and nothing done, when no turn came since the last consolidation (this
        process's or another's), when another memory of this user on the same database
        (another process) is consolidating now: one consolidation per user at a time
        (:meth:`~synapse_retriever.persistence.conversation.ConversationStorage.consolidation_turn`),
        or, on PostgreSQL, when this process's memories of the URL run 4 consolidations
        already and none ended within ``busy_timeout_s``.

        Examples
        --------
        >>> memory = ConversationMemory(":memory:", background=False)
        >>> _ = memory.add_turn("Deploys move to Fridays.", at=0)
        >>> memory.consolidate(), memory.consolidate()  # nothing new the second time
        (True, False)
        >>> memory.close()
        """
        # a run of the caller's, which close waits for (within its timeout) as for the
        # background one's: the database never closes under it
        return bool(self._consolidator.run_here(lambda: self._consolidate(force=True)))

    def wait_for_consolidation(self, timeout: float | None = None) -> bool:
        """Block until background consolidation is idle; False if ``timeout`` passed first."""
        return self._consolidator.wait(timeout)

    @property
    def consolidation_error(self) -> BaseException | None:
        """The last background consolidation failure, if any (also logged)."""
        return self._consolidator.last_error

    def _due(self) -> bool:
        """Whether ``consolidation_interval`` turns came since the last consolidation (or
        since another process was found consolidating); the caller holds the lock."""
        done = max(self._consolidated_through, self._skipped_at)
        return len(self._turns) - done >= self.config.consolidation_interval

    def _waiting(self, force: bool) -> bool:
        """Whether a consolidation is due (with ``force``: whether any turn waits for
        one), after taking in what other processes stored; the caller holds the lock."""
        if self._closed:
            return False
        self._catch_up()
        return len(self._turns) > self._consolidated_through and (force or self._due())

    def _consolidate(self, force: bool = False) -> bool:
        """One consolidation, if due and if no other process holds this user's (the
        storage's consolidation lease); True if it ran and was stored."""
        with self._lock:
            if not self._waiting(force):
                return False  # coalesced requests: this window was consolidated already
        with self._storage.consolidation_turn() as mine:
            if not mine:  # another process consolidates this user's memory now: not before
                with self._lock:  # another interval (a forced one may try again at once)
                    self._skipped_at = len(self._turns)
                return False
            return self._consolidate_held(force)

    def _consolidate_held(self, force: bool) -> bool:
        """:meth:`_consolidate`'s work, the lease held."""
        config = self.config
        with self._lock:
            if not self._waiting(force):
                return False  # another process did it while this one waited for the lease
            n = len(self._turns)
            low, high = config.consolidation_ages
            # Only the turns aged low to high are condensed: score the tail from the oldest
            # of them. The same scores as over every turn: ages count from the end, and the
            # most similar turn to the last one (relative relevance's maximum) is itself.
            first = max(0, n - 1 - high)
            view = self._view(first)
            # the last turn's own stored vector: no embedder call (a model's round trip,
            # paid for) while reads wait on the lock
            query = self._index.rows([n - 1])[0]
            scores, _ = importances(view, query, config, now=self._turns[-1].at)
            due = [
                (i, self._turns[i].id, self._turns[i].text)
                for i in range(first, n - low)
                if scores[i - first] > config.consolidation_threshold
                and self._turns[i].chunks is None
            ]
            window = [(t.id, t.text, t.boost) for t in self._turns[-config.replay_window :]]
            unread: list[tuple[int, str, str]] = []
            known: frozenset[int] = frozenset()
            at: dict[int, float] = {}
            if self.relations is not None:
                first = self._row.get(self._relations_through, -1) + 1  # ids only grow
                context = self._turns[max(0, first - _CONTEXT_TURNS) :]
                unread = [(t.id, t.role, t.text) for t in context] if first < n else []
                known = frozenset(self._row)
                at = {t.id: t.at for t in context}
            last_id = self._turns[-1].id
        linked = self._extract_relations(unread, known, at)
        condensed = []
        for _, turn_id, text in due:
            if self._closed:  # it would store nothing: stop here, and let the lease go
                return False
            condensed.append((turn_id, self.summarizer.condense(
                text, chunks_ratio=config.chunks_ratio, summary_ratio=config.summary_ratio
            )))  # fmt: skip
        texts = dict((turn_id, text) for _, turn_id, text in due)
        condensed = [
            (turn_id, self._storable(turn_id, texts[turn_id], c)) for turn_id, c in condensed
        ]
        themes = _themes(self.themes.themes([text for _, text, _ in window])) if window else []
        hits = matching([text for _, text, _ in window], themes)
        boosts = [
            (turn_id, min(1.0, boost + config.replay_boost))
            for (turn_id, _, boost), hit in zip(window, hits, strict=True)
            if hit and config.replay_boost > 0
        ]

        def store() -> bool:
            if self._closed:
                return False
            nodes, edges = linked
            stored = self._storage.consolidate(
                [(turn_id, c.chunks, c.summary) for turn_id, c in condensed],
                boosts,
                themes,
                n,
                graph=(nodes, edges, last_id) if self.relations is not None else None,
            )
            if not stored:  # another process consolidated these turns meanwhile
                self._consolidated_through = max(self._consolidated_through, n)
                return False
            if self.relations is not None:
                self._add_to_graph(nodes, edges)
                self._relations_through = last_id
            by_id = {
                t.id: t for t in self._turns[max(0, n - 1 - max(high, config.replay_window)) :]
            }
            for turn_id, result in condensed:
                by_id[turn_id].chunks, by_id[turn_id].summary = result.chunks, result.summary
            for turn_id, boost in boosts:
                by_id[turn_id].boost = boost
            self._consolidated_through = n
            return True

        # the lock is released while the write waits for another process's write lock
        return releasing_while_busy(self._lock, store)

    def _storable(self, turn_id: int, text: str, result: object) -> Condensed:
        """A summarizer's ``result`` for a turn as :class:`Condensed`. One of another type
        is refused (:class:`~synapse_retriever.errors.InvalidTypeError`: a plug-in's fault);
        a half (chunks, summary) that no backend can store (a lone surrogate, a NUL: a
        model's answer), or that shows nothing (blank: assembled, it would be a message
        without text), is logged and replaced by that half of the extractive condensation
        of ``text``; the other half is kept."""
        if (
            not isinstance(result, tuple)
            or len(result) != 2
            or not all(isinstance(part, str) for part in result)
        ):
            raise InvalidTypeError(
                f"summarizer.condense must return Condensed(chunks, summary), got "
                f"{type(result).__name__} {shown(result)} for turn {turn_id}"
            )
        good = [_is_storable(part) and not blank(part) for part in result]
        if all(good):
            return Condensed(*result)
        log.warning(
            "summarizer: turn %d's condensation is blank or holds a NUL or a lone surrogate; "
            "condensed extractively instead (that half): %.200r",
            turn_id,
            result,
        )
        backup = self._fallback(text)
        halves = zip(result, good, backup, strict=True)
        return Condensed(*(mine if ok else theirs for mine, ok, theirs in halves))

    def _extract_relations(
        self,
        unread: Sequence[tuple[int, str, str]],
        known: frozenset[int],
        at: dict[int, float],
    ) -> tuple[list[EntityRow], list[TypedEdgeRow]]:
        """The relation extractor's proposals for the turns not read yet, as graph rows.

        The turns go in windows of :data:`_RELATION_WINDOW`, each after the
        :data:`_CONTEXT_TURNS` before it (so a cause just before a window can be named).
        Runs outside the lock (a model may be slow). A proposal is kept only if its type is
        a link type (or MENTIONS of a thing), each end a known turn id or a ``kind:key``
        node that is not a turn; anything else, and an extractor that raises, is logged
        and skipped: consolidation goes on without those edges.
        """
        if self.relations is None or not unread:
            return [], []
        proposed: list[object] = []
        step = _RELATION_WINDOW
        start = next((i for i, t in enumerate(unread) if t[0] > self._relations_through), 0)
        for begin in range(start, len(unread), step):
            window = list(unread[max(0, begin - _CONTEXT_TURNS) : begin + step])
            try:
                proposed.extend(self.relations.relations(window))
            except Exception:
                log.warning("relation extractor failed; its turns stay unlinked", exc_info=True)
        nodes: list[EntityRow] = []
        edges: list[TypedEdgeRow] = []
        for relation in proposed:
            ends = _relation_ends(relation, known)
            if ends is None:
                log.warning("relation extractor proposed %.200r, skipped", relation)
                continue
            assert isinstance(relation, Relation)  # _relation_ends checked it
            stamp = max(
                (at.get(end, 0.0) for end in (relation.source, relation.target)
                 if isinstance(end, int)),
                default=max(at.values()),
            )  # fmt: skip
            for end in ends:
                if not end.startswith("turn:") and end not in self._labels:
                    kind, _, label = end.partition(":")
                    nodes.append(EntityRow(end, kind, label))
            edges.append(TypedEdgeRow(ends[0], ends[1], relation.type, stamp))
        return nodes, edges

    def _add_to_graph(self, nodes: Sequence[EntityRow], edges: Sequence[TypedEdgeRow]) -> None:
        for node, kind, label in nodes:
            self._labels.setdefault(node, (kind, label))
        for row in edges:
            self._graph.add_edge(
                row.source,
                row.target,
                row.type,
                at=row.at,
                count=row.reinforcements,
                traversals=row.traversals,
            )


_RELATION_WINDOW = 50
"""The most unread turns the relation extractor reads at once."""

_CONTEXT_TURNS = 5
"""Turns already read shown before each window, for context."""


def _relation_ends(relation: object, known: frozenset[int]) -> tuple[str, str] | None:
    """A proposed relation's two nodes, or None if it cannot be stored as it is."""
    if not isinstance(relation, Relation):
        return None
    if relation.type not in LINK_TYPES and relation.type != "MENTIONS":
        return None
    ends: list[str] = []
    for end in (relation.source, relation.target):
        if isinstance(end, bool):
            return None
        if isinstance(end, int):
            if end not in known:
                return None
            ends.append(f"turn:{end}")
        elif isinstance(end, str):
            kind, sep, key = end.partition(":")
            if not sep or blank(kind) or blank(key) or kind == "turn" or len(end) > 300:
                return None
            if not _is_storable(end):  # a model's answer no backend can store
                return None
            ends.append(end)
        else:
            return None
    if ends[0] == ends[1] or (relation.type == "MENTIONS" and not ends[0].startswith("turn:")):
        return None
    return ends[0], ends[1]


@dataclasses.dataclass(frozen=True)
class _PreparedTurn:
    """A checked turn with what :meth:`ConversationMemory._prepare_turn` computed for it."""

    text: str
    role: str
    session: str
    seconds: float
    explicit_at: bool
    vector: Vectors
    tokens: int
    entities: list[Entity]
    speaker: str | None
    key: str | None


_Result = TypeVar("_Result")


async def finished_if_cancelled(work: Awaitable[_Result]) -> _Result:
    """``await work``; if the awaiting task is cancelled meanwhile, ``work`` still runs to
    its end (a write in a thread cannot be stopped halfway anyway), and the cancellation
    is raised only once it has, however many times the task is cancelled: the caller
    never resumes while a write is in flight.

    Examples
    --------
    >>> async def cancelled_write() -> list[str]:
    ...     done: list[str] = []
    ...     async def write() -> None:
    ...         await asyncio.sleep(0.01)
    ...         done.append("written")
    ...     task = asyncio.ensure_future(finished_if_cancelled(write()))
    ...     await asyncio.sleep(0)
    ...     task.cancel()
    ...     try:
    ...         await task
    ...     except asyncio.CancelledError:
    ...         done.append("cancelled")
    ...     return done
    >>> asyncio.run(cancelled_write())
    ['written', 'cancelled']
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():  # a second cancellation (a timeout, a task group) waits too
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the caller gets the cancellation, not the error
        raise


@dataclasses.dataclass(frozen=True)
class _Ranking:
    """What :meth:`ConversationMemory._ranking` found: final and fused scores by turn id,
    the ids each channel ranked, and the graph's neighbours (memoized)."""

    scores: dict[int, float]
    fused: dict[int, float]
    lexical: frozenset[int]
    dense: frozenset[int]
    neighbours: Callable[[int], tuple[int, ...]]


def _appended(buffer: FloatArray, count: int, value: float) -> FloatArray:
    """``buffer`` (its first ``count`` values in use) with ``value`` at ``count``: in place,
    or in a copy twice the size when full, so appending stays amortised constant.

    Examples
    --------
    >>> times = _appended(np.zeros(1), 1, 5.0)
    >>> times[:2].tolist(), len(times)
    ([0.0, 5.0], 16)
    """
    if count >= len(buffer):
        grown = np.zeros(max(16, 2 * len(buffer)), dtype=buffer.dtype)
        grown[: len(buffer)] = buffer
        buffer = grown
    buffer[count] = value
    return buffer


def _stored_dim(loaded: Loaded, name: str) -> int | None:
    """The length of ``loaded``'s vectors if embedder ``name`` stored every one and all
    have one length; else None (the embedder's own ``dim`` decides).

    >>> _stored_dim(Loaded(embedders=["m", "m"], embeddings=[b"\\0" * 12, b"\\0" * 12]), "m")
    3
    >>> _stored_dim(Loaded(embedders=["m", "other"], embeddings=[b"\\0" * 12] * 2), "m")
    >>> _stored_dim(Loaded(), "m")  # nothing stored: ask the model
    """
    size = np.dtype(np.float32).itemsize
    widths = {len(blob) for blob in loaded.embeddings}
    if len(widths) != 1 or any(stored != name for stored in loaded.embedders):
        return None
    width = widths.pop()
    return width // size if width and not width % size else None


class _Stored:
    """``condensed(i)``: the stored condensation of turn ``i``, or None."""

    def __init__(self, turns: Sequence[TurnRecord]) -> None:
        self._turns = turns

    def __call__(self, i: int) -> Condensed | None:
        turn = self._turns[i]
        if turn.chunks is None or turn.summary is None:
            return None
        return Condensed(turn.chunks, turn.summary)


def _check_turn(
    text: object, role: object, session: object, speaker: object = None, key: object = None
) -> None:
    """Refuse a turn that cannot be stored as it is, before anything is."""
    if not isinstance(text, str):
        raise InvalidTypeError(
            f"text must be a str, got {type(text).__name__} {shown(text)}; for multimodal content, "
            "pass the text parts joined"
        )
    if blank(text):
        raise InvalidValueError(
            f"text must contain non-blank characters, got an empty turn {text[:20]!r}"
        )
    _check_text("text", text)
    for name, value in (("role", role), ("session", session)):
        if not isinstance(value, str):
            raise InvalidTypeError(
                f"{name} must be a non-empty str, got {type(value).__name__} {shown(value)}"
            )
        if not value.strip():
            raise InvalidValueError(f"{name} must be a non-empty str, got {shown(value)}")
        _check_text(name, value)
    if role not in ROLES:
        raise InvalidValueError(f"role must be one of {ROLES}, got {shown(role)}")
    assert isinstance(session, str)  # checked above
    if len(session) > MAX_NAME_CHARS:  # stored with every turn, named in every result
        raise InvalidValueError(
            f"session must be a name of at most {MAX_NAME_CHARS} characters, got "
            f"{len(session)}: {shown(session)}"
        )
    for name, value in (("speaker", speaker), ("key", key)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidTypeError(
                f"{name} must be None or a str, got {type(value).__name__} {shown(value)}"
            )
        if blank(value) or len(value) > MAX_NAME_CHARS:
            raise InvalidValueError(
                f"{name} must be None or a name of 1 to {MAX_NAME_CHARS} characters, "
                f"got {shown(value)}"
            )
        _check_text(name, value)
        control = next((c for c in value if unicodedata.category(c) == "Cc"), None)
        if control is not None:  # a bell, a newline: as a user's name refuses them
            raise InvalidValueError(
                f"{name} must not hold a control character, got {control!r} in {shown(value)}"
            )


def _themes(found: object) -> list[str]:
    """A theme extractor's answer, checked: an iterable of str (a list, a set, a
    generator), else :class:`~synapse_retriever.errors.InvalidTypeError` (a plug-in's fault:
    the consolidation stops, as for a summarizer's); a theme that is blank, spans lines
    (themes are stored one per line) or that no backend can store is logged and left out."""
    themes = (
        list(found)
        if isinstance(found, Iterable) and not isinstance(found, str | bytes | Mapping)
        else None
    )
    if themes is None or not all(isinstance(t, str) for t in themes):
        raise InvalidTypeError(
            f"themes.themes must return a list of str, got {type(found).__name__} {shown(found)}"
        )
    kept = [
        t for t in themes if not blank(t) and "\n" not in t and "\r" not in t and _is_storable(t)
    ]
    if len(kept) < len(themes):
        log.warning("theme extractor: left out %.200r", [t for t in themes if t not in kept])
    return kept


def _is_storable(text: str) -> bool:
    """Whether every backend can store ``text`` (:func:`_check_text` would pass it)."""
    try:
        _check_text("text", text)
    except InvalidValueError:
        return False
    return True


def _check_text(name: str, value: str) -> None:
    """Valid Unicode (:func:`check_unicode`) without a NUL, which PostgreSQL's text cannot
    hold: a turn one backend stores, every backend stores."""
    check_unicode(name, value)
    if "\x00" in value:
        at = value.index("\x00")
        raise InvalidValueError(
            f"{name} must not hold a NUL character, got one at {at} of {value[:60]!r}"
        )


def _session_set(sessions: object) -> frozenset[str]:
    if isinstance(sessions, (str, bytes)) or not isinstance(sessions, Iterable):
        raise InvalidTypeError(f"sessions must be a sequence of str, got {shown(sessions)}")
    names = list(sessions)  # a generator is read once
    if not all(isinstance(s, str) for s in names):
        raise InvalidTypeError(f"sessions must be a sequence of str, got {shown(names)}")
    return frozenset(names)


def _weights(weights: object) -> tuple[float, float]:
    """``(vector, graph)``: two finite numbers >= 0, not both 0."""
    pair = tuple(weights) if isinstance(weights, (tuple, list)) else ()
    values = [_finite(w) for w in pair]  # NumPy numbers too; None: not a finite number
    if len(values) != 2 or None in values or not all(w >= 0 for w in values) or not any(values):  # type: ignore[operator]
        numbers = bool(pair) and all(refused_number(w) is InvalidValueError for w in pair)
        raise (InvalidValueError if numbers else InvalidTypeError)(
            "weights must be (vector, graph): two finite numbers >= 0, not both 0, "
            f"got {shown(weights)}"
        )
    return (float(values[0] or 0.0), float(values[1] or 0.0))


def _finite(value: object) -> float | None:
    """``value`` as :func:`~synapse_retriever.clock.finite_real` reads it, None if it refuses."""
    try:
        return finite_real(value, "weight", "a number")
    except SynapseError:
        return None


def _weakly(
    memory: ConversationMemory, job: Callable[[ConversationMemory], object]
) -> Callable[[], None]:
    """``job(memory)`` while ``memory`` lives, holding it weakly in between (the worker
    thread's job must not keep the memory alive)."""
    ref = weakref.ref(memory)

    def run() -> None:
        alive = ref()
        if alive is not None:
            job(alive)

    return run


def _release(consolidator: Consolidator, storage: ConversationStorage) -> None:
    """A memory collected without :meth:`ConversationMemory.close`: stop its worker, then
    close its database (on the worker's thread if it is still running)."""
    consolidator.close(0.0, then=storage.close)
